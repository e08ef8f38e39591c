"""Lina's phase 2, live: the lyra-owned MoE service re-plans on routing drift on its own clock.

A real local cluster (one training server, two inference servers of 2 fake GPUs), the real
scheduler actor with the ``lyra`` policy, the real MoE service on Ray Serve and HTTP
traffic at a set rate (at most ``IN_FLIGHT`` requests out) whose topic mix the test
shifts mid-run. It shows what issue #31 asks:

- the re-plan comes within the configured number of checks (``replan_checks`` windows of
  ``replan_s`` after the shift, plus the window the shift fell in): counted in the
  service's own checks, not in wall time;
- afterwards the busiest replica's load over a window (max/mean over a layer's replicas) is
  back within 1.3, or within the planner's own figure for that window and budget when that
  is higher (``best`` in each check: what a fresh plan of that very window reaches);
- no request fails across it, also when the topic shifts while a server is being lent
  and while it is being reclaimed.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.ray.conftest import LiveCluster, start_cluster, stop_cluster
from tests.ray.http_load import HttpLoad
from tests.ray.live_helpers import start_lending_scheduler, wait_until

# alone: its checks bound serving traffic's failures and latency, which a second live
# module beside it (make test's other process) broke; it runs after, serially.
pytestmark = [pytest.mark.ray, pytest.mark.timeout(600), pytest.mark.alone]

GPU = "t4"
REPLAN_S, CHECKS, SLOTS = 2.0, 2, 4
"""Four expert slots a device: 16 replicas a layer on both servers. WHY not 3 (until
2026-12-01): mix B's best plan on 12 replicas leaves its busiest replica at ~1.26x the
mean, 3 % under the 1.3 bound, so a plan made from one window, judged on the next, passed
or failed by the windows' noise: after the re-plan a quiet run measured 1.287-1.290, a
run under a one-core hog 1.313 and failed. Replayed offline (the windows' loads drawn
around the live run's shares, planned and judged as the service does), that bar failed
1-18 % of checks; on 16 replicas mix B plans at ~1.15 and none failed, at any measured
device ratio from 4 up. The live runs after: 1.15-1.19. What this still proves: a service
that kept mix A's plan measures ~6.7 on mix B's windows, and the bar is the same 1.3."""
TOPIC_A, TOPIC_B = [1, 0, 0, 0], [0, 1, 0, 0]
"""The served Mixtral's routers send topic 0's and topic 1's tokens to different experts
(its token embeddings cluster by topic): the plan made for one mix serves the other badly
(busiest replica ~4.9x the mean in-process, seed 0)."""
BATCH, SEQ = 8, 128
"""1024 routed tokens a request-layer, ~256 per expert: past the knee of the devices' measured
expert time (they compute their experts), so the plan for this regime follows popularity.
WHY not 512 (SEQ 64, until 2026-12-01): nearer the knee, the plans flip with the device's
measured 256/1-token ratio (below ~5.5 at 12 replicas, 8 replicas a layer, not 12, and no
re-plan paid after the reclaim; a cold profile once measured 5.4). At 1024 they hold down to
a ratio of ~4 (the profile is warmed up too; this host measures 6.7-8.4). Twice the work a
request, so the load is bounded (``IN_FLIGHT``)."""
HIGH_RPS, LOW_RPS = 10.0, 0.2
"""As in the MoE lend/reclaim test: the high rate keeps both servers, the low one needs one."""
IN_FLIGHT = 4
"""At most this many requests out at once (the load's sends slip beyond it). WHY: the bound
the test checks counts the service's own windows from the shift, so the shift must reach
the service when the test makes it. Open-loop at ``HIGH_RPS``, a host slower than that
rate queued requests at the ingress without end, and each window then routed requests
sent long before: at SEQ 128 on this host the median latency grew to 25-30 s, and the
re-plan came 12 checks after the test's shift (a scratch copy of the test keeping every
request's latency; under a hog at SEQ 64, 14 checks, likely the same way). Four in
flight still keep both servers (0.1 a replica is the target). What the test proves is
unchanged: the same shifts, bounds and checks, and every request sent answered."""
BOUND = 1.3


@pytest.fixture(scope="module")
def client() -> Iterator[Any]:
    pytest.importorskip("ray")
    from lyra_ray.sdk import Client

    live: LiveCluster = start_cluster(nodes=())
    live.add_gpu_node(GPU, 2, pool="training")
    for _ in range(2):
        live.add_gpu_node(GPU, 2, pool="inference")
    live.cluster.wait_for_nodes()
    try:
        start_lending_scheduler(live.workdir)
        yield Client(live.address)
    finally:
        stop_cluster(live)


def _plan(client: Any) -> dict[str, Any]:
    (svc,) = [s for s in client.overview()["serving"]["services"] if s["name"] == "moe"]
    return dict(svc.get("plan") or {})


def _last_check(client: Any) -> int:
    checks = _plan(client).get("checks") or []
    return int(checks[-1]["check"]) if checks else 0


def _drift_replans(plan: dict[str, Any], after: int) -> list[dict[str, Any]]:
    """Phase-2 re-plans made at a check later than ``after``."""
    out = []
    for r in plan.get("replans", []):
        if (
            r["reason"].startswith("phase 2")
            and int(r["reason"].split("check ")[1].split(",")[0]) > after
        ):
            out.append(r)
    return out


def _check(plan: dict[str, Any], n: int) -> dict[str, Any] | None:
    return next((c for c in plan.get("checks", []) if c["check"] == n), None)


def _settled(plan: dict[str, Any]) -> bool:
    """Two checks in a row with nothing to gain: the plan fits the mix."""
    last = (plan.get("checks") or [])[-2:]
    return len(last) == 2 and all(c["streak"] == 0 and not c["replan"] for c in last)


def _shift_and_replan(client: Any, load: HttpLoad, topics: list[int]) -> tuple[int, int]:
    """Shift the mix; wait for the drift re-plan. Returns (last check before, re-plan's).

    The window after ``before`` holds the shift, part old mix and part new. A re-plan at
    that very check needs the window before it, all old mix, to have passed the gate by
    noise (a load-starved window has few requests): its placement fits the mixed window,
    and the gate re-plans again once the new mix's windows pay (within ``CHECKS`` more).
    That first, mixed re-plan counts only if the two checks after it are within bound.
    """
    # Right after a check, so that the shift falls early in window ``before + 1``. WHY:
    # read at a random moment, ``before`` could be a check behind (one that ended between
    # the read and the shift): the shift then fell in ``before + 2`` and a re-plan on time
    # counted one check late. A check that ends between the shift and the read after it
    # (a stall of a whole window) leaves the later number: the bound is then one window
    # lenient, never strict.
    first = _last_check(client)
    wait_until(lambda: _last_check(client) > first, 60, "a check of the service")
    load.body = {"topics": topics}
    before = _last_check(client)

    def replan() -> dict[str, Any] | None:
        plan = _plan(client)
        later = _drift_replans(plan, before + 1)
        if later:
            return later[0]
        early = _drift_replans(plan, before)
        after = [_check(plan, n) for n in (before + 2, before + 3)]
        if early and all(c is not None and c["imbalance"] <= max(BOUND, c["best"]) for c in after):
            return early[0]
        return None

    try:
        wait_until(lambda: replan() is not None, 120, "a phase-2 re-plan on the new mix")
    except AssertionError as e:
        # WHY: once (a quiet whole-suite run, after the reclaim) no re-plan came in
        # 120 s, and the report could not say whether the gate saw no imbalance, the
        # checks stopped, or a re-plan came at an unexpected check. Now it shows them.
        plan = _plan(client)
        tail = {k: plan.get(k, [])[-8:] for k in ("checks", "replans")}
        tail["expert_time_measured"] = plan.get("model", {}).get("expert_time_measured")
        raise AssertionError(f"{e}; last check before the shift {before}; plan: {tail}") from e
    first = replan()
    assert first is not None
    return before, int(first["reason"].split("check ")[1].split(",")[0])


def test_the_service_replans_on_a_topic_shift_and_evens_its_replicas_under_loans(
    client: Any,
) -> None:
    url = client.deploy_service(
        {
            "name": "moe",
            "model": "moe",
            "target_ongoing_per_replica": 0.1,
            "smoothing_s": 2.0,
            "down_after_s": 6.0,
            # devices compute their experts (no emulation); phase 2 every 2 s
            "config": {
                "slots": SLOTS,
                "batch": BATCH,
                "seq": SEQ,
                "replan_s": REPLAN_S,
                "replan_checks": CHECKS,
                "replan_gain": 0.1,
            },
        }
    )
    load = HttpLoad(url, max_in_flight=IN_FLIGHT)
    load.body = {"topics": TOPIC_A}
    load.start(rate=HIGH_RPS)
    try:
        wait_until(
            lambda: _plan(client).get("devices") == 4, 240, "the MoE service on both servers"
        )
        # the plan follows mix A first (at phase 1 on both servers, or by a drift re-plan)
        wait_until(lambda: _settled(_plan(client)), 120, "the plan settled on mix A")

        before, at = _shift_and_replan(client, load, TOPIC_B)
        # the shift fell inside window before+1; CHECKS more windows confirm it
        assert at <= before + 1 + CHECKS, (before, at, _plan(client)["checks"])
        wait_until(lambda: _check(_plan(client), at + 2) is not None, 60, "two windows more")
        plan = _plan(client)
        for n in (at + 1, at + 2):
            c = _check(plan, n)
            assert c is not None and c["imbalance"] <= max(BOUND, c["best"]), (c, plan)
        shifted = _check(plan, at)
        assert shifted is not None and shifted["imbalance"] > BOUND, shifted  # it was drift

        # a lend under way while the mix shifts back, then a reclaim while it shifts again
        load.set_rate(LOW_RPS)
        load.body = {"topics": TOPIC_A}
        wait_until(lambda: _plan(client).get("devices") == 2, 240, "a server lent")
        load.set_rate(HIGH_RPS)
        load.body = {"topics": TOPIC_B}
        wait_until(lambda: _plan(client).get("devices") == 4, 240, "the server reclaimed")
        _shift_and_replan(client, load, TOPIC_A)
    finally:
        report = load.stop()
    assert report["failures"] == {}, report
    assert report["ok"] == report["sent"] > 0, report
    budgets = [r["budget_per_layer"] for r in _plan(client)["replans"]]
    assert 2 * SLOTS in budgets and budgets[-1] == 4 * SLOTS, budgets
    client.remove_service("moe")
