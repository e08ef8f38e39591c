"""Throughput models: steps/s of a job on a GPU type with a worker count (and a partner).

Two sources feed the same interface (:class:`lyra_ray.model.ThroughputModel`):

* a job spec's own ``throughput`` (steps/s per worker per GPU type) times its scaling curve;
* a catalogue of measured steps/s per (job type, scale factor, GPU type), Gavel's format,
  including co-located pairs for space sharing.

The live runtime wraps either in :class:`MeasuredThroughputs` so that throughputs measured
online replace the seeded ones for every policy at once.
"""

from __future__ import annotations

import ast
import json
import math
from collections.abc import Hashable, Mapping
from pathlib import Path
from typing import Any

from lyra_ray.model import GpuType, JobSpec, ThroughputModel, scaling

TypeKey = tuple[str, int]


class CatalogueThroughputs(ThroughputModel):
    """Measured steps/s per ``(job_type, scale_factor)`` and GPU type, plus pairs.

    ``alone[(type, sf)][gpu]`` is the job's steps/s alone; ``pairs[(type, sf)][gpu][(other,
    sf2)]`` is ``(this, other)`` steps/s when sharing. A spec without ``job_type`` falls back
    to its own per-worker ``throughput``; a job type measured only at scale factor 1 is
    scaled by the spec's scaling curve.
    """

    def __init__(
        self,
        alone: Mapping[TypeKey, Mapping[GpuType, float]],
        pairs: Mapping[TypeKey, Mapping[GpuType, Mapping[TypeKey, tuple[float, float]]]]
        | None = None,
        predicted: frozenset[tuple[GpuType, TypeKey, TypeKey]] = frozenset(),
        estimated: frozenset[GpuType] = frozenset(),
    ) -> None:
        self.alone = {k: dict(v) for k, v in alone.items()}
        self.pairs = pairs or {}
        self.job_types = frozenset(k[0] for k in self.alone)
        self.predicted = predicted
        """(GPU type, job, partner) entries of :attr:`pairs` that a predictor filled in
        (:mod:`lyra_ray.model.interference`) rather than a profiler measured."""
        self.estimated = estimated
        """GPU types whose pair entries are estimates (the catalogue's seeds)."""

    def pair_rank(self, gpu: GpuType, a: TypeKey, b: TypeKey) -> int:
        """How much a pair entry is to be believed: 2 measured, 1 predicted from other
        pairs, 0 an estimate. :meth:`overlay` keeps the better of two."""
        if gpu in self.estimated:
            return 0
        return 1 if (gpu, a, b) in self.predicted else 2

    def overlay(self, top: CatalogueThroughputs) -> CatalogueThroughputs:
        """This table with ``top``'s entries laid over it: ``top``'s rates alone replace
        these; a pair entry is taken from whichever table believes it more (measured over
        predicted over estimated, ``top`` on a tie). So a profiled table seeds the live
        scheduler without a predicted pair hiding one the catalogue measured."""
        alone = {k: dict(v) for k, v in self.alone.items()}
        for k, rates in top.alone.items():
            alone.setdefault(k, {}).update(rates)
        pairs = {k: {g: dict(r) for g, r in v.items()} for k, v in self.pairs.items()}
        predicted = set(self.predicted)
        estimated = set(self.estimated) - set(top.gpu_types())
        for a, by_gpu in top.pairs.items():
            for g, row in by_gpu.items():
                dest = pairs.setdefault(a, {}).setdefault(g, {})
                for b, val in row.items():
                    mine = self.pair_rank(g, a, b) if b in dest else -1
                    if top.pair_rank(g, a, b) >= mine:
                        dest[b] = val
                        predicted.discard((g, a, b))
                        if (g, a, b) in top.predicted:
                            predicted.add((g, a, b))
        return CatalogueThroughputs(alone, pairs, frozenset(predicted), frozenset(estimated))

    def gpu_types(self) -> set[GpuType]:
        return {g for v in self.alone.values() for g in v}

    def throughput(self, spec: JobSpec, gpu_type: GpuType, workers: int) -> float:
        if spec.job_type is None:
            if spec.throughput_by_size is not None:  # planned from the job's model
                return spec.throughput_by_size.get(gpu_type, {}).get(workers, 0.0)
            if spec.throughput is None:
                return 0.0
            return spec.throughput.get(gpu_type, 0.0) * scaling.speedup(spec.scaling, workers)
        exact = self.alone.get((spec.job_type, workers))
        if exact is not None:
            return exact.get(gpu_type, 0.0)
        one = self.alone.get((spec.job_type, 1))
        if one is None:
            return 0.0
        return one.get(gpu_type, 0.0) * scaling.speedup(spec.scaling, workers)

    def pair_throughput(
        self, a: JobSpec, b: JobSpec, gpu_type: GpuType
    ) -> tuple[float, float] | None:
        """What both specs declare (their owners know their code), else the catalogue's
        measured pair of their job types."""
        declared = self.declared_pair(a, b, gpu_type)
        if declared is not None:
            return declared
        if a.job_type is None or b.job_type is None:
            return None
        row = self.pairs.get((a.job_type, a.min_workers), {}).get(gpu_type, {})
        val = row.get((b.job_type, b.min_workers))
        if val is None or (val[0] <= 0.0 and val[1] <= 0.0):
            return None
        return val


