"""One match as a self-contained job for an executor's worker process.

`MatchJob` carries everything the match needs (plain data, so it pickles to any worker, local or on
another machine) and `run_job` plays it with the same launcher as `cellarena match`, returning a
`MatchRecord`. Nothing here touches the results database: the coordinator commits what comes back.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import select
import signal
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from cellarena.arena.tournament_store import MatchRecord, SeatRecord, match_folder
from cellarena.server.bots.confinement import Limits
from cellarena.server.bots.launcher import BotSpec, LaunchedMatch, play_match
from cellarena.server.games import causes
from cellarena.server.play.match import TickSettings
from cellarena.server.replay import ReplayWriter
from cellarena.server.scratch_folders import owned_folder


@dataclass(frozen=True)
class MatchJob:
    index: int
    key: str
    game: str
    engine_config: dict[str, Any]
    bots: tuple[BotSpec, ...]
    settings: TickSettings
    seed: int
    #: Folder for this match's replay and bot logs (shared storage when workers are remote).
    folder: str
    connect_timeout: float
    #: Seconds after which the match is abandoned (a safety net; a match normally ends long before).
    wall_limit: float
    #: Play in a temporary folder and return the replay and logs in the record (`MatchRecord.files`),
    #: for workers on other machines that do not share ``folder``; the coordinator writes them there.
    ship_files: bool = False
    #: The map's name, for the match's folder name (None: the game's board).
    map: str | None = None
    #: What each bot may use (`cellarena.server.bots.confinement`), and whether it runs as a user of its own.
    limits: Limits = field(default_factory=Limits)
    isolate: bool = False
    #: A bot that asks for another game stops the tournament (`WrongGameError`) instead of forfeiting.
    strict: bool = False


class MatchAbandonedError(RuntimeError):
    """The match did not end within its wall-clock limit; it is not recorded and will be retried."""


class _Worker:
    """This process's state as a pool worker."""

    #: Whether it is playing a match right now (read by the parent watchdog).
    busy = threading.Event()
    #: Set by the coordinator when it is interrupted: the match playing here stops, and jobs already
    #: queued here are refused.
    stop: Any = None
    #: Set by the watchdog once the coordinator is gone: the match playing here stops.
    orphaned = threading.Event()


#: Seconds between two looks of a playing match at the stop flags: how soon an interrupt reaches it.
STOP_POLL = 0.1


class WrongGameError(RuntimeError):
    """With ``strict``, a bot asked to play another game: the tournament stops (nothing recorded).
    Without, that bot forfeits the match, with the reason in its seat's note."""


class JobRefusedError(RuntimeError):
    """The tournament was interrupted before this match started; it is not recorded."""


class MatchInterruptedError(RuntimeError):
    """The tournament was interrupted (or its coordinator died) while this match played: its bots were
    stopped and it is not recorded; the next run plays it."""


def worker_init(coordinator: int, stop: Any = None) -> None:
    """Set up a pool worker: it ignores Ctrl-C, always (the coordinator decides what stops, and sets
    ``stop``, which the match playing here watches: `run_job`); and it does not outlive the coordinator.

    Why not Ctrl-C's own SIGINT: raised as KeyboardInterrupt at whatever line runs when it lands, it
    can be lost (numpy swallows it in an attribute lookup, and the match plays on) or cut between a
    bot's start and its registration. A cancellation from inside trio lands at a checkpoint only.

    A coordinator killed with SIGKILL cannot tell its workers, and a pool worker waits for its next
    job forever. So a watchdog thread watches the coordinator: once it is gone, an idle worker exits,
    and a busy one stops its match (the launcher stops the bots) and exits.
    """
    _Worker.stop = stop
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    watch = threading.Thread(
        target=_watch_coordinator, args=(coordinator,), daemon=True, name="watch-coordinator"
    )
    watch.start()


