"""The scheduler's calls to ingresses never hold its cycle longer than one short wait.

The ingresses are replaced by fakes whose answers come when the test says: the point is
what the cycle does while an ingress is starting (no answer yet), once it answers, and
when it never does. The live serving tests run the same code against real Serve.
"""

from __future__ import annotations

from typing import Any

import pytest

from lyra_ray.runtime.ingress_calls import PENDING, IngressCalls
from lyra_ray.runtime.ingress_routes import IngressRoutes


class Clock:
    def __init__(self) -> None:
        self.t = 0.0

    def __call__(self) -> float:
        return self.t


class Response:
    """A DeploymentResponse whose answer the test sets; waiting advances the clock."""

    def __init__(self, clock: Clock, method: str, args: tuple[Any, ...]) -> None:
        self.clock, self.method, self.args = clock, method, args
        self.value: Any = PENDING
        self.cancelled = False
        self.waits: list[float] = []

    def result(self, timeout_s: float) -> Any:
        self.waits.append(timeout_s)
        if self.value is PENDING:
            self.clock.t += timeout_s
            raise TimeoutError("not yet")
        if isinstance(self.value, BaseException):
            raise self.value
        return self.value

    def cancel(self) -> None:
        self.cancelled = True


class Ingress:
    """Every ingress: records what each was sent."""

    def __init__(self, clock: Clock) -> None:
        self.clock = clock
        self.sent: list[tuple[str, Response]] = []
        self.missing: set[str] = set()

    def __call__(self, name: str) -> Any:
        if name in self.missing:
            raise RuntimeError(f"Application {name!r} does not exist.")
        outer = self

        class Handle:
            def __getattr__(self, method: str) -> Any:
                class Method:
                    def remote(self, *args: Any) -> Response:
                        r = Response(outer.clock, method, args)
                        outer.sent.append((name, r))
                        return r

                return Method()

        return Handle()

    def last(self, name: str, method: str) -> Response:
        return [r for n, r in self.sent if n == name and r.method == method][-1]

    def count(self, method: str) -> int:
        return sum(r.method == method for _, r in self.sent)


@pytest.fixture
def world() -> tuple[Clock, Ingress, IngressCalls]:
    clock = Clock()
    ing = Ingress(clock)
    return clock, ing, IngressCalls(handle=ing, wait_s=1.0, give_up_s=30.0, clock=clock)


def test_an_unanswered_call_holds_one_wait_then_is_read_when_it_comes(world) -> None:
    clock, ing, calls = world
    calls.send(("a", "stats"), "a", "stats")
    assert calls.collect(("a", "stats")) is PENDING
    assert clock.t == pytest.approx(1.0)  # one wait, not the 30-s timeout
    calls.send(("a", "stats"), "a", "stats")  # the next cycle asks again: not sent twice
    assert ing.count("stats") == 1
    ing.last("a", "stats").value = {"ongoing_avg": 2.0}
    assert calls.collect(("a", "stats")) == {"ongoing_avg": 2.0}
    assert calls.in_flight(("a", "stats")) is None


def test_a_deadline_is_shared_by_the_calls_read_together(world) -> None:
    clock, ing, calls = world
    for name in "abc":
        calls.send((name, "stats"), name, "stats")
    deadline = clock() + 1.0
    assert all(calls.collect((n, "stats"), deadline) is PENDING for n in "abc")
    assert clock.t == pytest.approx(1.0)
    assert [r.waits for _, r in ing.sent] == [[1.0], [0.0], [0.0]]


def test_a_call_unanswered_past_give_up_fails_is_cancelled_and_may_be_sent_again(world) -> None:
    clock, ing, calls = world
    calls.send(("a", "stats"), "a", "stats")
    first = ing.last("a", "stats")
    clock.t += 28.5
    assert calls.collect(("a", "stats")) is PENDING  # 29.5 s after it was sent
    clock.t += 1.0
    with pytest.raises(TimeoutError, match="no answer in 30 s"):
        calls.collect(("a", "stats"), clock())
    assert first.cancelled
    calls.send(("a", "stats"), "a", "stats")
    assert ing.count("stats") == 2


def test_an_error_is_raised_once_and_other_arguments_replace_a_call(world) -> None:
    _, ing, calls = world
    calls.send(("a", "set_backends"), "a", "set_backends", {"n1": ["x", 1]})
    calls.send(("a", "set_backends"), "a", "set_backends", {"n2": ["y", 1]})
    assert ing.count("set_backends") == 2
    assert calls.in_flight(("a", "set_backends")) == ({"n2": ["y", 1]},)
    ing.last("a", "set_backends").value = ValueError("bad backends")
    with pytest.raises(ValueError, match="bad backends"):
        calls.collect(("a", "set_backends"))
    assert calls.in_flight(("a", "set_backends")) is None


def routes_of(world) -> IngressRoutes:
    return IngressRoutes(calls=world[2])


TARGETS = {"svc": {"n1": ["svc-n1", 1], "n2": ["svc-n2", 1]}}


def test_a_starting_ingress_is_told_once_and_its_answer_read_at_a_later_poll(world) -> None:
    clock, ing, _ = world
    routes = routes_of(world)
    routes.tell(TARGETS)
    assert clock.t == pytest.approx(1.0)
    assert not routes.stale(TARGETS)  # on its way: not sent again
    assert ing.count("set_backends") == 1
    assert routes.may_route_to("svc", "n1")  # unconfirmed
    ing.last("svc", "set_backends").value = ["n1", "n2"]
    assert not routes.stale(TARGETS)
    assert routes.told == {"svc": {"n1", "n2"}}
    # a server leaves: the ingress may route there until it confirms
    fewer = {"svc": {"n1": ["svc-n1", 1]}}
    assert routes.stale(fewer)
    routes.tell(fewer)
    assert routes.may_route_to("svc", "n2")
    ing.last("svc", "set_backends").value = ["n1"]
    assert not routes.stale(fewer)
    assert not routes.may_route_to("svc", "n2")