class SpecThroughputs(CatalogueThroughputs):
    """Only the specs' own throughputs (no catalogue): YAML job lists, Philly traces."""

    def __init__(self) -> None:
        super().__init__({})


def _parse_key(raw: str) -> TypeKey:
    """``"('ResNet-18 (batch size 16)', 1)"`` as a key. Gavel's file spells each of its
    few dozen keys ~10,000 times (every pair entry names its partner), and
    ``ast.literal_eval`` costs ~8 µs a call, a tenth of a replay's start-up: each
    spelling is parsed once. A malformed key raises every time (errors are not kept)."""
    hit = _KEYS.get(raw)
    if hit is None:
        model, sf = ast.literal_eval(raw)
        hit = _KEYS[raw] = (str(model), int(sf))
    return hit


_KEYS: dict[str, TypeKey] = {}


def load_gavel_throughputs(path: str | Path) -> CatalogueThroughputs:
    """Read Gavel's throughput JSON (``simulation_throughputs.json`` and friends).

    Keys are ``str((model, scale_factor))``; under each, ``"null"`` is the job alone and
    any other key a co-located partner mapping to ``[this, partner]``. The
    ``*_unconsolidated`` GPU types are measurements of spread-out placements that Gavel's
    simulator does not use; they are skipped.
    """
    return parse_gavel_throughputs(read_throughputs_json(path), str(path))


def read_throughputs_json(path: str | Path) -> Any:
    """The file's JSON, or an InputError naming the file (unreadable, not UTF-8, not JSON)."""
    from lyra_ray.model.errors import InputError

    p = Path(path)
    try:
        return json.loads(p.read_text())
    except OSError as e:
        raise InputError(f"{p}: cannot read throughputs file: {e.strerror}") from e
    except UnicodeDecodeError as e:
        raise InputError(f"{p}: cannot read throughputs file: not UTF-8 ({e.reason})") from None
    except json.JSONDecodeError as e:
        raise InputError(f"{p}: line {e.lineno}: not valid JSON: {e.msg}") from e


def parse_gavel_throughputs(raw: Any, source: str) -> CatalogueThroughputs:
    """A parsed throughput JSON (see :func:`load_gavel_throughputs`) checked entry by
    entry; ``source`` names it in errors (a file, or ``lyra config: field 'throughputs'``).
    The one parser of this input, for a file and for a table sent in a config alike."""
    from lyra_ray.model.errors import InputError

    p = source
    if not isinstance(raw, dict):
        raise InputError(f"{p}: expected {{GPU type: {{job key: {{partner: throughput}}}}}}")
    predicted = _predicted(p, raw.get("predicted", []))
    _spread(p, raw.get("spread", {}))
    tables = {g: t for g, t in raw.items() if g not in EXTRA_KEYS}
    if not all(isinstance(t, dict) for t in tables.values()):
        raise InputError(f"{p}: expected {{GPU type: {{job key: {{partner: throughput}}}}}}")
    alone: dict[TypeKey, dict[GpuType, float]] = {}
    pairs: dict[TypeKey, dict[GpuType, dict[TypeKey, tuple[float, float]]]] = {}
    for gpu, table in tables.items():
        if gpu.endswith("_unconsolidated"):
            continue
        for key, entry in table.items():
            # Any shape error of an entry names it (a list, a missing "null", a string
            # where a number goes used to escape as a traceback; found by fuzzing).
            try:
                tk = _parse_key(key)
                rates = _rates(entry)
            except (ValueError, SyntaxError, TypeError, KeyError, IndexError, RecursionError) as e:
                raise InputError(
                    f"{p}: GPU type {gpu!r}: field {key!r}: malformed entry ({type(e).__name__})"
                ) from None
            alone.setdefault(tk, {})[gpu] = rates.pop("null")[0]
            prow = pairs.setdefault(tk, {}).setdefault(gpu, {})
            for other, val in rates.items():
                prow[_parse_key(other)] = val
    return CatalogueThroughputs(alone, pairs, predicted)


