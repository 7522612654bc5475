"""Why it ended, where people look (issue 27): `cellarena match` text and --json, a tournament's
standings and `cellarena results`; a bot that raises in on_tick and one that sleeps past its budget are
reported in the same words in a match and in a tournament; results databases made before causes
were kept still open, and their matches read "unknown"."""

from __future__ import annotations

import json
import sqlite3
import sys
from pathlib import Path
from typing import Any

import pytest
from bot_files import RAW_BOT, example_bot
from cellarena_cli import invoke, run_here

from cellarena.arena.results import TournamentResults
from cellarena.arena.schedule import Scheduled
from cellarena.arena.tournament_store import SCHEMA, MatchRecord, SeatRecord, Store, fingerprint

RAISER = """
from cellarena.sdk import Bot, run


class Raiser(Bot):
    def on_tick(self, view):
        raise ValueError("broken on purpose")


if __name__ == "__main__":
    raise SystemExit(run(Raiser))
"""
TICKS = 40


def _raiser(tmp_path: Path) -> str:
    path = tmp_path / "raiser.py"
    path.write_text(RAISER)
    return f"{sys.executable} {path}"


def _match(tmp_path: Path, *bots: str, extra: tuple[str, ...] = ()) -> tuple[int, dict, str]:
    args = ["match", "rezzo", "--max-ticks", str(TICKS), "--log-dir", str(tmp_path / "logs")]
    for bot in bots:
        args += ["--bot", bot]
    proc = run_here(*args, *extra, "--json")  # the bots are processes; `match` itself runs here
    return proc.returncode, json.loads(proc.stdout), proc.stderr


def _tournament(tmp_path: Path, *bots: str, extra: tuple[str, ...] = ()) -> dict:
    out = tmp_path / "cup"
    args = ["tournament", "rezzo", "--maps", "duel", "--rounds", "1", "--max-ticks", str(TICKS)]
    for bot in bots:
        args += ["--bot", bot]
    proc = run_here(*args, "--jobs", "1", "--out", str(out), *extra, "--json")  # as `_match`
    assert proc.returncode in (0, 3), proc.stderr
    code, results = invoke("results", str(out), "--json")  # in this process: a second of imports less
    assert code == 0, results
    data: dict = json.loads(results)
    return data


def test_a_bot_that_raises_is_invalid_in_the_same_words_in_a_match_and_a_tournament(tmp_path: Path) -> None:
    raiser, walker = f"raiser={_raiser(tmp_path)}", f"walker={example_bot('rezzo', 'random_walker')}"
    # A budget no busy machine misses: every answer is on time, so every one of the raiser's is invalid
    # (with the default budget, a traceback written on a loaded machine once made a late one).
    roomy = ("--budget-ms", "5000")
    code, match, _ = _match(tmp_path / "m", raiser, walker, extra=("--fast", *roomy))
    assert code == 0  # it played every tick: no forfeit, but every answer was invalid
    assert match["invalid"]["raiser"] == match["ticks"] and match["invalid"]["walker"] == 0
    assert match["causes"]["raiser"]["cause"] in ("tick_cap", "flag_at_base", "last_player_standing")
    log = Path(match["logs"]["raiser"]).read_text()
    assert log.count("Traceback (most recent call last)") == 1, log  # once, then a count
    assert f"{match['ticks']} invalid answers of its own" in log

    cup = _tournament(tmp_path / "t", raiser, walker, extra=roomy)
    seats = [s for m in cup["matches"] for s in m["seats"] if s["bot"] == "raiser"]
    assert seats and all(s["invalid"] > 0 and not s["forfeit"] for s in seats)
    standing = next(s for s in cup["standings"] if s["bot"] == "raiser")
    assert standing["invalid_rate"] == 1.0 and standing["crashes"] == 0
    # Every answer invalid: a failure all the same (issue 44), with its first exception.
    failed = [f for f in cup["failures"] if f["bot"] == "raiser"]
    assert len(failed) == len(seats) and all(f["what"].startswith("answered mostly invalid") for f in failed)
    assert all(f["exception"]["text"].startswith("on_tick raised ") for f in failed), failed


# Real time: a real bot process sleeps 80 ms past a real 20 ms budget; the other must answer within it.
@pytest.mark.realtime
def test_a_bot_that_sleeps_past_its_budget_is_unresponsive_in_a_match_and_a_tournament(
    tmp_path: Path,
) -> None:
    sleeper, walker = f"sleeper={RAW_BOT} delay:80", f"walker={example_bot('rezzo', 'random_walker')}"
    pacing = ("--fast", "--budget-ms", "20")
    code, match, _ = _match(tmp_path / "m", sleeper, walker, extra=pacing)
    assert code == 3 and match["forfeits"] == ["sleeper"]
    cause = match["causes"]["sleeper"]
    assert cause["cause"] == "unresponsive" and cause["ticks"] == 25
    assert "forfeits" in cause["text"] and "25 ticks in a row" in cause["text"]
    assert match["late_in_a_row"]["sleeper"]["ticks"] >= 25

    cup = _tournament(tmp_path / "t", sleeper, walker, extra=pacing)
    failures = [f for f in cup["failures"] if f["bot"] == "sleeper"]
    assert failures and all(f["cause"]["cause"] == "unresponsive" for f in failures)
    seats = [s for m in cup["matches"] for s in m["seats"] if s["bot"] == "sleeper"]
    assert all(s["cause"]["cause"] == "unresponsive" and s["forfeit"] for s in seats)


