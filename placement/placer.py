"""Consolidating placement: from per-job (GPU type, workers) to concrete nodes.

Why consolidate: a gang's all-reduce runs at NVLink speed inside a server and at network
speed across them, so a job's workers go on as few nodes as possible, all of one GPU
type, all or nothing. Why keep what runs: moving a job costs a checkpoint and restart,
so a job whose assignment did not change keeps its nodes (Gavel's lease extension) and
an elastic job that grows or shrinks keeps the workers it has. When a job must shrink,
workers on lent inference servers go first, so that a later reclaim is a scale-in.
"""

from __future__ import annotations

from collections.abc import Mapping

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
        for j, a in desired.items():
            p = a.partner
            if p is not None and p in desired and (desired[p].workers, p) > (a.workers, j):
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
                else:
                    del placed[j]
                continue
            merged: dict[NodeId, int] = dict(a.nodes)
            for n, g in extra:
                merged[n] = merged.get(n, 0) + g
            placed[j] = Assignment(a.gpu_type, a.workers, tuple(sorted(merged.items())), a.partner)

        pending.sort(key=lambda j: (-desired[j].workers, j))
        for j in pending:
            want = desired[j]
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
        for j, a in list(placed.items()):
            if a.partner is not None and a.partner not in placed:
                placed[j] = Assignment(a.gpu_type, a.workers, a.nodes, None)
        return placed

    @staticmethod
    def _fill(
        need: int,
        gpu_type: str,
        free: dict[NodeId, int],
        by_type: Mapping[str, list[NodeId]],
        preferred: tuple[NodeId, ...] = (),
        prefer_used: Mapping[NodeId, int] | None = None,
    ) -> list[tuple[NodeId, int]] | None:
        """Take ``need`` GPUs of ``gpu_type`` from ``free`` (mutated) or return ``None``."""
        pref = set(preferred)
        used = prefer_used or {}
        if not pref and not used:  # the common case, in one pass: tightest node, then name
            total, tight = 0, 0
            best: NodeId | None = None
            for n in by_type.get(gpu_type, ()):
                f = free[n]
                if f > 0:
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
