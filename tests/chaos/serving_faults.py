"""Pieces of the serving fault tests (issue #31, item 5): the faults, the traffic, and
the check that the scheduler's view of the inference pool is what Ray Serve runs.

Kept apart from the tests so that each test reads as: traffic on, one fault, wait for
capacity, compare the two views, report.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from tests.ray.app_traffic import AppTraffic
from tests.ray.http_load import HttpLoad
from tests.waiting import wait_for

SERVICES = ("user", "moe")
"""A platform team's own Serve app (``tests/ray/user_app.py``) and lyra's MoE service."""
SETTLED = ("serving", "lent")
"""Server states a settled pool holds (draining and reclaiming are on the way)."""


View = dict[str, Any]
"""One ``client.overview()``. WHY the helpers take one: a wait's poll used to ask the
scheduler for it four times (three in :func:`full`, one in :func:`disagreements`), four
times a second in :func:`wait_recovered`, and each asks Serve's controller and the MoE
ingress too: load that the tests put on the very actors whose recovery they time. A
poll now reads it once (:func:`settled`)."""


def serving_servers(client: Any, view: View | None = None) -> set[str]:
    view = view or client.overview()
    return {n["id"] for n in view["nodes"] if n["pool"] == "inference" and n["state"] == "serving"}


def server_states(client: Any, view: View | None = None) -> dict[str, str]:
    view = view or client.overview()
    return {n["id"]: n["state"] for n in view["nodes"] if n["pool"] == "inference"}


def service(client: Any, name: str, view: View | None = None) -> dict[str, Any]:
    view = view or client.overview()
    (svc,) = [s for s in view["serving"]["services"] if s["name"] == name]
    return dict(svc)


def disagreements(client: Any, view: View | None = None) -> list[str]:
    """Where the scheduler's pool and Ray Serve differ (empty: they agree).

    The scheduler's side: its servers and their states (``lyra status``). Serve's side:
    its applications and each ingress's routing set. They agree when no server is on
    its way (draining, reclaiming), every serving server runs a RUNNING backend app of
    every service, no lent server and no server the scheduler does not know has one,
    and each ingress routes to exactly the serving servers.
    """
    from ray import serve

    from lyra_ray.serving.apps import backend_app_name, ingress_app_name

    states = server_states(client, view)
    serving = {n for n, st in states.items() if st == "serving"}
    apps = serve.status().applications
    out = [f"server {n[:12]} still {st}" for n, st in states.items() if st not in SETTLED]
    for name in SERVICES:
        ingress = apps.get(ingress_app_name(name))
        if ingress is None or not str(ingress.status).endswith("RUNNING"):
            out.append(f"{name}: ingress not running")
            continue
        for node, st in states.items():
            app = apps.get(backend_app_name(name, node))
            if st == "serving" and (app is None or not str(app.status).endswith("RUNNING")):
                out.append(f"{name}: server {node[:12]} serving, its backend not running")
            if st == "lent" and app is not None:
                out.append(f"{name}: server {node[:12]} lent, its backend still there")
        known = {backend_app_name(name, n) for n in states}
        prefix = backend_app_name(name, "")
        stray = [a for a in apps if a.startswith(prefix) and a not in known]
        if stray:
            out.append(f"{name}: backends of servers the scheduler does not have: {stray}")
        routing = set(
            serve.get_app_handle(ingress_app_name(name)).stats.remote().result()["routing"]
        )
        if routing != serving:
            out.append(f"{name}: ingress routes to {len(routing)}, {len(serving)} serve")
    return out


def ready(client: Any, view: View | None = None) -> dict[str, int]:
    """Ready (GPU) replicas per service, as the scheduler reports them."""
    view = view or client.overview()
    return {name: int(service(client, name, view)["ready"]) for name in SERVICES}


def full(client: Any, view: View | None = None) -> bool:
    """Every serving server's replicas ready: one of each service per server here."""
    view = view or client.overview()
    n = len(serving_servers(client, view))
    return n > 0 and ready(client, view) == {name: n for name in SERVICES}


