"""C.A.T.A.: the step against the reference, the reaction phase, tallies, thresholds, moves, bots."""

from __future__ import annotations

import copy
import json
from typing import Any

import numpy as np
import pytest
from bot_files import example_bot, load_example_bot
from cata_reference import reference_react, reference_step
from cellarena_cli import cellarena, invoke
from hypothesis import given, settings
from hypothesis import strategies as st

from cellarena.sdk import protocol
from cellarena.sdk.games import MovesError
from cellarena.sdk.games.cata import (
    MEDITATE,
    PASS,
    Act,
    Automaton,
    View,
    block,
    encode_answer,
    identity_rule,
    make_view,
    neighbourhood,
    noop_answer,
    pack_board,
    quadrants,
    react,
    rule_index,
    step,
    strike,
    unpack_board,
)
from cellarena.server.games.base import ConfigError
from cellarena.server.games.cata.engine import CataEngine

Lookahead = load_example_bot("cata", "lookahead").Lookahead
RandomLegal = load_example_bot("cata", "random_legal").RandomLegal

Q = 1024  # cells per health point on the default 64x64 board


# ---------------------------------------------------------------------------------------- the step
@st.composite
def boards_and_rules(draw: Any, max_size: int = 12) -> tuple[np.ndarray, list[int], bool]:
    n = draw(st.integers(1, max_size))
    bits = draw(st.lists(st.integers(0, 1), min_size=n * n, max_size=n * n))
    rule = draw(st.lists(st.integers(0, 1), min_size=32, max_size=32))
    return np.array(bits, np.uint8).reshape(n, n), rule, draw(st.booleans())


@settings(max_examples=150, deadline=None)
@given(boards_and_rules())
def test_fast_step_matches_the_reference(case: tuple[np.ndarray, list[int], bool]) -> None:
    board, rule, torus = case
    ca = Automaton(board.shape[0], torus)
    ca.load(board)
    expected = board.tolist()
    for _ in range(3):  # several generations through the same buffers
        ca.step(rule)
        expected = reference_step(expected, rule, torus)
        assert ca.board.tolist() == expected


def test_fast_step_matches_the_reference_on_a_full_board() -> None:
    rng = np.random.default_rng(7)
    for torus in (False, True):
        board = rng.integers(0, 2, (64, 64), dtype=np.uint8)
        rule = rng.integers(0, 2, 32).tolist()
        assert step(board, rule, torus).tolist() == reference_step(board.tolist(), rule, torus)


def test_the_seeds_indexing_examples() -> None:
    # 1 = (C,U,R,D,L) = (0,0,0,0,1): only the left neighbour white. 17 = (1,0,0,0,1): C and L white.
    assert rule_index(0, 0, 0, 0, 1) == 1 and neighbourhood(1) == (0, 0, 0, 0, 1)
    assert rule_index(1, 0, 0, 0, 1) == 17 and neighbourhood(17) == (1, 0, 0, 0, 1)
    for centre, index in ((0, 1), (1, 17)):
        board = np.zeros((3, 3), np.uint8)
        board[1, 0], board[1, 1] = 1, centre  # L and C of the middle cell
        only = [0] * 32
        only[index] = 1
        assert step(board, only)[1, 1] == 1
        without = [1] * 32
        without[index] = 0
        assert step(board, without)[1, 1] == 0


def test_neighbours_read_up_right_down_left() -> None:
    board = np.zeros((3, 3), np.uint8)
    for (r, c), bit in (((0, 1), 8), ((1, 2), 4), ((2, 1), 2), ((1, 0), 1)):
        board[:] = 0
        board[r, c] = 1
        rule = [0] * 32
        rule[bit] = 1
        assert step(board, rule)[1, 1] == 1, (r, c)


def test_quadrant_layout_and_packed_bit_order() -> None:
    b = quadrants(64)
    assert (b[:32, :32] == 1).all() and (b[32:, 32:] == 1).all()
    assert (b[:32, 32:] == 0).all() and (b[32:, :32] == 0).all()
    engine = CataEngine.new({})
    assert (engine.board == b).all()
    packed = engine.pending()[1]["board"]
    assert len(packed) == 512
    # numpy.packbits order: row-major, the first cell in the top bit of byte 0.
    assert packed[:4] == b"\xff" * 4 and packed[4:8] == b"\x00" * 4 and packed[-1] == 0xFF
    assert (unpack_board(packed, 64) == b).all()
    odd = np.array([[1, 0, 1], [1, 1, 1], [0, 0, 1]], np.uint8)
    assert pack_board(odd) == bytes([0b10111100, 0b10000000])
    assert (unpack_board(pack_board(odd), 3) == odd).all()
    with pytest.raises(ValueError, match="takes 2 bytes"):
        unpack_board(b"\x00", 3)


