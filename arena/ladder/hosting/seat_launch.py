"""Submitted bots started by the process that plays their match: a local worker (`worker_process`) or
a cluster's worker (`cluster_hand_off`), docs/ladder.md "How submitted bots are built and run".

An isolated submitted bot has no network, so it cannot follow a ``redirect`` to where its match is
played. When the ladder hands such a match off, the job (`LaunchingMatch`) carries, for each such
seat, what to start there (`SeatLaunch`): the live version's archive, its hash, the bot's limits and
``--isolate``. The process that plays the match builds it into its cache by hash (`bot_cache`),
makes a loopback connection to its own lobby, seats it in the bot's seat (no token: the connection
is the seat's, as in `cellarena match`), and starts the bot with that connection handed over, under
the same confinement as on the ladder's machine. A bot that cannot be built or started there costs
its seat in that match (it never came: it forfeits), never the worker.
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import trio

from cellarena.arena.ladder.hosting.bot_cache import BotCache, PrepareError
from cellarena.arena.ladder.submissions.build import BuildLimits
from cellarena.server.bots.confinement import IsolationError, Limits
from cellarena.server.bots.launcher import (
    EXIT_WAIT,
    LOG_LIMIT,
    BotProcess,
    copy_log,
    start_bot,
    stop_bot,
    watch_limits,
)
from cellarena.server.bots.program import BotProgram, ProgramError
from cellarena.server.bots.python_view import python_view
from cellarena.server.net.connection import Connection
from cellarena.server.play.hosted import HostedMatch
from cellarena.server.play.lobby import Lobby

log = logging.getLogger("cellarena.ladder.worker")

#: Seconds the bots of a match with a bot started where it is played have to be in: its build there
#: (once per archive and machine) comes first.
LAUNCH_CONNECT_TIMEOUT = 120.0


@dataclass(frozen=True)
class SeatLaunch:
    """What a match's own process starts for one seat: a submitted bot's live version. Picklable."""

    name: str
    #: The version's label as its bot says it (``v3``).
    version: str
    sha256: str
    kind: str
    archive: bytes = field(repr=False)
    isolate: bool = False
    limits: Limits = field(default_factory=Limits)
    build_limits: BuildLimits = field(default_factory=BuildLimits)
    #: The cache of built bots: the ladder's ``bot-cache/``, made at that path where the match is
    #: played (the same machine, or a cluster's worker), else the system's temporary folder there.
    cache: str | None = None
    #: Folders out of the bot's and its build's sight there (the ladder's folder).
    hidden: tuple[str, ...] = ()
    #: Its private log, written there if that folder exists (the same machine); else its output is dropped.
    log: str | None = None


@dataclass(frozen=True)
class LaunchingMatch(HostedMatch):
    """A hosted match some of whose seats the host starts itself (`SeatLaunch`, None for a seat whose
    bot comes by redirect)."""

    launches: tuple[SeatLaunch | None, ...] = ()


def launches_of(job: HostedMatch) -> list[tuple[int, SeatLaunch]]:
    """The seats of ``job`` that its host starts, with what to start."""
    if not isinstance(job, LaunchingMatch):
        return []
    return [(seat, launch) for seat, launch in enumerate(job.launches) if launch is not None]


def connect_timeout(job: HostedMatch, usual: float) -> float:
    """How long ``job``'s bots have to be in: ``usual``, or more when its host starts a bot itself."""
    return usual if not launches_of(job) else max(usual, LAUNCH_CONNECT_TIMEOUT)


def cache_root(launch: SeatLaunch) -> Path:
    """Where this machine keeps its built bots for ``launch`` (see `SeatLaunch.cache`)."""
    if launch.cache is not None:
        wanted = Path(launch.cache)
        try:
            wanted.mkdir(parents=True, exist_ok=True)
            if os.access(wanted, os.W_OK):
                return wanted
        except OSError:
            pass
    return Path(tempfile.gettempdir()) / f"cellarena-bot-cache-{os.getuid()}"


