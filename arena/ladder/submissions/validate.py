"""Validating a built bot: one unrated match against a house bot before it may play rated ones
(docs/ladder.md, "How submitted bots are built and run").

The match is played as `cellarena match` plays one (`cellarena.server.bots.launcher.play_match`): a
server on a free loopback port, each bot started by the one launcher, isolated, on the connection it
is handed. A submitted Python bot sees only the Python the host offers
(`cellarena.server.bots.python_view`). A bot that crashes, never says hello or times out fails, with
its seat's cause in the words every page uses (`cellarena.server.games.causes`) and its own output.

Each submitted bot's output is its owner's: kept per match under the ladder's folder
(`private_log`), shown to its owner and the host alone (`may_read_log`, which the pages call).
"""

from __future__ import annotations

import re
import shlex
import shutil
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from cellarena.arena.ladder.submissions.build import PYTHON_PACKAGES
from cellarena.server.bots.confinement import Limits
from cellarena.server.bots.launcher import BotSpec, play_match
from cellarena.server.bots.program import BotProgram
from cellarena.server.bots.python_view import python_view
from cellarena.server.cli.game_cli import engine_config
from cellarena.server.games import causes
from cellarena.server.play.match import TickSettings

#: Bytes of a submitted bot's log shown with its validation (the file keeps the launcher's cap).
SHOWN_LOG = 64 * 1024
#: How a validation match is paced: as fast as both bots answer, within the usual budget, and a
#: seat that misses 20 ticks in a row is hung (a bot that times out fails).
VALIDATION_PACE = TickSettings(fast=True, max_missed_in_a_row=20)


@dataclass(frozen=True)
class ValidationResult:
    """A validation match's verdict on the submitted bot: whether it may play rated matches, its
    seat's cause (`causes`), a sentence for its owner, its log (the tail, `SHOWN_LOG`) and where
    the whole of it is kept."""

    ok: bool
    cause: dict[str, Any]
    reason: str
    log: str
    log_path: Path
    seconds: float


def private_log(root: Path, bot: str, match: str) -> Path:
    """Where the ladder keeps submitted bot ``bot``'s own output of match ``match``, under ``root``
    (the ladder's folder): one folder per bot, one file per match."""
    return root / "private-logs" / _safe(bot) / f"{_safe(match)}.log"


def may_read_log(viewer: str | None, owner: str | None, *, viewer_is_host: bool = False) -> bool:
    """Whether the signed-in owner ``viewer`` (None: nobody signed in) may read the private log of a
    bot owned by ``owner`` (None: a bot of the host's): its owner and the host, nobody else."""
    if viewer_is_host:
        return True
    return viewer is not None and owner is not None and viewer == owner


async def validate(
    program: BotProgram,
    house_bot: BotSpec,
    game: str,
    *,
    log_root: Path,
    match: str = "validation",
    game_values: dict[str, Any] | None = None,
    limits: Limits | None = None,
    isolate: bool = True,
    python_packages: tuple[str, ...] = PYTHON_PACKAGES,
    hidden: tuple[Path, ...] = (),
    seed: int = 0,
    connect_timeout: float = 15.0,
) -> ValidationResult:
    """Play ``program`` (seat 0) against ``house_bot`` (seat 1) in one unrated match of ``game``
    (``game_values``: its options, e.g. ``{"max_ticks": 200}``); the program's log is kept at
    `private_log` (``log_root``, ``match``). Isolated, the program sees only its folder, the system
    and ``python_packages``, not the ``hidden`` folders (the ladder's own); a Python house bot without
    a view gets the same one."""
    view = python_view(python_packages, hidden) if isolate else None
    mine = program.spec(view)
    theirs = house_bot
    if view is not None and theirs.view is None and _is_python(theirs.command):
        theirs = replace(theirs, view=view)
    if theirs.name == mine.name:
        theirs = replace(theirs, name=f"house-{theirs.name}")
    started = time.monotonic()
    kept = private_log(log_root, program.name, match)
    folder = kept.parent / f".{_safe(match)}"  # the match's logs, until the bot's is kept
    try:
        launched = await play_match(
            game,
            engine_config(game, game_values or {}),
            [mine, theirs],
            VALIDATION_PACE,
            seed=seed,
            log_dir=folder,
            connect_timeout=connect_timeout,
            limits=limits,
            isolate=isolate,
        )
        launched.logs[mine.name].replace(kept)
    finally:
        shutil.rmtree(folder, ignore_errors=True)  # the house bot's log is the host's, kept elsewhere
    names = [mine.name, theirs.name]
    cause = launched.causes.get(0) or {"cause": causes.UNKNOWN}
    failed = causes.is_forfeit(cause)
    reason = causes.sentence(0, cause, names)
    if not failed:
        reason = f"{mine.name} played the validation match to its end ({reason})"
    return ValidationResult(not failed, cause, reason, _tail(kept), kept, time.monotonic() - started)


def _is_python(command: str) -> bool:
    argv = shlex.split(command)
    return bool(argv) and argv[0] in ("python", "python3")


def _tail(path: Path) -> str:
    try:
        with open(path, "rb") as f:
            f.seek(0, 2)
            f.seek(max(0, f.tell() - SHOWN_LOG))
            return f.read().decode("utf-8", "replace")
    except OSError:
        return ""


def _safe(name: str) -> str:
    return re.sub(r"[^A-Za-z0-9._-]", "_", name).lstrip(".") or "bot"