@settings(max_examples=30, deadline=None)
@given(boards_and_rules(max_size=16))
def test_the_identity_rule_leaves_any_board_still(case: tuple[np.ndarray, list[int], bool]) -> None:
    board, _, torus = case
    assert (step(board, identity_rule(), torus) == board).all()
    ca = Automaton(board.shape[0], torus)
    ca.load(board)
    r = react(ca, identity_rule(), loser=0)
    assert (r.ended, r.generations) == ("static", 1)
    assert (ca.board == board).all()


# ---------------------------------------------------------------------------------------- the reaction phase
INVERT = [1 - (i >> 4) for i in range(32)]  # every cell flips: period 2
SHIFT_RIGHT = [i & 1 for i in range(32)]  # every cell takes its left neighbour's value


def test_a_two_cycle_is_detected_and_the_loser_picks() -> None:
    board = np.zeros((8, 8), np.uint8)
    board[:5] = 1  # 40 white, 24 black; the next state is the inverse
    for loser, picked in ((0, 1), (1, 0), (None, 2)):
        ca = Automaton(8)
        ca.load(board)
        r = react(ca, INVERT, loser=loser)
        assert (r.ended, r.generations, r.period, r.picked) == ("cycle", 2, 2, picked)
        expected = board if picked != 1 else 1 - board
        assert (ca.board == expected).all()


def test_the_cap_and_the_pick_window() -> None:
    board = np.zeros((16, 16), np.uint8)
    board[:, :8] = 1  # shifting right, the white half leaves through the edge after generation 8
    for loser, picked in ((1, 9), (0, 12), (None, 12)):
        ca = Automaton(16)
        ca.load(board)
        r = react(ca, SHIFT_RIGHT, loser=loser, max_generations=12, pick_window=4)
        assert (r.ended, r.generations, r.period, r.picked) == ("cap", 12, 0, picked)
        expected = np.zeros((16, 16), np.uint8)
        expected[:, picked : picked + 8] = 1
        assert (ca.board == expected).all()
    ca = Automaton(16)
    ca.load(board)
    assert react(ca, SHIFT_RIGHT, loser=0).ended == "static"  # all black after 16 generations


def test_a_long_cycle_on_a_torus() -> None:
    board = np.zeros((16, 16), np.uint8)
    board[3, 5] = 1
    ca = Automaton(16, torus=True)
    ca.load(board)
    r = react(ca, SHIFT_RIGHT, loser=1)
    assert (r.ended, r.generations, r.period, r.picked) == ("cycle", 16, 16, 0)


@settings(max_examples=40, deadline=None)
@given(boards_and_rules(max_size=8), st.sampled_from([0, 1, None]), st.integers(1, 40), st.integers(1, 8))
def test_react_matches_the_reference(
    case: tuple[np.ndarray, list[int], bool], loser: int | None, cap: int, window: int
) -> None:
    board, rule, torus = case
    ca = Automaton(board.shape[0], torus)
    ca.load(board)
    r = react(ca, rule, loser=loser, max_generations=cap, pick_window=window)
    ended, generations, period, final = reference_react(board.tolist(), rule, loser, cap, window, torus)
    assert (r.ended, r.generations, r.period) == (ended, generations, period)
    assert ca.board.tolist() == final


# ---------------------------------------------------------------------------------------- the engine
def request(engine: CataEngine) -> tuple[int, dict[str, Any]]:
    ((seat, req),) = engine.pending().items()
    return seat, req


def play(engine: CataEngine, move: Any) -> tuple[int, Any]:
    """The seat to move plays ``move``; (seat, events)."""
    seat, req = request(engine)
    action = engine.decode(seat, req, list(move))
    assert action is not None
    return seat, engine.apply({seat: action})


def first_turn(engine: CataEngine) -> None:
    """Turn 1: white strikes 0 and 1, black strikes 16 and 17."""
    for move in (strike(0), strike(16), strike(1), strike(17)):
        _, events = play(engine, move)
        assert not events.illegal and not events.malformed


