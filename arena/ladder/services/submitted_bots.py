"""Submitted bots in rated play: the ladder starts a bot's live version for each match, through the
house bots' path (`house.HouseBots`), so they are offered to the matchmaker alike: when a bot has
waited ``--house-after`` seconds, the idle house *or submitted* bot whose rating is closest to its
starts, plays one match and exits, and is stopped once idle (docs/ladder.md, "How submitted bots are
built and run"). No submitted bot holds a connection while it is not needed.

What differs from a house bot is here: the candidates (the game's active bots with a live version,
read from the store every ``every`` seconds), the program (`BotProgram.spec` on the live version's
built folder, seeing under ``--isolate`` only it, the system and the host's Python packages), the
token and the log. A submitted bot's token is its owner's (they upload with it), so it is never
rotated: each launch gets a token of its own, kept in memory only, handed through the same pipe, which
admission takes for the bot's (`Admission.launch_token`) and which seats only a connection the
launch's own processes hold. Its output goes to its owner's private log (`validate.private_log`):
``launch-N`` while it starts, renamed ``match-ID`` once its match starts (the file stays open).

When its match is played by a worker (``--workers``, ``--cluster``), an isolated bot, which cannot
follow a redirect, is started again there (`SubmittedBots.seat_launch` says what to start): this
launch only held its place in the queue.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import trio

from cellarena.arena.ladder.hosting.seat_launch import SeatLaunch
from cellarena.arena.ladder.identity import tokens
from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError
from cellarena.arena.ladder.submissions.archives import ArchiveStore, ArchiveStoreError
from cellarena.arena.ladder.submissions.build import PYTHON_PACKAGES, BuildLimits
from cellarena.arena.ladder.submissions.validate import private_log
from cellarena.arena.ladder.submissions.versions import Version
from cellarena.server.bots.confinement import Limits
from cellarena.server.bots.launcher import BotSpec
from cellarena.server.bots.program import BotProgram, ProgramError
from cellarena.server.bots.python_view import python_view

log = logging.getLogger("cellarena.ladder")


@dataclass(frozen=True)
class Launch:
    """What `HouseBots` starts for a submitted bot: its program, its one-launch token, its log."""

    spec: BotSpec
    secret: str
    log: Path


def program_folder(version_folder: Path) -> Path | None:
    """The folder with the bot.toml in a built version's folder (the archive's one top folder, or
    the folder itself); None if there is none (the version was never built here)."""
    if (version_folder / "bot.toml").is_file():
        return version_folder
    found = [p for p in sorted(version_folder.glob("*/bot.toml")) if p.is_file()]
    return found[0].parent if len(found) == 1 else None


class SubmittedBots:
    """The game's bots with a live version, started for matches by `HouseBots` (its ``submitted``)."""

    def __init__(
        self,
        store: LadderStore,
        game: str,
        folder: Path,
        *,
        isolate: bool = False,
        python_packages: tuple[str, ...] = PYTHON_PACKAGES,
        every: float = 2.0,
        limits: Limits | None = None,
        build_limits: BuildLimits | None = None,
    ) -> None:
        self.store = store
        self.game = game
        #: The ladder's folder: ``versions/`` where the builder built them, private logs, hidden from them.
        self.folder = folder
        self.isolate = isolate
        self.python_packages = python_packages
        self.every = every
        #: A bot's limits and its build's, where its match is played when that is not here (`seat_launch`).
        self.limits = limits or Limits()
        self.build_limits = build_limits or BuildLimits(python_packages=python_packages)
        #: Bots with a live version, and that version, as of the last look at the store.
        self.live: dict[str, tuple[BotRecord, Version]] = {}
        #: Each running launch's token -> its bot's name (in memory only: never stored, never logged).
        self._tokens: dict[str, str] = {}
        #: Each bot's latest launch's log, while it has not played a match yet.
        self._logs: dict[str, Path] = {}
        self._counter = itertools.count(1)
        self._warned = False
        #: Called with (bot's name, new log path) when a launch's log is renamed for its match.
        self.on_log_moved: Callable[[str, Path], None] = lambda name, path: None

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Read the bots with a live version now, then every ``every`` seconds until cancelled."""
        await self.refresh()
        task_status.started()
        while True:
            await trio.sleep(self.every)
            await self.refresh()

    async def refresh(self) -> None:
        try:
            self.live = await trio.to_thread.run_sync(self._read)
        except LadderStoreError as exc:  # the database's watch says it is down; keep what we had
            log.debug("submitted bots: cannot read the live versions: %s", exc)

    def _read(self) -> dict[str, tuple[BotRecord, Version]]:
        live = {}
        for bot in self.store.list_bots(self.game):
            if bot.kind == "house" or not bot.active or bot.stopped is not None:
                continue
            version = self.store.versions.live_version(bot.name)
            if version is not None:
                live[bot.name] = (bot, version)
        return live

    def candidates(self) -> list[BotRecord]:
        """The bots the ladder may start for a waiting bot (`HouseBots` keeps out busy ones)."""
        return [bot for bot, _ in self.live.values()]

    def launch(self, bot: BotRecord) -> Launch | None:
        """What to start for ``bot``'s live version; None (logged) if it has none built here."""
        found = self.live.get(bot.name)
        if found is None:
            return None
        version = found[1]
        folder = program_folder(self.folder / "versions" / version.bot / str(version.number))
        try:
            if folder is None:
                raise ProgramError("its built folder is missing (it will be found after a rebuild)")
            program = BotProgram.from_folder(folder, name=bot.name, version=f"v{version.number}")
        except ProgramError as exc:
            log.error("cannot start %s: %s", version.label, exc)
            return None
        view = python_view(self.python_packages, (self.folder,)) if self.isolate else None
        secret = tokens.new_token().secret
        for old in [t for t, name in self._tokens.items() if name == bot.name]:
            del self._tokens[old]  # a bot's earlier launch is over (`HouseBots` starts one at a time)
        self._tokens[secret] = bot.name
        path = private_log(self.folder, bot.name, f"launch-{next(self._counter)}")
        path.parent.mkdir(parents=True, exist_ok=True)
        self._logs[bot.name] = path
        log.info("starting %s for a match", version.label)
        if not self.isolate and not self._warned:
            self._warned = True
            log.warning(
                "submitted bots run without --isolate: with your user's rights, the ladder's folder and "
                "the network in reach; serve with --isolate when owners upload code (docs/security.md)"
            )
        return Launch(program.spec(view), secret, path)

    def seat_launch(self, name: str, ladder_id: int) -> SeatLaunch | None:
        """What the process that plays match ``ladder_id`` elsewhere (a worker) starts for bot ``name``'s
        live version, its archive read from the archive store; None if it has none, or its archive
        cannot be read (logged): then its match is played here. Reads a file: call it in a thread."""
        found = self.live.get(name)
        if found is None:
            return None
        version = found[1]
        try:
            archive = ArchiveStore(self.folder / "archives").read(version.sha256, version.kind)
        except (ArchiveStoreError, ValueError) as exc:
            log.error("%s is played here: %s", version.label, exc)
            return None
        held = self._logs.pop(name, None)  # the log of the start that only held its place in the queue
        if held is not None:
            with contextlib.suppress(OSError):
                held.unlink()
        return SeatLaunch(
            name,
            f"v{version.number}",
            version.sha256,
            version.kind,
            archive,
            isolate=self.isolate,
            limits=self.limits,
            build_limits=self.build_limits,
            cache=str(self.folder / "bot-cache"),
            hidden=(str(self.folder),),
            log=str(private_log(self.folder, name, f"match-{ladder_id}")),
        )

    def token_of(self, secret: object) -> str | None:
        """The bot a launch token was given to (`Admission.launch_token`), or None."""
        return self._tokens.get(secret) if isinstance(secret, str) else None

    def match_started(self, ladder_id: int, names: list[str]) -> None:
        """A ladder match started with ``names``: a submitted bot's launch log becomes that match's."""
        for name in names:
            path = self._logs.pop(name, None)
            if path is None:
                continue
            moved = private_log(self.folder, name, f"match-{ladder_id}")
            try:
                path.replace(moved)  # its writer keeps the file open: the rest follows it
            except OSError as exc:
                log.error("cannot keep %s's log of match %d: %s", name, ladder_id, exc)
                continue
            self.on_log_moved(name, moved)