def _watch_coordinator(coordinator: int) -> None:
    _wait_for_exit(coordinator)
    if _Worker.busy.is_set():
        _Worker.orphaned.set()
        deadline = time.monotonic() + 15.0  # the launcher's stop takes at most a few seconds
        while _Worker.busy.is_set() and time.monotonic() < deadline:
            time.sleep(0.1)
    os._exit(1)


def _wait_for_exit(pid: int) -> None:
    """Return once process ``pid`` has ended. Not the parent's pid: a worker's parent is the pool's
    fork server, which lives as long as any worker does. A pidfd names the very process (no pid reused
    since); without one (not Linux 5.3+), its pid is polled."""
    try:
        fd = os.pidfd_open(pid)
    except ProcessLookupError:
        return
    except (AttributeError, OSError):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            while True:
                os.kill(pid, 0)
                time.sleep(0.5)
        return
    try:
        select.select([fd], [], [])  # readable once the process has ended
    finally:
        os.close(fd)


def run_job(job: MatchJob) -> MatchRecord:
    """Play ``job``'s match to its end and report it. Runs in a worker process.

    A match stops when the coordinator sets the stop flag (its interrupt: Ctrl-C, or a bot of another
    game under --strict) or dies: the launcher stops the bots, and this job ends with
    `MatchInterruptedError`, unrecorded.
    """
    if _stop_requested():
        raise JobRefusedError(f"match {job.key} not started: the tournament was interrupted")
    if threading.current_thread() is not threading.main_thread():
        return _run(job)  # a thread pool's worker (a Dask cluster's): no watchdog, no pool's flags
    _Worker.busy.set()
    try:
        return _run(job)
    finally:
        _Worker.busy.clear()


def _stop_requested() -> bool:
    return _Worker.orphaned.is_set() or (_Worker.stop is not None and _Worker.stop.is_set())


def _run(job: MatchJob) -> MatchRecord:
    if not job.ship_files:
        return _play(job, Path(job.folder))
    with owned_folder("cellarena-job-") as tmp:
        record = _play(job, Path(tmp))
        # Paths relative to the match's folder, with the bytes; the coordinator lands them.
        files = {}
        for path in [record.replay, *(s.log for s in record.seats)]:
            if path is not None and Path(path).is_file():
                files[str(Path(path).relative_to(tmp))] = Path(path).read_bytes()
        return dataclasses.replace(
            record,
            replay=None if record.replay is None else str(Path(record.replay).relative_to(tmp)),
            seats=tuple(
                dataclasses.replace(s, log=None if s.log is None else str(Path(s.log).relative_to(tmp)))
                for s in record.seats
            ),
            files=files,
        )


def _play(job: MatchJob, root: Path) -> MatchRecord:
    started = time.perf_counter()
    # Each attempt writes files of its own, so a retried match never collides with an abandoned one.
    folder = match_folder(root, job.index, [b.name for b in job.bots], job.map)
    replay = folder / "match.replay"

    def recorder(_number: int, engine: Any, names: list[str], seed: int) -> ReplayWriter:
        return ReplayWriter(
            replay, engine, seed=seed, names=names, extra={"tournament_key": job.key}, events=True
        )

    interrupted = False

    async def stop_when_asked(scope: trio.CancelScope) -> None:
        nonlocal interrupted
        while not _stop_requested():
            await trio.sleep(STOP_POLL)
        interrupted = True
        scope.cancel()  # play_match stops its bots, shielded, wherever it was

    async def main() -> LaunchedMatch | None:
        launched = None
        with trio.move_on_after(job.wall_limit):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop_when_asked, nursery.cancel_scope)
                launched = await play_match(
                    job.game,
                    job.engine_config,
                    list(job.bots),
                    job.settings,
                    seed=job.seed,
                    log_dir=folder,
                    connect_timeout=job.connect_timeout,
                    recorder=recorder,
                    limits=job.limits,
                    isolate=job.isolate,
                )
                nursery.cancel_scope.cancel()  # the match is over: stop watching the flags
        return launched

    try:
        launched = trio.run(main)
        if interrupted:
            raise MatchInterruptedError(f"match {job.key} was stopped: the tournament was interrupted")
        if launched is None:
            raise MatchAbandonedError(f"match {job.key} did not end within {job.wall_limit:.0f} s")
        return _record(job, launched, replay, started)
    except BaseException as exc:
        mark_cut_short(folder, f"match {job.key}", f"{type(exc).__name__}: {exc}" if str(exc) else repr(exc))
        raise