def test_turn_order_and_the_observation() -> None:
    engine = CataEngine.new({})
    seats = []
    for k, move in enumerate((strike(0), strike(16), strike(1), strike(17))):
        seat, req = request(engine)
        seats.append(seat)
        assert (req["turn"], req["move"], req["seat"]) == (1, k, seat)
        assert req["moves_left"] == (2 if k < 2 else 1)
        play(engine, move)
    assert seats == [1, 0, 1, 0] and engine.turn == 2 and engine.tick == 4
    expected = identity_rule()
    expected[0] = expected[1] = 1
    expected[16] = expected[17] = 0
    assert engine.rule.tolist() == expected
    seat, req = request(engine)
    view = make_view(protocol.tick(engine.tick, 100, req))
    assert isinstance(view, View) and view.seat == 1 and view.turn == 2 and view.rule == tuple(expected)
    assert view.health == (62 * Q, 62 * Q) and view.cells_per_hp == Q
    assert req["last_reaction"]["tally"] == [2048, 2048]
    assert req["last_reaction"]["ended"] in ("static", "cycle", "cap")


def test_tally_costs_each_seat_the_other_colour() -> None:
    engine = CataEngine.new({})
    first_turn(engine)
    assert engine.health == [62 * Q, 62 * Q]  # turn 1's tally ran on the untouched quadrants
    engine.rule[:] = identity_rule()
    engine.ca.board[:] = 1
    engine.ca.board[0, :10] = 0
    for _ in range(4):
        play(engine, PASS)
    assert engine.health == [62 * Q - 4086, 62 * Q - 10]


def set_up_tally(engine: CataEngine, health: list[int], whites: int) -> None:
    """Next tally: these healths, and a still board with ``whites`` white cells."""
    engine.rule[:] = identity_rule()
    engine.health = list(health)
    engine.ca.board[:] = 0
    engine.ca.board.reshape(-1)[:whites] = 1


def pass_turn(engine: CataEngine) -> None:
    for _ in range(4):
        play(engine, PASS)


def test_a_threshold_crossed_by_a_jump_resets_the_board_once() -> None:
    engine = CataEngine.new({})
    first_turn(engine)
    rule = engine.rule.copy()
    rule[5] = 1  # a struck entry that the board reset must not undo
    set_up_tally(engine, [48 * Q + 1, 60 * Q], whites=3)
    engine.rule[:] = rule
    pass_turn(engine)
    assert engine.health[0] == 48 * Q - 2  # never exactly 48: crossed, not hit
    assert engine.last_reaction["crossed"] == [[48], []] and engine.last_reaction["reset"] == "board"
    assert engine.rule.tolist() == rule.tolist()
    # Each threshold triggers once: climbing back above 48 and crossing again does nothing.
    set_up_tally(engine, [48 * Q + 1, 60 * Q], whites=3)
    pass_turn(engine)
    assert engine.last_reaction["crossed"] == [[], []] and engine.last_reaction["reset"] == "none"
    assert engine.board.sum() == 3


def test_reaching_a_threshold_exactly_counts() -> None:
    engine = CataEngine.new({})
    first_turn(engine)
    set_up_tally(engine, [60 * Q, 16 * Q + 2], whites=64 * 64 - 2)
    pass_turn(engine)
    assert engine.health[1] == 16 * Q and engine.last_reaction["crossed"] == [[], [16]]
    assert (engine.board == quadrants(64)).all()


def test_32_resets_the_rule_and_the_strongest_reset_wins() -> None:
    engine = CataEngine.new({})
    first_turn(engine)
    struck = engine.rule.copy()
    set_up_tally(engine, [48 * Q + 5, 32 * Q + 5], whites=10)  # black crosses 48, white crosses 32
    engine.rule[:] = struck
    pass_turn(engine)
    assert engine.last_reaction["crossed"] == [[48], [32]]
    assert engine.last_reaction["reset"] == "board_and_rule"
    assert engine.rule.tolist() == identity_rule()
    assert (engine.board == quadrants(64)).all()


def test_meditation_resets_the_board_before_the_tally() -> None:
    engine = CataEngine.new({})
    first_turn(engine)
    set_up_tally(engine, [50 * Q, 60 * Q], whites=4096)
    _, events = play(engine, PASS)  # white
    seat, req = request(engine)
    assert seat == 0 and not req["opponent_meditated"]
    _, events = play(engine, MEDITATE)  # black is behind: legal
    assert not events.illegal
    seat, req = request(engine)
    assert seat == 1 and req["opponent_meditated"]
    play(engine, PASS)
    play(engine, PASS)
    assert engine.health == [48 * Q, 58 * Q]  # tallied on the quadrants, not the all-white board
    assert engine.last_reaction["meditated"] == [True, False]


