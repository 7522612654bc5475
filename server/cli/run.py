"""How a command runs the server: trio with its exception groups unwrapped, and logging to stderr."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import logging


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
    """Warnings (a dropped client, a match that failed) to stderr; with ``verbose``, every connection.

    As the process's logging was before once the command ends (`restore_logging_after_command`)."""
    import logging

    restore_logging_after_command(logging.getLogger())
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(message)s",
    )


def quiet_logger(name: str) -> None:
    """Only errors from logger ``name`` while the command runs: a benchmark's load disconnects on
    purpose, and a warning per disconnect would bury its report."""
    import logging

    logger = logging.getLogger(name)
    restore_logging_after_command(logger)
    logger.setLevel(logging.ERROR)


def restore_logging_after_command(logger: logging.Logger) -> None:
    """Put ``logger``'s level, handlers, propagation and switch back as they are now when the running
    click command ends.

    A command also runs inside another program's process (click's test runner, a notebook, a
    script calling `main`): one that left "cellarena" at ERROR, or a handler on the root logger
    writing to a stream the runner has closed since, changed what that program logs afterwards (in
    a full test run, later tests' caplog read nothing). Outside a click command, nothing is restored.
    """
    import click

    ctx = click.get_current_context(silent=True)
    if ctx is None:
        return
    level, handlers = logger.level, list(logger.handlers)
    propagate, disabled = logger.propagate, logger.disabled

    def restore() -> None:
        for handler in [h for h in logger.handlers if h not in handlers]:
            logger.removeHandler(handler)  # its stream (the command's stderr) is not ours to close
        for handler in handlers:
            if handler not in logger.handlers:
                logger.addHandler(handler)
        logger.setLevel(level)
        logger.propagate, logger.disabled = propagate, disabled

    ctx.call_on_close(restore)
