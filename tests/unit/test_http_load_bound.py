"""The live tests' HTTP load (``tests/ray/http_load.py``) with a bound on requests in
flight: a server slower than the rate never holds more than the bound, the slipped sends
are counted, and nothing fails or is lost. WHY the bound: at 10 requests a second the MoE
drift test's service fell behind on a slow host, its queue grew to 25 s, and the topic
mix the test shifted reached the service's routing 25 s late (2026-12-01)."""

from __future__ import annotations

import asyncio
import time

from aiohttp import web

from tests.ray.http_load import HttpLoad
from tests.threaded_http import served


class SlowServer:
    """POSTs that take ``delay_s`` each; counts the peak in flight and those served."""

    def __init__(self, delay_s: float) -> None:
        self.delay_s, self.now, self.peak, self.served = delay_s, 0, 0, 0

    async def handle(self, _request: web.Request) -> web.Response:
        self.now += 1
        self.peak = max(self.peak, self.now)
        await asyncio.sleep(self.delay_s)
        self.now -= 1
        self.served += 1
        return web.json_response({"node": "n"})


def test_a_bounded_load_never_has_more_in_flight_and_counts_what_it_held() -> None:
    server = SlowServer(delay_s=0.2)
    with served([("/", server.handle)]) as port:
        load = HttpLoad(f"http://127.0.0.1:{port}/", max_in_flight=2).start(rate=50.0)
        time.sleep(1.0)
        report = load.stop()
    assert server.peak == 2  # 50/s at 0.2 s each would be ~10 in flight unbounded
    assert report["held"] > 0 and report["failures"] == {}
    assert report["ok"] == report["sent"] == server.served > 0


def test_an_unbounded_load_stays_open_loop() -> None:
    server = SlowServer(delay_s=0.2)
    with served([("/", server.handle)]) as port:
        load = HttpLoad(f"http://127.0.0.1:{port}/").start(rate=50.0)
        time.sleep(1.0)
        report = load.stop()
    assert server.peak > 2 and report["held"] == 0
    assert report["ok"] == report["sent"] == server.served > 0
