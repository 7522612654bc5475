"""Cloth of Gold engine: rounds and turns, refusals reported back, the end conditions, the bots."""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from bot_files import example_bot, load_example_bot
from cellarena_cli import cellarena

from cellarena.sdk import protocol
from cellarena.sdk.games import MovesError
from cellarena.sdk.games.cloth import A, C, encode_answer, make_view, noop_answer
from cellarena.server.games.base import ConfigError
from cellarena.server.games.cloth.engine import ClothConfig, ClothEngine, neutral_board

Planner = load_example_bot("cloth", "planner").Planner
RandomPlacer = load_example_bot("cloth", "random_placer").RandomPlacer


def still(**options: Any) -> ClothEngine:
    """An empty 20x20 board whose generations change nothing (0 of them): the scores are the placements."""
    return ClothEngine.from_board(np.zeros((20, 20), np.uint8), generations=0, **options)


def turn(engine: ClothEngine, seat: int, units: Any) -> Any:
    requests = engine.pending()
    assert list(requests) == [seat]
    action = engine.decode(seat, requests[seat], units)
    return engine.apply({seat: action})


def test_a_round_asks_one_seat_at_a_time_and_b_leads_even_rounds() -> None:
    e = ClothEngine.from_board(np.zeros((20, 20), np.uint8), generations=0)
    req = e.pending()[0]
    assert req["round"] == 1 and req["you"] == A and req["first"] and req["places_first"]
    turn(e, 0, [[2, 2], [3, 2], [2, 3], [3, 3]])
    assert e.pending()[1]["places_first"] is False
    turn(e, 1, [[15, 15], [16, 15], [15, 16], [16, 16], [16, 17]])
    assert e.result() is None and e.round == 2 and e.tick == 2
    assert list(e.pending()) == [1]  # B first in even rounds
    assert e.pending()[1]["first"] is False
    assert e.history[-1].units == (4, 5)


def test_refusals_go_back_to_the_bot_with_reasons() -> None:
    e = still()
    events = turn(e, 0, [[5, 5], [5, 5], [19, 19], [99, 0], "junk"])
    assert events.illegal == {0: 3} and events.malformed == {0: 1}
    turn(e, 1, [[10, 10]])
    turn(e, 1, [[10, 11]])  # round 2: B first
    rejected = e.pending()[0]["rejected"]
    assert rejected == [
        [1, 5, 5, "occupied"],
        [2, 19, 19, "outside_territory"],
        [3, 99, 0, "off_board"],
        [4, -1, -1, "malformed"],
    ]
    view = make_view(protocol.tick(e.tick, 100, e.pending()[0]))
    assert [r.reason for r in view.rejected] == ["occupied", "outside_territory", "off_board", "malformed"]


def test_an_empty_batch_is_illegal_and_a_wrong_shape_is_invalid() -> None:
    e = still()
    req = e.pending()[0]
    assert e.decode(0, req, "place") is None
    assert e.decode(0, req, [[1, 1]] * 11) is None  # more than max_units
    assert e.decode(0, req, [[1, True], [1, 2]]) == [None, [1, 2]]
    events = turn(e, 0, [])
    assert events.illegal == {0: 1}
    assert e.pending()[1]["units"] == [0, 0]


def test_a_seat_with_no_legal_cell_is_not_asked() -> None:
    board = np.full((10, 10), C, np.uint8)
    board[5, 5] = 0  # the only free cell
    e = ClothEngine.from_board(board, generations=0)
    turn(e, 0, [[5, 5]])
    # B has nowhere to go, in round 1 or after; nor has A in round 2: nobody is asked again.
    assert e.pending() == {}
    r = e.result()
    assert r is not None and r.winner == 0 and r.ticks == 1 and len(e.history) == 2


def test_both_extinct_is_a_draw() -> None:
    e = ClothEngine.new({}, seed=4)
    e.apply({})
    e.apply({})
    r = e.result()
    assert r is not None and r.winner is None and r.ranks == {0: 1, 1: 1} and "died out" in r.reason


@pytest.mark.parametrize("leader", [0, 1])
def test_the_leader_wins_when_the_other_falls_behind_and_does_not_recover(leader: int) -> None:
    e = still()
    big, small = [[2, 2], [3, 2], [2, 3]], [[15, 15]]
    turn(e, 0, big if leader == 0 else small)
    turn(e, 1, small if leader == 0 else big)
    assert e.result() is None  # never in round 1
    turn(e, 1, [[15, 16]] if leader == 0 else [[3, 3]])  # round 2: B first
    turn(e, 0, [[3, 3]] if leader == 0 else [[15, 16]])
    r = e.result()
    assert r is not None and r.winner == leader and r.ranks[leader] == 1 and r.ranks[1 - leader] == 2
    assert r.scores[leader] == 2.0


def test_a_shrinking_lead_does_not_win() -> None:
    e = still()
    turn(e, 0, [[2, 2], [3, 2], [2, 3]])
    turn(e, 1, [[15, 15]])
    turn(e, 1, [[15, 16], [16, 15]])  # round 2: B catches up by 2, A adds nothing
    e.apply({})
    assert e.result() is None


