"""The tournament coordinator: schedule, skip what is already recorded, run the rest on an executor.

Matches run on any `concurrent.futures.Executor`: a local process pool by default, or one backed by
a cluster (``docs/scaling.md``). The coordinator only submits `MatchJob`s and commits the
`MatchRecord`s that come back, one SQLite transaction each, in whatever order they finish. A match
that fails or is interrupted is simply not recorded; the next run with the same command plays it.
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import dataclasses
import logging
import multiprocessing.context
import os
import secrets
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

from cellarena.arena.job import CUT_SHORT, MatchJob, WrongGameError, mark_cut_short, run_job
from cellarena.arena.schedule import Scheduled, schedule
from cellarena.arena.tournament_store import MatchRecord, Standing, Store
from cellarena.server.bots.confinement import Limits
from cellarena.server.bots.launcher import BotSpec
from cellarena.server.play.match import TickSettings

log = logging.getLogger("cellarena.arena")


@dataclass(frozen=True)
class TournamentSpec:
    """Everything that defines a tournament: the same spec resumes, a different one is refused."""

    game: str
    bots: tuple[BotSpec, ...]
    #: (map or None, engine config, seats) per map the tournament plays.
    maps: tuple[tuple[str | None, dict[str, Any], int], ...]
    rounds: int
    seed: int
    settings: TickSettings
    connect_timeout: float = 15.0
    # How bots are confined, and whether a bot of another game stops everything: not part of what is
    # played, so left out of `to_json` (a resume may change them).
    limits: Limits = field(default_factory=Limits)
    isolate: bool = False
    strict: bool = False

    def to_json(self) -> dict[str, Any]:
        s = self.settings
        return {
            "game": self.game,
            "bots": [[b.name, b.command, b.cwd] for b in self.bots],
            "maps": [[m, c, n] for m, c, n in self.maps],
            "rounds": self.rounds,
            "seed": self.seed,
            # A first-tick budget only when given, so that results folders from before it resume.
            "pacing": [s.fast, s.tick_rate, s.budget_ms, s.max_missed_in_a_row]
            + ([s.first_budget_ms] if s.first_budget_ms is not None else [])
            + ([{"time_bank_ms": s.time_bank_ms}] if s.time_bank_ms else []),
        }

    def matches(self) -> list[Scheduled]:
        return schedule(
            [b.name for b in self.bots], [(m, n) for m, _, n in self.maps], self.rounds, self.seed
        )

    def wall_limit(self, config: dict[str, Any]) -> float:
        """A generous per-match time limit: every decision point at its full budget, plus start and stop.

        The game's plugin says how many decision points a match with ``config`` can last.
        """
        from cellarena.server.games import plugin

        ticks = plugin(self.game).max_decisions(config)
        per_tick = self.settings.budget + (0.0 if self.settings.fast else self.settings.period)
        first = max(0.0, self.settings.first_tick_budget_ms / 1000 - self.settings.budget)
        return 60.0 + 2.0 * (ticks * per_tick + first) + 2.0 * self.connect_timeout


@dataclass
class Progress:
    """Callbacks for a display: ``start(total, done)`` once, ``advance(record)`` per match."""

    start: Callable[[int, int], None] = lambda total, done: None
    advance: Callable[[Scheduled, MatchRecord | None], None] = lambda match, record: None


@dataclass
class RunReport:
    total: int
    already: int
    played: int
    failed: list[tuple[str, str]] = field(default_factory=list)
    standings: list[Standing] = field(default_factory=list)
    seconds: float = 0.0
    #: Sum of the matches' own durations as their workers measured them.
    match_seconds: float = 0.0
    #: Per bot, why its seats forfeited or crashed when the launcher knew (over a limit, could not
    #: start, asked for another game), with how many times.
    notes: dict[str, list[tuple[str, int]]] = field(default_factory=dict)
    #: Per bot, the causes of its forfeits (`cellarena match`'s words: unresponsive, exited...) and counts.
    forfeits: dict[str, list[tuple[str, int]]] = field(default_factory=dict)


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else (os.cpu_count() or 1)


@runtime_checkable
class Interruptible(Protocol):
    """An executor whose matches under way a stop can interrupt (`LocalPool`, `cluster.DaskExecutor`)."""

    def interrupt(self) -> None: ...


class _NotingContext(multiprocessing.context.ForkServerContext):
    """The forkserver context, noting every worker process the pool makes with it: a pool's processes
    by the one hook the executor documents (its ``mp_context``), not by its private attributes."""

    def __init__(self) -> None:
        super().__init__()
        self.processes: list[multiprocessing.context.ForkServerProcess] = []

    # typeshed says a class attribute; the executor only calls it, so a method that notes will do.
    def Process(self, *args: Any, **kwargs: Any) -> multiprocessing.context.ForkServerProcess:  # type: ignore[override]  # noqa: N802
        process = multiprocessing.context.ForkServerProcess(*args, **kwargs)
        self.processes.append(process)
        return process


#: What the fork server imports once, so that each worker forked from it starts without importing
#: (a spawned worker spent some 0.5 s of CPU importing these; a tournament starts one per job).
WORKER_PRELOAD = ["cellarena.arena.job"]


class LocalPool(cf.ProcessPoolExecutor):
    """A process pool whose matches can be interrupted: `interrupt()` stops the running matches (each
    worker's launcher stops its bots) and makes the workers refuse the jobs already handed to them.
    After an interrupt, `shutdown` waits at most `STOP_GRACE` seconds for the workers, then kills
    them (their bots die with them: the parent-death signal and the reaper)."""

    #: Seconds an interrupted pool's workers have to stop their matches; each needs a few at most.
    STOP_GRACE = 30.0

    def __init__(self, jobs: int, log_file: Path | None = None) -> None:
        # forkserver: workers start clean (no trio state, threads or open sockets of the coordinator
        # to inherit), forked from a server that imported `WORKER_PRELOAD` once. Each watches the
        # coordinator, to end with it (`worker_init`), and takes the coordinator's environment as it
        # is now, as a spawned worker would: the server's is the one it started with.
        context = self._context = _NotingContext()
        context.set_forkserver_preload(WORKER_PRELOAD)
        self._stop = context.Event()
        super().__init__(
            max_workers=jobs,
            mp_context=context,
            initializer=_start_worker,
            initargs=(os.getpid(), self._stop, None if log_file is None else str(log_file), dict(os.environ)),
        )

    def worker_processes(self) -> list[multiprocessing.context.ForkServerProcess]:
        """The worker processes started so far (a broken or idle pool starts more)."""
        return list(self._context.processes)

    def interrupt(self) -> None:
        # A flag, not a signal: each worker's match watches it from inside trio (`run_job`), where a
        # stop lands at a checkpoint; the workers ignore Ctrl-C's SIGINT.
        self._stop.set()

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if not (wait and self._stop.is_set()):
            super().shutdown(wait, cancel_futures=cancel_futures)
            return
        # Interrupted: no wait without a deadline. The base class forgets its threads and processes
        # once told to shut down, so its thread is taken first (typeshed mistypes the attribute).
        manager: threading.Thread | None = getattr(self, "_executor_manager_thread", None)
        processes = [p for p in self.worker_processes() if p.is_alive()]
        super().shutdown(wait=False, cancel_futures=True)
        if manager is None:
            return
        manager.join(self.STOP_GRACE)
        if manager.is_alive():
            log.error("workers did not stop their matches within %g s: killing them", self.STOP_GRACE)
            for process in processes:
                with contextlib.suppress(OSError):
                    process.kill()
            manager.join(self.STOP_GRACE)  # it sees the pool broken and ends its futures


#: The match servers' log of a tournament, in its --out folder (`local_pool`).
SERVER_LOG = "server.log"


def _start_worker(coordinator: int, stop: Any, log_file: str | None, environ: dict[str, str]) -> None:
    """`job.worker_init`, the coordinator's environment (its bots' too), and the worker's log lines (a
    hung bot's "closing ... unresponsive") into ``log_file``: on the terminal they would land over the
    progress bar, and the summary says it all."""
    from cellarena.arena.job import worker_init

    os.environ.clear()
    os.environ.update(environ)
    worker_init(coordinator, stop)
    if log_file is not None:
        handler = logging.FileHandler(log_file, encoding="utf-8")  # appends: one line is one write
        handler.setFormatter(logging.Formatter("%(asctime)s pid %(process)d %(levelname)s %(message)s"))
        root = logging.getLogger()
        root.addHandler(handler)
        root.setLevel(logging.INFO)


def local_pool(jobs: int, log_file: Path | None = None) -> LocalPool:
    """A `LocalPool` of ``jobs`` workers, logging into ``log_file`` (None: to stderr, as before)."""
    return LocalPool(jobs, log_file)


def run_tournament(
    spec: TournamentSpec,
    out: Path,
    *,
    executor: cf.Executor,
    jobs: int,
    progress: Progress | None = None,
    ship_files: bool = False,
) -> RunReport:
    """Play every match of ``spec`` not yet recorded under ``out``; return the standings.

    ``ship_files``: workers send their replays and logs back with the results (a cluster whose
    workers do not share ``out``) rather than writing them there themselves.
    """
    progress = progress or Progress()
    started = time.perf_counter()
    out.mkdir(parents=True, exist_ok=True)
    configs = {m: c for m, c, _ in spec.maps}
    matches = spec.matches()
    with Store(out / "results.sqlite", spec.to_json(), matches) as store:
        _mark_leftovers(out / "matches", store.replay_folders())
        done = store.finished_keys()
        todo = [m for m in matches if m.key not in done]
        report = RunReport(total=len(matches), already=len(matches) - len(todo), played=0)
        progress.start(len(matches), report.already)
        by_name = {b.name: b for b in spec.bots}

        def job(m: Scheduled) -> MatchJob:
            return MatchJob(
                index=m.index,
                key=m.key,
                game=spec.game,
                engine_config=configs[m.map],
                bots=tuple(by_name[b] for b in m.bots),
                settings=spec.settings,
                seed=m.seed,
                folder=str((out / "matches").resolve()),
                connect_timeout=spec.connect_timeout,
                wall_limit=spec.wall_limit(configs[m.map]),
                ship_files=ship_files,
                map=m.map,
                limits=spec.limits,
                isolate=spec.isolate,
                strict=spec.strict,
            )

        pending: dict[cf.Future[MatchRecord], Scheduled] = {}
        queue = iter(todo)
        # Keep the workers just busy: submitting everything at once would make Ctrl-C wait for (or
        # cancel) thousands of queued futures. With --strict, no match waits in a worker's queue: one
        # bot of another game stops everything, and a match handed out is one started for nothing.
        ahead = jobs if spec.strict else 2 * jobs
        try:
            for m in _take(queue, ahead):
                pending[executor.submit(run_job, job(m))] = m
            while pending:
                finished, _ = cf.wait(pending, return_when=cf.FIRST_COMPLETED)
                for future in finished:
                    m = pending.pop(future)
                    try:
                        record = future.result()
                    except WrongGameError:
                        raise  # --strict: every match of that bot would be refused: stop (below), say why
                    except Exception as exc:  # a lost worker or an abandoned match: retried next run
                        log.error("match %s failed and is not recorded: %s", m.key, exc)
                        report.failed.append((m.key, f"{type(exc).__name__}: {exc}"))
                        progress.advance(m, None)
                    else:
                        if record.files:
                            record = land_files(record, out / "matches", m.index)
                        store.commit(m, record)
                        report.played += 1
                        report.match_seconds += record.seconds
                        progress.advance(m, record)
                    for nxt in _take(queue, 1):
                        pending[executor.submit(run_job, job(nxt))] = nxt
        except BaseException:
            for future in pending:
                future.cancel()
            if isinstance(executor, Interruptible):
                executor.interrupt()
            raise
        report.standings = store.standings([b.name for b in spec.bots])
        report.notes = store.notes()
        report.forfeits = store.forfeit_causes()
    report.seconds = time.perf_counter() - started
    return report


def land_files(record: MatchRecord, matches: Path, index: int) -> MatchRecord:
    """Write the files a cluster worker shipped back under ``matches`` (their paths name the attempt's
    own folder, as a local worker makes it) and point the record at them."""
    folder = matches
    tops = {Path(relative).parts[0] for relative in record.files}
    if any((matches / top).exists() for top in tops):  # two workers' attempts named alike: keep both
        folder = matches / f"m{index:05d}-{secrets.token_hex(4)}"
    for relative, data in record.files.items():
        path = (folder / relative).resolve()
        if not path.is_relative_to(folder.resolve()):
            raise ValueError(f"a worker sent a file outside its match folder: {relative!r}")
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(data)

    def landed(relative: str | None) -> str | None:
        return None if relative is None else str(folder / relative)

    return dataclasses.replace(
        record,
        replay=landed(record.replay),
        seats=tuple(dataclasses.replace(s, log=landed(s.log)) for s in record.seats),
        files={},
    )


def _mark_leftovers(matches: Path, recorded: set[Path]) -> None:
    """Mark attempt folders that no recorded match points to: their match was cut short by a run that
    was killed (its workers could not mark them). Only one coordinator runs here (the store's lock)."""
    if not matches.is_dir():
        return
    for attempt in sorted(matches.iterdir()):
        if attempt.is_dir() and not attempt.name.endswith(CUT_SHORT) and attempt.resolve() not in recorded:
            mark_cut_short(
                attempt, "a match", "found unrecorded by a later run: the run playing it was killed"
            )


def _take(it: Iterator[Scheduled], n: int) -> list[Scheduled]:
    out = []
    for _ in range(n):
        try:
            out.append(next(it))
        except StopIteration:
            break
    return out