def settled(client: Any) -> bool:
    """Every serving server's replicas ready and the two views agreeing, from one
    overview."""
    view = client.overview()
    return full(client, view) and not disagreements(client, view)


def wait_recovered(client: Any, want: Callable[[View], bool], t0: float, timeout: float) -> float:
    """Seconds from ``t0`` until ``want(view)`` and the two views agree (one overview a
    poll, passed to ``want``)."""
    last: list[str] = []

    def ok() -> bool:
        nonlocal last
        view = client.overview()
        last = disagreements(client, view) if want(view) else ["capacity not back yet"]
        return not last

    try:
        wait_for(ok, timeout, "capacity back and the views agreeing", every=0.25)
    except AssertionError as e:
        raise AssertionError(f"{e}: {last}; {server_states(client)}, {ready(client)}") from None
    return round(time.monotonic() - t0, 2)


USER_MIX = {"post": 0.6, "get": 0.25, "stream": 0.15}
"""The user app's requests per kind, as shares of its rate."""


class Traffic:
    """Open-loop load on both services at once: the user app's three routes (JSON POSTs,
    plain-text GETs, streams of ~2 s), MoE's JSON POSTs."""

    def __init__(self, urls: dict[str, str], rates: dict[str, float]) -> None:
        self.app = AppTraffic(urls["user"], stream_n=8, stream_gap_s=0.25)
        self.app.start({k: share * rates["user"] for k, share in USER_MIX.items()})
        self.loads = {"moe": HttpLoad(urls["moe"]).start(rates["moe"])}

    def set_rates(self, rates: dict[str, float]) -> None:
        for name, rate in rates.items():
            if name == "user":
                self.app.set_rates({k: share * rate for k, share in USER_MIX.items()})
            else:
                self.loads[name].set_rate(rate)

    def stop(self) -> dict[str, dict[str, Any]]:
        """Per service: what was sent, the failures by HTTP status or error after the
        client's one retry, and (``failed_without_retry``) what would have failed
        without it."""
        out = {"user": self._user()}
        for name, load in self.loads.items():
            r = load.stop()
            failed = sum(r["failures"].values())
            out[name] = {
                "sent": r["sent"],
                "ok": r["ok"],
                "failures": r["failures"],
                "failed": failed,
                "retried": r["retried"],
                "failed_without_retry": failed + sum(r["retried"].values()),
                "p50_ms": r["p50_ms"],
                "p99_ms": r["p99_ms"],
            }
        return out

    def _user(self) -> dict[str, Any]:
        r = self.app.stop()
        failures = {
            f"{kind} {why}": n
            for kind in ("post", "get", "stream")
            for why, n in r[kind]["failures"].items()
        }
        lat = sorted(
            1000 * (x["t1"] - x["t0"]) for x in self.app.records if x["kind"] == "post" and x["ok"]
        )
        return {
            "sent": sum(r[k]["sent"] for k in ("post", "get", "stream")),
            "ok": sum(r[k]["ok"] for k in ("post", "get", "stream")),
            "failures": failures,
            "failed": sum(failures.values()),
            "retried": {},
            "failed_without_retry": sum(failures.values()),
            "p50_ms": lat[len(lat) // 2] if lat else None,
            "p99_ms": lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None,
            "by_kind": {k: r[k] for k in ("post", "get", "stream")},
        }


def replica_pids(prefix: str) -> set[int]:
    """Processes of this host whose title starts with ``ray::<prefix>`` (Ray names a
    Serve replica's process ``ray::ServeReplica:<app>:<deployment>``). WHY not the State
    API: a wait on its actor list for the killed replica's successor never ended in one
    run; on one host the process table is the plain truth."""
    out: set[int] = set()
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            title = (proc / "cmdline").read_bytes().split(b"\0")[0].decode(errors="replace")
        except OSError:  # gone meanwhile
            continue
        if title.startswith(f"ray::{prefix}"):
            out.add(int(proc.name))
    return out


def sigkill(pid: int) -> int:
    os.kill(pid, 9)
    return pid
