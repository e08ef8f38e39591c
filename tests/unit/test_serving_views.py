"""``lyra status``'s serving part is read from what the pool holds, with no remote call.

WHY: the scheduler builds it under its lock. It used to ask Serve's controller for the
applications' status and each MoE ingress for its plan there, so every overview held
the scheduling loop for two round trips to the busiest actors of an overloaded host
(docs/testing.md, 2026-12-01). These check the counts come from the status the pool's
last poll read, that a call to Serve would fail the test, and that the MoE plan is left
to the lock-free step.
"""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any

import pytest

pytest.importorskip("ray")

from lyra_ray.runtime import serving_views
from lyra_ray.serving.names import backend_app_name

A, B = "a" * 40, "b" * 40


def _app(**states: int) -> Any:
    return SimpleNamespace(
        deployments={
            "Model": SimpleNamespace(replica_states=states),
            "Front": SimpleNamespace(replica_states={"RUNNING": 1}),
        }
    )


def _pool() -> Any:
    status = {
        backend_app_name("user", A): _app(RUNNING=2),
        backend_app_name("user", B): _app(RUNNING=1, STARTING=1),
        backend_app_name("moe", A): SimpleNamespace(
            deployments={"gpu0": SimpleNamespace(replica_states={"RUNNING": 1})}
        ),
    }
    return SimpleNamespace(
        services={
            "user": SimpleNamespace(model="app", app=SimpleNamespace(import_path="shop:build")),
            "moe": SimpleNamespace(model="moe", app=None),
        },
        shapes={
            "user": SimpleNamespace(
                gpu_deployments=[SimpleNamespace(name="Model")], ingress="Front"
            )
        },
        state={A: "serving", B: "reclaiming"},
        last_status=status,
        url=lambda name: f"http://x/{name}",
        demand=SimpleNamespace(of=lambda name: 1.5, last_stats={}, level=1.5),
        copies=SimpleNamespace(
            failures={}, deployed={"user": {"by_builder": 3, "by_task": 1, "builders_lost": 1}}
        ),
        loans=SimpleNamespace(reclaims=[], lends=[]),
    )


def test_counts_come_from_the_last_poll_and_nothing_is_called(monkeypatch: Any) -> None:
    from ray import serve

    def no_call(*a: Any, **k: Any) -> Any:
        raise AssertionError("a remote call under the scheduler's lock")

    monkeypatch.setattr(serve, "status", no_call)
    out = serving_views.describe_pool(_pool())
    user, moe = sorted(out["services"], key=lambda s: s["name"], reverse=True)
    # the user's copy counts its GPU deployment only; ready only on serving servers
    assert (user["name"], user["replicas"], user["ready"]) == ("user", 4, 2)
    assert (moe["name"], moe["replicas"], moe["ready"]) == ("moe", 1, 1)
    assert "plan" not in moe  # asked for after the lock (moe_plans)
    # how the user's copies were deployed, as the pool counted them (a copy of the count)
    assert user["copies_deployed"] == {"by_builder": 3, "by_task": 1, "builders_lost": 1}
    assert "copies_deployed" not in moe
    assert out["servers"] == {A: "serving", B: "reclaiming"}


def test_moe_plans_asks_each_named_ingress() -> None:
    asked: list[str] = []
    pool = SimpleNamespace(routes=SimpleNamespace(plan=lambda n: asked.append(n) or {"n": n}))
    assert serving_views.moe_plans(pool, ["moe", "moe2"]) == {  # type: ignore[arg-type]
        "moe": {"n": "moe"},
        "moe2": {"n": "moe2"},
    }
    assert asked == ["moe", "moe2"]
