"""The workload catalogue: job type -> steps/s per worker on each GPU type.

Two kinds of number live here, and each says which it is:

* **Measured** (``h200``): steps/s alone and beside every partner, measured on a real
  NVIDIA H200 on 2026-11-26 (``../shared/data/gpu/h200.json``, copied into the package
  as ``lyra_ray/model/data/h200_throughputs.json`` with its provenance; method and
  noise in ``docs/profiling.md``). The jobs measured are shaped like these types
  (:mod:`lyra_ray.jobs.models`).
* **Estimates** (``a100``, ``v100``, ``p100``, ``t4``, ``k80`` and every share in
  :data:`KEEP_WHEN_SHARED`): the project's own round numbers, shaped like published
  measurements (V100 ≈ 1.5–3x P100 ≈ 2–6x K80 depending on the model, after Gavel's
  table; T4 inference cards train at roughly K80–P100 speed). Nothing measured them.
  ``lyra profile`` measures a cluster's own types; ``lyra up --throughputs FILE`` and
  ``lyra simulate --throughputs FILE`` use such a table instead.

They seed the scheduler before it has measured anything and make the demo and tests
independent of ``../shared/data``.
"""

from __future__ import annotations

from lyra_ray.model.measured import H200_FILE, job_key, load_packaged

ESTIMATED: dict[str, dict[str, float]] = {
    "resnet50": {"a100": 7.0, "v100": 4.0, "p100": 2.2, "t4": 1.6, "k80": 0.8},
    "resnet18": {"a100": 22.0, "v100": 14.0, "p100": 9.0, "t4": 6.5, "k80": 4.0},
    "transformer": {"a100": 9.0, "v100": 5.5, "p100": 2.5, "t4": 2.0, "k80": 1.0},
    "lm": {"a100": 30.0, "v100": 18.0, "p100": 9.5, "t4": 7.0, "k80": 4.5},
    "recommendation": {"a100": 25.0, "v100": 15.0, "p100": 11.0, "t4": 9.0, "k80": 7.5},
    "a3c": {"a100": 3.0, "v100": 2.0, "p100": 1.9, "t4": 1.6, "k80": 1.5},
    "cyclegan": {"a100": 10.0, "v100": 6.0, "p100": 2.8, "t4": 2.2, "k80": 1.2},
    "bert": {"a100": 5.0, "v100": 2.8, "p100": 1.3, "t4": 1.1, "k80": 0.45},
}
"""Estimated steps/s of one worker (see the module docstring): not measurements."""

_MEASURED: dict[str, dict[str, dict[str, float | list[float]]]] = {
    g: rows
    for g, rows in load_packaged(H200_FILE).items()
    if g not in ("provenance", "spread", "predicted")
}
"""Measured tables per GPU type, Gavel's form (``{gpu: {job key: {"null": x, partner:
[this, partner]}}}``)."""

MEASURED_GPU_TYPES = frozenset(_MEASURED)

CATALOGUE: dict[str, dict[str, float]] = {
    name: {
        **rates,
        **{g: float(rows[job_key(name)]["null"]) for g, rows in _MEASURED.items()},  # type: ignore[arg-type]
    }
    for name, rates in ESTIMATED.items()
}
"""steps/s of one worker. Keys are lower-case GPU types as the cluster names them;
``h200`` is measured, the rest estimated."""

KEEP_WHEN_SHARED: dict[str, float] = {
    "resnet50": 0.55,
    "resnet18": 0.6,
    "transformer": 0.6,
    "lm": 0.7,
    "recommendation": 0.75,
    "a3c": 0.8,
    "cyclegan": 0.55,
    "bert": 0.5,
}
"""Estimated share of its alone speed a job keeps while it shares its GPUs with another
(space sharing, Gavel's "packed" policies): round numbers in the range Gavel measured
(compute-bound image models keep about half, small or input-bound models more), used on
the GPU types without measured pairs. The H200 measurements show one share per job type
cannot describe a pair (a compute-heavy pair keeps ~0.5 each, a pair with a light job
0.8-1.0), so measured types use their measured pairs instead. A seed only: the live
scheduler replaces each side with what it measures beside that partner
(:class:`lyra_ray.model.throughput.MeasuredThroughputs`)."""


def pair_rates(a: str, b: str, gpu: str) -> tuple[float, float]:
    """Steps/s of ``a`` and ``b`` (one worker each) sharing one ``gpu``.

    On a measured GPU type, the measured pair, each side clipped to its rate alone: a
    measured share above 1 (up to 1.1 here, the two runs differ by 13 % on average) is
    noise, and a seed that promised a job more speed beside a partner than alone would
    make a packed policy pair everything. Elsewhere, each side's estimated share.
    """
    rows = _MEASURED.get(gpu)
    if rows is not None:
        val = rows[job_key(a)][job_key(b)]
        assert isinstance(val, list)
        return (min(float(val[0]), CATALOGUE[a][gpu]), min(float(val[1]), CATALOGUE[b][gpu]))
    return (
        CATALOGUE[a].get(gpu, 0.0) * KEEP_WHEN_SHARED[a],
        CATALOGUE[b].get(gpu, 0.0) * KEEP_WHEN_SHARED[b],
    )