def test_match_text_says_why_and_warns_of_invalid_answers(tmp_path: Path) -> None:
    raiser, walker = f"raiser={_raiser(tmp_path)}", f"walker={example_bot('rezzo', 'random_walker')}"
    args = ["match", "rezzo", "--max-ticks", "20", "--fast", "--bot", raiser, "--bot", walker]
    proc = run_here(*args)
    assert proc.returncode == 0, proc.stderr
    assert "why: " in proc.stdout and "tick cap" in proc.stdout
    assert "raiser sent 20 invalid answers" in proc.stdout


def _old_database(path: Path, spec: dict) -> None:
    """A results database as cellarena wrote it before causes (and notes): seats without them."""
    old = SCHEMA.replace("    note TEXT,\n    cause TEXT,\n    bank_drawn_ms INTEGER,\n", "")
    assert "cause" not in old and "bank_drawn_ms" not in old
    db = sqlite3.connect(path)
    db.executescript(old)
    db.execute(
        "INSERT INTO tournament VALUES (1, ?, ?, '2026-01-01T00:00:00+00:00')",
        (fingerprint(spec), json.dumps(spec, sort_keys=True)),
    )
    db.execute(
        "INSERT INTO matches VALUES (0, 'k0', 0, 'duel', 1, 'a', 'last player standing', 9, 0.1, NULL, 'x')"
    )
    for seat, (bot, rank) in enumerate((("a", 1), ("b", 2))):
        db.execute("INSERT INTO seats VALUES (0, ?, ?, ?, 0, 0, 0, 0, 0, 0, NULL)", (seat, bot, rank))
    db.commit()
    db.close()


def test_a_results_database_from_before_causes_reads_unknown_then_gains_them(tmp_path: Path) -> None:
    spec = {"game": "rezzo", "bots": [["a", "x", None], ["b", "y", None]]}
    _old_database(tmp_path / "results.sqlite", spec)
    before = TournamentResults(tmp_path)  # read-only: no migration, the column is missing
    assert [s.cause_json()["cause"] for s in before.matches()[0].seats] == ["unknown", "unknown"]
    assert before.report()["standings"][0]["invalid_rate"] == 0.0
    assert before.report()["standings"][0]["bank_drawn_ms"] == 0  # no bank column: none drawn
    assert before.matches()[0].seats[0].bank_drawn_ms is None

    with Store(tmp_path / "results.sqlite", spec) as store:  # the migration
        cause = {"cause": "flag_at_base", "tick": 5, "text": "b is out at tick 5"}
        seats = (
            SeatRecord("a", 1, 0, 2, 0, False, False, 0, None),
            SeatRecord("b", 2, 1, 0, 0, False, False, 0, None, cause=cause, bank_drawn_ms=40),
        )
        store.commit(Scheduled(1, 0, "duel", ("a", "b"), 2), MatchRecord("a", "why", 9, 0.1, None, seats))
    after = TournamentResults(tmp_path)
    rows = after.matches()
    assert [s.cause_json()["cause"] for s in rows[0].seats] == ["unknown", "unknown"]  # history: unknown
    assert rows[1].seats[1].cause == cause
    assert after.report()["matches"][1]["seats"][1]["cause"]["text"] == "b is out at tick 5"
    assert [s.bank_drawn_ms for s in rows[0].seats + rows[1].seats] == [None, None, None, 40]


def test_the_ladders_match_and_bot_pages_and_json_carry_each_seats_cause(tmp_path: Path) -> None:
    from cellarena.arena.ladder.records import SeatResult
    from cellarena.arena.ladder.scoring.settlement import settle
    from cellarena.arena.ladder.store.ladder_store import LadderStore
    from cellarena.arena.ladder.web.public_pages import LadderSite, match_json

    with LadderStore(str(tmp_path / "ladder.sqlite")) as store:
        alice, _ = store.add_bot("alice", "rezzo")
        bob, _ = store.add_bot("bob", "rezzo")
        match_id = store.begin_match("rezzo", "duel", 1, [alice.id, bob.id])
        lost = {"cause": "unresponsive", "tick": 30, "ticks": 25, "text": "bob forfeits at tick 30: <late>"}
        won = {"cause": "last_player_standing", "tick": 30, "text": "alice is the last seat still playing"}
        seats = [SeatResult(1, cause=won), SeatResult(2, late=25, forfeit=True, cause=lost)]
        store.finish_match(match_id, seats, reason="every other seat disconnected", ticks=30, settle=settle)
        site = LadderSite(store, "rezzo")
        page = site.match_html(match_id)
        assert "bob forfeits at tick 30: &lt;late&gt;" in page and "<th>why</th>" in page  # escaped
        record = store.match(match_id)
        assert record is not None
        assert [s["cause"] for s in match_json(record)["seats"]] == [won, lost]
        assert "bob forfeits at tick 30" in site.bot_html("bob")
        recent = site.bot_json("bob")["recent"]
        assert recent[0]["seats"][1]["cause"]["cause"] == "unresponsive"


