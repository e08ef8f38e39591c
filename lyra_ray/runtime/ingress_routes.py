"""What each service's ingress was told: the servers it sends new requests to.

Owned by :class:`~lyra_ray.runtime.serving.ServingPool`, which decides the servers
(those serving whose copy runs). Its own state because the ingresses are Serve replicas
that can be restarted behind the scheduler's back (a crash, a redeploy) and then know
none: this remembers what was told, notices when an ingress reports other servers, and
tells it again at the next poll. Every call the cycle makes to an ingress goes through
:class:`~lyra_ray.runtime.ingress_calls.IngressCalls`, so none holds the cycle (and the
scheduler's lock) longer than one short wait.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lyra_ray.runtime.ingress_calls import PENDING, IngressCalls, ingress

log = logging.getLogger(__name__)

CALL_TIMEOUT_S = 30.0
"""How long a view's own call (:meth:`IngressRoutes.plan`, never under the lock) waits."""
Backends = dict[str, list[Any]]
"""Per server: its backend application's name and its GPU replicas."""


def call(name: str, method: str, *args: Any) -> Any:
    """Ask ``name``'s ingress, waiting at most ``CALL_TIMEOUT_S`` (views only)."""
    return getattr(ingress(name), method).remote(*args).result(timeout_s=CALL_TIMEOUT_S)


