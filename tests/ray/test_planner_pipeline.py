"""The planner against a real pipeline: torch.distributed.pipelining on Ray workers.

Two Ray actors (one CPU each, one torch thread each) form a gloo process group and run a
small GPT-like transformer (embedding, 6 blocks, an output head with a large vocabulary)
as a 2-stage pipeline: GPipe, 1F1B and interleaved 1F1B (2 or 4 chunks per worker, 4 or
8 virtual stages), at 1 to 32 microbatches for one global batch, with the planner's
balanced stage split or Megatron-LM's even one. One worker first profiles every layer's forward and
backward time at each microbatch size, and both time a send to each other and the
schedule's own cost per microbatch (a pipeline of two tiny stages); the planner, fed
those numbers, predicts every configuration's step time and chooses its stages, which
the workers then run.

Checked: the predictions rank the measured step times (Spearman >= 0.8) of the
configurations the planner predicts at least ``SPACING`` apart, chosen from all of them
by prediction alone (closer ones are ties at the planner's accuracy here); the measured
bubble (idle over busy time summed over the workers, idle being the time spent waiting
on the other worker: in the schedule's point-to-point waits, and for the drain at the
end) follows ``(p - 1)/(v m)``; the balanced split beats the even one. The passes over the
configurations end early once their fastest steps settle (``SETTLED``); the checks are
the same either way.

Two stages because the host has two cores: a third worker would share a core and the
step times would measure time-slicing, not the schedule. For the same reason a step only
counts when the host was quiet just before and after it (both workers, computing at once,
ran at most 20 % slower than their CPU time, than each other and than the host's typical
rate); after 150 s of waiting, the test skips. ``make test`` runs it after every other
test, alone (``alone``): beside the other process's live modules it would only wait and
skip. Why Ray and not torch.multiprocessing: the workers are what the runtime launches
(Ray actors), and a one-node ``ray.cluster_utils.Cluster`` with two CPUs costs ~10 s to
start.
"""

from __future__ import annotations

import math
import os
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest

pytestmark = [pytest.mark.ray, pytest.mark.alone]

ray = pytest.importorskip("ray")
torch = pytest.importorskip("torch")
from scipy.stats import spearmanr  # noqa: E402

from lyra_ray.ops.embedded import disconnect, start_with_retries  # noqa: E402
from lyra_ray.ops.ports import free_port  # noqa: E402
from lyra_ray.parallelism import (  # noqa: E402
    Constants,
    GpuSpec,
    LayerCost,
    PlanOptions,
    ProfiledTimes,
    layer_list,
    plan,
)
from lyra_ray.parallelism.schedule import bubble_fraction, valid  # noqa: E402
from tests.ray.pipeline_stage import (  # noqa: E402
    BATCH,
    BLOCKS,
    HIDDEN,
    SEQ,
    STAGES,
    VOCAB,
    StageWorker,
)
from tests.ray.quiet_gate import HostBusy, Quiet  # noqa: E402

