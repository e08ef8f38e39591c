"""A real aiohttp app on 127.0.0.1, on its own event loop in a thread.

For tests whose code under test drives HTTP from its own loop or thread (the load
drivers: ``lyra_ray.serving.load``, ``tests/ray/http_load.py``): the server must keep
answering while the test's thread blocks on them.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable, Iterator, Sequence
from contextlib import contextmanager

from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


@contextmanager
def served(posts: Sequence[tuple[str, Handler]]) -> Iterator[int]:
    """Serve ``(path, handler)`` POST routes on a free loopback port (yielded); stopped,
    its loop closed, on exit."""
    loop = asyncio.new_event_loop()
    thread = threading.Thread(target=loop.run_forever, daemon=True)
    thread.start()
    app = web.Application()
    for path, handler in posts:
        app.router.add_post(path, handler)
    runner = web.AppRunner(app)

    async def start() -> int:
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return int(runner.addresses[0][1])

    try:
        yield asyncio.run_coroutine_threadsafe(start(), loop).result(10)
    finally:
        asyncio.run_coroutine_threadsafe(runner.cleanup(), loop).result(10)
        loop.call_soon_threadsafe(loop.stop)
        thread.join(10)
        loop.close()
