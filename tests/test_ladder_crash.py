"""The ladder store survives ``kill -9``: no result lost, none counted twice, cut-short matches void.

A separate process (tests/ladder_writer.py) plays matches into the database as fast as it can and is
SIGKILLed at a random moment, three times over, each time restarted as a ladder server restarts. After
each kill: every match the writer was told is finished is finished, whole; at most the one match it
was in the middle of is still running, and the next start voids exactly that; the ratings and the
standings equal a recount from the finished matches (tests/ladder_checks.py). On SQLite and on
PostgreSQL both.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from ladder_checks import assert_consistent, raw

from cellarena.arena.ladder.store.ladder_store import LadderStore

WRITER = Path(__file__).with_name("ladder_writer.py")
GAME = "rezzo"
ROUNDS = 3


def run_and_kill(target: str, seed: int, rng: random.Random) -> tuple[list[int], set[int]]:
    """Start the writer, let it finish 10 to 40 matches, SIGKILL it a moment later; what it voided at
    its start and the matches it reported finished."""
    proc = subprocess.Popen(
        [sys.executable, str(WRITER), target, str(seed)], stdout=subprocess.PIPE, text=True, bufsize=1
    )
    assert proc.stdout is not None
    finished: set[int] = set()
    voided: list[int] = []
    quota = rng.randint(10, 40)
    deadline = time.monotonic() + 60
    try:
        for line in proc.stdout:
            word, *ids = line.split()
            if word == "voided":
                voided = [int(i) for i in ids]
            elif word == "finished":
                finished.add(int(ids[0]))
            if len(finished) >= quota or time.monotonic() > deadline:
                break
        time.sleep(rng.uniform(0, 0.01))  # somewhere inside the next begin or finish, or between them
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=10)
        # Whole lines only (`ladder_writer.say` writes each at once): a cut one is not counted.
        finished |= {
            int(line.split()[1])
            for line in proc.stdout
            if line.startswith("finished ") and line.endswith("\n")
        }
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == -signal.SIGKILL, "the writer died before it was killed"
    assert len(finished) >= quota, "the writer was too slow to finish its matches"
    return voided, finished


def statuses(target: str) -> dict[int, str]:
    with raw(target) as db:
        return {int(i): s for i, s in db.query("SELECT id, status FROM matches")}


def test_kill_9_loses_no_result_and_counts_none_twice(ladder_db: str) -> None:
    rng = random.Random(1234)
    reported: set[int] = set()
    left_running: list[int] = []
    for round_ in range(ROUNDS):
        voided, finished = run_and_kill(ladder_db, round_, rng)
        assert voided == left_running, "the restart voided other matches than those cut short"
        reported |= finished
        status = statuses(ladder_db)
        assert all(status[i] == "finished" for i in reported), "a finished result was lost"
        left_running = sorted(i for i, s in status.items() if s == "running")
        assert len(left_running) <= 1, f"more than the one match in play is running: {left_running}"
        assert_consistent(ladder_db, GAME)
    with LadderStore(ladder_db) as store:
        assert [m.id for m in store.void_running()] == left_running
        table = store.standings(GAME)
    recount = assert_consistent(ladder_db, GAME)
    assert {s.bot for s in table} == set(recount) and sum(s.matches for s in table) > 0
    assert "running" not in statuses(ladder_db).values()