def test_an_ingress_that_cannot_be_told_is_told_again(world) -> None:
    clock, ing, _ = world
    routes = routes_of(world)
    ing.missing.add("svc")  # still being deployed: no application yet
    routes.tell(TARGETS)
    assert routes.stale(TARGETS)
    ing.missing.clear()
    routes.tell(TARGETS)
    clock.t += 31.0
    assert routes.stale(TARGETS)  # unanswered past give-up: failed, told again
    assert ing.last("svc", "set_backends").cancelled


def test_stats_wait_for_their_answer_and_a_restarted_ingress_is_told_again(world) -> None:
    clock, ing, _ = world
    routes = routes_of(world)
    routes.tell(TARGETS)
    ing.last("svc", "set_backends").value = ["n1", "n2"]
    routes.stale(TARGETS)
    expected = lambda: {"n1", "n2"}  # noqa: E731
    clock.t += 1.0
    assert routes.stats("svc", expected, clock() + 1.0) is None  # not answered yet
    ing.last("svc", "stats").value = {"ongoing_avg": 1.0, "routing": ["n1", "n2"]}
    assert routes.stats("svc", expected) == {"ongoing_avg": 1.0, "routing": ["n1", "n2"]}
    assert not routes.retry
    # Serve restarted the ingress: it knows no server
    assert routes.stats("svc", expected) is None
    ing.last("svc", "stats").value = {"ongoing_avg": 0.0, "routing": []}
    routes.stats("svc", expected)
    assert routes.retry and routes.stale(TARGETS)


def test_stats_asked_before_the_ingress_confirmed_its_servers_do_not_count_as_a_restart(
    world,
) -> None:
    _, ing, _ = world
    routes = routes_of(world)
    expected = lambda: {"n1", "n2"}  # noqa: E731
    assert routes.stats("svc", expected) is None  # asked while it was never told
    routes.tell(TARGETS)
    ing.last("svc", "stats").value = {"ongoing_avg": 0.0, "routing": []}
    assert routes.stats("svc", expected) is not None
    assert not routes.retry  # the answer predates the tell, still in flight
    ing.last("svc", "set_backends").value = ["n1", "n2"]
    routes.stale(TARGETS)
    assert not routes.retry


def test_requests_left_on_a_server_are_counted_once_every_ingress_answered(world) -> None:
    _, ing, _ = world
    routes = routes_of(world)
    assert routes.inflight_on(["a", "b"], "n1") is None
    ing.last("a", "inflight_on").value = 0
    assert routes.inflight_on(["a", "b"], "n1") is None  # b has not answered
    ing.last("b", "inflight_on").value = 2
    assert routes.inflight_on(["a", "b"], "n1") == 2  # a's 0 stands: nothing new goes there
    assert ing.count("inflight_on") == 2
    ing.last("b", "inflight_on").value = 0
    assert routes.inflight_on(["a", "b"], "n1") is None  # b asked again
    ing.last("b", "inflight_on").value = 0
    assert routes.inflight_on(["a", "b"], "n1") == 0
    assert routes.inflight_on([], "n1") == 0


def test_a_count_asked_before_the_ingress_confirmed_its_servers_is_not_read(world) -> None:
    clock, ing, _ = world
    routes = routes_of(world)
    assert routes.inflight_on(["svc"], "n2") is None  # asked early, unanswered
    early = ing.last("svc", "inflight_on")
    routes.tell({"svc": {"n1": ["svc-n1", 1]}})
    ing.last("svc", "set_backends").value = ["n1"]
    clock.t += 1.0
    routes.stale({"svc": {"n1": ["svc-n1", 1]}})
    early.value = 0
    assert routes.inflight_on(["svc"], "n2") is None  # asked again, the early 0 unread
    assert ing.last("svc", "inflight_on") is not early
    ing.missing.add("svc")
    assert routes.inflight_on(["svc"], "n2") is None  # the new question is still read
    ing.last("svc", "inflight_on").value = 1
    assert routes.inflight_on(["svc"], "n2") == 1


def test_a_removed_service_is_read_no_more(world) -> None:
    calls = world[2]
    routes = routes_of(world)
    routes.tell(TARGETS)
    routes.stats("svc", lambda: {"n1"})
    routes.removed("svc")
    assert calls.flying == {} and "svc" not in routes.told


def test_the_plan_of_an_ingress_that_never_confirmed_its_servers_is_not_asked(world) -> None:
    _, ing, _ = world
    routes = routes_of(world)
    routes.tell(TARGETS)
    assert routes.plan("svc") == {}
    assert ing.count("plan") == 0  # a view would have waited 30 s for a starting ingress


def test_one_polls_counters_are_read_within_one_shared_wait(world) -> None:
    clock, ing, _ = world
    routes = routes_of(world)
    read = routes.stats_reader(lambda name: {"n1"})
    assert [read(name) for name in ("a", "b", "c")] == [None, None, None]
    assert clock.t == pytest.approx(1.0)  # one wait for the three, not three
    ing.last("b", "stats").value = {"ongoing_avg": 0.5, "routing": ["n1"]}
    assert routes.stats_reader(lambda name: {"n1"})("b") == {"ongoing_avg": 0.5, "routing": ["n1"]}
