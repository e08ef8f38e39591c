"""Consolidating placement: from per-job (GPU type, workers) to concrete nodes.

Why consolidate: a gang's all-reduce runs at NVLink speed inside a server and at network
speed across them, so a job's workers go on as few nodes as possible, all of one GPU
type, all or nothing. Why keep what runs: moving a job costs a checkpoint and restart,
so a job whose assignment did not change keeps its nodes (Gavel's lease extension) and
an elastic job that grows or shrinks keeps the workers it has. When a job must shrink,
workers on lent inference servers go first, so that a later reclaim is a scale-in.
A job whose flexible workers sit on another GPU type (``Assignment.extra``) is placed
part by part, each part on nodes of its own type, all or nothing.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence

from lyra_ray.model import Assignment, ClusterSnapshot, JobId, NodeId

_NodeIndex = tuple[dict[NodeId, int], dict[NodeId, str], dict[str, list[NodeId]]]
"""(usable GPUs per node, GPU type per node, usable nodes per type in snapshot order)"""


def usable_capacity(snap: ClusterSnapshot) -> dict[NodeId, int]:
    """GPUs training may use on each node: the training pool plus lent inference nodes."""
    return {n.id: n.num_gpus for n in snap.nodes if n.pool == "training" or n.id in snap.lent_nodes}


def _fits(nodes: tuple[tuple[NodeId, int], ...], free: Mapping[NodeId, int]) -> bool:
    if len(nodes) == 1:  # most gangs sit on one node: no generator
        n, g = nodes[0]
        return free.get(n, 0) >= g
    return all(free.get(n, 0) >= g for n, g in nodes)


def _keep_parts(
    want: Assignment,
    prev: Assignment | None,
    free: dict[NodeId, int],
    node_type: Mapping[NodeId, str],
    lent: frozenset[NodeId],
) -> list[tuple[NodeId, int]] | None:
    """What a job whose workers span GPU types keeps where it runs (``free`` updated):
    per type, up to what it wants there, lent-node workers dropped first, as a
    single-type shrink does; ``None`` if its nodes are no longer free (place afresh)."""
    if prev is None or not prev.nodes:
        return None
    need = dict(want.parts)
    by_type: dict[str, list[tuple[NodeId, int]]] = {}
    for n, g in prev.nodes:
        if n in free and node_type[n] in need:
            by_type.setdefault(node_type[n], []).append((n, g))
    kept: list[tuple[NodeId, int]] = []
    for t, have in by_type.items():
        have.sort(key=lambda ng: (ng[0] not in lent, ng[1], ng[0]), reverse=True)
        left = need[t]
        for n, g in have:
            if left == 0:
                break
            kept.append((n, min(g, left)))
            left -= min(g, left)
    if any(free[n] < g for n, g in kept):
        return None
    for n, g in kept:
        free[n] -= g
    return kept


def _missing(a: Assignment, node_type: Mapping[NodeId, str]) -> list[tuple[str, int]]:
    """Per GPU type, the workers ``a`` wants beyond the nodes it holds."""
    have: dict[str, int] = {}
    for n, g in a.nodes:
        have[node_type[n]] = have.get(node_type[n], 0) + g
    return [(t, c - have.get(t, 0)) for t, c in a.parts if c > have.get(t, 0)]


class ConsolidatingPlacer:
    """Places gangs best-fit on one node when possible, else across the fewest nodes."""

    def __init__(self) -> None:
        self._cache: tuple[object, frozenset[NodeId], _NodeIndex] | None = None

    def _index(self, snap: ClusterSnapshot) -> _NodeIndex:
        """Capacity and per-type node lists, kept while the snapshot's node tuple is the
        same object (the core reuses it until a node comes or goes)."""
        c = self._cache
        if c is None or c[0] is not snap.nodes or c[1] != snap.lent_nodes:
            cap = usable_capacity(snap)
            node_type = {n.id: n.gpu_type for n in snap.nodes}
            by_type: dict[str, list[NodeId]] = {}
            for n in cap:
                by_type.setdefault(node_type[n], []).append(n)
            for ids in by_type.values():  # by id: ``_fill`` may stop at the first exact fit
                ids.sort()
            c = (snap.nodes, snap.lent_nodes, (cap, node_type, by_type))
            self._cache = c
        return c[2]

    def place(
        self,
        desired: Mapping[JobId, Assignment],
        snap: ClusterSnapshot,
        previous: Mapping[JobId, Assignment],
        preferred: Mapping[JobId, tuple[NodeId, ...]] | None = None,
    ) -> dict[JobId, Assignment]:
        preferred = preferred or {}
        cap, node_type, by_type = self._index(snap)
        free = dict(cap)
        lent = snap.lent_nodes
        placed: dict[JobId, Assignment] = {}

        # Riders (the smaller job of a space-sharing pair) reuse their partner's GPUs.
        riders: set[JobId] = set()
        paired = False  # no partner placed: the last pass would have nothing to do
        for j, a in desired.items():
            p = a.partner
            if p is not None:
                paired = True
                if p in desired and (desired[p].workers, p) > (a.workers, j):
                    riders.add(j)
        leaders = [j for j in desired if j not in riders] if riders else list(desired)

        # 1. Keep what still fits where it runs; grow or shrink in place.
        pending: list[JobId] = []
        grow: list[JobId] = []  # kept jobs with fewer GPUs than they want, in placing order
        for j in sorted(leaders):
            want, prev = desired[j], previous.get(j)
            if (  # fast path: unchanged job on nodes that are still usable (the common case)
                prev is not None
                and prev.nodes
                and (
                    want is prev  # the round mechanism's lease extension hands prev back
                    or (
                        prev.workers == want.workers
                        and prev.gpu_type == want.gpu_type
                        and prev.partner == want.partner
                        and prev.extra == want.extra
                    )
                )
                and _fits(prev.nodes, free)
            ):
                held = 0
                for n, g in prev.nodes:
                    free[n] -= g
                    held += g
                placed[j] = prev
                if held < prev.workers:
                    grow.append(j)
                continue
            if want.extra or (prev is not None and prev.extra):
                kept_parts = _keep_parts(want, prev, free, node_type, lent) if prev else None
                if kept_parts is None:
                    pending.append(j)
                    continue
                placed[j] = dataclasses.replace(want, nodes=tuple(sorted(kept_parts)))
                if sum(g for _, g in kept_parts) < want.workers:
                    grow.append(j)
                continue
            if prev is None or prev.gpu_type != want.gpu_type or not prev.nodes:
                pending.append(j)
                continue
            kept = [(n, g) for n, g in prev.nodes if n in free and node_type[n] == want.gpu_type]
            have = sum(g for _, g in kept)
            if have > want.workers:  # shrink: drop lent-node workers first, then small pieces
                kept.sort(key=lambda ng: (ng[0] not in lent, ng[1], ng[0]), reverse=True)
                out, need = [], want.workers
                for n, g in kept:
                    if need == 0:
                        break
                    take = min(g, need)
                    out.append((n, take))
                    need -= take
                kept = out
            if any(free[n] < g for n, g in kept):
                pending.append(j)
                continue
            for n, g in kept:
                free[n] -= g
            placed[j] = Assignment(want.gpu_type, want.workers, tuple(sorted(kept)), want.partner)
            if sum(g for _, g in kept) < want.workers:
                grow.append(j)

        # 2. Grow the kept jobs that want more, then place new gangs, biggest first.
        for j in grow:
            a = placed[j]
            if a.extra:
                extra = self._fill_parts(
                    _missing(a, node_type), free, by_type, preferred.get(j, ()), dict(a.nodes)
                )
            else:
                extra = self._fill(
                    a.workers - sum(g for _, g in a.nodes),
                    a.gpu_type,
                    free,
                    by_type,
                    preferred.get(j, ()),
                    prefer_used=dict(a.nodes),
                )
            if extra is None:  # cannot grow: keep only what it had, at its old size
                prev = previous[j]
                for n, g in a.nodes:
                    free[n] += g
                if all(free.get(n, 0) >= g for n, g in prev.nodes):
                    for n, g in prev.nodes:
                        free[n] -= g
                    placed[j] = prev
                    paired = paired or prev.partner is not None  # its old partner, maybe
                else:
                    del placed[j]
                continue
            merged: dict[NodeId, int] = dict(a.nodes)
            for n, g in extra:
                merged[n] = merged.get(n, 0) + g
            placed[j] = dataclasses.replace(a, nodes=tuple(sorted(merged.items())))

        pending.sort(key=lambda j: (-desired[j].workers, j))
        for j in pending:
            want = desired[j]
            if want.extra:
                nodes = self._fill_parts(want.parts, free, by_type, preferred.get(j, ()), {})
                if nodes is not None:
                    placed[j] = dataclasses.replace(want, nodes=tuple(sorted(nodes)))
                continue
            nodes = self._fill(want.workers, want.gpu_type, free, by_type, preferred.get(j, ()))
            if nodes is not None:
                placed[j] = Assignment(
                    want.gpu_type, want.workers, tuple(sorted(nodes)), want.partner
                )

        for j in sorted(riders):
            want = desired[j]
            host = placed.get(want.partner or "")
            if host is None or host.gpu_type != want.gpu_type:
                continue
            out, need = [], want.workers
            for n, g in host.nodes:
                if need == 0:
                    break
                take = min(g, need)
                out.append((n, take))
                need -= take
            placed[j] = Assignment(want.gpu_type, want.workers, tuple(out), want.partner)
        # A leader whose rider did not fit runs alone rather than with a phantom partner.
        if paired:
            for j, a in list(placed.items()):
                if a.partner is not None and a.partner not in placed:
                    placed[j] = Assignment(a.gpu_type, a.workers, a.nodes, None)
        return placed

    @classmethod
    def _fill_parts(
        cls,
        parts: Sequence[tuple[str, int]],
        free: dict[NodeId, int],
        by_type: Mapping[str, list[NodeId]],
        preferred: tuple[NodeId, ...],
        used: Mapping[NodeId, int],
    ) -> list[tuple[NodeId, int]] | None:
        """:meth:`_fill` for each ``(gpu_type, count)`` part, all or nothing."""
        taken: list[tuple[NodeId, int]] = []
        for gpu_type, need in parts:
            if need <= 0:
                continue
            got = cls._fill(need, gpu_type, free, by_type, preferred, prefer_used=used)
            if got is None:
                for n, g in taken:
                    free[n] += g
                return None
            taken += got
        return taken

    @staticmethod
    def _fill(
        need: int,
        gpu_type: str,
        free: dict[NodeId, int],
        by_type: Mapping[str, list[NodeId]],
        preferred: tuple[NodeId, ...] = (),
        prefer_used: Mapping[NodeId, int] | None = None,
    ) -> list[tuple[NodeId, int]] | None:
        """Take ``need`` GPUs of ``gpu_type`` from ``free`` (mutated) or return ``None``.

        ``by_type`` lists each type's nodes by id (:meth:`ConsolidatingPlacer._index`).
        Every choice here is by (fit, id), so the order changes no answer; it lets the
        common case stop at the first node with exactly ``need`` free: no node fits
        tighter, none before it has the same fit, and the total is then enough.
        """
        pref = set(preferred)
        used = prefer_used or {}
        if not pref and not used:  # the common case, in one pass: tightest node, then name
            total, tight = 0, 0
            best: NodeId | None = None
            for n in by_type.get(gpu_type, ()):
                f = free[n]
                if f > 0:
                    if f == need:
                        free[n] = 0
                        return [(n, need)]
                    total += f
                    if f >= need and (best is None or f < tight or (f == tight and n < best)):
                        best, tight = n, f
            if total < need:
                return None
            if best is not None:
                free[best] -= need
                return [(best, need)]
        cands = [n for n in by_type.get(gpu_type, ()) if free[n] > 0]
        if sum(free[n] for n in cands) < need:
            return None
        single = [n for n in cands if free[n] >= need]
        if single:  # best fit: preferred nodes, nodes the job already uses, then tightest
            best = min(single, key=lambda n: (n not in pref, n not in used, free[n], n))
            free[best] -= need
            return [(best, need)]
        order = sorted(cands, key=lambda n: (n not in pref, n not in used, -free[n], n))
        out = []
        for n in order:
            if need == 0:
                break
            take = min(free[n], need)
            free[n] -= take
            need -= take
            out.append((n, take))
        return out
