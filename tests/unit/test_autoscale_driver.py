"""The runtime side of autoscaling without Ray: the loop's observer sends the request
only when it changes (and again after a minute), counts the spend above min_workers,
keeps it across a restart, and explains waiting jobs (lyra_ray/runtime/autoscale.py)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from lyra_ray import model as m
from lyra_ray.autoscale.settings import parse_autoscale
from lyra_ray.model.throughput import SpecThroughputs
from lyra_ray.policies.base import get_policy
from lyra_ray.runtime.autoscale import AutoscaleDriver
from lyra_ray.scheduling.core import SchedulerCore
from lyra_ray.scheduling.loop import Cycle
from tests.builders import job

TYPES = {
    "head": {"resources": {"CPU": 0}},
    "a100": {
        "resources": {"GPU": 1, "accelerator_type:A100": 1},
        "labels": {"gpu-type": "a100", "pool": "training"},
        "max_workers": 2,
    },
}
SETTINGS = parse_autoscale(
    {
        "enabled": True,
        "prices": {"a100": 36.0},
        "budget_usd": 100.0,
        "cluster": {"available_node_types": TYPES, "head_node_type": "head"},
    }
)


class Clock:
    def __init__(self) -> None:
        self.t = 1000.0

    def __call__(self) -> float:
        return self.t


def driver(tmp_path: Path, clock: Clock, sent: list[Any]) -> AutoscaleDriver:
    return AutoscaleDriver(
        SETTINGS, str(tmp_path), lambda: frozenset(), None, lambda b, s: sent.append(b), clock
    )


def cycle(core: SchedulerCore, now: float, *events: m.Event) -> Cycle:
    decision = core.decide(core.fold(now, list(events)))
    return Cycle(now, tuple(events), decision)


def test_it_asks_when_the_level_changes_counts_the_spend_and_keeps_it(tmp_path: Path) -> None:
    core = SchedulerCore(get_policy("fifo_nonpreemptive"), SpecThroughputs(), 60.0)
    clock, sent = Clock(), []
    d = driver(tmp_path, clock, sent)
    d.observe(core, cycle(core, 0.0, m.JobSubmitted("j1", job("j1", tput={"a100": 1.0}))))
    assert sent == [[{"GPU": 1.0, "accelerator_type:A100": 1.0}]]
    rows = d.annotate([{"id": "j1", "reason_code": "no_fit", "reason": "needs 1 GPU"}])
    assert rows[0]["reason_code"] == "autoscale" and "1 a100 node" in rows[0]["reason"]
    clock.t += 5
    d.observe(core, cycle(core, 5.0))
    assert len(sent) == 1  # unchanged: not sent again
    node = m.Node("a0", "a100", 1)
    clock.t += 1800  # half an hour with one node up above min_workers 0: $18
    d.observe(core, cycle(core, 1805.0, m.NodeUp(node)))
    assert d.view()["spend"]["usd"] == pytest.approx(0.0)  # accrued over the nodes seen before
    clock.t += 1800
    d.observe(core, cycle(core, 3605.0))
    view = d.view()
    assert view["spend"]["usd"] == pytest.approx(18.0) and view["requests_made"] == 1
    assert view["node_types"][0]["busy"] == 1 and view["node_types"][0]["requested"] == 1
    # unchanged, it was sent again only because a minute had passed (a head restarted
    # without fault tolerance lost it): the same bundles, one change counted
    assert len(sent) == 3 and all(b == sent[0] for b in sent) and d.calls == 1
    clock.t += 5
    d.observe(core, cycle(core, 3610.0))
    assert len(sent) == 3
    saved = json.loads((tmp_path / "autoscale.json").read_text())
    assert saved["spend"]["node_seconds"]["a100"] > 0
    again = driver(tmp_path, clock, [])
    assert again.spend.node_hours() > 0 and again.calls == d.calls == 1


def test_a_bound_job_is_told_which_cap_holds_it(tmp_path: Path) -> None:
    core = SchedulerCore(get_policy("fifo_nonpreemptive"), SpecThroughputs(), 60.0)
    clock, sent = Clock(), []
    d = driver(tmp_path, clock, sent)
    specs = [m.JobSubmitted(f"j{i}", job(f"j{i}", tput={"a100": 1.0}, arrival=i)) for i in range(3)]
    d.observe(core, cycle(core, 0.0, *specs))
    assert len(sent[-1]) == 2  # max_workers 2
    rows = d.annotate([{"id": "j2", "reason_code": "no_fit", "reason": "needs 1 GPU"}])
    assert rows[0]["reason_code"] == "autoscale_bound" and "max_workers" in rows[0]["reason"]
    off = AutoscaleDriver(parse_autoscale(None), str(tmp_path), frozenset, None, lambda b, s: 1 / 0)
    off.observe(core, cycle(core, 1.0))  # off: nothing is asked, nothing raised
    assert off.view() == {"enabled": False}
