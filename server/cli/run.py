"""How a command runs the server: trio with its exception groups unwrapped, and logging to stderr."""

from __future__ import annotations

import sys
from typing import Any


def run_trio(fn: Any) -> Any:
    """trio.run, re-raising the one exception inside nested exception groups.

    Nurseries wrap everything in groups, so without this a Ctrl-C or a bad port would never reach
    the commands' `except KeyboardInterrupt` / `except OSError`, and users would see a traceback.
    """
    import trio

    try:
        return trio.run(fn)
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        if leaf is group or isinstance(leaf, BaseExceptionGroup):
            raise
        raise leaf from None


def configure_logging(verbose: bool) -> None:
    """Warnings (a dropped client, a match that failed) to stderr; with ``verbose``, every connection."""
    import logging

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(message)s",
    )