EXTRA_KEYS = frozenset({"provenance", "spread", "predicted"})
"""Optional top-level keys beside the GPU types (``lyra profile`` writes them): where the
figures came from, the relative spread of each, and which pair entries were predicted.
Gavel's own files have none of them."""


def _predicted(p: str, raw: Any) -> frozenset[tuple[GpuType, TypeKey, TypeKey]]:
    """``[[gpu type, job key, partner key], ...]``, else an InputError naming the entry."""
    from lyra_ray.model.errors import InputError

    if not isinstance(raw, list):
        raise InputError(f"{p}: field 'predicted': expected a list of [GPU type, job, partner]")
    out = set()
    for i, item in enumerate(raw):
        try:
            if not isinstance(item, list) or len(item) != 3 or not isinstance(item[0], str):
                raise TypeError("not [GPU type, job, partner]")
            out.add((item[0], _parse_key(str(item[1])), _parse_key(str(item[2]))))
        except (ValueError, SyntaxError, TypeError, RecursionError):
            raise InputError(
                f"{p}: field 'predicted[{i}]': expected [GPU type, job key, partner key]"
            ) from None
    return frozenset(out)


def _spread(p: str, raw: Any) -> None:
    """``{gpu: {job key: {"null": s, partner: [s, s]}}}`` of finite numbers >= 0: read by
    people and ``lyra profile``; checked so a damaged file is refused, not half-read."""
    from lyra_ray.model.errors import InputError

    def ok(v: Any) -> bool:
        vals = v if isinstance(v, list) else [v]
        return all(
            isinstance(x, int | float) and not isinstance(x, bool) and math.isfinite(x) and x >= 0
            for x in vals
        )

    if not isinstance(raw, dict) or not all(
        isinstance(t, dict) and all(isinstance(e, dict) for e in t.values()) for t in raw.values()
    ):
        raise InputError(f"{p}: field 'spread': expected {{GPU type: {{job: {{partner: x}}}}}}")
    for gpu, table in raw.items():
        for key, entry in table.items():
            if not all(ok(v) for v in entry.values()):
                raise InputError(
                    f"{p}: field 'spread.{gpu}.{key}': spreads are finite numbers >= 0"
                )


def _rates(entry: Any) -> dict[str, tuple[float, float]]:
    """``{"null": x, "(model, sf)": [a, b], ...}`` with finite numbers, else ValueError."""
    if not isinstance(entry, dict):
        raise TypeError("not a mapping")
    out: dict[str, tuple[float, float]] = {"null": (float(entry["null"]), 0.0)}
    for other, val in entry.items():
        if other != "null":
            _parse_key(other)
            out[other] = (float(val[0]), float(val[1]))
    if not all(math.isfinite(x) for v in out.values() for x in v):
        raise ValueError("not finite")
    return out


def catalogue_throughputs() -> CatalogueThroughputs:
    """The workload catalogue the project ships (see :mod:`lyra_ray.model.catalogue`)."""
    from lyra_ray.model.catalogue import CATALOGUE, MEASURED_GPU_TYPES, pair_rates

    alone = {(name, 1): dict(t) for name, t in CATALOGUE.items()}
    pairs = {
        (a, 1): {g: {(b, 1): pair_rates(a, b, g) for b in CATALOGUE} for g in CATALOGUE[a]}
        for a in CATALOGUE
    }
    estimated = {g for t in CATALOGUE.values() for g in t} - MEASURED_GPU_TYPES
    return CatalogueThroughputs(alone, pairs, estimated=frozenset(estimated))


MAX_MEASURED = 1024
"""Measured (job name, GPU type) rows kept, the most recently observed. Unbounded, they
grew with every distinct job name a scheduler ever saw, and every commit of its state
carried them all (issue #17, item 7); a name seen again within the last thousand
still starts from what was measured."""


