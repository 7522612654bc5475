"""What a newcomer tripped over on the way to a first bot (issue 27, point 6), each fixed and held
here: two commands that named one match's length with two numbers, `replay show` without a legend
or owners, and `match --web` ending in a traceback on Ctrl-C. (The browser's trips are in
tests/test_web_newcomer.py.)"""

from __future__ import annotations

import json
import signal
import time
import urllib.request
from pathlib import Path

import numpy as np
import pytest
from bot_files import RAW_BOT
from bot_processes import BotPids
from cellarena_cli import ROOT, invoke, line_within, run_here, start_cellarena

from cellarena.server.replay import read_replay

BOTS = ROOT / "example_bots"


#: game -> (bot a, bot b, options of a short match)
MATCHES: dict[str, tuple[str, str, list[str]]] = {
    "rezzo": ("rezzo/builder.py", "rezzo/raider.py", []),
    "cloth": ("cloth/planner.py", "cloth/random_placer.py", ["--width", "32", "--height", "32"]),
    "cata": ("cata/lookahead.py", "cata/random_legal.py", ["--size", "32", "--max-turns", "6"]),
    "colorblocks": ("colorblocks/greedy.py", "colorblocks/random_legal.py", ["--max-turns", "20"]),
    "drop2df": ("drop2df/planner.py", "drop2df/passer.py", ["--turns", "8"]),
}


def _ok(*args: str) -> str:
    """`cellarena ARGS` run in this process (a child process would add a second of imports), which
    succeeded: its output. The matches' bots are real processes (`replays`)."""
    code, out = invoke(*args)
    assert code == 0, out
    return out


#: What `cellarena match` printed for each game's match.
PRINTED: dict[str, str] = {}


@pytest.fixture(scope="module")
def replays(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """One replay per game, played by the example bots (named alpha and beta) through `cellarena match`
    in this process (the bots are processes); Rezzo's builder beats the raider on the duel map by a
    loss at tick 179."""
    out = tmp_path_factory.mktemp("replays")
    made = {}
    for game, (a, b, options) in MATCHES.items():
        path = out / f"{game}.replay"
        proc = run_here(
            "match", game, "--bot", f"alpha=python {BOTS / a}", "--bot", f"beta=python {BOTS / b}",
            "--fast", *options, "--replay", str(path),
        )  # fmt: skip
        assert proc.returncode == 0, proc.stdout + proc.stderr
        made[game] = path
        PRINTED[game] = proc.stdout
    return made


def test_match_and_replay_verify_count_one_match_the_same(replays: dict[str, Path]) -> None:
    """A Rezzo loss happens in a tick before that tick's moves: the match's result counts that tick
    (179), the replay holds 178 ticks of moves. `verify` printed 178 where `match` printed 179."""
    replay = replays["rezzo"]
    code, verified = invoke("replay", "verify", str(replay))
    assert code == 0, verified
    report = json.loads(_ok("replay", "verify", "--json", str(replay)))["replays"][0]
    ticks = report["ticks_verified"]
    assert report["moves_verified"] == ticks - 1  # the case in point: ended by a loss, before the moves
    assert PRINTED["rezzo"].splitlines()[0].startswith(f"alpha wins after {ticks} ticks")
    assert verified.strip() == (
        f"ok: {ticks} ticks verified, {ticks - 1} with moves (the game ended before the last one's moves)"
    )
    assert read_replay(str(replay)).result["ticks"] == ticks  # what `match --json` says: its result's


@pytest.mark.parametrize("game", sorted(MATCHES))
def test_replay_show_has_a_legend_naming_each_seat(replays: dict[str, Path], game: str) -> None:
    shown = _ok("replay", "show", str(replays[game]))
    as_json = json.loads(_ok("replay", "show", "--json", str(replays[game])))
    legend = as_json["legend"]
    assert legend and all(line in shown for line in legend)
    for seat, name in enumerate(("alpha", "beta")):
        assert any(f"seat {seat} ({name})" in line or f"seat {seat}: {name}" in line for line in legend), (
            legend
        )


def test_replay_show_draws_rezzo_owners_without_colour(replays: dict[str, Path]) -> None:
    """Bases `A`/`B`, geysers `a`/`b` and flags `0`/`1`: whose is whose, even piped to a file."""
    from cellarena.sdk.games.rezzo import Cell

    owned = {Cell.BASE: "ABCDEFGH", Cell.GEYSER: "abcdefgh", Cell.FLAG: "01234567"}
    seen = set()
    for tick in (60, 120, 170):
        shown = json.loads(_ok("replay", "show", "--json", "--tick", str(tick), str(replays["rezzo"])))
        frame = shown["frame"]
        cells = np.array(frame["cells"], np.uint8).reshape(frame["height"], frame["width"])
        picture = shown["picture"]
        for (y, x), code in np.ndenumerate(cells):
            kind, owner = int(code) & 0xF8, int(code) & 7
            if kind in owned:
                assert picture[y][x] == owned[kind][owner], (tick, x, y, code)
                seen.add((kind, owner))
    assert {(Cell.FLAG, 0), (Cell.BASE, 0), (Cell.BASE, 1), (Cell.GEYSER, 1)} <= seen  # the match has them


@pytest.mark.parametrize("when", ["after the match", "during the match"])
def test_ctrl_c_ends_match_web_cleanly(tmp_path: Path, when: str, bot_pids: BotPids) -> None:
    """`match --web` keeps its live page up after the match until Ctrl-C, which ended in a traceback
    (`OSError: [Errno 9] Bad file descriptor`: hypercorn had closed the page's socket already) and
    exit status 1. Now it ends as any interrupted command: a line saying what stopped, status 130."""
    pace = ["--fast", "--max-ticks", "30"] if when == "after the match" else ["--tick-rate", "15"]
    proc = start_cellarena(
        "match", "rezzo", "--bot", f"a={RAW_BOT}", "--bot", f"b={RAW_BOT}", *pace,
        "--log-dir", str(tmp_path), "--web", "--web-port", "0", env=bot_pids.env,
    )  # fmt: skip
    try:
        assert proc.stderr is not None
        seen = [line_within(proc.stderr, what="live view's address")]
        url = seen[0].split("live view at ")[1].strip()
        if when == "after the match":
            while "stays up" not in seen[-1]:
                seen.append(line_within(proc.stderr, what="line saying the page stays up"))
                assert seen[-1], "".join(seen)
        with urllib.request.urlopen(url, timeout=30) as page:  # the page is up
            assert page.status == 200
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(bot_pids.listed()) < 2:  # both bots started
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    finally:
        proc.kill()
    err = "".join(seen) + err
    assert proc.returncode == 130, err
    assert "Traceback" not in err and "Bad file descriptor" not in err, err
    stopped = "the live view was stopped" if when == "after the match" else "every bot process was stopped"
    assert f"interrupted; {stopped}" in err
    with pytest.raises(OSError):  # and nothing listens there any more
        urllib.request.urlopen(url, timeout=5)
    assert bot_pids.listed() and bot_pids.running() == []
