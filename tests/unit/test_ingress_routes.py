"""The scheduler never calls an ingress that Serve does not list as running.

Why it matters: a call to a starting ingress waits for its replica up to 30 s, and the
scheduler makes it in its cycle, under the lock every view takes. These tests replace
the remote call with a recorder and check that a starting ingress is skipped (and asked
again at the next poll), while a running one is called as before.
"""

from __future__ import annotations

from typing import Any

import pytest

from lyra_ray.runtime import ingress_routes
from lyra_ray.runtime.ingress_routes import IngressRoutes


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, str]]:
    made: list[tuple[str, str]] = []
    answers: dict[str, Any] = {
        "set_backends": None,
        "stats": {"completed": 3, "routing": ["n1"]},
        "plan": {"devices": 2, "counts": [1, 1]},
    }

    def call(name: str, method: str, *args: Any) -> Any:
        made.append((name, method))
        return answers[method]

    monkeypatch.setattr(ingress_routes, "call", call)
    return made


def test_a_starting_ingress_is_not_called_and_is_told_at_the_next_poll(
    calls: list[tuple[str, str]],
) -> None:
    up = {"a": True, "b": False}
    routes = IngressRoutes(lambda name: up[name])
    targets = {"a": {"n1": ["app-a-n1", 1]}, "b": {"n1": ["app-b-n1", 1]}}

    routes.tell(targets)
    assert calls == [("a", "set_backends")]
    assert routes.told == {"a": {"n1"}}
    assert routes.stale(targets)  # b is asked again at the next poll

    assert routes.stats("b", lambda: {"n1"}) is None
    assert routes.plan("b") == {}
    assert calls == [("a", "set_backends")]  # neither made a call

    up["b"] = True
    routes.tell(targets)
    assert calls[1:] == [("a", "set_backends"), ("b", "set_backends")]
    assert routes.told == {"a": {"n1"}, "b": {"n1"}}
    assert not routes.stale(targets)


def test_a_running_ingress_is_asked_for_its_counters_and_plan(
    calls: list[tuple[str, str]],
) -> None:
    routes = IngressRoutes(lambda name: True)
    assert routes.stats("a", lambda: {"n1"}) == {"completed": 3, "routing": ["n1"]}
    assert routes.plan("a") == {"devices": 2, "counts": [1, 1]}
    assert calls == [("a", "stats"), ("a", "plan")]
    assert not routes.retry  # it routes to the servers expected