class MeasuredThroughputs(ThroughputModel):
    """A seed model overlaid with throughputs measured online (per job name and GPU type).

    The live runtime reports steps/s per worker; those replace the seeded values for
    that job, scaled by the job's own curve, so later decisions use what was seen.
    """

    def __init__(self, seed: ThroughputModel, max_rows: int = MAX_MEASURED) -> None:
        self.seed = seed
        self.max_rows = max_rows
        self.measured: dict[tuple[str, GpuType], float] = {}
        """Oldest observation first: the order in which rows are forgotten."""
        self.measured_pairs: dict[tuple[str, str, GpuType], float] = {}
        """(job name, partner name, GPU type) -> the job's steps/s beside that partner,
        oldest first; kept apart from :attr:`measured` because a shared GPU's rate is
        not the job's rate alone (it would make the job look slow everywhere)."""
        self._names: frozenset[str] | None = None

    def observe(self, spec: JobSpec, gpu_type: GpuType, workers: int, steps_per_s: float) -> None:
        if workers > 0 and steps_per_s > 0:
            self._names = None
            key = (spec.name, gpu_type)
            self.measured.pop(key, None)  # re-observed: now the newest
            self.measured[key] = steps_per_s / scaling.speedup(spec.scaling, workers)
            while len(self.measured) > self.max_rows:
                del self.measured[next(iter(self.measured))]

    def observe_pair(
        self, spec: JobSpec, partner: JobSpec, gpu_type: GpuType, steps_per_s: float
    ) -> None:
        if steps_per_s > 0:
            self._names = None
            key = (spec.name, partner.name, gpu_type)
            self.measured_pairs.pop(key, None)
            self.measured_pairs[key] = steps_per_s
            while len(self.measured_pairs) > self.max_rows:
                del self.measured_pairs[next(iter(self.measured_pairs))]

    def to_state(self) -> dict[str, Any]:
        """The rows in the order they would be forgotten, so a restored model forgets
        the same ones next (a restart decides alike)."""
        rows = [[name, g, v] for (name, g), v in self.measured.items()]
        out: dict[str, Any] = {"measured": rows, "seed": self.seed.to_state()}
        if self.measured_pairs:  # absent when empty: states saved before pairs load alike
            out["pairs"] = [[a, b, g, v] for (a, b, g), v in self.measured_pairs.items()]
        return out

    def load_state(self, state: Mapping[str, Any]) -> None:
        self._names = None
        self.measured = {(str(n), str(g)): float(v) for n, g, v in state.get("measured", [])}
        self.measured_pairs = {
            (str(a), str(b), str(g)): float(v) for a, b, g, v in state.get("pairs", [])
        }
        self.seed.load_state(state.get("seed", {}))

    def pair_class(self, spec: JobSpec) -> Hashable | None:
        """The seed's class until this job name was measured; then the name joins the
        key, since its rates (alone, and rescaled or measured beside a partner) are its
        own. Two jobs of one type, one measured and one not, are no longer taken for
        each other (found live: the measured job's pair rates were used for both, and
        max-min fairness then gave the pair only part of the GPU)."""
        seed = self.seed.pair_class(spec)
        if seed is None or spec.name not in self._measured_names():
            return seed
        return (seed, spec.name)

    def _measured_names(self) -> frozenset[str]:
        """Job names with a measured row, rebuilt after the rows changed."""
        if self._names is None:
            self._names = frozenset(
                [n for n, _g in self.measured] + [n for n, _b, _g in self.measured_pairs]
            )
        return self._names

    def throughput(self, spec: JobSpec, gpu_type: GpuType, workers: int) -> float:
        per_worker = self.measured.get((spec.name, gpu_type))
        if per_worker is None:
            return self.seed.throughput(spec, gpu_type, workers)
        return per_worker * scaling.speedup(spec.scaling, workers)

    def pair_throughput(
        self, a: JobSpec, b: JobSpec, gpu_type: GpuType
    ) -> tuple[float, float] | None:
        """The seed's pair rates (the catalogue's, or what both specs declare), each side
        replaced by what was measured beside that very partner. A pair the seed does not
        know is offered only once both sides were measured together: a guess would let
        a packed policy pair anything."""
        seeded = self.seed.pair_throughput(a, b, gpu_type)
        ma = self.measured_pairs.get((a.name, b.name, gpu_type))
        mb = self.measured_pairs.get((b.name, a.name, gpu_type))
        if seeded is None:
            return (ma, mb) if ma is not None and mb is not None else None
        sa, sb = self._rescaled(a, seeded[0], gpu_type), self._rescaled(b, seeded[1], gpu_type)
        return (sa if ma is None else ma, sb if mb is None else mb)

    def _rescaled(self, spec: JobSpec, seeded: float, gpu_type: GpuType) -> float:
        """A seeded pair rate on the scale of the job's measured rate alone. The seed says
        what share of its speed a job keeps beside a partner; once the job was measured
        alone, that share must apply to the measured speed (a measured 9 steps/s beside a
        seeded 1.6 steps/s pair would make every pair look ruinous, and the reverse)."""
        per_worker = self.measured.get((spec.name, gpu_type))
        alone_seed = self.seed.throughput(spec, gpu_type, spec.min_workers)
        if per_worker is None or alone_seed <= 0:
            return seeded
        alone = per_worker * scaling.speedup(spec.scaling, spec.min_workers)
        return seeded * alone / alone_seed
