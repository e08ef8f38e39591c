"""Open-loop traffic over a user's app's three routes (``tests/ray/user_app.py``), every
outcome kept: JSON POSTs, plain-text GETs and server-sent-event streams.

A background thread runs an asyncio loop that starts requests of each kind at its own
rate, whatever the answers take (open loop), on a fresh connection each (no keep-alive
race decides an outcome) and with no retry of its own: every failure the service lets
through is seen. A stream is *whole* when its events are the app's, in order: where it
ran, tokens ``0..n-1``, ``[DONE]``; one that breaks off is a failure of its own kind.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
import uuid
from collections import Counter
from typing import Any

import aiohttp

from lyra_ray.serving.load import check_loopback_url

KINDS = ("post", "get", "stream")
RECENT_S = 10.0
"""A server counts for held streams while it answered a request started this recently
(at the loaning tests' low rate each serving server gets one about every 1.5 s)."""


class AppTraffic:
    def __init__(
        self, url: str, stream_n: int = 12, stream_gap_s: float = 0.3, timeout_s: float = 90.0
    ) -> None:
        self.url = check_loopback_url(url).rstrip("/")
        self.stream_n, self.stream_gap_s, self.timeout_s = stream_n, stream_gap_s, timeout_s
        self.rates = {k: 0.0 for k in KINDS}
        self.records: list[dict[str, Any]] = []
        self.held = 0
        """Tokens of each held stream (:meth:`hold`); 0: no stream is held."""
        self._stop = threading.Event()
        self._thread = threading.Thread(target=lambda: asyncio.run(self._run()), daemon=True)

    def start(self, rates: dict[str, float]) -> AppTraffic:
        self.rates.update(rates)
        self._thread.start()
        return self

    def set_rates(self, rates: dict[str, float]) -> None:
        self.rates.update(rates)

    def hold(self, n: int) -> None:
        """Keep a stream of ``n`` tokens in flight on every server seen, a new one started
        while one has none (the router sends it to the server with the fewest in
        flight); 0 stops. Why: whether an open-loop stream happens to run on a server
        when it starts draining is chance (Poisson, ~1.5 streams a server at the loaning
        tests' low rate: none about one time in four). One held stream a server was not
        enough either (CI failed once more): the router can put both on one server, the
        other then has none for a whole stream. So another starts while any server has
        none, up to two a server (the demand stays below one server's). A server counts
        while it answered a request started in the last ``RECENT_S``: one drained stops
        getting any, and holding streams for it would pile them onto the others."""
        self.held = n

    def stop(self) -> dict[str, Any]:
        """Stop starting requests, wait for those in flight, report."""
        self._stop.set()
        self._thread.join(self.timeout_s + 30)
        return report(self.records)

    async def _post(self, s: aiohttp.ClientSession, rec: dict[str, Any]) -> None:
        body = {"id": rec["id"], "x": [0.1] * 32}
        async with s.post(f"{self.url}/predict", json=body) as r:
            rec["status"] = r.status
            raw = await r.read()
            if r.status == 200:
                out = json.loads(raw)
                rec["node"] = out["node"]
                rec["ok"] = len(out["y"]) == 32
            else:
                rec["error"] = f"http_{r.status}"
                rec["detail"] = raw[:200].decode(errors="replace")

    async def _get(self, s: aiohttp.ClientSession, rec: dict[str, Any]) -> None:
        async with s.get(f"{self.url}/info") as r:
            rec["status"] = r.status
            text = await r.text()
            rec["ok"] = r.status == 200 and text.startswith("model on ")
            if rec["ok"]:
                rec["node"] = text.split()[2]  # "model on <node id> pid <pid>"
            else:
                rec["error"], rec["detail"] = f"http_{r.status}", text[:200]

    async def _stream(self, s: aiohttp.ClientSession, rec: dict[str, Any]) -> None:
        n = rec.setdefault("n", self.stream_n)
        params = {"id": rec["id"], "n": str(n), "gap": str(self.stream_gap_s)}
        async with s.get(f"{self.url}/stream", params=params) as r:
            rec["status"] = r.status
            if r.status != 200:
                rec["error"] = f"http_{r.status}"
                return
            rec["content_type"] = r.headers.get("Content-Type", "")
            events: list[str] = []
            async for line in r.content:
                text = line.decode().strip()
                if text.startswith("data: "):
                    events.append(text[len("data: ") :])
                    if len(events) == 1:
                        rec["node"] = json.loads(events[0])["node"]
                        rec["first_at"] = time.time()
            rec["events"] = events
            want = [str(i) for i in range(n)] + ["[DONE]"]
            rec["ok"] = events[1:] == want and rec["content_type"].startswith("text/event-stream")
            if not rec["ok"]:
                rec["error"] = "stream_not_whole"

    async def _one(self, kind: str, n: int | None = None) -> None:
        rec: dict[str, Any] = {"kind": kind, "id": uuid.uuid4().hex[:12], "t0": time.time()}
        if n is not None:
            rec["n"], rec["held"] = n, True
        self.records.append(rec)
        timeout = aiohttp.ClientTimeout(total=self.timeout_s)
        try:
            conn = aiohttp.TCPConnector(force_close=True)
            async with aiohttp.ClientSession(timeout=timeout, connector=conn) as s:
                await {"post": self._post, "get": self._get, "stream": self._stream}[kind](s, rec)
        except Exception as e:  # a connection cut, a timeout: counted, never lost
            rec["ok"], rec["error"], rec["detail"] = False, type(e).__name__, str(e)[:200]
        rec.setdefault("ok", False)
        rec["t1"] = time.time()

    async def _kind(self, kind: str, tasks: set[asyncio.Task[None]]) -> None:
        next_t = time.monotonic()
        while not self._stop.is_set():
            rate = self.rates[kind]
            if rate <= 0:
                await asyncio.sleep(0.1)
                next_t = time.monotonic()
                continue
            next_t += 1.0 / rate
            await asyncio.sleep(max(0.0, next_t - time.monotonic()))
            task = asyncio.create_task(self._one(kind))
            tasks.add(task)
            task.add_done_callback(tasks.discard)

    async def _holder(self, tasks: set[asyncio.Task[None]]) -> None:
        while not self._stop.is_set():
            await asyncio.sleep(0.1)
            if self.held <= 0:
                continue
            live = [r for r in self.records if r.get("held") and "t1" not in r]
            now = time.time()  # servers that answered lately: a drained one drops out
            seen = {r["node"] for r in self.records if r.get("node") and now - r["t0"] < RECENT_S}
            covered = {r["node"] for r in live if r.get("node")}
            starting = [r for r in live if not r.get("node")]
            if starting or covered >= seen or len(live) >= 2 * max(1, len(seen)):
                continue  # one at a time, each routed before the next is decided
            task = asyncio.create_task(self._one("stream", self.held))
            tasks.add(task)
            task.add_done_callback(tasks.discard)  # its record is in before the next look

    async def _run(self) -> None:
        tasks: set[asyncio.Task[None]] = set()
        await asyncio.gather(*(self._kind(k, tasks) for k in KINDS), self._holder(tasks))
        if tasks:
            await asyncio.gather(*tasks)


def report(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Per kind: sent, ok, failures by kind, and the first failures in detail."""
    out: dict[str, Any] = {}
    for kind in KINDS:
        mine = [r for r in records if r["kind"] == kind]
        out[kind] = {
            "sent": len(mine),
            "ok": sum(1 for r in mine if r.get("ok")),
            "failures": dict(Counter(r.get("error", "?") for r in mine if not r.get("ok"))),
        }
    out["errors"] = [
        {k: r.get(k) for k in ("kind", "id", "error", "detail", "t0", "t1")}
        for r in records
        if not r.get("ok")
    ][:20]
    return out