SIZES = (1, 2, 4, 8, 16, 32)  # microbatch sizes profiled: m = BATCH / size
Config = tuple[str, int, int, str]  # (schedule, microbatches, chunks per worker, partition)
SHAPED: tuple[Config, ...] = (  # the bubble's shape and the split's gain, always run
    ("gpipe", 1, 1, "balanced"),
    ("gpipe", 2, 1, "balanced"),
    ("gpipe", 4, 1, "even"),
    ("gpipe", 4, 1, "balanced"),
    ("1f1b", 8, 1, "even"),
    ("1f1b", 8, 1, "balanced"),
    ("interleaved", 2, 2, "balanced"),
    ("interleaved", 4, 2, "balanced"),
)
CANDIDATES: tuple[Config, ...] = tuple(
    (sched, m, v, how)
    for sched, v in (("gpipe", 1), ("1f1b", 1), ("interleaved", 2), ("interleaved", 4))
    for m in (1, 2, 4, 8, 16, 32)
    for how in ("balanced", "even")
    if valid(sched, STAGES, m, v, (BLOCKS + 2) // STAGES)  # the planner's rule: what torch runs
)
"""What the ranking is drawn from: every schedule, 2 or 4 chunks a worker, microbatch
count (too few leave a bubble, too many pay the runtime's cost per microbatch and small
matmuls) and split."""
SPACING = 1.12
"""Configurations ranked must be predicted at least this far apart (each at least 12 %
slower than the one before). Why: the planner's error on this host is ~6 % either way,
varying by configuration (predicted over measured from 0.78 to 0.92 in one run, 0.78 to
0.93 in another), so configurations predicted a few percent apart are ties it cannot
order, and ranking them measures noise. The first design ranked eight configurations
within 2-9 % of their neighbours; with errors of that size Spearman falls under 0.8 in
about one run in four (4,000 simulated runs: 25 %), as it did in CI (0.71, 0.74). Seven
configurations 12 % apart miss 0.8 about once in 10,000 runs at 6 % error, once in 200
at 8 %."""
TIE = 0.02
"""Predictions this close (2 %) are ties to the planner, far under its ~6 % error
(``SPACING``): among them the ranking's choice may favour a schedule not yet in it."""
MIN_RANKED = 4
"""Spearman 0.8 allows one swap of neighbours among four configurations (0.8) and two
among five (0.8), so four is not a looser bar on the order, only a shorter one. How
many there are depends on the host's profile, not on the planner: the predictions
spanned 2.5-3x in two runs alone (7 and 6 ranked) but 1.69x in one inside the CI suite
(0.16 to 0.27 s: a smaller cost per microbatch measured), which left four and failed
the former minimum of five with every one of them in order. ``MIN_SPAN`` keeps a planner
that predicts everything alike from passing on fewer."""
MIN_SPAN = 1.5
"""The slowest candidate must be predicted at least this much slower than the fastest:
one microbatch on two stages idles each worker half the step, about 2x."""
REPS = 3
SWEEPS = 6
"""Every configuration runs ``REPS`` steps in each of up to ``SWEEPS`` passes over all of
them, each pass started only on a quiet host; a configuration's time is its fastest step.
(Three passes were too few inside the full suite: twice running there, two
configurations 1 % apart swapped places; alone, the test passed every time. A balanced
split is the most jittery, both its stages being critical: its 1F1B steps ranged over
186-206 ms in one run of three, so five passes of two steps once left it 3 % ahead of
the even split instead of the 10 % its fastest step shows.)"""
MIN_SWEEPS = 4
SETTLED = 0.01
"""The sweeps stop early, after at least ``MIN_SWEEPS``, once a whole pass improved no
configuration's fastest step by ``SETTLED`` (1 %) or more: the minima have settled, so
further passes would only repeat them. Why: in a run alone, passes 4 to 6 moved one
minimum by 0.6 % and nothing else, for 35 of the test's 120 s. A host that still
perturbs the steps keeps moving the minima, and the test then runs all ``SWEEPS``, as
before. What is compared, and the bars, are unchanged: this only ends the measuring
when more of it would change nothing beyond its noise."""
RHO_MIN = 0.8
"""Spearman's bar, for the ranking and for the bubbles' order."""
RHO_EPS = 1e-9
"""Spearman's rho over ranks is a rational number (1 - 6 sum d^2 / (n (n^2 - 1))) that
floating point can land a hair below: two swaps of neighbours among five, exactly the
0.8 this test allows (``MIN_RANKED``), came out 0.7999999999999999 in a whole-suite run
and failed. A tolerance far under any one swap's step (0.1 among five) moves no case."""
PROFILES = 3
"""Layer profiles taken; each layer's time is its fastest (a burst inflates one)."""


def model_spec() -> Any:
    """The layer list the planner partitions: only sizes matter (times come from the
    profile); activations cross a boundary as float32."""
    out = 4.0 * SEQ * HIDDEN
    layers = [LayerCost("embed", 0, 0, 2 * VOCAB * HIDDEN, out, out)]
    layers += [LayerCost(f"block{i}", 0, 0, 24 * HIDDEN**2, 8 * out, out) for i in range(BLOCKS)]
    layers.append(LayerCost("head", 0, 0, 2 * VOCAB * HIDDEN, 8.0 * SEQ * VOCAB, 4.0))
    return layer_list("tiny-gpt", layers)


@contextmanager
def running_workers() -> Iterator[list[Any]]:
    """A one-node Ray cluster of ``STAGES`` CPUs and one worker per stage."""
    from ray.cluster_utils import Cluster

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    os.environ["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    os.environ.setdefault("RAY_TMPDIR", f"/tmp/lyra-pipeline-{os.getuid()}")
    # WHY retried: Ray gives a new head's raylet a fixed 30 s to register; under a CPU hog
    # that ran out here ("The current node timed out during startup"), as it had for the
    # other modules' heads, which start_with_retries already covered
    cluster = start_with_retries(
        lambda: Cluster(
            initialize_head=True,
            head_node_args={
                "num_cpus": STAGES,
                "object_store_memory": 100 * 2**20,
                "include_dashboard": False,
            },
        )
    )
    try:
        ray.init(address=cluster.address, log_to_driver=False)
        port = free_port()
        ws = [StageWorker.remote(r, port) for r in range(STAGES)]  # type: ignore[attr-defined]
        ray.get([w.__ray_ready__.remote() for w in ws])
        yield ws
        ray.get([w.close.remote() for w in ws])
    finally:
        disconnect()
        cluster.shutdown()


@pytest.fixture(scope="module")
def workers() -> Iterator[list[Any]]:
    with running_workers() as ws:
        yield ws


def spaced(predicted: dict[Config, float]) -> list[Config]:
    """The fastest configuration, then each next one predicted at least ``SPACING`` times
    slower than the last taken; chosen from predictions alone, before anything runs.
    Among configurations predicted within ``TIE`` of the fastest that qualifies, the
    first whose (schedule, chunks) no taken one has goes first: they are ties to the
    planner, and a sort that broke them by name once took four GPipe configurations
    (GPipe and 1F1B at eight microbatches are predicted alike on two stages), so the
    ranking no longer spanned two schedules (the "not one knob" check below)."""
    out: list[Config] = []
    left = sorted(predicted, key=lambda c: (predicted[c], c))
    while True:
        ok = [c for c in left if not out or predicted[c] >= SPACING * predicted[out[-1]]]
        if not ok:
            return out
        knobs = {(c[0], c[2]) for c in out}
        ties = [c for c in ok if predicted[c] <= (1 + TIE) * predicted[ok[0]]]
        pick = next((c for c in ties if (c[0], c[2]) not in knobs), ok[0])
        out.append(pick)
        left = [c for c in left if predicted[c] > predicted[pick]]


def measure(workers: list[Any]) -> list[dict[str, Any]]:
    """Profile layers and the link, predict each configuration with the planner, run the
    spaced ones (``ranked``) and the shaped ones with the planner's stage split, and pair
    prediction and measurement. A step counts only if the host was quiet just before and
    just after it."""
    quiet = Quiet(workers)
    runs = quiet.samples(PROFILES, lambda: ray.get(workers[0].profile.remote(SIZES, 5)))
    fastest = {  # the fastest of the profiles, layer by layer: bursts inflate one
        b: [
            (min(x[0] for x in ls), min(x[1] for x in ls))
            for ls in zip(*(r[b] for r in runs), strict=True)
        ]
        for b in SIZES
    }
    profile = ProfiledTimes(fastest)
    hop = ray.get([w.link.remote((SIZES[0], SIZES[-1]), 20) for w in workers])[0]
    small, large = 4.0 * SIZES[0] * SEQ * HIDDEN, 4.0 * SIZES[-1] * SEQ * HIDDEN
    bw = (large - small) / max(hop[SIZES[-1]] - hop[SIZES[0]], 1e-9)
    # The planner charges each stage two hops per microbatch (activation, gradient).
    # Timed as a profile is, only on a quiet host, ``PROFILES`` times, the median kept:
    # it is a slope of two fastest steps, and one noisy step can halve or double it.
    # (Taken once and unguarded before: the likely cause, not shown, of a suite run whose
    # 32-microbatch predictions were 22-32 % short, ranked under a 1-microbatch
    # configuration predicted slower: Spearman 0.70.)
    slopes = quiet.samples(PROFILES, lambda: max(ray.get([w.overhead.remote(5) for w in workers])))
    latency = sorted(slopes)[len(slopes) // 2] / 2
    cpu = GpuSpec("cpu", 1e11, 64 * 2**30, 1e10, bw, bw, gpus_per_server=STAGES)
    model = model_spec()
    plans = {}
    for sched, m, v, how in dict.fromkeys(CANDIDATES + SHAPED):
        options = PlanOptions(
            tp=(1,), pp=(STAGES,), microbatches=(BATCH // m,), schedules=(sched,),
            chunks=(max(v, 2),), recompute="never", partition=how, top_k=1,
            max_microbatch=BATCH, constants=Constants(collective_latency_s=latency),
        )  # fmt: skip
        (plans[sched, m, v, how],) = plan(model, cpu, STAGES, BATCH, options, profile=profile)
    ranked = spaced({c: p.iteration_s for c, p in plans.items() if c in CANDIDATES})
    rows = [
        {
            "schedule": sched, "m": m, "v": v, "partition": how,
            "stages": list(plans[c].stages), "predicted_s": plans[c].iteration_s,
            "bubble_formula": bubble_fraction(STAGES, m, v),
            "bubble_predicted": plans[c].bubble, "measured_s": float("inf"),
            "ranked": c in ranked, "shaped": c in SHAPED,
        }
        for c in dict.fromkeys(SHAPED + tuple(ranked))
        for sched, m, v, how in [c]
    ]  # fmt: skip
    for sweep in range(1, SWEEPS + 1):
        before = [r["measured_s"] for r in rows]
        for r in rows:
            quiet.wait()
            got = ray.get([w.run.remote(r["schedule"], r["m"], r["stages"], REPS) for w in workers])
            wall, idle = max(g[0] for g in got), sum(g[1] for g in got)
            if wall < r["measured_s"] and quiet.now():
                busy = sum(g[0] for g in got) - idle
                r["measured_s"], r["bubble_measured"] = wall, idle / busy
        if sweep >= MIN_SWEEPS and settled(before, [r["measured_s"] for r in rows]):
            break
    if any(math.isinf(r["measured_s"]) for r in rows):
        raise HostBusy("some configurations never ran on a quiet host")
    return rows


def settled(before: list[float], after: list[float]) -> bool:
    """No configuration's fastest step improved by ``SETTLED`` or more in the last pass
    (and each has one: a configuration never measured on a quiet host has not settled)."""
    return all(
        math.isfinite(a) and a > (1 - SETTLED) * b for b, a in zip(before, after, strict=True)
    )


def ranking(rows: list[dict[str, Any]]) -> float:
    """Spearman between predicted and measured step times over the ranked configurations."""
    ranked = [r for r in rows if r["ranked"]]
    rho = spearmanr([r["predicted_s"] for r in ranked], [r["measured_s"] for r in ranked])[0]
    return float(rho)


def test_planner_ranks_real_pipelines_and_bubble_follows_formula(workers: list[Any]) -> None:
    try:
        rows = measure(workers)
    except HostBusy as e:  # a timing comparison is meaningless on a saturated host
        pytest.skip(str(e))
    table = "\n".join(str(r) for r in rows)
    ranked = [r for r in rows if r["ranked"]]
    span = max(r["predicted_s"] for r in ranked) / min(r["predicted_s"] for r in ranked)
    assert span >= MIN_SPAN, f"predictions span only {span:.2f}x\n{table}"
    assert len(ranked) >= MIN_RANKED, f"too few configurations predicted apart\n{table}"
    assert len({(r["schedule"], r["v"]) for r in ranked}) >= 2, table  # not one knob
    rho = ranking(rows)
    assert rho >= RHO_MIN - RHO_EPS, f"Spearman {rho:.2f}\n{table}"
    balanced = [r for r in rows if r["shaped"] and r["partition"] == "balanced"]
    for r in balanced:
        # Idle over busy time of the two workers: (p - 1)/m for GPipe and 1F1B, and
        # (p - 1)/(v m) interleaved; transfers count as idle, and the stages are only as
        # even as whole layers allow.
        assert (
            abs(r["bubble_measured"] - r["bubble_formula"]) <= 0.12 + 0.1 * r["bubble_formula"]
        ), table
    formula = [r["bubble_formula"] for r in balanced]
    bubbles = spearmanr(formula, [r["bubble_measured"] for r in balanced])[0]
    assert bubbles >= RHO_MIN - RHO_EPS, table
    gpipe = [r["bubble_measured"] for r in balanced if r["schedule"] == "gpipe"]
    assert gpipe == sorted(gpipe, reverse=True), table
    # DAPPLE-style uneven stages beat Megatron-LM's even split on this uneven model.
    for sched, m in (("gpipe", 4), ("1f1b", 8)):
        pair = {
            r["partition"]: r for r in rows if r["shaped"] and (r["schedule"], r["m"]) == (sched, m)
        }
        assert pair["balanced"]["stages"] != pair["even"]["stages"], table
        assert pair["balanced"]["measured_s"] < pair["even"]["measured_s"], table


if __name__ == "__main__":  # prints the table for docs/planner.md
    import json

    with running_workers() as ws:
        print(json.dumps(measure(ws), indent=1))
