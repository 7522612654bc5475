"""`cellarena results RUNS_DIR` on a real tournament's folder, and the match folders named for people."""

from __future__ import annotations

import json
import re
import sqlite3
from pathlib import Path

from bot_files import RAW_BOT
from cellarena_cli import run_here

LONG = "a_bot_with_a_rather_long_name_that_tables_like_to_cut"


def test_results_prints_standings_head_to_head_and_failures(tmp_path: Path) -> None:
    out = tmp_path / "out"
    # In this process: see `run_here` on tournaments.
    proc = run_here(
        "tournament", "rezzo", "--bot", f"{LONG}={RAW_BOT} random", "--bot", f"plain={RAW_BOT} random",
        "--bot", f"crasher={RAW_BOT} crash", "--maps", "duel", "--rounds", "1", "--max-ticks", "10",
        "--jobs", "1", "--out", str(out), "--json",
    )  # fmt: skip
    assert proc.returncode in (0, 1), proc.stderr
    folders = sorted(p.name for p in (out / "matches").iterdir())
    assert len(folders) == 6
    assert f"0000-{LONG}-vs-crasher-duel" in folders and "0005-plain-vs-crasher-duel" in folders
    assert all(re.fullmatch(r"\d{4}-[\w.+=-]+-vs-[\w.+=-]+-duel", f) for f in folders), folders

    as_json = run_here("results", str(out), "--json")  # in this process: no start-up to pay
    assert as_json.returncode == 0, as_json.stderr
    data = json.loads(as_json.stdout)
    assert {s["bot"] for s in data["standings"]} == {LONG, "plain", "crasher"}
    h2h = data["head_to_head"]
    for a in h2h:
        for b, r in h2h[a].items():  # each pair met twice (both seat orders), seen from both sides
            assert r["wins"] + r["draws"] + r["losses"] == 2
            assert (r["wins"], r["draws"], r["losses"]) == (
                h2h[b][a]["losses"], h2h[b][a]["draws"], h2h[b][a]["wins"],
            )  # fmt: skip
    assert h2h["plain"]["crasher"]["wins"] == 2
    assert data["failures"] and {f["bot"] for f in data["failures"]} == {"crasher"}
    con = sqlite3.connect(out / "results.sqlite")
    crashed = con.execute("SELECT COUNT(*) FROM seats WHERE crashed OR forfeit").fetchone()[0]
    assert len(data["failures"]) == crashed

    text = run_here("results", str(out), env={"COLUMNS": "200"})
    assert text.returncode == 0, text.stderr
    assert LONG in text.stdout  # whole, not cut
    assert "head to head" in text.stdout
    assert "crasher crashed in" in text.stdout or "crasher forfeited (" in text.stdout


def test_results_of_a_folder_without_results_says_so(tmp_path: Path) -> None:
    proc = run_here("results", str(tmp_path))
    assert proc.returncode == 2
    assert f"{tmp_path / 'results.sqlite'}: no results here" in proc.stderr
