"""A mixed-type run's batch split (#21): each worker's share of the global batch follows
its GPU's speed, so a V100 does not wait on a T4; the runtime puts the shares in the run's
config by node label and each worker reads its own."""

from __future__ import annotations

import math

import pytest

from lyra_ray.model import Assignment, JobSpec
from lyra_ray.model.mixed import BATCH_SHARES_KEY, label_shares, worker_share
from lyra_ray.runtime.ray_runtime import RayRuntime


def test_shares_follow_speed_and_sum_to_one_over_the_workers() -> None:
    shares = label_shares({"v100": 1.0, "t4": 0.4}, (("v100", 2), ("t4", 2)), str.upper)
    assert shares == pytest.approx({"V100": 1 / 2.8, "T4": 0.4 / 2.8})
    assert 2 * shares["V100"] + 2 * shares["T4"] == pytest.approx(1.0)  # type: ignore[index]


def test_an_unknown_or_zero_speed_gives_no_shares() -> None:
    assert label_shares({"v100": 1.0}, (("v100", 1), ("t4", 1)), str) is None
    assert label_shares({"v100": 0.0, "t4": 0.0}, (("v100", 1), ("t4", 1)), str) is None


@pytest.mark.parametrize(
    ("shares", "label", "want"),
    [
        (None, "V100", 0.25),
        ({"V100": 0.4, "T4": 0.1}, "V100", 0.4),
        ({"V100": 0.4, "T4": 0.1}, "T4", 0.1),
        ({"V100": 0.4}, "K80", 0.25),  # a label the run does not know: even split
        ({"V100": 0.4}, None, 0.25),
        ({"V100": math.nan}, "V100", 0.25),
        ({"V100": 7.0}, "V100", 0.25),
        ({"V100": "0.4"}, "V100", 0.25),
    ],
)
def test_a_worker_reads_its_own_share_or_an_even_split(
    shares: dict[str, object] | None, label: str | None, want: float
) -> None:
    assert worker_share(shares, label, 4) == pytest.approx(want)  # type: ignore[arg-type]


def test_the_runtime_puts_the_shares_in_a_mixed_runs_config_only(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # No control actor: creating it started a whole local Ray through Ray's auto-init,
    # in a unit test, and hung there when a stale cluster file pointed at a dead GCS.
    from lyra_ray.runtime import ray_runtime

    monkeypatch.setattr(ray_runtime, "get_or_create_control", lambda: None)
    spec = JobSpec(name="j", total_steps=10, min_workers=2, max_workers=4,
                   throughput={"v100": 1.0, "t4": 0.5}, config={"lr": 0.1})  # fmt: skip
    rt = RayRuntime(lambda _j: spec, "/tmp/ckpt", speeds=lambda s, g: s.throughput[g])  # type: ignore[index]
    rt.inventory.gpu_label.update({"n1": "V100", "n2": "T4"})
    from lyra_ray.model import Node

    rt.inventory.nodes.update({"n1": Node("n1", "v100", 2), "n2": Node("n2", "t4", 2)})
    mixed = Assignment("v100", 4, (("n1", 2), ("n2", 2)), extra=(("t4", 2),))
    cfg = rt._run_config(spec, mixed)
    assert cfg["lr"] == 0.1
    assert cfg[BATCH_SHARES_KEY] == pytest.approx({"V100": 1 / 3, "T4": 1 / 6})
    plain = Assignment("v100", 2, (("n1", 2),))
    assert BATCH_SHARES_KEY not in rt._run_config(spec, plain)
