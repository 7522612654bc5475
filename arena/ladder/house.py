"""House bots: bots the ladder launches itself, so that a bot waiting alone still gets a match.

A house bot is registered with the command that starts it (`cellarena ladder house add`). When a
bot has waited ``after`` seconds in the queue and a house bot of the game is idle (not queued, not
playing, not starting), the ladder starts the idle house bot whose rating is closest to the longest
waiter's. It runs as a match's bots do (`cellarena.server.launcher.start_bot`): in a session of its
own, confined by the same limits (and `--isolate`), told where to connect in its environment and its
token through an inherited pipe (docs/protocol.md), its output in a capped log. It plays one match
and exits; the next time it is needed it starts again. One that neither queues nor plays for
``idle_limit`` seconds (it never connected, or hangs after its match) is stopped, so a broken house
bot cannot stay "running" forever and never be started again.

The store keeps only a hash of every token, so each launch gives the house bot a new token
(`LadderStore.rotate`): the one it was started with is the only one that works.

As cellarena started it, a house bot whose process exits mid-match is said to have ``exited`` (its
status or signal and its log's last line, its token redacted) or gone over a ``limit``, rather than
``disconnected``: the match starter asks `HouseBots.explain` at the match's end.
"""

from __future__ import annotations

import functools
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.seating import LadderSeating
from cellarena.arena.ladder.store import LadderStore, LadderStoreError
from cellarena.arena.ratings import initial
from cellarena.server.confinement import Limits
from cellarena.server.connection import Connection
from cellarena.server.launcher import (
    EXIT_WAIT,
    LOG_LIMIT,
    BotProcess,
    BotSpec,
    copy_log,
    exit_cause,
    holds_connection,
    last_log_line,
    start_bot,
    stop_bot,
    watch_limits,
)

log = logging.getLogger("cellarena.ladder")


@dataclass
class Launched:
    """A house bot's latest launch, kept after it ends so that its match can ask why it went."""

    proc: BotProcess
    #: The token it was started with, redacted from its log's last line.
    secret: str
    log: Path
    #: Set once its output is all in its log.
    log_done: trio.Event = field(default_factory=trio.Event)
    #: Set once its exit is seen (or it was stopped here).
    exited: trio.Event = field(default_factory=trio.Event)
    #: Set once what it left was stopped too (`stop_bot` read its cgroup's limit).
    reaped: trio.Event = field(default_factory=trio.Event)