#: The suffix of an attempt folder whose match recorded nothing.
CUT_SHORT = "-cut-short"


def mark_cut_short(folder: Path, what: str, why: str) -> None:
    """Rename an attempt that recorded nothing to ``...-cut-short``, with a note saying why, so that
    nobody takes its partial replay and logs for a result (the next run plays the match anew)."""
    with contextlib.suppress(OSError):
        (folder / "CUT-SHORT.txt").write_text(
            f"This attempt of {what} was cut short ({why}). It is not in the results; running the "
            "same tournament command again plays the match anew in another folder.\n"
        )
        folder.rename(folder.with_name(folder.name + CUT_SHORT))


def _with_sentence(seat: int, cause: dict[str, Any] | None, names: list[str]) -> dict[str, Any] | None:
    """A seat's cause as stored: its sentence made with the bots' names (the results need no replay)."""
    from cellarena.server.games.causes import sentence

    return None if cause is None else {**cause, "text": sentence(seat, cause, names)}


def _record(job: MatchJob, launched: LaunchedMatch, replay: Path, started: float) -> MatchRecord:
    """The record of a match that ended, with a note per seat that forfeited for a known reason."""
    notes = dict(launched.stopped)
    for name, refusal in launched.refused.items():
        if refusal.game != job.game:
            bot = next(b for b in job.bots if b.name == name)
            if job.strict:
                raise WrongGameError(
                    f"bot {name!r} ({bot.command}) asked to play {refusal.game!r}, but this tournament "
                    f"plays {job.game!r}: keep only {job.game} bots in the bots folder (or rename this one's "
                    "file or folder to start with '_')"
                )
            notes[name] = f"asked to play {refusal.game!r}, not {job.game!r}"
        else:
            notes.setdefault(name, f"refused by the server: {refusal.code}: {refusal.message}")
    for seat, cause in launched.causes.items():
        if cause.get("cause") == causes.NEVER_CONNECTED and cause.get("detail"):
            # Given up at the connect timeout (or it could not start, noted already): say which.
            notes.setdefault(job.bots[seat].name, f"never took its seat: {cause['detail']}")
    outcome = launched.outcome
    seats = []
    for seat, bot in enumerate(job.bots):
        forfeit = seat in outcome.forfeits
        code = launched.exit_codes.get(bot.name)
        seats.append(
            SeatRecord(
                bot=bot.name,
                rank=outcome.result.ranks[seat],
                late=outcome.late[seat],
                invalid=outcome.invalid[seat],
                illegal=outcome.illegal[seat],
                forfeit=forfeit,
                # Exit statuses below zero are our own stop signal to a bot slow to exit; not a crash.
                crashed=forfeit or code is None or code > 0,
                exit_code=code,
                log=str(launched.logs[bot.name]),
                note=notes.get(bot.name),
                cause=_with_sentence(seat, launched.causes.get(seat), [b.name for b in job.bots]),
                bank_drawn_ms=None if outcome.bank_drawn_ms is None else outcome.bank_drawn_ms[seat],
            )
        )
    winner = outcome.result.winner
    return MatchRecord(
        winner=None if winner is None else job.bots[winner].name,
        reason=outcome.result.reason,
        ticks=outcome.ticks,
        seconds=time.perf_counter() - started,
        replay=str(replay),
        seats=tuple(seats),
    )
