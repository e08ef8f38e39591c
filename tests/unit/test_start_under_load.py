"""Starting the scheduler and Serve's proxy when the host is too busy for Ray's own
first answer (both found under a one-core CPU hog, docs/testing.md): the start waits for
what Ray is still bringing up instead of failing the command that asked."""

from __future__ import annotations

import threading
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