@pytest.mark.parametrize(
    ("setup", "move", "reason"),
    [
        ("t1", PASS, "turn 1"),
        ("t1", MEDITATE, "turn 1"),
        ("t1", block(20), "turn 1"),
        ("t1", strike(20), "own half"),  # white's first move on its own half
        ("t2", strike(20), "own half"),
        ("t2", strike(2), "already your colour"),
        ("t2", block(18), "nothing to restore"),
        ("t2", block(3), "opponent's half"),
        ("t2", MEDITATE, "below the opponent"),  # equal health
        ("second block", block(17), "already blocked"),
        ("ahead", MEDITATE, "below the opponent"),
        ("twice", MEDITATE, "already meditated"),
    ],
)
def test_every_illegal_move_is_a_counted_reported_noop(
    setup: str, move: tuple[int, int], reason: str
) -> None:
    engine = CataEngine.new({})
    if setup != "t1":
        first_turn(engine)  # rule: 0, 1 white (struck by white); 16, 17 black (struck by black)
        engine.rule[2] = 1  # so that white's strike on 2 finds it white already
    # On turn 2 white (seat 1) moves first: each case ends with white to move.
    if setup == "second block":
        play(engine, block(16))  # white restores 16, black passes, white tries 17
        play(engine, PASS)
    if setup == "ahead":
        engine.health = [50 * Q, 60 * Q]
    if setup == "twice":
        engine.health = [60 * Q, 50 * Q]
        play(engine, MEDITATE)
        play(engine, PASS)
    seat, req = request(engine)
    assert seat == 1
    before_rule, before_board = engine.rule.copy(), engine.board.copy()
    before_flags = (list(engine.blocked), list(engine.meditated))
    action = engine.decode(seat, req, list(move))
    assert action == list(move)
    events = engine.apply({seat: action})
    assert events.illegal == {seat: 1} and not events.malformed
    assert (engine.rule == before_rule).all() and (engine.board == before_board).all()
    assert (list(engine.blocked), list(engine.meditated)) == before_flags
    # The refusal comes back in the seat's next request, with its reason.
    while True:
        nxt, req = request(engine)
        if nxt == seat:
            break
        play(engine, PASS)
    assert req["refused"]["move"] == list(move) and reason in req["refused"]["reason"]
    view = make_view(protocol.tick(engine.tick, 0, req))
    assert view.refused == req["refused"]


def test_the_sdk_agrees_with_the_engine_on_legality() -> None:
    rng = np.random.default_rng(3)
    for trial in range(12):
        engine = CataEngine.new({"max_generations": 4})  # short reactions keep the probes quick
        if trial:
            first_turn(engine)
            engine.rule[:] = rng.integers(0, 2, 32)
            engine.health = [int(h) for h in rng.integers(10 * Q, 60 * Q, 2)]
            for move in [strike(i) for i in range(16)] + [block(i) for i in range(16, 32)]:
                if rng.random() < 0.1:
                    play(engine, move)  # some history this turn: blocks, refusals
        seat, req = request(engine)
        view = make_view(protocol.tick(engine.tick, 0, req))
        legal = set(view.legal_moves())
        for kind in Act:
            for index in range(32):
                probe = copy.deepcopy(engine)
                events = probe.apply({seat: [int(kind), index]})
                listed = (int(kind), index if kind in (Act.STRIKE, Act.BLOCK) else 0) in legal
                assert (not events.illegal) == listed, (trial, kind, index)


def test_malformed_answers_are_invalid_noops() -> None:
    engine = CataEngine.new({})
    seat, req = request(engine)
    for bad in (None, 3, "strike", [1], [1, 2, 3], [9, 0], [1, 32], [1, -1], [True, 1], [1.0, 2], {"k": 1}):
        assert engine.decode(seat, req, bad) is None
    h = engine.state_hash()
    events = engine.apply({seat: [7, 7], 1 - seat: [1, 20]})
    assert events.malformed == {seat: 1, 1 - seat: 1} and not events.illegal
    assert engine.rule.tolist() == identity_rule() and engine.tick == 1 and h != engine.state_hash()