GAME_MATCHES = {
    "rezzo": (
        ["builder", "raider"],
        ["--max-ticks", "400"],
        {"flag_at_base", "last_player_standing", "tick_cap"},
    ),
    "cata": (["lookahead", "random_legal"], [], {"health_zero", "tick_cap"}),
    "cloth": (
        ["planner", "random_placer"],
        [],
        {"fell_behind", "score", "territory", "died_out", "tick_cap"},
    ),
    "colorblocks": (["greedy", "random_legal"], [], {"objective_captured", "tick_cap"}),
    "drop2df": (["planner", "passer"], [], {"score"}),
}


@pytest.mark.parametrize("game", sorted(GAME_MATCHES))
def test_every_games_match_says_why_in_json_and_its_replay_agrees(game: str, tmp_path: Path) -> None:
    from cellarena.server.replay import read_replay, verify

    bots, extra, words = GAME_MATCHES[game]
    args = ["match", game, "--fast", "--replay", str(tmp_path / "m.replay"), *extra]
    for i, bot in enumerate(bots):
        args += ["--bot", f"{chr(97 + i)}={example_bot(game, bot)}"]
    proc = run_here(*args, "--json")
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    names = sorted(out["ranks"])
    assert sorted(out["causes"]) == names
    for name in names:
        cause = out["causes"][name]
        assert cause["cause"] in words and cause["text"] and "{" not in cause["text"], cause
    replay = read_replay(tmp_path / "m.replay")
    assert verify(replay).ok and replay.events()
    stored = replay.causes()
    assert {replay.names[s]: c["cause"] for s, c in stored.items()} == {
        n: c["cause"] for n, c in out["causes"].items()
    }


FORFEITS = [
    ("crash", "exited", lambda c: c["status"] == 3),
    ("game:cata", "wrong_game", lambda c: c["asked"] == "cata" and c["game"] == "rezzo"),
    ("silent", "unresponsive", lambda c: c["ticks"] == 25),
]


@pytest.mark.parametrize(("mode", "word", "check"), FORFEITS)
def test_each_forfeit_is_named_by_its_cause(mode: str, word: str, check: Any, tmp_path: Path) -> None:
    bots = (f"bad={RAW_BOT} {mode}", f"good={RAW_BOT} random")
    code, match, _ = _match(tmp_path, *bots, extra=("--fast", "--budget-ms", "30", "--connect-timeout", "5"))
    assert code == 3 and "bad" in match["failed"]
    cause = match["causes"]["bad"]
    assert cause["cause"] == word and check(cause), cause
    assert cause["text"].startswith("bad forfeits"), cause
    assert match["causes"]["good"]["cause"] == "last_player_standing"


def test_a_bot_that_exits_says_its_last_log_line(tmp_path: Path) -> None:
    script = tmp_path / "dies.py"
    script.write_text(
        "import sys\nfrom cellarena.sdk import Bot, run\n\n"
        "class Dies(Bot):\n"
        "    def on_tick(self, view):\n"
        "        if view.tick > 3:\n"
        "            print('giving up: out of ideas', file=sys.stderr, flush=True)\n"
        "            sys.exit(7)\n"
        "        return 0\n\n"
        "raise SystemExit(run(Dies))\n"
    )
    code, match, _ = _match(
        tmp_path, f"dies={sys.executable} {script}", f"good={RAW_BOT} random", extra=("--fast",)
    )
    assert code == 3
    cause = match["causes"]["dies"]
    assert cause["cause"] == "exited" and cause["status"] == 7, cause
    assert cause["last_log_line"].endswith("giving up: out of ideas"), cause
    assert "exited with status 7" in cause["text"] and "giving up: out of ideas" in cause["text"]
    assert match["last_log_line"]["dies"].endswith("giving up: out of ideas")


def test_a_causes_sentence_fills_in_names_only() -> None:
    """Causes come from replay files too, which are untrusted: only {N} is filled in."""
    from cellarena.server.games.causes import sentence

    names = ["alice", "{0} bob"]
    assert sentence(1, {"cause": "x", "text": "{1} lost to {0}"}, names) == "{0} bob lost to alice"
    hostile = "{0:>999999999}{0.__class__}{7}{}"
    assert sentence(0, {"cause": "x", "text": hostile}, names) == "{0:>999999999}{0.__class__}seat 7{}"
    assert "unknown" in sentence(0, None, names)
