"""Starting the scheduler and Serve's proxy when the host is too busy for Ray's own
first answer (both found under a one-core CPU hog, docs/testing.md): the start waits for
what Ray is still bringing up instead of failing the command that asked."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any

import pytest

ray = pytest.importorskip("ray")

from lyra_ray.runtime import scheduler_start as scheduler  # noqa: E402
from lyra_ray.runtime import serve_proxy  # noqa: E402


class _Actor:
    class ping:  # the shape of an actor method
        @staticmethod
        def remote() -> str:
            return "ref"


class _Options:
    def __init__(self, **_: Any) -> None:
        pass

    def remote(self, _cfg: Any) -> _Actor:
        return _Actor()


def test_a_restarting_scheduler_is_waited_for(monkeypatch: pytest.MonkeyPatch) -> None:
    """A head brought back restarts the detached scheduler from its GCS state; the
    ``lyra up`` that finds it by name waits for it instead of failing on its ping."""
    answers: list[Any] = [
        ray.exceptions.ActorUnavailableError("The actor is restarting", None),
        ray.exceptions.ActorUnavailableError("The actor is restarting", None),
        {"ok": True},
    ]

    def get(_ref: Any) -> Any:
        a = answers.pop(0)
        if isinstance(a, Exception):
            raise a
        return a

    monkeypatch.setattr(scheduler, "GlobalScheduler", type("G", (), {"options": _Options}))
    monkeypatch.setattr(scheduler.ray, "get", get)
    monkeypatch.setattr(scheduler.time, "sleep", lambda _s: None)
    assert isinstance(scheduler.start_scheduler({"policy": "fifo"}), _Actor)
    assert answers == []


def test_a_scheduler_that_died_still_fails_the_start(monkeypatch: pytest.MonkeyPatch) -> None:
    def get(_ref: Any) -> Any:
        raise ray.exceptions.ActorDiedError()

    monkeypatch.setattr(scheduler, "GlobalScheduler", type("G", (), {"options": _Options}))
    monkeypatch.setattr(scheduler.ray, "get", get)
    with pytest.raises(ray.exceptions.RayActorError):
        scheduler.start_scheduler({"policy": "fifo"})


@pytest.fixture
def healthz() -> Iterator[tuple[str, int, list[str]]]:
    """An HTTP server that answers ``/-/healthz`` 503 twice, then 200 (a proxy starting)."""
    seen: list[str] = []

    class H(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append(self.path)
            self.send_response(200 if len(seen) > 2 else 503)
            self.end_headers()

        def log_message(self, *_: Any) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), H)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield "127.0.0.1", server.server_address[1], seen
    finally:
        server.shutdown()


def test_serve_whose_first_proxy_was_replaced_is_adopted_once_healthy(
    monkeypatch: pytest.MonkeyPatch, healthz: tuple[str, int, list[str]]
) -> None:
    """Serve's controller replaced its first proxy (not ready within its 5-s check), and
    ``serve.start``, waiting on that one, raised: Serve is up, so the second call adopts
    it, and the start returns only once the proxy that replaced it answers."""
    host, port, seen = healthz
    calls: list[dict[str, Any]] = []

    def start(**kw: Any) -> None:
        calls.append(kw)
        if len(calls) == 1:
            raise ray.exceptions.ActorDiedError()

    monkeypatch.setattr(serve_proxy.serve, "start", start)
    monkeypatch.setattr(serve_proxy, "_address", lambda h, p: (h, p))
    assert serve_proxy.start_serve(host, port, ready_s=30) == (host, port)
    assert [c["proxy_location"] for c in calls] == ["HeadOnly", "HeadOnly"]
    assert seen == ["/-/healthz"] * 3  # waited through two 503s


def test_a_proxy_that_never_becomes_healthy_names_its_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from lyra_ray.ops.ports import free_port

    port = free_port()  # nothing listens there
    monkeypatch.setattr(serve_proxy, "_address", lambda h, p: (h, p))
    with pytest.raises(TimeoutError, match=f"127.0.0.1:{port} not healthy"):
        serve_proxy._wait_healthy("0.0.0.0", port, ready_s=1.0)


def test_two_deploys_start_serve_once_and_the_scheduler_lock_stays_free(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A deploy starts Serve outside the scheduler's lock (a minute under load, with every
    view waiting behind it before): while Serve starts, the lock is free; a second deploy
    at the same time waits for that one start rather than making its own; and the checks
    made once Serve runs still refuse a route its other apps hold."""
    from types import SimpleNamespace

    from lyra_ray.model.errors import InputError
    from lyra_ray.runtime.scheduler_views import SchedulerViews

    release = threading.Event()
    starts: list[tuple[str, int]] = []
    lock_free_while_starting: list[bool] = []
    lock = threading.RLock()

    def start_serve(host: str, port: int) -> tuple[str, int]:
        starts.append((host, port))

        def probe() -> None:  # another thread: a view, or the cycle
            got = lock.acquire(timeout=5)
            if got:
                lock.release()
            lock_free_while_starting.append(got)

        other = threading.Thread(target=probe)
        other.start()
        other.join()
        release.wait(10)
        return host, 8123

    monkeypatch.setattr(serve_proxy, "start_serve", start_serve)
    proxy = serve_proxy.ServeProxy()

    checked: list[bool] = []

    def check(*_: Any) -> None:  # the routes of Serve's other apps clash, once known
        checked.append(proxy.started)
        if proxy.started:
            raise InputError("services: field 'route': taken (the test stops here)")

    serving = SimpleNamespace(nodes={"n1": object()}, proxy=proxy, check=check)
    views = SchedulerViews(
        cfg=SimpleNamespace(period_s=0.1),  # type: ignore[arg-type]
        core=None,  # type: ignore[arg-type]
        runtime=None,  # type: ignore[arg-type]
        serving=serving,  # type: ignore[arg-type]
        desk=None,  # type: ignore[arg-type]
        live=SimpleNamespace(fault=None, archive=None),  # type: ignore[arg-type]
        stats=None,  # type: ignore[arg-type]
        clock=None,  # type: ignore[arg-type]
        users=SimpleNamespace(require_admin=lambda *_: None),  # type: ignore[arg-type]
        metrics=None,
        lock=lock,
        wake=threading.Event(),
    )
    raw = {"name": "chat", "model": "moe", "route": "/chat"}
    replies: list[dict[str, Any]] = []
    deploys = [
        threading.Thread(target=lambda: replies.append(views.deploy_services([raw])))
        for _ in range(2)
    ]
    for t in deploys:
        t.start()
    deadline = time.monotonic() + 10  # Serve starting, both deploys past their first check
    while (not starts or checked.count(False) < 2) and time.monotonic() < deadline:
        time.sleep(0.01)
    release.set()
    for t in deploys:
        t.join(10)
    assert starts == [("127.0.0.1", 8000)]  # one start for both deploys
    assert lock_free_while_starting == [True]
    assert proxy.started and proxy.port == 8123
    assert [r["ok"] for r in replies] == [False, False]
    assert all("field 'route'" in r["error"] for r in replies)