def test_win_draw_and_turn_cap() -> None:
    engine = CataEngine.new({})
    first_turn(engine)
    set_up_tally(engine, [100, 4000], whites=2000)  # both fall to 0 or below: the higher health wins
    pass_turn(engine)
    result = engine.result()
    assert result is not None and result.winner == 1 and result.ranks == {0: 2, 1: 1}
    assert engine.pending() == {} and engine.health == [-1900, 1904]
    draw = CataEngine.new({})
    first_turn(draw)
    set_up_tally(draw, [1000, 1000], whites=2048)
    pass_turn(draw)
    assert draw.result() is not None and draw.result().winner is None and draw.result().ranks == {0: 1, 1: 1}
    capped = CataEngine.new({"max_turns": 2})
    first_turn(capped)
    set_up_tally(capped, [50 * Q, 50 * Q], whites=100)
    pass_turn(capped)
    result = capped.result()
    assert result is not None and result.winner == 0 and "turn cap 2" in result.reason


def test_a_noop_match_ends_in_a_draw_after_32_turns() -> None:
    engine = CataEngine.new({})
    while engine.result() is None:
        engine.apply({})
    assert engine.turn == 32 and engine.result().winner is None and engine.health == [0, 0]


def test_config_errors_say_what_to_change() -> None:
    with pytest.raises(ConfigError, match="even number"):
        CataEngine.new({"size": 63})
    with pytest.raises(ConfigError, match="unknown cata option"):
        CataEngine.new({"sise": 64})
    with pytest.raises(ConfigError, match="must be a whole number"):
        CataEngine.new({"max_turns": "10"})
    with pytest.raises(ConfigError, match="at least 1"):
        CataEngine.new({"max_generations": 0})
    small = CataEngine.new({"size": 8, "torus": True})
    assert small.q == 16 and small.health == [64 * 16] * 2 and small.config.to_mapping()["torus"] is True


def test_sdk_answers() -> None:
    assert encode_answer(strike(5), {}) == [1, 5]
    assert encode_answer(Act.MEDITATE, {}) == [3, 0]
    assert noop_answer({}) == [0, 0]
    for bad in (Act.STRIKE, (1, 40), (8, 1), "x", (1, 2, 3)):
        with pytest.raises(MovesError):
            encode_answer(bad, {})


# ---------------------------------------------------------------------------------------- the bots
def bot_game(bots: list[Any]) -> CataEngine:
    engine = CataEngine.new({})
    while engine.result() is None:
        seat, req = request(engine)
        answer = bots[seat].on_tick(make_view(protocol.tick(engine.tick, 0, req)))
        events = engine.apply({seat: engine.decode(seat, req, encode_answer(answer, req))})
        assert not events.illegal and not events.malformed
    return engine


def test_the_lookahead_bot_beats_the_random_bot() -> None:
    wins = 0
    for game in range(4):
        look = Lookahead(generation_budget=1500)
        seat = game % 2
        bots = [look, RandomLegal(seed=game)] if seat == 0 else [RandomLegal(seed=game), look]
        engine = bot_game(bots)
        result = engine.result()
        assert result is not None and sorted(result.ranks) == [0, 1]
        wins += result.winner == seat
    assert wins >= 3


def test_a_real_match_between_the_example_bots() -> None:
    out = cellarena(
        "match",
        "cata",
        "--bot",
        f"look={example_bot('cata', 'lookahead')}",
        "--bot",
        f"rand={example_bot('cata', 'random_legal')}",
        "--fast",
        "--json",
    )
    assert out.returncode == 0, out.stderr
    report = json.loads(out.stdout)
    assert report["winner"] in ("look", "rand") and report["illegal"] == {"look": 0, "rand": 0}
    assert report["invalid"] == {"look": 0, "rand": 0}


def test_the_benchmark_command_measures_both_steps() -> None:
    code, out = invoke("bench", "cata", "--sizes", "8", "--seconds", "0.05", "--json")
    assert code == 0, out
    r = json.loads(out)["sizes"]["8"]
    assert r["generations_per_s"] > 0 and r["reference_generations_per_s"] > 0
    assert r["ratio"] == pytest.approx(r["generations_per_s"] / r["reference_generations_per_s"])


def test_the_worked_turn_of_the_docs() -> None:
    engine = CataEngine.new({})
    for move in (strike(1), strike(30), strike(8), strike(23)):
        _, events = play(engine, move)
        assert not events.illegal
    assert engine.health == [62 * Q, 62 * Q]
    report = engine.last_reaction
    assert report["tally"] == [2048, 2048] and report["reset"] == "none"
    assert (report["ended"], report["generations"]) == ("static", 63)
    assert int(engine.board.sum()) == 1980
