"""Space sharing, live (Gavel's packed policies, #18): two jobs run on one GPU at once.

One node with one (fake) V100, a packed policy and two jobs of the user's own kind (no
catalogue type) that each declare they keep 80 % of their speed beside another
(``keep_when_shared``). The policy pairs them; the runtime gives each run's worker half
of the same GPU, pinned to the same node, and both step at the same time, which one GPU
allows only shared. Both finish with exactly their steps, and the scheduler has learnt
each side's speed beside the other.

Both declare the same share on purpose: max-min fairness then gives the pair the whole
GPU (X = 1, each job alone X = 0), so Gavel's rounds keep the pair until one finishes.
Unequal shares (0.8 and 0.7) make the optimum give the weaker side some time alone;
Gavel's priority for an entry that has X > 0 and has received nothing is X * 1e9, so
that job then runs a round alone, and each switch restarts both runs (a faithful,
tested rule of the round mechanism, but a test that waits for an overlap window should
not depend on how long the restarts take).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from lyra_ray.runtime.store import StateStore
from tests.ray.conftest import LiveCluster, start_cluster, stop_cluster
from tests.ray.live_helpers import (
    assert_every_step_once,
    assert_placements_match,
    job,
    release,
    scheduler_client,
    step_counts,
    wait_until,
)
from tests.waiting import wait_for

pytestmark = [
    pytest.mark.ray,
    pytest.mark.timeout(600),
]


@pytest.fixture(scope="module")
def live() -> Iterator[LiveCluster]:
    pytest.importorskip("ray")
    cluster: LiveCluster = start_cluster((("v100", 1),))
    try:
        yield cluster
    finally:
        stop_cluster(cluster)


@pytest.fixture(scope="module")
def client(live: LiveCluster) -> Any:
    return scheduler_client(live, "max_min_fairness_packed", round_s=10.0, min_lease_s=10.0)


def _learnt_pairs(live: LiveCluster) -> dict[tuple[str, str], float]:
    """The pair rates the scheduler saved with its state, read beside it through the
    store's own reader (the layout on disk is the store's: whole or incremental)."""
    store = StateStore(live.workdir / "state")
    try:
        state = store.load()
    finally:
        store.close()
    assert state is not None, "the scheduler committed no state"
    rows = state["core"]["throughputs"].get("pairs", [])
    return {(a, b): float(v) for a, b, _g, v in rows}


def _steps(log: Path) -> int:
    return sum(step_counts(log).values()) if log.exists() else 0


def test_a_packed_policy_runs_two_jobs_on_one_gpu_at_once(
    live: LiveCluster, client: Any, tmp_path: Path
) -> None:
    """Both jobs keep their slow pace until the scheduler has learnt each one's rate
    beside the other, then run their remaining steps without pause: the finish (every
    step once, the exact total, the partners in the launches) is checked as before,
    without waiting out a minute of steps that prove nothing more (issue 47)."""
    total = 600
    cfg = {"step_sleep_s": 0.1, "checkpoint_every": 20}
    logs = {n: tmp_path / f"{n}.log" for n in ("left", "right")}
    pace = tmp_path / "pace"
    specs = [
        job(
            n,
            total,
            logs[n],
            pace,
            workers=1,
            keep_when_shared=0.8,
            throughput={"v100": 1.0},
            config=cfg,
        )
        for n in logs
    ]
    # The first job may start alone (an idle cluster starts a round at once); the pair
    # forms at the first round boundary after its lease and then keeps the GPU.
    ids = dict(zip(logs, client.submit_entries(specs), strict=True))
    a, b = ids["left"], ids["right"]

    def paired() -> bool:
        sa, sb = client.status(a).get("assignment"), client.status(b).get("assignment")
        return bool(sa and sb and sa["partner"] == b and sb["partner"] == a)

    wait_until(paired, 240, "the two jobs paired on the GPU")
    sa, sb = client.status(a)["assignment"], client.status(b)["assignment"]
    assert sa["nodes"] == sb["nodes"] and sum(g for _n, g in sa["nodes"]) == 1, (sa, sb)

    # Both step at the same time on a cluster of one GPU: some 3-s window, while paired,
    # in which both logs grow.
    def both_step() -> bool:
        before = {n: _steps(p) for n, p in logs.items()}
        time.sleep(3.0)
        after = {n: _steps(p) for n, p in logs.items()}
        return paired() and all(after[n] > before[n] for n in logs)

    wait_until(both_step, 240, "both jobs stepping at once on the one GPU")

    def learnt_both() -> bool:
        learnt = _learnt_pairs(live)
        return learnt.get(("left", "right"), 0) > 1 and learnt.get(("right", "left"), 0) > 1

    # read beside the running scheduler through its store: not every half second
    wait_for(learnt_both, 240, "each job's rate beside the other learnt", every=2.0)
    release(pace)
    final = {n: client.wait(jid, timeout=400) for n, jid in ids.items()}
    for n, st in final.items():
        assert st["status"] == "finished" and st["steps_done"] == total, st
        assert_every_step_once(logs[n], total, slack=20)
        assert_placements_match(client, ids[n])
    launches = client.call("launches")
    for x, y in ((a, b), (b, a)):
        assert any(p["partner"] == y for _t, j, _g, p in launches if j == x), launches
    # each side's speed beside the other was measured (sleep-bound here: ~10 steps/s)
    learnt = _learnt_pairs(live)
    assert learnt.get(("left", "right"), 0) > 1 and learnt.get(("right", "left"), 0) > 1, learnt
