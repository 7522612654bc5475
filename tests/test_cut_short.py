"""What is cut short says so: a full disk under the results, an attempt that recorded nothing, a gzip
replay cut at any byte."""

from __future__ import annotations

import gzip
from pathlib import Path
from typing import Any

import pytest
import trio
from bot_files import RAW_BOT

from cellarena.arena.job import MatchAbandonedError, MatchJob, run_job
from cellarena.arena.schedule import schedule
from cellarena.arena.tournament_store import MatchRecord, SeatRecord, Store, StoreError
from cellarena.server.bots.launcher import BotSpec, play_match
from cellarena.server.play.match import TickSettings
from cellarena.server.replay import ReplayError, ReplayWriter, read_replay, verify

SPEC = {"game": "rezzo", "bots": [["a", "x", None], ["b", "y", None]], "rounds": 1}


def test_a_full_disk_under_the_results_says_so(tmp_path: Path) -> None:
    matches = schedule(["a", "b"], [("duel", 2)], rounds=40, seed=0)
    with Store(tmp_path / "results.sqlite", SPEC) as store:
        # The database may not grow past its size now: SQLite's "disk is full", as on a full disk.
        pages = store._db.execute("PRAGMA page_count").fetchone()[0]
        store._db.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(StoreError) as caught:
            for m in matches:
                seats = tuple(
                    SeatRecord(b, 1 + i, 0, 0, 0, False, False, 0, "x" * 2000) for i, b in enumerate(m.bots)
                )
                store.commit(m, MatchRecord(m.bots[0], "test", 10, 0.1, "y" * 2000, seats))
    message = str(caught.value)
    assert "no space left on device" in message and "cannot rollback" not in message
    assert "run the same command again to resume" in message


def test_an_attempt_that_recorded_nothing_is_marked_cut_short(tmp_path: Path) -> None:
    job = MatchJob(
        index=7,
        key="r0/duel/a-b",
        game="rezzo",
        engine_config={"map": "duel", "max_ticks": 100_000},
        bots=(BotSpec("a", f"{RAW_BOT} forever"), BotSpec("b", f"{RAW_BOT} forever")),
        settings=TickSettings(tick_rate=10),
        seed=0,
        folder=str(tmp_path),
        connect_timeout=5,
        wall_limit=1.5,
        map="duel",
    )
    with pytest.raises(MatchAbandonedError):
        run_job(job)
    [attempt] = list(tmp_path.iterdir())
    assert attempt.name == "0007-a-vs-b-duel-cut-short"
    note = (attempt / "CUT-SHORT.txt").read_text()
    assert "r0/duel/a-b was cut short (MatchAbandonedError" in note and "not in the results" in note


@pytest.fixture(scope="module")
def gz_replay(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    folder = tmp_path_factory.mktemp("replay")
    path = folder / "m.replay"

    def recorder(_n: int, engine: Any, names: list[str], seed: int) -> ReplayWriter:
        return ReplayWriter(path, engine, seed=seed, names=names)

    trio.run(
        lambda: play_match(
            "rezzo",
            {"map": "duel", "max_ticks": 20},
            [BotSpec("a", RAW_BOT), BotSpec("b", RAW_BOT)],
            TickSettings(fast=True, budget_ms=2000),
            seed=0,
            log_dir=folder,
            recorder=recorder,
        )
    )
    return gzip.compress(path.read_bytes())


def test_a_gzip_replay_cut_at_any_byte_is_reported_as_cut(gz_replay: bytes, tmp_path: Path) -> None:
    whole = tmp_path / "whole.replay.gz"
    whole.write_bytes(gz_replay)
    assert verify(read_replay(whole)).complete
    cut = tmp_path / "cut.replay.gz"
    silent = []
    for n in range(2, len(gz_replay)):  # from the gzip magic on: one byte is not known for gzip
        cut.write_bytes(gz_replay[:n])
        try:
            report = verify(read_replay(cut))
        except ReplayError as exc:
            said = str(exc)
        else:
            said = "complete" if report.complete else report.incomplete_reason
        if "cut off" not in said:
            silent.append((n, said))
    assert silent == []


def test_a_later_run_marks_the_attempts_a_killed_run_left(tmp_path: Path) -> None:
    from cellarena.arena.runner import _mark_leftovers

    matches = tmp_path / "matches"
    recorded, killed = matches / "m00000-11-aaaaaa", matches / "m00001-12-bbbbbb"
    for folder in (recorded, killed):
        folder.mkdir(parents=True)
        (folder / "match.replay").write_bytes(b"partial")
    _mark_leftovers(matches, {recorded.resolve()})
    assert sorted(p.name for p in matches.iterdir()) == ["m00000-11-aaaaaa", "m00001-12-bbbbbb-cut-short"]
    assert (
        "the run playing it was killed"
        in (matches / "m00001-12-bbbbbb-cut-short" / "CUT-SHORT.txt").read_text()
    )
