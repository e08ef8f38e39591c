"""The live tests' HTTP load (``tests/ray/http_load.py``) with a bound on requests in
flight: a server slower than the rate never holds more than the bound, the slipped sends
are counted, and nothing fails or is lost. WHY the bound: at 10 requests a second the MoE
drift test's service fell behind on a slow host, its queue grew to 25 s, and the topic
mix the test shifted reached the service's routing 25 s late (2026-12-01)."""

from __future__ import annotations

import asyncio
import threading
import time

from aiohttp import web

from tests.ray.http_load import HttpLoad


class SlowServer:
    """A loopback JSON server taking ``delay_s`` a request, counting its peak in flight."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s, self.now, self.peak, self.served = delay_s, 0, 0, 0
        self.port = 0
        self._ready = threading.Event()
        self._loop = asyncio.new_event_loop()
        threading.Thread(target=self._serve, daemon=True).start()
        assert self._ready.wait(10)

    async def _handle(self, _request: web.Request) -> web.Response:
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(self.delay_s)
        self.now -= 1
        self.served += 1
        return web.json_response({"node": "n"})

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/", self._handle)
        runner = web.AppRunner(app)
        self._loop.run_until_complete(runner.setup())
        site = web.TCPSite(runner, "127.0.0.1", 0)
        self._loop.run_until_complete(site.start())
        self.port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._ready.set()
        self._loop.run_forever()


def test_a_bounded_load_never_has_more_in_flight_and_counts_what_it_held() -> None:
    server = SlowServer(delay_s=0.2)
    load = HttpLoad(f"http://127.0.0.1:{server.port}/", max_in_flight=2).start(rate=50.0)
    time.sleep(1.0)
    report = load.stop()
    assert server.peak == 2  # 50/s at 0.2 s each would be ~10 in flight unbounded
    assert report["held"] > 0 and report["failures"] == {}
    assert report["ok"] == report["sent"] == server.served > 0


def test_an_unbounded_load_stays_open_loop() -> None:
    server = SlowServer(delay_s=0.2)
    load = HttpLoad(f"http://127.0.0.1:{server.port}/").start(rate=50.0)
    time.sleep(1.0)
    report = load.stop()
    assert server.peak > 2 and report["held"] == 0
    assert report["ok"] == report["sent"] == server.served > 0
