"""How a command runs the server: trio with its exception groups unwrapped, and logging to stderr."""

from __future__ import annotations

import os
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

    watched = _supervisor_fd()
    try:
        return trio.run(fn if watched is None else _watching(fn, watched))
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        if leaf is group or isinstance(leaf, BaseExceptionGroup):
            raise
        raise leaf from None


#: The environment variable naming the read end of a pipe whose other end the process's supervisor
#: (`ladder up`) holds: its end of file means the supervisor is gone (an fd number, no secret).
SUPERVISOR_FD = "CELLARENA_SUPERVISOR_FD"


def _supervisor_fd() -> int | None:
    """The pipe `SUPERVISOR_FD` names, taken out of the environment (what this process starts has a
    supervisor of its own: this process), or None."""
    named = os.environ.pop(SUPERVISOR_FD, None)
    if named is None:
        return None
    try:
        fd = int(named)
        os.fstat(fd)
    except (ValueError, OSError):
        print(
            f"warning: {SUPERVISOR_FD}={named!r} names no open file descriptor: not watched",
            file=sys.stderr,
        )
        return None
    return fd


def _watching(fn: Any, fd: int) -> Any:
    """``fn`` alongside a watch of the supervisor's pipe: at its end of file the process stops as on
    SIGTERM (gracefully: a server voids its matches and tells its bots), its output, which went to
    the supervisor, then going nowhere."""

    async def main() -> Any:
        import signal

        import trio

        async def watch() -> None:
            async with trio.lowlevel.FdStream(fd) as pipe:
                while await pipe.receive_some(1024):
                    pass
            nowhere = os.open(os.devnull, os.O_WRONLY)
            for out in (1, 2):
                os.dup2(nowhere, out)
            os.close(nowhere)
            os.kill(os.getpid(), signal.SIGTERM)

        result: list[Any] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(watch)
            result.append(await fn())
            nursery.cancel_scope.cancel()
        return result[0]

    return main


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
