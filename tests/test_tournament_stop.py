"""Stopping a tournament: the coordinator's stop flag reaches a worker's match inside trio, a match
stopped while a bot starts leaves no bot behind, an interrupted pool never waits without end, and
--strict hands out no match beyond those that run (issue 38: a --strict run once hung)."""

from __future__ import annotations

import concurrent.futures as cf
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import trio
from bot_files import RAW_BOT

from cellarena.arena import job as job_module
from cellarena.arena import runner
from cellarena.arena.job import CUT_SHORT, MatchInterruptedError, MatchJob, WrongGameError, run_job
from cellarena.arena.runner import LocalPool, TournamentSpec, run_tournament
from cellarena.server.bots import launcher, spawn
from cellarena.server.bots.launcher import BotSpec
from cellarena.server.play.match import TickSettings


def _children_running(marker: str) -> list[int]:
    """This process's children whose command line holds ``marker``, zombies left out."""
    me = str(os.getpid())
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        fields = stat[stat.rindex(")") + 2 :].split()  # after "pid (comm) ": state, ppid, ...
        if fields[1] == me and fields[0] != "Z" and marker in cmdline:
            found.append(int(entry.name))
    return found


# Real time: asserts the stop takes under 20 s of real time.
@pytest.mark.realtime
def test_a_stop_that_lands_while_a_bot_starts_stops_the_match_and_leaves_no_bot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ordering the SIGINT of the old interrupt could not survive, forced: the coordinator's flag
    is set while the match starts its second bot, and that start goes on in a match already
    cancelled. The first bot is stopped, the second never starts, and the job says why it ended."""
    stop = threading.Event()
    monkeypatch.setattr(job_module._Worker, "stop", stop)
    real_spawn = spawn.spawn
    starts: list[list[str]] = []

    async def spawn_after_the_stop(argv: list[str], **kw: Any) -> spawn.Child:
        starts.append(argv)
        if len(starts) == 2:
            stop.set()
            try:
                await trio.sleep(30)  # until the match's watcher sees the flag and cancels it
            except trio.Cancelled:
                return await real_spawn(argv, **kw)
            raise AssertionError("the stop flag did not reach the match within 30 s")
        return await real_spawn(argv, **kw)

    monkeypatch.setattr(launcher, "spawn", spawn_after_the_stop)
    marker = str(tmp_path)  # in each bot's command line: its pid file's folder
    job = MatchJob(
        index=3,
        key="r0/duel/a-b",
        game="rezzo",
        engine_config={"map": "duel", "max_ticks": 100_000},
        bots=(
            BotSpec("a", f"{RAW_BOT} forever {marker}"),
            BotSpec("b", f"{RAW_BOT} forever {marker}"),
        ),
        settings=TickSettings(tick_rate=10),
        seed=0,
        folder=str(tmp_path / "matches"),
        connect_timeout=15,
        wall_limit=120,
        map="duel",
    )
    started = time.monotonic()
    with pytest.raises(MatchInterruptedError, match="was interrupted"):
        run_job(job)
    assert time.monotonic() - started < 20  # the bots' stop, not the wall limit or a connect timeout
    assert len(starts) == 2
    spawn._thread().submit(lambda: None).result(timeout=30)  # any start asked of the forking thread is done
    assert _children_running(marker) == []
    [attempt] = (tmp_path / "matches").iterdir()
    assert attempt.name.endswith(CUT_SHORT)


def test_a_match_refused_after_the_stop_starts_no_bot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    stop = threading.Event()
    stop.set()
    monkeypatch.setattr(job_module._Worker, "stop", stop)
    job = MatchJob(
        index=0,
        key="r0/duel/a-b",
        game="rezzo",
        engine_config={"map": "duel"},
        bots=(BotSpec("a", "/nonexistent/a"), BotSpec("b", "/nonexistent/b")),
        settings=TickSettings(),
        seed=0,
        folder=str(tmp_path),
        connect_timeout=15,
        wall_limit=60,
    )
    with pytest.raises(job_module.JobRefusedError):
        run_job(job)
    assert list(tmp_path.iterdir()) == []


class _Recorder(cf.Executor):
    """Runs each job at once, in this thread, and counts the jobs handed out before each result is seen."""

    def __init__(self) -> None:
        self.submitted = 0
        self.interrupted = False

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        self.submitted += 1
        future: cf.Future[Any] = cf.Future()
        try:
            future.set_result(fn(*args, **kwargs))
        except Exception as exc:
            future.set_exception(exc)
        return future

    def interrupt(self) -> None:
        self.interrupted = True


@pytest.mark.parametrize(("strict", "handed_out"), [(True, 2), (False, 4)])
def test_with_strict_no_match_waits_in_a_worker_queue(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, strict: bool, handed_out: int
) -> None:
    """Without --strict each worker has a match queued behind the one it plays; with it, a bot of
    another game in the first matches stops the tournament before any other match is handed out."""

    def wrong_game(job: MatchJob) -> Any:
        raise WrongGameError(f"{job.key}: a bot asked for another game")

    monkeypatch.setattr(runner, "run_job", wrong_game)
    bots = tuple(BotSpec(name, "/nonexistent") for name in "abcd")
    spec = TournamentSpec("rezzo", bots, (("duel", {"map": "duel"}, 2),), 1, 0, TickSettings(), strict=strict)
    executor = _Recorder()
    with pytest.raises(WrongGameError):
        run_tournament(spec, tmp_path, executor=executor, jobs=2)
    assert executor.submitted == handed_out
    assert executor.interrupted


def _sleep_through_the_stop(seconds: float) -> None:
    time.sleep(seconds)  # a job that never looks at the stop flag


# Real time: asserts the pool's shutdown takes under 15 s of real time.
@pytest.mark.realtime
def test_an_interrupted_pool_kills_a_worker_that_does_not_stop(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(LocalPool, "STOP_GRACE", 1.0)
    pool = LocalPool(1)
    future = pool.submit(_sleep_through_the_stop, 120)
    [worker] = pool.worker_processes()
    pool.interrupt()
    started = time.monotonic()
    pool.shutdown()
    assert time.monotonic() - started < 15
    assert not worker.is_alive()
    with pytest.raises(cf.process.BrokenProcessPool):
        future.result(timeout=0)


def _environment_variable(name: str) -> str | None:
    return os.environ.get(name)


def test_a_pool_worker_takes_the_coordinators_environment_of_the_moment(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Workers are forked from a fork server started with the first pool, whose environment is the one
    of then; a bot's environment is its worker's, so each worker takes the coordinator's as it is."""
    with LocalPool(1) as pool:
        assert pool.submit(_environment_variable, "CELLARENA_TEST_MARK").result(timeout=60) is None
    monkeypatch.setenv("CELLARENA_TEST_MARK", "set after the fork server started")
    with LocalPool(1) as pool:
        got = pool.submit(_environment_variable, "CELLARENA_TEST_MARK").result(timeout=60)
    assert got == "set after the fork server started"