class SeatBots:
    """Starts the submitted bots of the matches one lobby plays. ``hand(conn, ladder_id, seat)``
    seats a connection made for a bot; ``gave_up(ladder_id, seat, why)`` says one will not come."""

    def __init__(
        self,
        lobby: Lobby,
        hand: Callable[[Connection, int, int], None],
        gave_up: Callable[[int, int, str], None],
    ) -> None:
        self.lobby = lobby
        self.hand = hand
        self.gave_up = gave_up
        self._caches: dict[Path, BotCache] = {}

    def cache(self, launch: SeatLaunch) -> BotCache:
        root = cache_root(launch)
        if root not in self._caches:
            self._caches[root] = BotCache(root, hidden=tuple(Path(p) for p in launch.hidden))
        return self._caches[root]

    async def play(self, ladder_id: int, seat: int, launch: SeatLaunch, ended: trio.Event) -> None:
        """Build ``launch`` (from the cache), start it on a connection handed into its seat, and stop
        it once ``ended`` is set (its match is over or given up)."""
        try:
            folder = await self.cache(launch).prepare(
                launch.sha256, launch.kind, launch.archive, launch.build_limits,
                version=launch.version, name=launch.name,
            )  # fmt: skip
            program = BotProgram.from_folder(folder, name=launch.name, version=launch.version)
        except (PrepareError, ProgramError, OSError) as exc:
            self._lost(ladder_id, seat, launch, f"it cannot be built here: {exc}")
            return
        hidden = tuple(Path(p) for p in launch.hidden)
        view = python_view(launch.build_limits.python_packages, hidden) if launch.isolate else None
        ours, theirs = loopback_pair()
        conn = self.lobby.accept_handed(ours)
        if conn is None:
            theirs.close()
            return
        self.hand(conn, ladder_id, seat)
        try:
            proc = await start_bot(
                program.spec(view), "127.0.0.1", 0, None,
                limits=launch.limits, isolate=launch.isolate, connection=theirs,
            )  # fmt: skip
        except (OSError, IsolationError) as exc:
            conn.close("its bot could not be started")
            self._lost(ladder_id, seat, launch, f"it could not be started here: {exc}")
            return
        finally:
            theirs.close()  # the bot's now
        log.info("ladder match %d: started %s %s (pid %d)", ladder_id, launch.name, launch.version, proc.pid)
        await self._watch(proc, launch, ended)

    def _lost(self, ladder_id: int, seat: int, launch: SeatLaunch, why: str) -> None:
        """Its seat is lost: said in the worker's log, and in its private log, for its owner."""
        log.error("ladder match %d: %s %s forfeits: %s", ladder_id, launch.name, launch.version, why)
        path = _log_path(launch)
        if path is not None:
            with contextlib.suppress(OSError):
                path.write_text(f"[cellarena: {launch.name} {launch.version} forfeits this match: {why}]\n")
        self.gave_up(ladder_id, seat, why)

    async def _watch(self, proc: BotProcess, launch: SeatLaunch, ended: trio.Event) -> None:
        """Copy its output to its log and hold it to its limits until ``ended``, then stop it."""
        path = _log_path(launch)
        try:
            async with trio.open_nursery() as nursery:
                assert proc.stdout is not None
                nursery.start_soon(copy_log, proc.stdout, path or Path(os.devnull), LOG_LIMIT)
                nursery.start_soon(watch_limits, [proc], launch.limits)
                await ended.wait()
                with trio.CancelScope(shield=True):
                    await stop_bot(proc, patience=EXIT_WAIT)
        finally:
            if proc.returncode is None:
                with trio.CancelScope(shield=True):
                    await stop_bot(proc, patience=0.0)


def _log_path(launch: SeatLaunch) -> Path | None:
    """Its private log, if its folder is on this machine (the ladder's machine)."""
    path = None if launch.log is None else Path(launch.log)
    return path if path is not None and path.parent.is_dir() else None


def loopback_pair() -> tuple[socket.socket, socket.socket]:
    """Two ends of one TCP connection on 127.0.0.1 (the server's, the bot's), through a listener of
    its own that is gone at once: the kernel completes a loopback connection without waiting."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        theirs = socket.create_connection(listener.getsockname()[:2], timeout=5.0)
        try:
            ours, _ = listener.accept()
        except BaseException:
            theirs.close()
            raise
    theirs.settimeout(None)  # the bot gets it blocking, as a socket it made itself would be
    theirs.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    return ours, theirs
