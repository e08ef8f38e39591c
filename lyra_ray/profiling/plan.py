"""What a profile measures, and the throughput file its results make (pure).

A profile measures every job on every GPU type: alone at each worker count it may run
at, and beside every partner on one GPU (or, with ``pairs_per_job``, beside only a few,
the rest predicted: :mod:`lyra_ray.model.interference`). Each measurement has a stable
id, so results can arrive in any order, from any number of profiling jobs, and a cut
short profile can say exactly which are missing.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from lyra_ray.model.measured import job_key


@dataclass(frozen=True)
class ProfiledJob:
    """One job to profile: a catalogue type or a user's own entrypoint."""

    key: str
    """Its name in the table: the job type, or the user job's name (its spec's
    ``profile:`` key finds it again)."""
    side: Mapping[str, Any]
    """What :mod:`lyra_ray.profiling.core` runs: ``{"job_type", "size"}`` or
    ``{"entrypoint", "config"}``."""
    workers: tuple[int, ...] = (1,)
    """Worker counts to measure alone."""
    runtime_env: Mapping[str, Any] = field(default_factory=dict)
    """The job's runtime env: a profiling job carries one, so a pair is measured only
    between jobs with the same env."""
    entrypoint: str | None = None
    """The Train loop that runs the job with several workers."""
    config: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Measurement:
    gpu: str
    jobs: tuple[str, ...]
    """One job (alone) or two (a pair, one worker each on one GPU)."""
    workers: int = 1

    @property
    def id(self) -> str:
        kind = "pair" if len(self.jobs) == 2 else "alone"
        return "|".join([self.gpu, kind, *self.jobs, str(self.workers)])


def worker_counts(lo: int, hi: int, limit: int) -> tuple[int, ...]:
    """The sizes an elastic job ``[lo, hi]`` is measured at: both ends and the powers of
    two between (a throughput curve is interpolated between them), none above ``limit``
    (the GPUs of the type)."""
    sizes = {lo, hi, *(2**k for k in range(hi.bit_length()) if lo < 2**k < hi)}
    return tuple(sorted(n for n in sizes if n <= limit))


def choose_pairs(keys: Sequence[str], per_job: int | None) -> list[tuple[str, str]]:
    """Every unordered pair, self-pairs included; or, with ``per_job``, about that many
    partners per job, spread evenly (each job in turn takes the partner it has not met
    that has the fewest pairs so far), so the predictor sees every job from several
    sides."""
    every = list(itertools.combinations_with_replacement(keys, 2))
    if per_job is None or per_job >= len(keys):
        return every
    count = dict.fromkeys(keys, 0)
    chosen: set[tuple[str, str]] = set()
    for a in keys:
        while count[a] < per_job:
            options = [b for b in keys if b != a and tuple(sorted((a, b))) not in chosen]
            if not options:
                break
            b = min(options, key=lambda k: (count[k], keys.index(k)))
            chosen.add((a, b) if keys.index(a) <= keys.index(b) else (b, a))
            count[a] += 1
            count[b] += 1
    return [p for p in every if p in chosen]


def plan(
    jobs: Sequence[ProfiledJob], gpus: Mapping[str, int], pairs_per_job: int | None = None
) -> list[Measurement]:
    """Every measurement, GPU type by GPU type: alone first, then pairs."""
    out: list[Measurement] = []
    for gpu in sorted(gpus):
        for j in jobs:
            out += [Measurement(gpu, (j.key,), n) for n in j.workers if n <= gpus[gpu]]
        envs: dict[str, list[str]] = {}
        for j in jobs:
            envs.setdefault(repr(sorted(j.runtime_env.items())), []).append(j.key)
        for keys in envs.values():
            out += [Measurement(gpu, p) for p in choose_pairs(keys, pairs_per_job)]
    return out


def table(
    measurements: Iterable[Measurement],
    results: Mapping[str, Sequence[Mapping[str, Any]]],
    provenance: Mapping[str, Any],
) -> dict[str, Any]:
    """Gavel's throughput JSON from the results (id -> one result per side), with each
    figure's spread and, under ``provenance.missing``, every measurement that has no
    usable result (and why). A pair is kept only where both jobs have a rate alone on
    that GPU type: the format has no pair without its ``"null"`` entry."""
    out: dict[str, Any] = {}
    spread: dict[str, Any] = {}
    missing: list[dict[str, str]] = []
    todo = list(measurements)

    def failed(m: Measurement, why: str) -> None:
        missing.append({"id": m.id, "why": why})

    for m in todo:
        res = results.get(m.id)
        if res is None:
            failed(m, "not measured")
            continue
        bad = [r.get("error") for r in res if "error" in r or not r.get("rate")]
        if bad:
            failed(m, str(bad[0] or "no step in the time given"))
            continue
        if len(m.jobs) == 1:
            k = job_key(m.jobs[0], m.workers)
            out.setdefault(m.gpu, {}).setdefault(k, {})["null"] = float(res[0]["rate"])
            spread.setdefault(m.gpu, {}).setdefault(k, {})["null"] = res[0].get("spread") or 0.0
    for m in todo:
        res = results.get(m.id)
        if len(m.jobs) != 2 or res is None or any("error" in r or not r.get("rate") for r in res):
            continue
        (a, b), rows = m.jobs, out.get(m.gpu, {})
        ka, kb = job_key(a), job_key(b)
        if ka not in rows or kb not in rows:
            failed(m, "a side has no rate alone on this GPU type")
            continue
        ra, rb = float(res[0]["rate"]), float(res[1]["rate"])
        sa, sb = res[0].get("spread") or 0.0, res[1].get("spread") or 0.0
        rows[ka][kb], spread[m.gpu][ka][kb] = [ra, rb], [sa, sb]
        if a != b:
            rows[kb][ka], spread[m.gpu][kb][ka] = [rb, ra], [sb, sa]
    return {
        **out,
        "spread": spread,
        "predicted": [],
        "provenance": {**provenance, "missing": missing},
    }
