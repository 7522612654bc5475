"""`ladder up`'s supervisor: the ladder's parts (a `serve GAME` per game, `web`) as child processes in
one trio nursery. A part that exits is started again after a back-off that doubles while it keeps
failing; a stop (SIGINT, SIGTERM, SIGHUP) sends each part SIGTERM, then SIGKILL after a grace, and returns
once every part is down.

Each part is given the read end of a pipe whose write end `up` alone holds (its number in
`CELLARENA_SUPERVISOR_FD`): a kill -9 of `up` closes it, and each part, watching it, stops as on
SIGTERM, so nothing `up` started outlives it (`server/cli/run.py`).

`supervise` takes how a part is run as a function, so its timing is tested in virtual time with a
fake part; `run_process` is the real one.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TextIO

import trio

from cellarena.server.cli.run import SUPERVISOR_FD

log = logging.getLogger("cellarena.ladder.up")

#: Lines of a part's output kept to say why it ended.
TAIL_LINES = 8
#: A line of a part's output longer than this is cut: the log is for people.
LINE_LIMIT = 4000
#: Seconds the output is still read after a part's exit.
DRAIN_AFTER_EXIT = 1.0


@dataclass(frozen=True)
class Part:
    """One process of the ladder: its name in the log (``serve rezzo``, ``web``) and its command."""

    name: str
    argv: tuple[str, ...]
    cwd: Path | None = None


@dataclass(frozen=True)
class Exit:
    """How a part ended: its exit status (negative: the signal that ended it) and its last lines."""

    status: int | None
    tail: tuple[str, ...] = ()

    def describe(self) -> str:
        if self.status is None:
            return "ended"
        if self.status < 0:
            try:
                return f"was killed by {signal.Signals(-self.status).name}"
            except ValueError:
                return f"was killed by signal {-self.status}"
        return f"exited with status {self.status}"


@dataclass(frozen=True)
class Backoff:
    """Seconds before a part that ended starts again: ``first``, times ``factor`` after each quick
    failure, at most ``most``; a part that ran ``steady`` seconds or more starts again after ``first``."""

    first: float = 1.0
    factor: float = 2.0
    most: float = 60.0
    steady: float = 60.0

    def after(self, delay: float, ran: float) -> tuple[float, float]:
        """The wait now and the one after, for a part that waited ``delay`` before and then ran ``ran``."""
        now = self.first if ran >= self.steady else delay
        return now, min(now * self.factor, self.most)


RunPart = Callable[[Part], Awaitable[Exit]]


async def keep_up(part: Part, run: RunPart, backoff: Backoff) -> None:
    """Run ``part`` again and again, each time after the back-off, until cancelled."""
    delay = backoff.first
    while True:
        started = trio.current_time()
        ended = await run(part)
        wait, delay = backoff.after(delay, trio.current_time() - started)
        lines = "".join(f"\n  {part.name}| {line}" for line in ended.tail)
        log.warning(
            "%s %s; next try in %g s%s",
            part.name,
            ended.describe(),
            wait,
            f"; its last lines:{lines}" if lines else "",
        )
        await trio.sleep(wait)


async def supervise(parts: Sequence[Part], run: RunPart, backoff: Backoff, stop: trio.Event) -> None:
    """Keep every part up until ``stop`` is set, then stop them all (``run`` stops its process when
    cancelled) and return."""
    async with trio.open_nursery() as nursery:
        for part in parts:
            nursery.start_soon(keep_up, part, run, backoff)
        await stop.wait()
        log.info("stopping %s", ", ".join(p.name for p in parts))
        nursery.cancel_scope.cancel()


async def stop_on_signals(stop: trio.Event) -> None:
    """Set ``stop`` at the first SIGINT, SIGTERM or SIGHUP (a closed terminal: the parts, in sessions
    of their own, would not hear it)."""
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM, signal.SIGHUP) as signals:
        async for signum in signals:
            log.warning("%s: stopping every part", signal.Signals(signum).name)
            stop.set()
            return


def process_runner(grace: float, out: TextIO = sys.stderr) -> RunPart:
    """Parts run as child processes, their output copied to ``out`` line by line under their name,
    each stopped by SIGTERM then, after ``grace`` seconds, SIGKILL."""

    async def run(part: Part) -> Exit:
        return await run_process(part, grace, out)

    return run


async def run_process(part: Part, grace: float, out: TextIO) -> Exit:
    """Run ``part`` to its end; cancelled, stop it first (SIGTERM, SIGKILL after ``grace``)."""
    # The write end is not inheritable: only this process holds it, so only its death ends the pipe.
    watched, held = os.pipe()
    try:
        proc = await trio.lowlevel.open_process(
            list(part.argv),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            cwd=part.cwd,
            start_new_session=True,  # a Ctrl-C reaches `up` alone, which stops each part in turn
            pass_fds=(watched,),
            env={**os.environ, SUPERVISOR_FD: str(watched)},
        )
    except BaseException:
        os.close(held)
        raise
    finally:
        os.close(watched)
    try:
        return await _supervised(part, proc, grace, out)
    finally:
        os.close(held)


async def _supervised(part: Part, proc: trio.Process, grace: float, out: TextIO) -> Exit:
    log.info("%s started (pid %d)", part.name, proc.pid)
    tail: deque[str] = deque(maxlen=TAIL_LINES)
    assert proc.stdout is not None
    copied = trio.Event()
    # Shielded: a stopping part's last words (what it voided, "stopped") are copied too.
    copying = trio.CancelScope(shield=True)

    async def copy() -> None:
        with copying:
            assert proc.stdout is not None
            await _copy_lines(proc.stdout, part.name, tail, out)
        copied.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(copy)
        try:
            await proc.wait()
        finally:
            with trio.CancelScope(shield=True):
                await stop_process(proc, grace)
                with trio.move_on_after(DRAIN_AFTER_EXIT):  # a grandchild may hold the pipe open
                    await copied.wait()
                copying.cancel()
                await proc.stdout.aclose()
    return Exit(proc.returncode, tuple(tail))


async def stop_process(proc: trio.Process, grace: float) -> None:
    """SIGTERM, then SIGKILL if ``proc`` is still up after ``grace`` seconds; waits for its end
    under a deadline too (a process in uninterruptible sleep is left, and said so)."""
    if proc.returncode is not None:
        return
    proc.terminate()
    with trio.move_on_after(grace):
        await proc.wait()
        return
    log.warning("pid %d did not stop within %g s of SIGTERM: SIGKILL", proc.pid, grace)
    proc.kill()
    with trio.move_on_after(max(grace, 5.0)):
        await proc.wait()
        return
    log.error("pid %d did not end after SIGKILL", proc.pid)


async def _copy_lines(stream: trio.abc.ReceiveStream, name: str, tail: deque[str], out: TextIO) -> None:
    pending = b""
    while chunk := await stream.receive_some(65536):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        if len(pending) > LINE_LIMIT:
            lines.append(pending)
            pending = b""
        for raw in lines:
            _emit(raw, name, tail, out)
    if pending:
        _emit(pending, name, tail, out)


def _emit(raw: bytes, name: str, tail: deque[str], out: TextIO) -> None:
    line = raw.decode("utf-8", errors="replace").rstrip("\r")[:LINE_LIMIT]
    tail.append(line)
    print(f"{name}| {line}", file=out, flush=True)