class HouseBots:
    """Starts house bots for bots that wait too long; `run` is its task, beside the lobby's."""

    def __init__(
        self,
        store: LadderStore,
        seating: LadderSeating,
        log_dir: Path,
        *,
        after: float = 5.0,
        every: float = 0.5,
        idle_limit: float = 30.0,
        host: str = "127.0.0.1",
        limits: Limits | None = None,
        isolate: bool = False,
    ) -> None:
        self.store = store
        self.seating = seating
        self.log_dir = log_dir
        self.after = after
        self.every = every
        self.idle_limit = idle_limit
        self.host = host
        self.limits = limits or Limits()
        self.isolate = isolate
        #: House bots whose process runs, by name.
        self.running: dict[str, BotProcess] = {}
        #: Each house bot's latest launch, by name, running or not (replaced by its next one).
        self.launched: dict[str, Launched] = {}

    async def run(self, port: int) -> None:
        """Look at the queue every ``every`` seconds until cancelled; then stop every house bot."""
        try:
            async with trio.open_nursery() as nursery:
                while True:
                    await trio.sleep(self.every)
                    needed = self._needed()
                    if needed is not None:
                        await self._launch(nursery, needed, port)
        finally:
            with trio.CancelScope(shield=True):
                for proc in list(self.running.values()):
                    await stop_bot(proc, patience=0.0)

    def _needed(self) -> BotRecord | None:
        """The idle house bot to start now, or None: nobody waited long enough, or no house bot is free."""
        now = trio.current_time()
        waiting = [
            q
            for q in self.seating.queue.waiting.values()
            if now - q.since >= self.after and q.bot.kind != "house"
        ]
        if not waiting:
            return None
        busy = set(self.running) | set(self.seating.queue.waiting) | self.seating.starter.playing()
        idle = [b for b in self.seating.results.house_bots() if b.name not in busy]
        if not idle:
            return None
        longest = min(waiting, key=lambda q: q.since)
        ratings = self.seating.results.ratings
        target = ratings.get(longest.bot.name, initial()).mu
        return min(idle, key=lambda b: (abs(ratings.get(b.name, initial()).mu - target), b.name))

    async def _launch(self, nursery: trio.Nursery, bot: BotRecord, port: int) -> None:
        assert bot.house_command is not None
        try:
            token = await trio.to_thread.run_sync(self.store.rotate, bot.name)
        except LadderStoreError as exc:
            log.error("cannot start house bot %s: %s", bot.name, exc)
            return
        spec = BotSpec(bot.name, bot.house_command)
        path = self.log_dir / f"house-{bot.name}.log"
        try:
            proc = await start_bot(
                spec,
                self.host,
                port,
                token.secret,
                limits=self.limits,
                isolate=self.isolate,
                # Known before its token is in the pipe: its hello is judged by its own processes.
                on_started=functools.partial(self.running.__setitem__, bot.name),
            )
        except OSError as exc:
            log.error("cannot start house bot %s (%r): %s", bot.name, bot.house_command, exc)
            return
        log.info("started house bot %s for a bot that waited %g s", bot.name, self.after)
        self.running[bot.name] = proc
        launched = Launched(proc, token.secret, path)
        self.launched[bot.name] = launched
        assert proc.stdout is not None
        nursery.start_soon(self._copy_log, launched)
        nursery.start_soon(self._reap, bot.name, launched)
        nursery.start_soon(watch_limits, [proc], self.limits)

    def holds(self, name: str, conn: Connection) -> bool:
        """Whether house bot ``name``'s own processes hold ``conn`` (`Admission.house_owner`)."""
        proc = self.running.get(name)
        return proc is not None and holds_connection(proc, conn)

    async def explain(self, name: str) -> dict[str, Any] | None:
        """Why house bot ``name``'s connection went (`cellarena.server.match.ExplainGone`, for its
        seat): ``exited`` with its status or signal, or ``limit``, with its log's last line; None
        if its process has not exited within `EXIT_WAIT` seconds (the socket closes a moment
        before the exit is seen) or was stopped here, as the ladder stopped or it sat idle."""
        launched = self.launched.get(name)
        if launched is None:
            return None
        with trio.move_on_after(EXIT_WAIT):
            await launched.exited.wait()
        proc = launched.proc
        code = proc.returncode
        if code is None:
            return None
        with trio.move_on_after(EXIT_WAIT):
            await launched.reaped.wait()
        if proc.signalled and proc.stopped_for is None:
            return None
        with trio.move_on_after(EXIT_WAIT):
            await launched.log_done.wait()
        line = last_log_line(launched.log, secrets=[launched.secret])
        return exit_cause(proc, code, self.limits, line)

    async def _copy_log(self, launched: Launched) -> None:
        assert launched.proc.stdout is not None
        try:
            await copy_log(launched.proc.stdout, launched.log, LOG_LIMIT)
        finally:
            launched.log_done.set()

    async def _reap(self, name: str, launched: Launched) -> None:
        """Wait for a house bot to end its match and exit, or to sit idle (neither queued nor playing)
        for ``idle_limit`` seconds; then stop what it left in its session."""
        proc = launched.proc
        try:
            idle_since = trio.current_time()
            while proc.returncode is None:
                with trio.move_on_after(self.every):
                    await proc.wait()
                now = trio.current_time()
                if name in self.seating.queue.waiting or name in self.seating.starter.playing():
                    idle_since = now
                elif now - idle_since >= self.idle_limit:
                    log.warning(
                        "house bot %s neither queued nor played for %g s: stopped (see its log)",
                        name,
                        self.idle_limit,
                    )
                    break
        finally:
            if proc.returncode is not None:
                launched.exited.set()
            with trio.CancelScope(shield=True):
                await stop_bot(proc, patience=0.0)
            launched.exited.set()
            launched.reaped.set()
            if self.running.get(name) is proc:
                del self.running[name]
