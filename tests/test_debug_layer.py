"""The debug layer (docs/protocol.md#debug): what a bot draws goes with its answer, is kept within caps
and placed on the board, is recorded per seat and tick, and never costs a move."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bot_files import RAW_BOT
from cellarena_cli import CLOCK_FREE, cellarena, run_here
from game_servers import js_bot_folder

from cellarena.sdk import Bot, protocol
from cellarena.sdk.bot import _add_debug, _Log
from cellarena.sdk.debug import DebugLayer
from cellarena.sdk.games.rezzo import FORWARD, Cell
from cellarena.sdk.protocol import debug as debug_layer
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.play.match import Match, TickSettings
from cellarena.server.replay import LENGTH, read_replay, strip_debug, verify

DRAWER = Path(__file__).parent / "bots" / "drawer.py"


# ------------------------------------------------------------------ the SDK's layer
def test_a_bot_that_never_draws_has_no_layer_and_sends_no_debug() -> None:
    bot = Bot()
    assert "_debug" not in bot.__dict__  # nothing made, nothing sent: `_answer` looks here only
    bot.debug.log("now it has one")
    assert isinstance(bot.__dict__["_debug"], DebugLayer)


def test_bad_calls_are_dropped_and_counted_never_raised() -> None:
    layer = DebugLayer()
    layer.mark((1, 2), "red", "ok")
    layer.mark((1,), "red")  # not a cell
    layer.mark((1.5, 2), "red")  # floats are no cells
    layer.mark((1, 2), "no-such-colour")
    layer.mark((1, 2), "#00ff00", "bad\nlabel")
    layer.line((0, 0), (3, 3), "#ABCDEF")
    layer.line((0, 0), "x", "blue")
    layer.mark((np.int64(3), np.int32(4)), "blue", "a label longer than sixteen")
    assert layer.dropped == 5 and layer.first_problem is not None
    assert layer.first_problem.startswith("mark((1,)")
    drawn = layer.take()
    assert drawn == {
        "marks": [
            {"cell": [1, 2], "colour": "#e6194b", "label": "ok"},
            {"cell": [3, 4], "colour": "#4363d8", "label": "a label longer t"},
        ],
        "lines": [{"from": [0, 0], "to": [3, 3], "colour": "#abcdef"}],
    }
    assert layer.take() is None  # a new tick starts clean


def test_the_sdk_holds_a_tick_to_the_caps() -> None:
    layer = DebugLayer()
    for i in range(debug_layer.MAX_MARKS + 10):
        layer.mark((i, i), "red")
    for _ in range(debug_layer.MAX_LINES + 5):
        layer.line((0, 0), (1, 1), "red")
    layer.log("z" * 1000)
    layer.log("z" * 100)  # past 1 KiB in all
    layer.log("first\nsecond")
    assert layer.dropped == 10 + 5 + 1
    drawn = layer.take()
    assert drawn is not None
    assert len(drawn["marks"]) == debug_layer.MAX_MARKS and len(drawn["lines"]) == debug_layer.MAX_LINES
    assert drawn["text"] == ["z" * 1000, "first", "second"]


def test_whatever_a_bot_draws_its_answer_stays_under_the_frame_limit(
    capsys: pytest.CaptureFixture[str],
) -> None:
    layer = DebugLayer()
    worst_label = "\U0001f600" * 16  # 4 bytes a character
    for _ in range(5000):
        layer.mark((2**31 - 1, -(2**31)), "#ffffff", worst_label, agent=2**31 - 1)
        layer.line((2**31 - 1, -(2**31)), (-(2**31), 2**31 - 1), "#ffffff", agent=2**31 - 1)
        layer.log("\U0001f600" * 300)
    reply: dict[str, Any] = {"type": "moves", "tick": 7, "moves": [1] * 64}
    _add_debug(reply, layer, _Log("drawer", quiet=True))
    assert "debug" in reply  # the caps alone keep it small enough to go
    assert len(protocol.encode(reply)) < protocol.MAX_CLIENT_FRAME * 0.6  # room for the moves
    # A move so large that no drawing fits beside it: the drawing goes, the move stays.
    fresh = DebugLayer()
    fresh.mark((0, 0), "red")
    huge: dict[str, Any] = {"type": "moves", "tick": 8, "moves": [1] * 65_470}
    capsys.readouterr()
    _add_debug(huge, fresh, _Log("drawer", quiet=True))
    assert "debug" not in huge and huge["moves"] == [1] * 65_470
    assert (
        "tick 8: the debug drawing would make the answer too large; sent without it"
        in capsys.readouterr().err
    )


# ------------------------------------------------------------------ the server's rules
def test_clean_keeps_the_well_formed_within_the_caps_and_counts_the_rest() -> None:
    marks = [{"cell": [i, i], "colour": "#FF0000"} for i in range(300)]
    marks[0] = {"cell": [0, 0], "colour": "red"}  # names are the SDK's; the wire says #rrggbb
    marks[1] = {"cell": [1, 1, 1], "colour": "#ff0000"}
    marks[2] = {"cell": [True, 1], "colour": "#ff0000"}
    marks[3] = {"cell": [3, 3], "colour": "#ff0000", "label": 5}
    marks[4] = {"cell": [4, 4], "colour": "#ff0000", "agent": "one"}
    cleaned = debug_layer.clean(
        {
            "marks": marks,
            "lines": [{"from": [0, 0], "to": [1, 1], "colour": "#00ff00"}] * 70 + ["x"],
            "text": ["a" * 1000, "b" * 30, "c" * 20, "tab\there"],
            "future": {"ignored": True},
        }
    )
    kept = cleaned.kept
    assert kept is not None
    assert len(kept["marks"]) == debug_layer.MAX_MARKS and kept["marks"][0] == {
        "cell": [5, 5],
        "colour": "#ff0000",
    }
    assert len(kept["lines"]) == debug_layer.MAX_LINES
    assert kept["text"] == ["a" * 1000, "c" * 20]
    # 5 malformed marks and 39 past the cap; 7 lines past it; two text lines (too long, a tab)
    assert cleaned.dropped == 5 + 39 + 7 + 2
    assert debug_layer.clean("nonsense") == debug_layer.Cleaned(None, 1)
    assert debug_layer.clean({"marks": "nonsense", "text": 3}) == debug_layer.Cleaned(None, 2)


def test_a_malformed_debug_never_makes_a_moves_message_bad() -> None:
    checked = protocol.check_moves({"type": "moves", "tick": 3, "moves": [1], "debug": ["not", "a", "map"]})
    assert checked["moves"] == [1] and "debug" not in checked
    good = {"type": "moves", "tick": 3, "moves": [1], "debug": {"text": ["hi"]}}
    assert protocol.check_moves(good)["debug"] == {"text": ["hi"]}


@pytest.mark.parametrize("torus", [False, True])
def test_rezzo_places_a_viewport_cell_on_the_board_cell_that_agent_sees_there(torus: bool) -> None:
    engine = RezzoEngine.new({"map": "field", "torus": torus}, seed=5)
    rng = np.random.default_rng(1)
    for _ in range(40):  # agents move and turn: every facing is met
        engine.apply({s: [int(m) for m in rng.integers(0, 4, 8)] for s in range(engine.players)})
    board = engine.cells()
    requests = engine.pending()
    for seat, request in requests.items():
        place = engine.debug_placer(seat, request)
        for k in request["agents"]:
            codes, _ = engine.viewport(seat, k)
            for row in range(13):
                for col in range(13):
                    cell = place(k, [row, col])
                    if cell is None:  # off a bounded board: the viewport reads OOB there
                        assert not torus and codes[row, col] == Cell.OOB
                        continue
                    x, y = cell
                    seen = int(codes[row, col])
                    here = int(engine._viewports.relative(board[y, x], seat))
                    assert seen == here, (seat, k, row, col)
        assert place(None, [12, 6]) == place(request["agents"][0], [12, 6])  # the first agent
        assert place(999, [0, 0]) is None and place(request["agents"][0], [13, 0]) is None


def test_a_match_keeps_a_seats_drawing_within_a_megabyte() -> None:
    engine = RezzoEngine.new({}, seed=1)
    match = Match(1, engine, [("a", None), ("b", None)], TickSettings())
    seat = match.seats[0]
    request = engine.pending()[0]
    text = ["t" * 100] * 10  # about 1 KiB a tick
    kept_ticks = 0
    for _ in range(2000):
        seat.debug = {"text": text}
        match.referee.keep_debug(seat, request)
        kept_ticks += 0 in match.referee.debug
        match.referee.debug = {}
    assert seat.debug_bytes <= debug_layer.MAX_MATCH_BYTES < seat.debug_bytes + 1100
    assert 900 < kept_ticks < 1100
    assert seat.debug_dropped == (2000 - kept_ticks) * 10


# ------------------------------------------------------------------ end to end, over TCP
# The commands run in this process (`run_here`: a process costs a second of imports); the bots are
# processes over TCP all the same.
def _match(tmp_path: Path, *bots: str, ticks: int = 30) -> tuple[dict[str, Any], Path]:
    replay = tmp_path / "m.replay"
    args = [a for i, b in enumerate(bots) for a in ("--bot", f"s{i}={b}")]
    proc = run_here(
        "match", "rezzo", *args, "--fast", *CLOCK_FREE, "--max-ticks", str(ticks),
        "--replay", str(replay), "--log-dir", str(tmp_path / "logs"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout), replay


def test_a_flood_of_annotations_is_cut_at_the_caps_with_every_move_played(tmp_path: Path) -> None:
    result, path = _match(tmp_path, f"{RAW_BOT} flood", f"{RAW_BOT} random")
    assert result["late"] == {"s0": 0, "s1": 0} and result["invalid"] == {"s0": 0, "s1": 0}
    rep = read_replay(path)
    assert len(rep.ticks) == 30 and all(0 in t.moves for t in rep.ticks)  # every move of the flood played
    board = RezzoEngine.new(rep.config, rep.seed)
    drawn = [t.debug.get(0) for t in rep.ticks]
    for t, d in zip(rep.ticks, drawn, strict=True):
        assert 1 not in t.debug  # the quiet bot drew nothing
        if t.tick % 3 == 0:
            assert d is None  # the malformed ones are dropped whole
        else:
            assert d is not None
            assert (
                0 < len(d["marks"]) <= debug_layer.MAX_MARKS
                and len(d.get("lines", ())) <= debug_layer.MAX_LINES
            )
            assert sum(len(x.encode()) for x in d["text"]) <= debug_layer.MAX_TEXT_BYTES
            for m in d["marks"]:  # board cells, on the board
                assert 0 <= m["cell"][0] < board.width and 0 <= m["cell"][1] < board.height
    assert rep.result is not None and rep.result["extra"]["debug_dropped"][0] > 0
    assert rep.result["extra"]["debug_dropped"][1] == 0
    assert verify(rep).ok


def test_an_older_client_without_debug_leaves_the_replay_as_it_was(tmp_path: Path) -> None:
    _result, path = _match(tmp_path, f"{RAW_BOT} random", f"{RAW_BOT} random", ticks=10)
    rep = read_replay(path)
    assert all(t.debug == {} for t in rep.ticks)
    assert rep.result is not None and "debug_dropped" not in rep.result.get("extra", {})
    assert b"debug" not in path.read_bytes()


def test_sdk_drawings_are_recorded_per_seat_and_tick_and_strip_debug_removes_them(tmp_path: Path) -> None:
    _result, path = _match(tmp_path, f"python {DRAWER}", f"{RAW_BOT} random", ticks=12)
    rep = read_replay(path)
    engine = RezzoEngine.new(rep.config, rep.seed)
    for t in rep.ticks:  # the drawer marks the cell ahead of its first agent, and logs the tick
        agent = next(a for a in engine.agents() if a.player == 0 and a.alive)
        fx, fy = FORWARD[agent.facing]
        d = t.debug[0]
        assert d["marks"] == [{"cell": [agent.x + fx, agent.y + fy], "colour": "#e6194b", "label": "ahead"}]
        assert d["text"] == [f"tick {t.tick}"] and d["lines"][0]["from"] == [agent.x, agent.y]
        engine.apply(t.moves)
    out = tmp_path / "stripped.replay"
    # A process, as a user runs it: the suite's one such run of `replay strip-debug`.
    proc = cellarena("replay", "strip-debug", str(path), str(out))
    assert proc.returncode == 0, proc.stderr
    assert "removed from 12 ticks" in proc.stdout
    assert b"debug" not in out.read_bytes()
    stripped = read_replay(out)
    assert all(t.debug == {} for t in stripped.ticks) and verify(stripped).ok
    assert [t.moves for t in stripped.ticks] == [t.moves for t in rep.ticks]
    # Records without a drawing keep their bytes: the header is byte for byte the original's.
    raw, copy = path.read_bytes(), out.read_bytes()
    (size,) = LENGTH.unpack_from(raw)
    assert copy[: LENGTH.size + size] == raw[: LENGTH.size + size]
    assert run_here("replay", "verify", str(out)).returncode == 0
    # As a function too, and onto itself refused by the command.
    assert strip_debug(out, tmp_path / "again.replay") == 0
    same = run_here("replay", "strip-debug", str(out), str(out))
    assert same.returncode == 1 and "OUT" in same.stderr
    bad = run_here("replay", "strip-debug", str(tmp_path / "none.replay"), str(tmp_path / "x"))
    assert bad.returncode == 1 and "none.replay" in bad.stderr
    as_json = run_here("replay", "strip-debug", str(path), str(tmp_path / "j.replay"), "--json")
    assert json.loads(as_json.stdout) == {"ok": True, "out": str(tmp_path / "j.replay"), "ticks": 12}


def test_the_js_example_bot_and_the_rezzo_template_send_drawings(tmp_path: Path) -> None:
    made = run_here("new-bot", "rezzo", "my_bot", "--dir", str(tmp_path / "my_bot"))
    assert made.returncode == 0, made.stderr
    folder = js_bot_folder()
    result, path = _match(
        tmp_path, f"node {folder / 'bot.js'}", f"python {tmp_path / 'my_bot' / 'my_bot.py'}"
    )
    assert result["invalid"] == {"s0": 0, "s1": 0}
    rep = read_replay(path)
    js = [t.debug[0] for t in rep.ticks]  # every tick: a text line, and a mark ahead of its agent
    assert all(" agents, moves " in d["text"][0] for d in js)
    assert all(d["marks"][0]["colour"] == "#ffe119" for d in js)
    template = [t.debug[1]["text"][0] for t in rep.ticks]
    assert template[0].startswith(f"tick {rep.ticks[0].tick}: ")


def test_a_replay_with_malformed_drawings_reads_them_cleaned_and_the_player_takes_it(tmp_path: Path) -> None:
    """A replay is untrusted input that the web player draws: junk in its ``debug`` is left out."""
    from cellarena.server.replay import ReplayWriter
    from cellarena.server.web.timeline import Timeline

    engine = RezzoEngine.new({}, seed=3)
    path = tmp_path / "junk.replay"
    with ReplayWriter(path, engine, seed=3, names=["a", "b"]) as writer:
        for junk in ("junk", {"marks": [{"cell": "x", "colour": "<script>"}], "text": ["ok", 5]}):
            tick = engine.tick
            engine.apply({})
            # As a hand-made file would hold it: the writer itself only takes the match's clean maps.
            record = {"type": "tick", "tick": tick, "moves": {}, "hash": engine.state_hash()}
            writer._write(writer._pack({**record, "debug": {0: junk, 1: {"text": ["fine"]}}}, "junk"))
    rep = read_replay(path)
    assert [t.debug for t in rep.ticks] == [
        {1: {"text": ["fine"]}},
        {0: {"text": ["ok"]}, 1: {"text": ["fine"]}},
    ]
    assert verify(rep).complete is False and verify(rep).ok
    frames = json.loads(Timeline(rep).chunk(0, 3))
    assert frames[1]["debug"] == {"0": {"text": ["ok"]}, "1": {"text": ["fine"]}}
    assert all(f["debug"] == {} for f in json.loads(Timeline(rep, debug=False).chunk(0, 3)))


@pytest.mark.parametrize("game", ["cata", "cloth", "colorblocks", "drop2df"])
def test_every_games_python_template_draws_what_it_decided(tmp_path: Path, game: str) -> None:
    """Each game's `new-bot` template draws, not only Rezzo's: a text line for each decision, and
    where the game has cells to point at, marks on the board cells it acted on (cloth: each unit
    placed; colorblocks: each placement; drop2df: the cell it edits, on its own row)."""
    made = run_here("new-bot", game, "mine", "--dir", str(tmp_path / "mine"))
    assert made.returncode == 0, made.stderr
    replay = tmp_path / "m.replay"
    proc = run_here(
        "match", game, "--bot", f"mine=python {tmp_path / 'mine' / 'mine.py'}",
        "--bot", f"rnd=python -m cellarena.sdk.opponents {game}", "--fast", "--replay", str(replay),
        "--log-dir", str(tmp_path / "logs"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["invalid"]["mine"] == 0
    rep = read_replay(replay)
    drawn = [(t, t.debug[0]) for t in rep.ticks if 0 in t.debug]
    asked = [t for t in rep.ticks if 0 in t.moves]
    assert drawn and len(drawn) == len(asked)  # a drawing with every answer it gave
    assert all(d["text"][0].startswith(("turn ", "round ")) for _, d in drawn), drawn[:2]
    assert 1 not in {s for t in rep.ticks for s in t.debug}  # the random opponent draws nothing
    marks = [(t, m) for t, d in drawn for m in d.get("marks", [])]
    if game == "cloth":
        assert marks and all([m["cell"] for m in d["marks"]] == t.moves[0] for t, d in drawn if "marks" in d)
    elif game == "colorblocks":
        placed = [[a[1], a[2]] for t, _ in drawn for a in t.moves[0] if a[0] == "place"]
        assert marks and [m["cell"] for _, m in marks] == placed
    elif game == "drop2df":
        assert all(m["cell"] == [t.moves[0], 0] for t, m in marks)  # its edit, on row 0 (seat 0)
    else:
        assert marks == []  # cata's moves are rule entries, not cells: said in text