class IngressRoutes:
    def __init__(self, calls: IngressCalls | None = None) -> None:
        self.calls = calls or IngressCalls()
        self.told: dict[str, set[str]] = {}
        """Per service: the servers its ingress last confirmed it was told."""
        self.told_at: dict[str, float] = {}
        """Per service: when (the calls' clock) that confirmation was read; an answer
        to ``stats`` sent before it may still show the servers told before."""
        self.quiet: dict[tuple[str, ...], float] = {}
        """Per (service, "inflight_on", server): when the question was sent that its
        ingress answered with no request left there (see :meth:`inflight_on`)."""
        self.retry = False
        """An ingress could not be told its servers (still starting), or reported other
        servers than it was told: tell every ingress again at the next poll."""

    def tell(self, targets: Mapping[str, Backends]) -> None:
        """Send each service's ingress its servers (one already on its way to it is not
        sent again), then read the answers that come within one short wait; the others
        are read at the next polls (:meth:`stale`). One that cannot be told (it may
        still be starting) is told again at the next poll."""
        self.retry = False
        for name, backends in targets.items():
            try:
                self.calls.send((name, "set_backends"), name, "set_backends", backends)
            except Exception:
                log.info("ingress of %s not ready yet", name, exc_info=True)
                self.retry = True
        self._settle(self.calls.deadline())

    def _settle(self, deadline: float) -> None:
        """Read the answers to the ``set_backends`` calls in flight, waiting at most
        until ``deadline`` in all."""
        for key in [k for k in self.calls.flying if k[1] == "set_backends"]:
            sent = self.calls.in_flight(key)
            try:
                got = self.calls.collect(key, deadline)
            except Exception:
                log.info("ingress of %s not told its servers yet", key[0], exc_info=True)
                self.retry = True
                continue
            if got is not PENDING and sent is not None:
                self.told[key[0]] = set(sent[0])
                self.told_at[key[0]] = self.calls.clock()

    def _telling(self, name: str) -> set[str] | None:
        """The servers ``name``'s ingress is being told, or was last told."""
        sent = self.calls.in_flight((name, "set_backends"))
        return set(sent[0]) if sent is not None else self.told.get(name)

    def stale(self, targets: Mapping[str, Backends]) -> bool:
        """Whether an ingress must be told again: a call failed or went unanswered, an
        ingress reported other servers, or the servers changed since."""
        self._settle(self.calls.clock())
        return self.retry or any(set(b) != self._telling(n) for n, b in targets.items())

    def may_route_to(self, name: str, node: str) -> bool:
        """Whether ``name``'s ingress may still send new requests to ``node``: it was
        last told so, or what it is being told has not been confirmed yet."""
        told = self.told.get(name, set())
        return self.calls.in_flight((name, "set_backends")) is not None or node in told

    def inflight_on(self, names: Iterable[str], node: str) -> int | None:
        """The requests still on ``node`` across the ``names``' ingresses; None while
        one has not answered (it is starting or busy) or cannot be reached.

        Asked once no ingress may route to ``node`` any more (:meth:`may_route_to`), so
        each count can only fall: an ingress that answered 0 to a question sent after
        it confirmed its servers is not asked again, and the answers may come at
        different polls. An answer to a question sent before that confirmation is not
        read (it may have counted before the last requests arrived)."""
        total, known = 0, True
        pending = []
        for name in names:
            key = (name, "inflight_on", node)
            told_at = self.told_at.get(name, float("-inf"))
            if key in self.quiet and self.quiet[key] >= told_at:
                continue
            if self.calls.in_flight(key) is not None and self.calls.sent_at(key) < told_at:
                self.calls.discard(key)
            try:
                self.calls.send(key, name, "inflight_on", node)
            except Exception:
                log.info("ingress of %s not asked about %s", name, node[:12], exc_info=True)
                known = False
                continue
            pending.append(key)
        deadline = self.calls.deadline()
        for key in pending:
            asked_at = self.calls.sent_at(key)
            try:
                got = self.calls.collect(key, deadline)
            except Exception:
                log.info("ingress of %s did not say what runs on %s", key[0], node[:12],
                         exc_info=True)  # fmt: skip
                known = False
                continue
            if got is PENDING:
                known = False
            elif int(got) == 0:
                self.quiet[key] = asked_at
            else:
                total += int(got)
        return total if known else None

    def lost(self, name: str, node: str) -> None:
        """``node`` is gone: the ingress ends the requests still on it (a user's app only:
        the MoE ingress's expert calls time out on their own); not waited for. An ingress
        that cannot be reached (being restarted) holds nothing to end."""
        try:
            ingress(name).lost.remote(node)
        except Exception:
            log.info("ingress of %s not told of lost server %s", name, node[:12], exc_info=True)

    def forget(self, name: str, node: str) -> None:
        """The ingress drops ``node``'s counters (it was lent); not waited for."""
        ingress(name).forget.remote(node)

    def removed(self, name: str) -> None:
        """``name`` is no longer a service: nothing more is read from its ingress."""
        self.calls.drop(name)
        self.quiet = {k: t for k, t in self.quiet.items() if k[0] != name}
        self.told.pop(name, None)
        self.told_at.pop(name, None)

    def stats(
        self, name: str, expected: Callable[[], set[str]], deadline: float | None = None
    ) -> Mapping[str, Any] | None:
        """The ingress's counters; None while it starts, or until it answers (waiting
        at most until ``deadline``). One that routes to other servers than
        ``expected()`` although it had been told them before it was asked (Serve
        restarted it after a crash: it knows none) is told them again at the next
        poll."""
        key = (name, "stats")
        try:
            self.calls.send(key, name, "stats")
            asked_at = self.calls.sent_at(key)
            got = self.calls.collect(key, deadline)
        except Exception:
            return None
        if got is PENDING:
            return None
        got = dict(got)
        servers = expected()
        if (
            set(got.get("routing", servers)) != servers
            and self.calls.in_flight((name, "set_backends")) is None
            and asked_at >= self.told_at.get(name, float("-inf"))
        ):
            self.retry = True
        return got

    def stats_reader(
        self, expected: Callable[[str], set[str]]
    ) -> Callable[[str], Mapping[str, Any] | None]:
        """:meth:`stats` for one poll's services, read within one wait shared by all;
        ``expected(name)`` gives the servers a service's ingress should route to."""
        deadline = self.calls.deadline()
        return lambda name: self.stats(name, lambda: expected(name), deadline)

    def plan(self, name: str) -> dict[str, Any]:
        """A MoE service's expert plan, as its ingress holds it ({} while it starts).
        A view's call: it waits, so it is never made under the scheduler's lock.

        WHY not asked of an ingress that never confirmed its servers: it is still
        starting (or re-planning onto its first servers) and has no plan to show, and
        the call waited out its 30 s for it. Every ``overview`` of a new MoE service
        took 30-37 s that way under two busy loops (lyra moe serve's wait for its first
        server polls it), against the SDK's 60 s."""
        if name not in self.told:
            return {}
        try:
            return dict(call(name, "plan"))
        except Exception:
            return {}
