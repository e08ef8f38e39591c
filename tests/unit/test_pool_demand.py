"""The serving pool's demand side across a scheduler restart (``runtime/pool_demand.py``)."""

from __future__ import annotations

import json

from lyra_ray.runtime.pool_demand import PoolDemand
from lyra_ray.serving.spec import parse_service_spec


def _services() -> dict[str, object]:
    spec = parse_service_spec(
        {"name": "shop", "import_path": "shop:build", "min_servers": 2, "down_after_s": 4.0,
         "smoothing_s": 1.0, "target_ongoing_per_replica": 1.0}
    )  # fmt: skip
    return {"shop": spec}


def test_a_restart_keeps_the_demand_level_it_had_before_the_servers_are_known() -> None:
    """A restarted scheduler loads its state, then hears of its servers: the service's
    level (3 of 3 servers, under load) must come back as 3, not clamped to the one
    server an empty pool sizes an estimator to (then raised to its floor of 2), which
    lent a server under full load."""
    services = _services()
    before = PoolDemand()
    before.resize(services, 3, lambda _s: 1, start={"shop": 3})  # type: ignore[arg-type]
    for t in range(10):
        before.sample(float(t), lambda _n: {"ongoing_avg": 2.9})
    assert before.level == 3
    saved = json.loads(json.dumps(before.to_state()))

    after = PoolDemand()
    after.load_state(saved)
    after.resize(services, 0, lambda _s: 1)  # type: ignore[arg-type]  # no server known yet
    assert after.estimators == {}
    after.resize(services, 3, lambda _s: 1)  # type: ignore[arg-type]  # the servers reported
    assert after.estimators["shop"].to_state() == before.estimators["shop"].to_state()
    assert after.of("shop") == 3 and after.level == 3
    assert after.sample(10.0, lambda _n: {"ongoing_avg": 2.9}) == []  # nothing moved
