"""drop2df: the rulebook's golden vectors, the rule table, edits and tokens, the duplicate format,
the example bots, and one real `cellarena match`."""

from __future__ import annotations

import json
from typing import Any

import drop2df_reference as ref
import numpy as np
import pytest
from bot_files import example_bot, load_example_bot
from cellarena_cli import cellarena, invoke
from hypothesis import given, settings
from hypothesis import strategies as st

from cellarena.sdk import protocol
from cellarena.sdk.games import MovesError
from cellarena.sdk.games.drop2df import (
    BLOCK,
    CHARS,
    EMPTY,
    HOLE,
    MINUS,
    PLUS,
    RABBIT,
    RULE_TABLE,
    Token,
    View,
    decode_ops,
    legal_edits,
    make_view,
    moves_for,
    noop_answer,
    parse,
    rule,
    step,
    step_many,
    text,
)
from cellarena.server.games import ConfigError, get_engine
from cellarena.server.games.drop2df.engine import Drop2dfConfig, Drop2dfEngine

GOLDEN = """\
01.[0][@][ ][ ][-][ ][ ][+][ ][ ][0]
02.[0][ ][@][-][ ][-][+][ ][+][ ][0]
03.[0][@][ ][ ][ ][#][#][ ][ ][+][0]
04.[0][ ][@][ ][ ][#][#][ ][+][ ][0]
05.[0][@][ ][@][ ][#][#][+][ ][+][0]
06.[0][ ][ ][ ][@][#][#][ ][ ][ ][0]
07.[0][ ][ ][@][ ][#][#][ ][ ][ ][0]
08.[0][ ][@][ ][@][#][#][ ][ ][ ][0]
09.[0][@][ ][ ][ ][#][#][ ][ ][ ][0]
10.[0][ ][@][ ][ ][#][#][ ][ ][ ][0]
"""
EMPTY_BOARD = "[0][@][ ][ ][ ][ ][ ][ ][ ][ ][0]"


def play(engine: Drop2dfEngine, seat_ops: dict[int, list[Any]] | None = None) -> list[str]:
    """Play every turn (seat_ops[seat][turn] if given, else pass); the lines of seat 0, numbered."""
    lines = []
    while engine.result() is None:
        lines.append(f"{engine.tick + 1:02d}." + text(engine.row(0)))
        actions = {s: ops[engine.tick] for s, ops in (seat_ops or {}).items() if engine.tick < len(ops)}
        engine.apply(actions)
    lines.append(f"{engine.tick + 1:02d}." + text(engine.row(0)))
    return lines


# ---------------------------------------------------------------------------------------- golden
def test_the_seeds_example_of_play_is_reproduced_exactly() -> None:
    engine = Drop2dfEngine.from_row(parse("[0][@][ ][ ][-][ ][ ][+][ ][ ][0]"))
    lines = play(engine)
    assert "".join(line + "\n" for line in lines[:10]) == GOLDEN
    # The rulebook's extension: period 6 from line 06, and where line 31 ends; nothing scores.
    assert lines[10] == "11.[0][@][ ][@][ ][#][#][ ][ ][ ][0]"
    assert lines[30] == "31.[0][ ][ ][@][ ][#][#][ ][ ][ ][0]"
    assert all(lines[i][3:] == lines[i + 6][3:] for i in range(5, 25))
    assert engine.result().scores == {0: 0.0, 1: 0.0}  # type: ignore[union-attr]


def test_the_empty_board_scores_4_in_30_turns_with_no_edits() -> None:
    engine = Drop2dfEngine.from_row(parse(EMPTY_BOARD))
    lines = play(engine)
    assert lines[8] == "09.[0][ ][ ][ ][ ][ ][ ][@][ ][@][0]"
    assert lines[12] == "13.[0][ ][ ][@][ ][@][ ][@][ ][@][0]"
    at_cell_9 = [i + 1 for i, line in enumerate(lines[:30]) if line[3:].split("]")[9] == "[@"]
    assert at_cell_9 == [9, 13, 21, 25]
    result = engine.result()
    assert result is not None and result.scores == {0: 4.0, 1: 4.0} and result.ticks == 30
    assert result.winner is None and result.ranks == {0: 1, 1: 1}


# ---------------------------------------------------------------------------------------- the rule
def test_the_rule_table_is_total_mirror_symmetric_and_the_rulebooks() -> None:
    assert len(RULE_TABLE) == 216
    for l in range(6):  # noqa: E741
        for c in range(5):  # a hole is never a centre
            for r in range(6):
                got = RULE_TABLE[l * 36 + c * 6 + r]
                assert got in (EMPTY, PLUS, MINUS, BLOCK, RABBIT), (l, c, r)
                assert got == RULE_TABLE[r * 36 + c * 6 + l] == rule(l, c, r)
                want = ref.rule(CHARS[l], CHARS[c], CHARS[r])
                assert CHARS[got] == want == ref.reading_a(CHARS[l], CHARS[c], CHARS[r]), (l, c, r)


