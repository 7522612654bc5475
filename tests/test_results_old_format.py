"""A results folder written before match folders were named after their bots (``m00007-PID-HEX``)
still resumes, reads back and verifies: the database records every replay's and log's path."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from bot_files import RAW_BOT
from cellarena_cli import CLOCK_FREE, run_here

from cellarena.arena.results import TournamentResults

COMMAND = [
    "tournament", "rezzo", "--bot", f"a={RAW_BOT} random", "--bot", f"b={RAW_BOT} random",
    "--bot", f"c={RAW_BOT} random", "--maps", "duel", "--rounds", "1", "--max-ticks", "10", "--jobs", "1",
    *CLOCK_FREE,  # a late move on a busy machine would change a match played again
]  # fmt: skip


def _to_old_format(out: Path, forget: int) -> None:
    """Rename every match folder as the old runner named it and point the database at the new names;
    then forget the last ``forget`` matches, as a run killed before them would have."""
    con = sqlite3.connect(out / "results.sqlite")
    with con:
        for idx, replay in con.execute("SELECT idx, replay FROM matches").fetchall():
            new = Path(replay).parent
            old = new.with_name(f"m{idx:05d}-4242-{idx:06x}")
            new.rename(old)
            con.execute("UPDATE matches SET replay = ? WHERE idx = ?", (str(old / Path(replay).name), idx))
            for seat, log in con.execute("SELECT seat, log FROM seats WHERE match = ?", (idx,)).fetchall():
                moved = str(old / Path(log).name) if log else None
                con.execute("UPDATE seats SET log = ? WHERE match = ? AND seat = ?", (moved, idx, seat))
        last = [i for (i,) in con.execute("SELECT idx FROM matches ORDER BY idx DESC LIMIT ?", (forget,))]
        for table, column in (("ratings", "match"), ("seats", "match"), ("matches", "idx")):
            con.executemany(f"DELETE FROM {table} WHERE {column} = ?", [(i,) for i in last])
    con.close()


def test_an_old_format_results_folder_resumes_and_reads_back(tmp_path: Path) -> None:
    # In this process: see `run_here` on tournaments.
    out = tmp_path / "out"
    first = run_here(*COMMAND, "--out", str(out), "--json")
    assert first.returncode == 0, first.stderr
    whole = json.loads(first.stdout)
    assert whole["total"] == 6
    _to_old_format(out, forget=2)
    assert len(list((out / "matches").glob("m0*"))) == 6

    resumed = run_here(*COMMAND, "--out", str(out), "--json")
    assert resumed.returncode == 0, resumed.stderr
    report = json.loads(resumed.stdout)
    assert (report["played"], report["total"]) == (2, 6)
    assert report["standings"] == whole["standings"]  # as if never interrupted
    folders = sorted(p.name for p in (out / "matches").iterdir())
    assert len([f for f in folders if re.fullmatch(r"\d{4}-\w+-vs-\w+-duel", f)]) == 2  # the new runs

    results = TournamentResults(out)
    matches = results.matches()
    assert len(matches) == 6 and all(m.replay is not None and m.replay.is_file() for m in matches)
    assert sum("/m0" in str(m.replay) for m in matches) == 4  # the old folders, read where they are
    read = run_here("results", str(out), "--json")
    assert read.returncode == 0 and json.loads(read.stdout)["standings"] == whole["standings"]
    old = next(m.replay for m in matches if "/m0" in str(m.replay))
    verified = run_here("replay", "verify", str(old), "--json")
    assert verified.returncode == 0 and json.loads(verified.stdout)["ok"] is True
