"""Open-loop HTTP load with a rate the test changes on the fly, and every failure kept.
Optionally bounded: at most ``max_in_flight`` requests out, the sends slipping beyond it.

The live loaning test needs low traffic (so a server is lent), then a spike (so it is
reclaimed), and must see every request that failed in between: a background thread runs
an asyncio loop that sends POSTs at the current rate to a loopback URL only.

A request whose connection the server closed before any response (aiohttp's
``ServerDisconnectedError``) is sent once more, as a client library does with an
idempotent request (these are); each such retry is kept in ``retried``, so a report
shows failures both with and without it (issue #31 asks for both).

Every failure is counted by what it was (``http_<status>`` whatever the body, else the
exception's type) and its first ones kept with the body's first bytes and the time
(``errors``), so a failed run says which request failed, when, and what the server said.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections import Counter
from typing import Any

import aiohttp

from lyra_ray.serving.load import check_loopback_url

MAX_ERRORS_KEPT, BODY_BYTES_KEPT = 20, 300


class HttpLoad:
    def __init__(self, url: str, timeout_s: float = 60.0, max_in_flight: int | None = None) -> None:
        self.url = check_loopback_url(url)
        self.timeout_s = timeout_s
        self.max_in_flight = max_in_flight
        """At most this many requests in flight (None: no bound, a pure open loop). A send
        due while that many are out waits for one to end, and the schedule slips
        (counted in ``held``): a host slower than the rate then holds no queue of
        requests at the server, whose age would delay what the test changes (a body's
        topic mix) by however long that queue is."""
        self.held = 0
        self.rate = 0.0
        self.body: dict[str, Any] = {}
        """What every request sends (the MoE drift test sets a topic mix here)."""
        self.sent = 0
        self.ok = 0
        self.failures: Counter[str] = Counter()
        self.retried: Counter[str] = Counter()
        """Requests sent again after the server dropped the connection unanswered."""
        self.latencies_ms: list[float] = []
        self.nodes: Counter[str] = Counter()
        self.errors: list[dict[str, Any]] = []
        """The first failures: kind, wall time, seconds since sent, the body's first bytes."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def start(self, rate: float) -> HttpLoad:
        self.rate = rate
        self._thread.start()
        return self

    def set_rate(self, rate: float) -> None:
        self.rate = rate

    def stop(self) -> dict[str, Any]:
        """Stop sending, wait for what is in flight, and report."""
        self._stop.set()
        self._thread.join(self.timeout_s + 30)
        lat = sorted(self.latencies_ms)
        return {
            "sent": self.sent,
            "ok": self.ok,
            "failures": dict(self.failures),
            "retried": dict(self.retried),
            "p50_ms": lat[len(lat) // 2] if lat else None,
            "p99_ms": lat[min(len(lat) - 1, int(0.99 * len(lat)))] if lat else None,
            "nodes": dict(self.nodes),
            "held": self.held,
            "errors": list(self.errors),
        }

    def _fail(self, kind: str, t0: float, detail: str = "") -> None:
        self.failures[kind] += 1
        if len(self.errors) < MAX_ERRORS_KEPT:
            self.errors.append(
                {
                    "kind": kind,
                    "at": time.time(),
                    "after_s": round(time.monotonic() - t0, 3),
                    "detail": detail[:BODY_BYTES_KEPT],
                }
            )

    async def _one(self, session: aiohttp.ClientSession) -> None:
        t0 = time.monotonic()
        try:
            await self._post(session, t0)
        except aiohttp.ServerDisconnectedError as e:
            self.retried[type(e).__name__] += 1
            await self._post(session, t0, last=True)

    async def _post(self, session: aiohttp.ClientSession, t0: float, last: bool = False) -> None:
        try:
            async with session.post(self.url, json=self.body) as resp:
                raw = await resp.read()
                if resp.status != 200:  # the status first: an error body may be plain text
                    self._fail(f"http_{resp.status}", t0, raw.decode(errors="replace"))
                    return
                try:
                    body = json.loads(raw)
                except ValueError:
                    self._fail("http_200_not_json", t0, raw.decode(errors="replace"))
                    return
                self.ok += 1
                self.latencies_ms.append(1000 * (time.monotonic() - t0))
                self.nodes[str(body.get("node", ""))[:12]] += 1
        except TimeoutError:
            self._fail("timeout", t0)
        except aiohttp.ServerDisconnectedError as e:
            if not last:
                raise  # sent once more by _one
            self._fail(type(e).__name__, t0, str(e))
        except Exception as e:  # a connection error, or anything else: counted, never lost
            self._fail(type(e).__name__, t0, str(e))

    async def _run(self) -> None:
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        async with aiohttp.ClientSession(timeout=timeout) as session:
            tasks: set[asyncio.Task[None]] = set()
            next_t = time.monotonic()
            while not self._stop.is_set():
                if self.rate <= 0:
                    await asyncio.sleep(0.1)
                    next_t = time.monotonic()
                    continue
                next_t += 1.0 / self.rate
                await asyncio.sleep(max(0.0, next_t - time.monotonic()))
                if self.max_in_flight is not None and len(tasks) >= self.max_in_flight:
                    self.held += 1
                    while len(tasks) >= self.max_in_flight and not self._stop.is_set():
                        await asyncio.wait(tasks, return_when=asyncio.FIRST_COMPLETED)
                    next_t = time.monotonic()
                    if self._stop.is_set():
                        break
                task = asyncio.create_task(self._one(session))
                self.sent += 1
                tasks.add(task)
                task.add_done_callback(tasks.discard)
            if tasks:
                await asyncio.gather(*tasks)