def test_one_scenario_per_rule() -> None:
    cases = {
        "[0][+][ ][ ][0]": "[0][ ][+][ ][0]",  # a charge grows into empty cells and does not stay
        "[0][+][ ][-][0]": "[0][ ][#][ ][0]",  # opposite charges meet in the middle: a block
        "[0][+][-][ ][0]": "[0][#][#][-][0]",  # touching opposites both turn into blocks
        "[0][+][ ][+][0]": "[0][ ][ ][ ][0]",  # like charges cancel
        "[0][ ][+][#][0]": "[0][+][ ][#][0]",  # a charge against a block vanishes; the block stays
        "[0][@][ ][#][0]": "[0][ ][@][#][0]",  # @ spreads into an empty cell, even towards a block
        "[0][@][ ][+][0]": "[0][ ][ ][ ][0]",  # @ meeting a charge: both gone
        "[0][ ][@][0]": "[0][@][ ][0]",  # @ into the right hole is gone (and scored)
    }
    for before, after in cases.items():
        assert text(step(parse(before))) == after, before


#: A batch of 1..6 random rows of one length (4..24 cells), holes at both ends.
batches = st.integers(4, 24).flatmap(
    lambda n: st.lists(
        st.lists(st.integers(0, 4), min_size=n - 2, max_size=n - 2).map(lambda inner: [HOLE, *inner, HOLE]),
        min_size=1,
        max_size=6,
    )
)


@settings(max_examples=200, deadline=None)
@given(batches, st.integers(1, 5))
def test_the_vectorised_step_matches_the_reference(boards: list[list[int]], steps: int) -> None:
    n = len(boards[0])
    batch = np.array(boards, np.uint8)
    out, scratch = np.empty_like(batch), np.empty((len(boards), n - 2), np.uint8)
    chars = ["".join(CHARS[c] for c in b) for b in boards]
    for _ in range(steps):
        step_many(batch, out, scratch)
        batch, out = out, batch
        chars = [ref.step(c) for c in chars]
        assert ["".join(CHARS[c] for c in row) for row in batch.tolist()] == chars
        assert [text(step(parse(c))) for c in chars] == [text(parse(ref.step(c))) for c in chars]


# ---------------------------------------------------------------------------------------- edits
def one_turn(row: str, ops: Any, tokens: tuple[int, ...] = ()) -> tuple[Drop2dfEngine, Any]:
    engine = Drop2dfEngine.from_row(parse(row), {"players": 1, "tokens": bool(tokens)})
    engine.set_tokens(0, tokens)
    events = engine.apply({0: ops})
    return engine, events


def test_each_edit_toggles_one_cell_before_the_step() -> None:
    row = "[0][@][ ][#][+][-][ ][ ][ ][ ][0]"
    assert legal_edits(parse(row)) == [2, 3, 4, 5, 6, 7, 8, 9]
    for cell, changed in [(2, "#"), (3, " "), (4, "-"), (5, "+")]:
        engine, events = one_turn(row, [cell])
        edited = row[: 1 + 3 * cell] + changed + row[2 + 3 * cell :]
        assert engine.row(0) == step(parse(edited)), cell
        assert events.illegal == {} and events.malformed == {}
        assert engine.pending()[0]["refused"] == []


@pytest.mark.parametrize(
    ("ops", "reason"),
    [
        ([0], "cell 0 is a hole"),
        ([10], "cell 10 is a hole"),
        ([1], "holds [@]"),
        ([11], "out of range"),
        ([-1], "out of range"),
        ([10**12], "out of range"),
    ],
)
def test_illegal_edits_are_counted_no_ops_reported_next_turn(ops: list[int], reason: str) -> None:
    row = "[0][@][ ][ ][-][ ][ ][+][ ][ ][0]"
    engine, events = one_turn(row, ops)
    assert engine.row(0) == step(parse(row))
    assert events.illegal == {0: 1}
    refused = engine.pending()[0]["refused"]
    assert len(refused) == 1 and reason in refused[0]


def test_a_second_edit_in_a_turn_is_a_counted_no_op() -> None:
    row = "[0][@][ ][ ][-][ ][ ][+][ ][ ][0]"
    engine, events = one_turn(row, [4, 7, 2])
    assert engine.row(0) == step(parse("[0][@][ ][ ][+][ ][ ][+][ ][ ][0]"))
    assert events.illegal == {0: 2}
    assert engine.pending()[0]["refused"] == ["a second edit in one turn"] * 2
    # Refusals are reported for one turn only.
    engine.apply({})
    assert engine.pending()[0]["refused"] == []


