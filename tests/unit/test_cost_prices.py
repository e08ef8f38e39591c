"""Prices: every figure says where it came from; Gavel's cost policies price every GPU
type of cluster.yaml and weigh them as the price table says."""

from __future__ import annotations

from pathlib import Path

import pytest

from lyra_ray.model import ClusterSnapshot, JobSpec, JobStatus, JobView, Node, ThroughputModel
from lyra_ray.model.prices import gpu_hour_prices, instance_prices, provenance
from lyra_ray.ops.local import lyra_section
from lyra_ray.policies.base import get_policy, takes_argument
from lyra_ray.policies.gavel.cost import DEFAULT_PRICES
from lyra_ray.runtime.autoscale import policy_args
from lyra_ray.runtime.config import SchedulerConfig

ROOT = Path(__file__).resolve().parents[2]
COST = "max_sum_throughput_normalized_by_cost_perf"


def settings():  # type: ignore[no-untyped-def]
    return SchedulerConfig.from_dict(lyra_section(str(ROOT / "cluster.yaml"))).autoscale_settings()


def test_the_price_table_says_where_and_when_and_is_consistent() -> None:
    p = provenance()
    assert p["date"] and "aws.amazon.com" in p["aws"] and "cloud.google.com" in p["gcp"]
    inst = instance_prices()
    assert inst["p3.8xlarge"] == pytest.approx(4 * gpu_hour_prices()["v100"])
    assert inst["p4d.24xlarge"] == pytest.approx(8 * gpu_hour_prices()["a100"])
    assert inst["g4dn.12xlarge"] == pytest.approx(4 * gpu_hour_prices()["t4"])
    assert inst["p2.8xlarge"] == pytest.approx(8 * gpu_hour_prices()["k80"])


def test_cost_policies_price_every_gpu_type_of_cluster_yaml() -> None:
    types = {t.gpu_type for t in settings().node_types}
    assert types <= set(DEFAULT_PRICES)
    assert {"v100": 3.06, "p100": 1.46, "k80": 0.9}.items() <= DEFAULT_PRICES.items()  # Gavel's


def _snap(tput: dict[str, float]) -> ClusterSnapshot:
    spec = JobSpec(name="j", total_steps=100, throughput=tput)
    job = JobView("j", spec, 0.0, JobStatus.QUEUED, 0.0, 0.0, {}, {}, None)
    nodes = (Node("a", "a100", 1), Node("t", "t4", 1))
    return ClusterSnapshot(0.0, nodes, (job,), ThroughputModel())


@pytest.mark.parametrize(("a100", "best"), [(3.0, "t4"), (6.0, "a100")])
def test_the_cost_policy_weighs_a100_against_t4_by_price(a100: float, best: str) -> None:
    # per dollar: t4 1.0 / $0.978; a100 3.0 or 6.0 / $4.10
    x = get_policy(COST).allocate(_snap({"a100": a100, "t4": 1.0})).fractions["j"]
    assert max(x, key=lambda g: x[g]) == best


def test_the_live_scheduler_hands_the_node_types_prices_to_cost_policies() -> None:
    s = settings()
    args = policy_args(COST, {}, s)
    assert args["prices"]["a100"] == pytest.approx(32.7726 / 8)
    assert policy_args(COST, {"prices": {"v100": 1.0}}, s) == {"prices": {"v100": 1.0}}
    assert policy_args("fifo", {}, s) == {}
    assert takes_argument(COST, "prices") and not takes_argument("fifo", "prices")
    assert not takes_argument("module:Thing", "prices")
