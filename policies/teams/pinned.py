"""Admit-then-pin (``enforce: pin``): the teams' enforcement before issue #42, kept to
compare against (docs/teams.md's evaluation).

Jobs are admitted by team (:mod:`lyra_ray.policies.teams.admission`), and the inner
policy is handed a snapshot that holds only the admitted jobs, each pinned to the GPU
type its admission gave it (other types report no throughput) and with its
``max_workers`` cut to what its team may use; its owner is its team, and the snapshot's
``entity_weights`` carry the teams' weights. Whatever the inner policy answers is then
clipped to the admission. Jobs left out wait with the code ``quota``.

What it costs (the reason ``inside``, :mod:`lyra_ray.policies.teams.policy`, replaced
it): a heterogeneity-aware policy has no GPU type left to choose for a pinned job, so
its relative-speed placement and the pairs it would form across types are gone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Hashable, Mapping
from typing import Any

from lyra_ray.model import (
    Allocation,
    ClusterSnapshot,
    GpuType,
    JobId,
    JobSpec,
    JobView,
    ThroughputModel,
    split_pair,
)
from lyra_ray.model.teams import TeamSet
from lyra_ray.policies.base import Policy
from lyra_ray.policies.teams.admission import Admission, admit


class PinnedThroughput(ThroughputModel):
    """The inner snapshot's throughput model: a pinned spec runs on its type only."""

    def __init__(self, base: ThroughputModel, pins: Mapping[int, GpuType]) -> None:
        self.base = base
        self.pins = pins  # id(spec) -> GPU type; the specs live as long as the snapshot

    def _ok(self, spec: JobSpec, gpu_type: GpuType) -> bool:
        pin = self.pins.get(id(spec))
        return pin is None or pin == gpu_type

    def throughput(self, spec: JobSpec, gpu_type: GpuType, workers: int) -> float:
        return self.base.throughput(spec, gpu_type, workers) if self._ok(spec, gpu_type) else 0.0

    def pair_throughput(
        self, a: JobSpec, b: JobSpec, gpu_type: GpuType
    ) -> tuple[float, float] | None:
        if not (self._ok(a, gpu_type) and self._ok(b, gpu_type)):
            return None
        return self.base.pair_throughput(a, b, gpu_type)

    def pair_class(self, spec: JobSpec) -> Hashable | None:
        base = self.base.pair_class(spec)
        pin = self.pins.get(id(spec))
        return base if base is None or pin is None else ("pinned", pin, base)

    def __getattr__(self, name: str) -> Any:  # job_types, overlay, ... of the base
        if name == "base":  # not set yet (a copy being built): no recursion
            raise AttributeError(name)
        return getattr(self.base, name)


def spare_inference(snap: ClusterSnapshot) -> dict[GpuType, int]:
    """GPUs of inference servers serving does not need now and that are not on loan
    yet (lent ones are already training capacity in ``gpus_by_type``)."""
    inference = sorted((n for n in snap.nodes if n.pool == "inference"), key=lambda n: n.id)
    spare = max(0, len(inference) - snap.serving_demand - len(snap.lent_nodes))
    out: dict[GpuType, int] = {}
    for n in [n for n in inference if n.id not in snap.lent_nodes][:spare]:
        out[n.gpu_type] = out.get(n.gpu_type, 0) + n.num_gpus
    return out


def allocate_pinned(
    inner: Policy, teams: TeamSet, snap: ClusterSnapshot
) -> tuple[Allocation, Admission]:
    """Admit, pin, ask ``inner``, clip (the module docstring); also returns the admission."""
    adm = admit(snap, teams, spare_inference(snap))
    inner_snap = inner_snapshot(snap, adm, teams)
    return clip(inner.allocate(inner_snap), adm), adm


def inner_snapshot(snap: ClusterSnapshot, adm: Admission, teams: TeamSet) -> ClusterSnapshot:
    """Only the admitted jobs, each pinned to its type, capped, and owned by its team."""
    pins: dict[int, GpuType] = {}
    jobs: list[JobView] = []
    for j in snap.jobs:
        if j.id not in adm.gpu_type:
            continue
        g = adm.gpu_type[j.id]
        spec = dataclasses.replace(j.spec, max_workers=adm.max_workers[j.id], user=adm.team[j.id])
        pins[id(spec)] = g
        tput = {g: j.throughput[g]} if g in j.throughput else {}
        moved = j.current is not None and j.current.gpu_type != g
        current = None if moved else j.current  # admitted elsewhere: to be placed anew
        jobs.append(dataclasses.replace(j, spec=spec, throughput=tput, current=current))
    return dataclasses.replace(
        snap,
        jobs=tuple(jobs),
        throughput_model=PinnedThroughput(snap.throughput_model, pins),
        entity_weights=teams.weights(),
    )


def clip(alloc: Allocation, adm: Admission) -> Allocation:
    """The inner answer within the admission: admitted jobs only, on their type, at most
    their cap; the quota reasons of the jobs left out added to the policy's own."""
    workers: dict[JobId, tuple[GpuType, int]] = {}
    for jid, (_, n) in alloc.workers.items():
        if jid in adm.gpu_type:  # on the admitted type (a policy may keep a job where it ran)
            workers[jid] = (adm.gpu_type[jid], min(n, adm.max_workers[jid]))
    fractions = {
        key: row
        for key, row in alloc.fractions.items()
        if all(m in adm.gpu_type for m in split_pair(key))
    }
    extra = {
        jid: parts
        for jid, parts in alloc.extra.items()
        if jid in workers and workers[jid] == alloc.workers[jid]
    }
    waiting = {**adm.waiting, **alloc.waiting}
    return dataclasses.replace(
        alloc, workers=workers, fractions=fractions, extra=extra, waiting=waiting
    )