def test_malformed_answers_are_invalid_and_never_raise() -> None:
    engine = Drop2dfEngine.new({}, seed=2)
    request = engine.pending()[0]
    for bad in [7.5, "edit", {"edit": 3}, [1.5], [[1]], [[1, 2, 3]], [None], [True], [0] * 9, b"\x01"]:
        assert engine.decode(0, request, bad) is None, bad
    assert engine.decode(0, request, None) == [] and engine.decode(0, request, []) == []
    assert engine.decode(0, request, [3, [1, 4]]) == [3, [1, 4]]
    before = engine.row(0)
    events = engine.apply({0: "garbage", 1: [3]})
    assert events.malformed == {0: 1}
    assert engine.row(0) == step(before) != engine.row(1)


# ---------------------------------------------------------------------------------------- tokens
def test_tokens_each_face_and_their_limits() -> None:
    row = "[0][@][ ][#][+][-][ ][ ][ ][ ][0]"
    cases = [
        (Token(PLUS, 4), "[0][@][ ][#][ ][-][ ][ ][ ][ ][0]"),
        (Token(PLUS, 5), "[0][@][ ][#][+][+][ ][ ][ ][ ][0]"),
        (Token(MINUS, 5), "[0][@][ ][#][+][ ][ ][ ][ ][ ][0]"),
        (Token(MINUS, 4), "[0][@][ ][#][-][-][ ][ ][ ][ ][0]"),
        (Token(EMPTY, 3), "[0][@][ ][ ][+][-][ ][ ][ ][ ][0]"),
        (Token(EMPTY, 2), "[0][@][#][#][+][-][ ][ ][ ][ ][0]"),
    ]
    for token, after in cases:
        engine, events = one_turn(row, moves_for(token), (EMPTY, PLUS, MINUS, PLUS))
        assert engine.row(0) == step(parse(after)), token
        assert events.illegal == {}
        left = list((EMPTY, PLUS, MINUS, PLUS))
        left.remove(token.face)
        assert engine.pending()[0]["tokens"] == sorted(left)
    # An edit and a token in one turn both act, in order; a second token does not.
    engine, events = one_turn(row, [2, [EMPTY, 2], [PLUS, 4]], (EMPTY, PLUS))
    assert engine.row(0) == step(parse(row)) and events.illegal == {0: 1}
    assert engine.pending()[0]["refused"] == ["a second token in one turn"]
    assert engine.pending()[0]["tokens"] == [PLUS]
    for ops, reason in [
        ([[PLUS, 6]], "cannot change [ ]"),
        ([[MINUS, 4]], "no [-] token left"),
        ([[7, 4]], "not a token face"),
        ([[EMPTY, 1]], "cannot change [@]"),
    ]:
        engine, events = one_turn(row, ops, (EMPTY, PLUS))
        assert engine.row(0) == step(parse(row)) and events.illegal == {0: 1}
        assert reason in engine.pending()[0]["refused"][0]


def test_tokens_are_rolled_only_when_the_option_is_on() -> None:
    assert Drop2dfEngine.new({}, seed=1).pending()[0]["tokens"] == []
    seen = set()
    for seed in range(20):
        tokens = Drop2dfEngine.new({"tokens": True}, seed=seed).pending()[1]["tokens"]
        assert len(tokens) == 4 and set(tokens) <= {EMPTY, PLUS, MINUS}
        seen.add(tuple(tokens))
    assert len(seen) > 3


# ---------------------------------------------------------------------------------------- format
def test_setup_drops_the_dice_on_distinct_spaces() -> None:
    boards = set()
    for seed in range(60):
        row = Drop2dfEngine.new({}, seed=seed).row(0)
        assert row[:2] == bytes([HOLE, RABBIT]) and row[-1] == HOLE and len(row) == 11
        marks = [c for c in row[2:-1] if c != EMPTY]
        assert len(marks) == 2 and set(marks) <= {PLUS, MINUS, BLOCK}
        boards.add(row)
    assert len(boards) > 30
    wide = Drop2dfEngine.new({"length": 20, "dice": 20, "turns": 5}, seed=3)
    assert EMPTY not in wide.row(0)[2:-1] and len(wide.row(0)) == 23


def test_the_duplicate_format_gives_every_seat_the_same_board() -> None:
    for seed in range(10):
        engine = Drop2dfEngine.new({"players": 3}, seed=seed)
        requests = engine.pending()
        assert sorted(requests) == [0, 1, 2]
        assert len({r["row"] for r in requests.values()}) == 1
        assert engine.public_config()["start"] == requests[0]["row"]
    # Each seat edits only its own copy.
    engine = Drop2dfEngine.from_row(parse(EMPTY_BOARD), {"players": 3})
    engine.apply({1: [5]})
    assert engine.row(0) == engine.row(2) == step(parse(EMPTY_BOARD)) != engine.row(1)


