"""A loopback HTTP server answering every path with one handler: for the unit tests' fake APIs."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator

from aiohttp import web
from aiohttp.typedefs import Handler


@contextlib.asynccontextmanager
async def serving(handler: Handler) -> AsyncIterator[str]:
    """`http://127.0.0.1:<port>` while the server runs; every method and path goes to `handler`."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", handler)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    try:
        yield f"http://127.0.0.1:{runner.addresses[0][1]}"
    finally:
        await runner.cleanup()
