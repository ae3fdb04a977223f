"""Running a one-shot write command (`rollback`, `hand-over`, `hand-back`, `release-claims`) within
its `--timeout` (issue 47): an API server that accepts and never answers ends the command with one
line naming the kubeconfig, the context and the server, not a wait until someone kills it."""

from __future__ import annotations

import argparse
import asyncio
import sys
from collections.abc import Callable, Coroutine
from typing import Any

from ..kube.kubeconfig import target_of

EXIT_TIMED_OUT = 1


def run_within_timeout(main: Callable[[argparse.Namespace], Coroutine[Any, Any, int]], args: argparse.Namespace) -> int:
    """`main(args)` in a new event loop, stopped after `args.timeout` seconds. What it wrote before
    then stays: each write tests the object's resourceVersion, so running the command again is safe."""

    async def bounded() -> int:
        async with asyncio.timeout(args.timeout):
            return await main(args)

    try:
        return asyncio.run(bounded())
    except TimeoutError:
        # Named from the file only now: a command that ends in time reads its kubeconfig once.
        where = target_of(args.kubeconfig, getattr(args, "context", None))
        print(f"error: {args.command}: {where}: no answer within {args.timeout:g}s (--timeout); "
              "stopped: what was written before stays, and running it again is safe", file=sys.stderr)
        return EXIT_TIMED_OUT


__all__ = ["EXIT_TIMED_OUT", "run_within_timeout"]
