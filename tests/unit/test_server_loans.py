"""An inference server's loan states and their record (``runtime/server_loans.py``),
without Ray: the serving pool carries each state out on Serve; what it must get right
here is which transitions reroute requests, and that a restart resumes every server in
the state it was in. The states carried out on a live pool are the loaning modules'
(``tests/ray/test_live_loaning.py``, ``tests/chaos/test_chaos_serving.py``)."""

from __future__ import annotations

from lyra_ray.runtime.server_loans import (
    DRAINING,
    KEPT_RECORDS,
    LENT,
    RECLAIMING,
    SERVING,
    ServerLoans,
)


def test_a_lend_drains_then_lends_and_a_reclaim_serves_again() -> None:
    loans = ServerLoans()
    assert loans.joined("a") and loans.joined("b") and not loans.joined("a")
    assert loans.taking_requests() == 2
    assert loans.lend("a", 10.0, copies_exist=lambda: True)  # stops taking requests
    assert loans.state["a"] == DRAINING and not loans.is_lent("a")
    loans.deleting_copies("a")
    loans.drained("a")
    assert loans.is_lent("a") and "a" not in loans.deleting and loans.taking_requests() == 1
    assert not loans.reclaim("a", 20.0)  # nothing to route to until its copies run
    assert loans.state["a"] == RECLAIMING and loans.taking_requests() == 2
    assert not loans.reclaimed("a", 26.0, rise_at=15.0)  # no other server reclaiming
    assert loans.state["a"] == SERVING
    (rec,) = loans.reclaims
    assert rec["latency_s"] == 11.0 and rec["since_action_s"] == 6.0
    assert [e["node"] for e in loans.lends] == ["a"]


def test_a_reclaim_while_draining_serves_at_once_unless_copies_are_being_deleted() -> None:
    loans = ServerLoans()
    loans.joined("a")
    loans.joined("b")
    loans.lend("a", 1.0, lambda: True)
    assert loans.reclaim("a", 2.0) and loans.state["a"] == SERVING  # its copies still run
    loans.lend("b", 3.0, lambda: True)
    loans.deleting_copies("b")
    assert not loans.reclaim("b", 4.0) and loans.state["b"] == RECLAIMING


def test_a_drain_cut_short_while_deleting_leaves_the_next_drain_a_fresh_start() -> None:
    """Its copies were being deleted when the reclaim came; once they serve again, the
    next lend must drain anew (wait for requests, then delete), and a reclaim of that
    drain before any delete routes at once. WHY: a stale ``deleting`` once made every
    later drain wait for copies nobody deleted (CI, 2026-12-01)."""
    loans = ServerLoans()
    loans.joined("a")
    loans.lend("a", 1.0, lambda: True)
    loans.deleting_copies("a")
    assert not loans.reclaim("a", 2.0) and loans.state["a"] == RECLAIMING
    assert "a" not in loans.deleting
    loans.reclaimed("a", 3.0, rise_at=None)
    assert loans.lend("a", 4.0, lambda: True) and loans.state["a"] == DRAINING
    assert "a" not in loans.deleting  # the pool waits for requests, then deletes
    assert loans.reclaim("a", 5.0) and loans.state["a"] == SERVING


def test_a_server_that_leaves_mid_delete_comes_back_with_no_delete_under_way() -> None:
    loans = ServerLoans()
    loans.joined("a")
    loans.lend("a", 1.0, lambda: True)
    loans.deleting_copies("a")
    loans.left("a")
    assert "a" not in loans.deleting and loans.joined("a") and loans.state["a"] == SERVING


def test_a_lend_of_a_reclaiming_server_whose_copies_never_came_back_lends_at_once() -> None:
    loans = ServerLoans()
    loans.joined("a")
    loans.lend("a", 1.0, lambda: True)
    loans.drained("a")
    loans.reclaim("a", 2.0)
    assert not loans.lend("a", 3.0, copies_exist=lambda: False)
    assert loans.state["a"] == LENT and len(loans.lends) == 1  # no second drain recorded
    loans.reclaim("a", 4.0)
    assert loans.lend("a", 5.0, copies_exist=lambda: True) and loans.state["a"] == DRAINING


def test_the_latency_counts_from_the_earlier_of_the_rise_and_the_action() -> None:
    loans = ServerLoans()
    for n in ("a", "b"):
        loans.joined(n)
        loans.lend(n, 0.0, lambda: True)
        loans.drained(n)
        loans.reclaim(n, 10.0)
    assert loans.reclaimed("a", 14.0, rise_at=None)  # b still reclaiming
    assert loans.reclaims[-1]["latency_s"] == 4.0
    assert not loans.reclaimed("b", 15.0, rise_at=12.0)  # a rise after the action
    assert loans.reclaims[-1]["latency_s"] == 5.0


def test_a_restart_resumes_every_server_in_its_state_and_the_record_is_bounded() -> None:
    loans = ServerLoans()
    for n in ("a", "b", "c"):
        loans.joined(n)
    loans.lend("a", 1.0, lambda: True)
    loans.drained("a")
    loans.lend("b", 2.0, lambda: True)
    loans.left("c")
    loans.lends.extend({"node": "x", "at": float(i)} for i in range(KEPT_RECORDS + 5))
    again = ServerLoans()
    again.load_state(loans.to_state())
    assert again.state == {"a": LENT, "b": DRAINING}
    assert len(again.lends) == KEPT_RECORDS and again.lends[-1]["at"] == KEPT_RECORDS + 4
    assert not again.joined("a")  # a restart knows its own servers