def test_the_higher_score_wins_and_equal_scores_draw() -> None:
    board = "[0][@][ ][ ][ ][ ][ ][ ][ ][ ][0]"
    engine = Drop2dfEngine.from_row(parse(board))
    # Seat 1 walls the wave off at once: it never scores, seat 0 scores the empty board's 4.
    play(engine, {1: [[2]]})
    result = engine.result()
    assert result is not None and result.winner == 0 and result.ranks == {0: 1, 1: 2}
    assert result.scores == {0: 4.0, 1: 0.0} and "4 to 0" in result.reason
    assert engine.pending() == {} and engine.apply({0: [3]}).illegal == {}


def test_config_errors_say_what_to_change() -> None:
    cls = get_engine("drop2df")
    for config, words in [
        ({"size": 3}, "unknown drop2df option(s) size"),
        ({"turns": 0}, "turns must be between 1 and 1000"),
        ({"length": "8"}, "length must be a whole number"),
        ({"tokens": 1}, "tokens must be true or false"),
        ({"dice": 9}, "lower dice or raise length"),
        ({"players": 9}, "players must be between 1 and 8"),
    ]:
        with pytest.raises(ConfigError, match=words.replace("(", r"\(").replace(")", r"\)")):
            cls.new(config)
    cfg = Drop2dfConfig.from_mapping({"turns": 12, "tokens": True})
    assert Drop2dfConfig.from_mapping(cfg.to_mapping()) == cfg


# ---------------------------------------------------------------------------------------- the SDK
def test_the_sdk_view_and_answers() -> None:
    engine = Drop2dfEngine.new({"tokens": True}, seed=4)
    message = protocol.tick(engine.tick, 2000, engine.pending()[0])
    view = make_view(message)
    assert isinstance(view, View) and view.row == engine.row(0) and view.turn == 1 and view.turns == 30
    assert view.turns_left == 30 and len(view.tokens) == 4 and view.budget_ms == 2000
    assert moves_for(None) == [] == noop_answer(message)
    assert moves_for(np.int64(3)) == [3] and moves_for([2, Token(PLUS, 4)]) == [2, [PLUS, 4]]
    for bad in ["x", 1.5, [None], [0] * 9]:
        with pytest.raises(MovesError):
            moves_for(bad)
    with pytest.raises(ValueError, match="'row'"):
        make_view({**message, "row": b"\x09\x09\x09"})
    assert decode_ops(moves_for([5, Token(EMPTY, 2)])) == [5, [EMPTY, 2]]


# ---------------------------------------------------------------------------------------- bots
def bot_game(seed: int, classes: list[type]) -> Drop2dfEngine:
    """A full match with each seat's bot driven in-process through the SDK adapter."""
    engine = Drop2dfEngine.new({"players": len(classes)}, seed=seed)
    bots = [cls() for cls in classes]
    while engine.result() is None:
        actions = {}
        for seat, request in engine.pending().items():
            # A roomy budget: the planner's search then never stops early on a loaded machine.
            message = protocol.tick(engine.tick, 60000, request)
            answer = moves_for(bots[seat].on_tick(make_view(message)))
            actions[seat] = engine.decode(seat, request, answer)
        events = engine.apply(actions)
        assert events.illegal == {} and events.malformed == {}
    return engine


def test_the_planner_never_scores_less_than_passing_and_beats_it_on_most_seeds() -> None:
    planner, passer = load_example_bot("drop2df", "planner"), load_example_bot("drop2df", "passer")
    better = 0
    seeds = range(12)
    for seed in seeds:
        result = bot_game(seed, [planner.Planner, passer.Passer]).result()
        assert result is not None
        assert result.scores[0] >= result.scores[1], seed
        better += result.scores[0] > result.scores[1]
    assert better > len(seeds) // 2


def test_a_real_match_between_the_example_bots() -> None:
    done = cellarena(
        "match",
        "drop2df",
        "--bot",
        f"plan={example_bot('drop2df', 'planner')}",
        "--bot",
        f"pass={example_bot('drop2df', 'passer')}",
        *("--fast", "--json", "--seed", "4", "--turns", "12"),
    )
    assert done.returncode == 0, done.stderr
    summary = json.loads(done.stdout)
    assert summary["ticks"] == 12 and summary["winner"] == "plan"
    assert summary["late"] == {"plan": 0, "pass": 0} and summary["illegal"] == {"plan": 0, "pass": 0}


def test_the_bench_command_prints_json() -> None:
    code, out = invoke("bench", "drop2df", "--rows", "50", "--seconds", "0.05", "--json")
    assert code == 0, out
    figures = json.loads(out)
    assert figures["cells_per_row"] == 11 and figures["step_many_rows_per_s"] > 0 and figures["ratio"] > 0
