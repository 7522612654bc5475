"""One vocabulary (issue 44): one scripted match, said by `cellarena match`, a tournament's end,
`cellarena results` and the web player's data in the same words, with the same counts.

The match: a bot whose on_tick raises every tick (tests/bots/raiser.py) against one that answers two
ticks and exits (raw_bot.py crash), on Rezzo's duel map with a budget no busy machine misses, so it
plays the same way each time: the second bot forfeits as ``exited`` at tick 3, the first is the last
one standing with 3 invalid answers, a failure by the rule of `words.mostly_invalid`.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
from pathlib import Path
from typing import Any

import pytest
from bot_files import RAW_BOT, ROOT
from cellarena_cli import invoke, run_here, start_cellarena

from cellarena.server.games import causes, words

RAISER = f"python {shlex.quote(str(ROOT / 'tests' / 'bots' / 'raiser.py'))}"
BOTS = ("--bot", f"raiser={RAISER}", "--bot", f"crasher={RAW_BOT} crash")
PACE = ("--max-ticks", "20", "--budget-ms", "1000")
FIRST = "on_tick raised ZeroDivisionError: no plan for tick 1"
#: "1 invalid answers" and the like: a count of one with a plural noun.
WRONG_PLURAL = re.compile(
    r"\b1 (?:late|invalid|illegal) (?:answers|moves)\b|\b1 (?:ticks|matches|forfeits|failures)\b"
)


@pytest.fixture(scope="module")
def played(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """The match played by `match` and by a tournament (both seat orders), and what each says."""
    root = tmp_path_factory.mktemp("vocabulary")
    out = root / "tournament"
    # Both at once: each mostly waits for its bots to start. The tournament is a process (its log
    # lines, which a command run here would give pytest's capture, are checked); the match runs here.
    started = start_cellarena(
        "tournament", "rezzo", *BOTS, "--maps", "duel", *PACE, "--jobs", "1", "--out", str(out)
    )  # fmt: skip
    match = run_here(
        "match", "rezzo", *BOTS, "--map", "duel", "--fast", *PACE, "--replay", str(root / "m.replay"),
        "--log-dir", str(root / "logs"), "--json",
    )  # fmt: skip
    stdout, stderr = started.communicate(timeout=240)
    tournament = subprocess.CompletedProcess(started.args, started.returncode, stdout, stderr)
    assert match.returncode == 3, match.stderr  # a seat failed: the crasher
    assert tournament.returncode == 0, tournament.stderr
    code, results = invoke("results", str(out), "--json")  # in this process: no start-up to pay
    assert code == 0, results
    code, text = invoke("results", str(out))
    assert code == 0, text
    return {
        "match": json.loads(match.stdout),
        "match_replay": root / "m.replay",
        "out": out,
        "tournament": tournament,
        "results": json.loads(results),
        "results_text": text,
    }


def _player_end(replay: Path) -> dict[str, Any]:
    """The last frame the web player gets for ``replay`` (its owner's view: drawings and errors)."""
    from cellarena.server.replay import read_replay
    from cellarena.server.web.timeline import Timeline

    timeline = Timeline(read_replay(replay))
    frames = json.loads(timeline.chunk(0, 1000))
    return {"meta": timeline.meta(), "frames": frames}


def _said(c: dict[str, Any]) -> tuple[Any, Any, Any]:
    return c["cause"], c.get("tick"), c["text"]


def test_match_results_and_the_player_say_the_same_of_one_match(played: dict[str, Any]) -> None:
    m, r = played["match"], played["results"]
    first = next(x for x in r["matches"] if x["match"] == "r1|duel|raiser|crasher")
    seats = {s["bot"]: s for s in first["seats"]}
    player = _player_end(Path(first_replay(played)))
    shown = player["meta"]["result"]
    for seat, bot in enumerate(("raiser", "crasher")):
        on_page = shown["causes"].get(seat) or shown["causes"][str(seat)]
        assert _said(m["causes"][bot]) == _said(seats[bot]["cause"]) == _said(on_page)
        for count in words.COUNTS:  # late, invalid, illegal: one name, one number everywhere
            assert m[count][bot] == seats[bot][count] == player["frames"][-1]["totals"][count][seat], count
    assert m["causes"]["crasher"]["cause"] == causes.EXITED and m["causes"]["crasher"]["tick"] == 3
    assert m["invalid"]["raiser"] == 3 and m["ticks"] == first["ticks"] == 4
    # Its process exited (the launcher says so at the match's end): not "disconnected".
    assert m["reason"] == first["reason"] == shown["reason"] == words.ONE_LEFT


def first_replay(played: dict[str, Any]) -> str:
    failures = [f for f in played["results"]["failures"] if f["match"] == "r1|duel|raiser|crasher"]
    return failures[0]["replay"]


def test_the_raising_bot_is_among_the_failures_with_its_log_and_first_exception(
    played: dict[str, Any],
) -> None:
    """The issue's "done when": named among the failures, its log path and its exception, in
    `results` and at the tournament's end alike."""
    failures = played["results"]["failures"]
    raiser = [f for f in failures if f["bot"] == "raiser"]
    assert len(raiser) == 2  # both seat orders
    for f in raiser:
        assert f["what"] == "answered mostly invalid (3 invalid answers in 4 ticks)"
        assert f["exception"] == {"tick": 1, "text": FIRST}
        assert Path(f["log"]).is_file() and FIRST in Path(f["log"]).read_text()
    crasher = [f for f in failures if f["bot"] == "crasher"]
    assert [f["what"] for f in crasher] == ["forfeited (exited)"] * 2
    end = played["tournament"].stdout
    said = f"2 failures; first exception at tick 1: {FIRST}; log: {raiser[0]['log']}"
    assert said in end and said in played["results_text"]
    assert (
        "raiser answered mostly invalid (3 invalid answers in 4 ticks) in r1|duel|raiser|crasher"
        in (played["results_text"])
    )


def test_the_tournament_end_says_why_as_results_does_and_names_it(played: dict[str, Any]) -> None:
    end, out = played["tournament"].stdout, played["out"]
    summary = end[end.index("why, per bot") :].splitlines()
    listed = played["results_text"]
    assert all(line in listed.splitlines() for line in summary[:5]), (summary, listed)
    assert "  raiser: won 2 (last_player_standing 2); 6 invalid answers in 8 ticks" in summary
    assert "  crasher: lost 2 (exited 2); 2 forfeits (exited 2)" in summary
    assert f"cellarena results {out}" in end
    # The match servers' lines go to their log, never over the progress bar.
    assert "crasher forfeits at tick 3" in (out / "server.log").read_text()
    assert "forfeits at tick" not in played["tournament"].stderr
    for text in (end, listed, played["tournament"].stderr):
        assert not WRONG_PLURAL.search(text), WRONG_PLURAL.search(text)


def test_the_player_shows_the_exception_where_it_happened_to_its_owner_only(played: dict[str, Any]) -> None:
    from cellarena.arena.why import first_exception
    from cellarena.server.replay import read_replay, strip_debug_bytes
    from cellarena.server.web.timeline import Timeline

    path = played["match_replay"]
    frames = _player_end(path)["frames"]
    raised = [(f["tick"], f["debug"]["0"]["error"]) for f in frames if "0" in (f.get("debug") or {})]
    assert raised[0] == (1, FIRST) and [t for t, _ in raised] == [1, 2, 3]
    public = json.loads(Timeline(read_replay(path), debug=False).chunk(0, 1000))
    assert not any(f.get("debug") for f in public)  # a ladder's public pages
    # A bot whose log names no exception: its answers' errors say it (a failure's "first exception").
    assert first_exception(path, 0, None) == {"tick": 1, "text": FIRST}
    assert first_exception(path, 1, None) is None and first_exception(path, 0, None, invalid=0) is None
    stripped, count = strip_debug_bytes(path.read_bytes())
    assert count == 3 and b"ZeroDivisionError" not in stripped  # public replays and exports


def test_the_players_words_are_the_servers() -> None:
    static = ROOT / "server" / "web" / "static"
    found = re.search(
        r"const FORFEITS = new Set\(\[([^\]]*)\]\)", (static / "games" / "rezzo.js").read_text()
    )
    assert found and set(json.loads(f"[{found.group(1)}]")) == causes.FORFEITS
    player = (static / "player.js").read_text()
    assert all(f'title: "{meaning}"' in player for meaning in words.COUNTS.values())


def test_counts_are_said_with_their_plural_right() -> None:
    assert words.counted("invalid", 1) == "1 invalid answer"
    assert words.counted("invalid", 0) == "0 invalid answers"
    assert words.counted("late", 25) == "25 late answers"
    assert words.counted("illegal", 1) == "1 illegal move"
    assert words.mostly_invalid(3, 4) and not words.mostly_invalid(2, 4) and not words.mostly_invalid(0, 0)


def test_a_hung_bot_is_late_exactly_as_often_as_the_rule_says(tmp_path: Path) -> None:
    """`late 26` for a "25 in a row" rule was the forfeit's own tick counted late: no more."""
    proc = run_here(
        "match", "rezzo", "--bot", f"steady={RAW_BOT} random", "--bot", f"hung={RAW_BOT} silent",
        "--map", "duel", "--fast", "--budget-ms", "100", "--max-late-in-a-row", "3", "--json",
    )  # fmt: skip
    result = json.loads(proc.stdout)
    said = result["causes"]["hung"]
    assert said["cause"] == causes.UNRESPONSIVE and said["ticks"] == 3 == result["late"]["hung"], result
    assert result["reason"] == words.ONE_LEFT


def test_the_player_page_shows_the_exception_and_counts_the_forfeit_out(
    played: dict[str, Any], browser: Any
) -> None:
    """In Chromium: the exception in the panel of what the bots drew, at its tick; at the end, the
    forfeited seat out of "players still in", beside the same reason and sentences."""
    from browser import page_of, viewer
    from test_web_player import _open, _seek

    path = played["match_replay"]
    with viewer("replay", "view", str(path), "--port", "0") as url, page_of(browser) as (page, console):
        meta = _open(page, url)
        assert f"raiser: exception at tick 1: {FIRST}" in page.inner_text("#debug-text")
        _seek(page, meta["frames"] - 1)
        said = page.inner_text("#events")
        assert "1 of 2 players still in (1 forfeited)" in said, said
        assert f"wins: {words.ONE_LEFT}" in said
        assert f"why: {played['match']['causes']['crasher']['text']}" in said
        console.assert_clean()