def test_the_round_cap_goes_to_score_then_territory_then_a_draw() -> None:
    e = still(max_rounds=1)
    turn(e, 0, [[2, 2], [3, 2]])
    turn(e, 1, [[15, 15]])
    assert e.result().winner == 0 and "higher score" in e.result().reason  # type: ignore[union-attr]
    e = still(max_rounds=1)
    turn(e, 0, [[2, 2], [3, 2]])  # adjacent: territories overlap
    turn(e, 1, [[15, 15], [17, 17]])  # spread: more territory
    assert e.result().winner == 1 and "territory" in e.result().reason  # type: ignore[union-attr]
    e = still(max_rounds=1)
    turn(e, 0, [[2, 2]])
    turn(e, 1, [[15, 15]])
    assert e.result().winner is None and "level" in e.result().reason  # type: ignore[union-attr]


def test_strict_mutual_loss_ends_on_equal_populations() -> None:
    for strict in (False, True):
        e = still(strict_mutual_loss=strict)
        turn(e, 0, [[2, 2]])
        turn(e, 1, [[15, 15]])
        assert (e.result() is not None) is strict


def test_generations_run_after_both_placements() -> None:
    e = ClothEngine.from_board(np.zeros((20, 20), np.uint8), generations=1)
    turn(e, 0, [[5, 5], [6, 5], [7, 5]])  # a blinker
    turn(e, 1, [[15, 15]])  # a lone cell dies
    assert e.board[4:7, 6].tolist() == [A, A, A] and e.history[-1].units == (3, 0)


def test_neutral_cells_are_point_symmetric_and_seeded() -> None:
    cfg = ClothConfig()
    board = neutral_board(cfg, 7)
    assert (board == board[::-1, ::-1]).all()
    assert set(np.unique(board).tolist()) <= {0, C}
    assert 0.05 < np.mean(board == C) < 0.11
    assert (neutral_board(cfg, 7) == board).all() and not (neutral_board(cfg, 8) == board).all()
    assert not neutral_board(ClothConfig(neutral_density=0.0), 7).any()


@pytest.mark.parametrize(
    ("config", "words"),
    [
        ({"width": 3}, "between 8 and 1024"),
        ({"widht": 64}, "unknown cloth option"),
        ({"max_units": "10"}, "whole number"),
        ({"neutral_density": 0.9}, "between 0 and 0.5"),
        ({"strict_mutual_loss": 1}, "true or false"),
    ],
)
def test_config_errors_say_what_to_change(config: dict[str, Any], words: str) -> None:
    with pytest.raises(ConfigError, match=words):
        ClothEngine.new(config)


def test_config_round_trips() -> None:
    cfg = ClothConfig.from_mapping({"width": 32, "neutral_density": 0})
    assert ClothConfig.from_mapping(cfg.to_mapping()) == cfg
    assert ClothEngine.new(cfg.to_mapping()).public_config()["threshold"] == 729


def test_the_sdk_answer_encoding() -> None:
    msg = {"max_units": 3}
    assert encode_answer([(1, 2), np.array([3, 4])], msg) == [[1, 2], [3, 4]]
    assert encode_answer(np.array([[1, 2]]), msg) == [[1, 2]]
    assert noop_answer(msg) == []
    for bad in ([(1, 2)] * 4, 5, [(1, 2, 3)], [("a", 1)]):
        with pytest.raises(MovesError):
            encode_answer(bad, msg)


# ---------------------------------------------------------------------------------------- bots
def play(seed: int, bots: dict[int, Any], budget_ms: int = 400) -> tuple[ClothEngine, float]:
    """A whole game, each bot's on_tick driven directly against the engine; the slowest answer (s)."""
    e = ClothEngine.new({}, seed=seed)
    slowest = 0.0
    while e.result() is None:
        ((seat, req),) = e.pending().items()
        message = protocol.tick(e.tick, budget_ms, req)
        t0 = time.monotonic()
        answer = encode_answer(bots[seat].on_tick(make_view(message)), message)
        slowest = max(slowest, time.monotonic() - t0)
        events = e.apply({seat: e.decode(seat, req, answer)})
        assert not events.illegal and not events.malformed  # both bots place legal units only
    return e, slowest


# Real time: asserts each of the planner's answers takes under 400 ms of real time.
@pytest.mark.realtime
def test_the_planner_beats_the_random_placer() -> None:
    wins = 0
    for seed in range(4):
        planner_seat = seed % 2
        bots = {planner_seat: Planner(seed), 1 - planner_seat: RandomPlacer(seed)}
        engine, slowest = play(seed, bots)
        result = engine.result()
        assert result is not None
        wins += result.winner == planner_seat
        assert slowest < 0.4  # within the budget it was given
    assert wins >= 3


def test_a_match_between_the_example_bots_over_tcp(tmp_path: Path) -> None:
    proc = cellarena(
        "match",
        "cloth",
        "--bot",
        f"plan={example_bot('cloth', 'planner')}",
        "--bot",
        f"rand={example_bot('cloth', 'random_placer')}",
        "--fast",
        "--json",
        "--max-rounds",
        "4",
        "--log-dir",
        str(tmp_path),
    )
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    assert out["winner"] in ("plan", "rand", None)
    assert out["invalid"] == {"plan": 0, "rand": 0} and out["illegal"] == {"plan": 0, "rand": 0}
    assert out["late"] == {"plan": 0, "rand": 0}
    assert Path(out["replay"]).exists()
