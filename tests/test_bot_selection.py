"""`cellarena tournament`'s bot selection, as a user types it: --bots-dir and --bot repeated and
combined, only bot entry points entered, --exclude, and a name used twice refused."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from bot_files import RAW_BOT, RAW_BOT_FILE
from cellarena_cli import refused, run_here

# A bot file that is a program: it runs the tests' raw bot as its main module.
BOT = f"""import runpy
import sys

if __name__ == "__main__":
    sys.argv = [{str(RAW_BOT_FILE)!r}, "random"]
    runpy.run_path({str(RAW_BOT_FILE)!r}, run_name="__main__")
"""


def _folders(tmp: Path) -> tuple[Path, Path]:
    one, two = tmp / "one", tmp / "two"
    one.mkdir()
    two.mkdir()
    (one / "alpha.py").write_text(BOT)
    (one / "draft_gamma.py").write_text(BOT)
    (one / "test_alpha.py").write_text(BOT)  # a test, even with a main block, is no bot
    (one / "conftest.py").write_text("")
    (one / "__init__.py").write_text("")
    (one / "helpers.py").write_text("def util() -> int:\n    return 1\n")  # imported, never started
    (one / "alpha_test.py").write_text(BOT)
    (two / "beta.py").write_text(BOT)
    return one, two


def test_dirs_and_bots_combine_and_only_entry_points_are_entered(tmp_path: Path) -> None:
    one, two = _folders(tmp_path)
    proc = run_here(
        "tournament", "rezzo", "--bots-dir", str(one), "--bots-dir", str(two), "--bot", f"solo={RAW_BOT}",
        "--exclude", "draft_*", "--maps", "duel", "--rounds", "1", "--max-ticks", "5", "--jobs", "1",
        "--out", str(tmp_path / "out"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert {s["bot"] for s in result["standings"]} == {"alpha", "beta", "solo"}


def test_exclude_matches_a_bot_name_too(tmp_path: Path) -> None:
    one, two = _folders(tmp_path)
    proc = run_here(
        "tournament", "rezzo", "--bots-dir", str(one), "--bots-dir", str(two), "--exclude", "alpha",
        "--exclude", "draft_gamma.py", "--bot", f"solo={RAW_BOT}", "--maps", "duel", "--rounds", "1",
        "--max-ticks", "5", "--jobs", "1", "--out", str(tmp_path / "out"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert {s["bot"] for s in json.loads(proc.stdout)["standings"]} == {"beta", "solo"}


def test_the_same_name_twice_is_refused_naming_both(tmp_path: Path) -> None:
    one, _ = _folders(tmp_path)
    proc = refused("tournament", "rezzo", "--bots-dir", str(one), "--bot", f"alpha={RAW_BOT}")
    assert "bot name 'alpha' is already used by" in proc.stderr and str(one / "alpha.py") in proc.stderr
    twice = refused("tournament", "rezzo", "--bots-dir", str(one), "--bots-dir", str(one))
    assert "'alpha' is already used" in twice.stderr


def test_a_folder_of_helpers_only_says_what_a_bot_is(tmp_path: Path) -> None:
    (tmp_path / "helpers.py").write_text("X = 1\n")
    proc = refused("tournament", "rezzo", "--bots-dir", str(tmp_path), "--bot", f"solo={RAW_BOT}")
    assert 'no bots found (expected .py files with an `if __name__ == "__main__":` block' in proc.stderr


def test_a_bot_added_to_a_results_folder_plays_only_its_matches(tmp_path: Path) -> None:
    out = tmp_path / "out"
    base = ["tournament", "rezzo", "--maps", "duel", "--rounds", "1", "--max-ticks", "5", "--jobs", "1"]
    bots = ["--bot", f"a={RAW_BOT} random", "--bot", f"b={RAW_BOT} random"]

    def run(*more: str) -> dict[str, object]:
        proc = run_here(*base, *bots, *more, "--out", str(out), "--json")
        assert proc.returncode == 0, proc.stderr
        result: dict[str, object] = json.loads(proc.stdout)
        return result

    first = run()
    assert (first["played"], first["total"]) == (2, 2)  # a-b in both seat orders
    con = sqlite3.connect(out / "results.sqlite")
    before = set(con.execute("SELECT key, seed, finished FROM matches"))
    con.close()
    grown = run("--bot", f"c={RAW_BOT} random")
    assert (grown["played"], grown["total"], grown["matches"]) == (4, 6, 6)  # only a-c and b-c
    con = sqlite3.connect(out / "results.sqlite")
    after = set(con.execute("SELECT key, seed, finished FROM matches"))
    con.close()
    assert before < after and len(after) == 6  # the first two untouched, still recorded
    again = run("--bot", f"c={RAW_BOT} random")
    assert again["played"] == 0
    standings = {s["bot"]: s["matches"] for s in again["standings"]}  # type: ignore[attr-defined]
    assert standings == {"a": 4, "b": 4, "c": 4}
    # A changed bot is still another tournament, refused.
    changed = refused(*base, "--bot", f"a={RAW_BOT} idle", *bots[2:], "--out", str(out))
    assert "holds a different tournament" in changed.stderr
