"""`cellarena replay fork`: a new, unrated match from a replay's state at one of its ticks.

The state is rebuilt the one way every tool rebuilds one (`replay.rebuild_at`). The match is played
over the server as `cellarena match` plays one (`bots.launcher.play_match`), starting from that
engine (`play.start.MatchStart`): the seats given a bot are played by it, the others by their
recorded moves from the replay, in the server's own process (then they pass). The new replay's
header names its origin and carries the moves that led to the tick (`replay.fork_origin`), so it
verifies on its own (docs/replays.md, "Forking a match").
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellarena.server.bots.launcher import BotSpec, LaunchedMatch, play_match
from cellarena.server.play.match import TickSettings
from cellarena.server.play.start import MatchStart, Script
from cellarena.server.replay import (
    Rebuilt,
    Replay,
    ReplayError,
    ReplayWriter,
    TickError,
    fork_origin,
    read_replay,
    rebuild_at,
    verify,
)


class ForkError(ValueError):
    """What is wrong with a fork's request; ``option`` names the option at fault (or the PATH)."""

    def __init__(self, option: str, message: str) -> None:
        super().__init__(message)
        self.option = option


@dataclass(frozen=True)
class ForkPlan:
    """A checked fork: the origin, its state at ``tick``, and the bot of each seat given one."""

    replay: Replay
    #: The state at ``tick``; the fork's match plays on this very engine.
    rebuilt: Rebuilt
    bots: dict[int, BotSpec]
    tick: int

    def names(self) -> list[str]:
        """The fork's seat names: each new bot's, and the origin's for the seats that replay."""
        return [self.bots[s].name if s in self.bots else n for s, n in enumerate(self.replay.names)]

    def scripted(self) -> dict[int, Script]:
        """The seats without a bot, each playing its recorded moves from the tick on (then passing)."""
        return {
            s: recorded_moves(self.replay, s, self.tick)
            for s in range(self.replay.players)
            if s not in self.bots
        }


def recorded_moves(replay: Replay, seat: int, since: int) -> Script:
    """Seat ``seat``'s moves as recorded from tick ``since`` on: tick -> its action, None (it passes)
    where the replay has none (it was late, or the replay ends)."""
    moves = {t.tick: t.moves[seat] for t in replay.ticks if t.tick >= since and seat in t.moves}
    return moves.get


def parse_bot(text: str, players: int) -> tuple[int, BotSpec]:
    """``SEAT=COMMAND`` (the bot named ``fork-SEAT``) or ``SEAT:NAME=COMMAND``; ForkError for --bot."""
    head, sep, command = text.partition("=")
    seat_text, _, name = head.partition(":")
    if not sep or not (seat_text.strip().isascii() and seat_text.strip().isdigit()):
        raise ForkError("--bot", f'{text!r} is not SEAT=COMMAND (a seat number, e.g. 0="python my_bot.py")')
    seat = int(seat_text)
    if seat >= players:
        raise ForkError("--bot", f"{text!r}: the replay has no seat {seat}; its seats are 0..{players - 1}")
    try:
        spec = BotSpec.parse(f"{name.strip() or f'fork-{seat}'}={command}")
    except ValueError as exc:
        raise ForkError("--bot", str(exc)) from None
    program = spec.argv()[0]
    if shutil.which(program) is None and not (os.path.isfile(program) and os.access(program, os.X_OK)):
        raise ForkError("--bot", f"seat {seat}: cannot start {spec.command!r}: no program {program!r} found")
    return seat, spec


def plan_fork(path: str, tick: int, bots: tuple[str, ...]) -> ForkPlan:
    """Read and verify the origin and rebuild it at ``tick``; ForkError naming what is at fault."""
    if tick < 0:
        raise ForkError("--tick", f"the tick must be 0 or more, got {tick}")
    try:
        replay = read_replay(path)
        report = verify(replay)
    except ReplayError as exc:
        raise ForkError("PATH", str(exc)) from None
    if not report.ok:
        raise ForkError(
            "PATH",
            f"{path}: does not verify ({report.summary()}); a fork starts only from a replay that does",
        )
    given: dict[int, BotSpec] = {}
    for text in bots:
        seat, spec = parse_bot(text, replay.players)
        if seat in given:
            raise ForkError("--bot", f"seat {seat} is given two bots; give one --bot per seat")
        given[seat] = spec
    names = [spec.name for spec in given.values()]
    taken = [n for s, n in enumerate(replay.names) if s not in given]
    if clash := sorted({n for n in names if names.count(n) > 1 or n in taken}):
        raise ForkError(
            "--bot",
            f"bot names must differ from each other and the other seats'; repeated: {', '.join(clash)}",
        )
    try:
        rebuilt = rebuild_at(replay, tick)
    except TickError as exc:
        raise ForkError("--tick", str(exc)) from None
    except ReplayError as exc:
        raise ForkError("PATH", str(exc)) from None
    if (ended := rebuilt.engine.result()) is not None:
        raise ForkError(
            "--tick",
            f"{path}: the match is over at tick {tick} (it ended at tick {ended.ticks}); "
            "fork at an earlier tick",
        )
    return ForkPlan(replay, rebuilt, given, tick)


def settings_for(
    plan: ForkPlan, *, fast: bool, budget_ms: float | None, tick_rate: float | None
) -> TickSettings:
    """The fork's pacing: the game's own unless told otherwise."""
    engine = plan.rebuilt.engine
    return TickSettings(
        tick_rate=tick_rate or type(engine).default_tick_rate,
        budget_ms=budget_ms if budget_ms is not None else type(engine).default_budget_ms,
        fast=fast,
    )


async def play_fork(
    plan: ForkPlan,
    out: Path,
    settings: TickSettings,
    *,
    log_dir: Path,
    connect_timeout: float = 15.0,
) -> LaunchedMatch:
    """Play the fork over a server on loopback and write its replay to ``out``."""
    replay, rebuilt = plan.replay, plan.rebuilt
    origin = fork_origin(replay, rebuilt)

    def recorder(_number: int, engine: Any, names: list[str], seed: int) -> ReplayWriter:
        out.parent.mkdir(parents=True, exist_ok=True)
        return ReplayWriter(out, engine, seed=seed, names=names, events=True, forked_from=origin)

    names = plan.names()
    specs = [plan.bots.get(s, BotSpec(names[s], "(recorded moves)")) for s in range(replay.players)]
    return await play_match(
        replay.game,
        dict(replay.config),
        specs,
        settings,
        seed=replay.seed,
        log_dir=log_dir,
        connect_timeout=connect_timeout,
        recorder=recorder,
        start=MatchStart(lambda: rebuilt.engine, plan.scripted()),
    )


def origin_of(header: Mapping[str, Any]) -> dict[str, Any] | None:
    """A replay header's origin, for people: the file it was forked from, its digest and the tick."""
    origin = header.get("forked_from")
    if not isinstance(origin, dict):
        return None
    return {k: origin.get(k) for k in ("replay", "sha256", "tick")}
