"""Rezzo's game events and causes (issue 27): what each step reports, and that the three paths that
step Rezzo (the engine, the server's slot batch and the vector environment's batch, with numpy or
numba) report the very same events, bit for bit, on random boards."""

from __future__ import annotations

from typing import Any

import numpy as np
from hypothesis import given
from hypothesis import strategies as st
from rezzo_boards import engine_from
from test_rezzo_batched import batches, both_backends, slow, use

from cellarena.sdk.games.rezzo import Move
from cellarena.server.games import causes
from cellarena.server.games.rezzo.batch.batched import BatchedRezzo
from cellarena.server.games.rezzo.batch.slot_batch import SlotBatch
from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.training.rezzo.vector_env import RezzoVectorEnv


@both_backends
@slow(80)
@given(case=batches(), steps=st.integers(1, 8))
def test_batched_events_match_the_engine(
    backend: str, case: tuple[list[RezzoEngine], int], steps: int
) -> None:
    engines, seed = case
    batch = BatchedRezzo(engines, backend=use(backend))
    rng = np.random.default_rng(seed + 7)
    k = batch.agents_per_player
    for step in range(1, steps + 1):
        moves = rng.choice([0, 1, 2, 3, 4, 5, 5, 5, 5], size=(batch.batch, batch.n_agents))
        want: dict[int, list[dict[str, Any]]] = {}
        for b, engine in enumerate(engines):
            if engine.result() is None:
                alive = engine.frame()["alive"]
                actions = {p: {i: int(moves[b, p * k + i]) for i in range(k)} for p in alive}
                want[b] = engine.apply(actions).log
        batch.step(moves)
        for b, log in want.items():
            assert batch.events[b] == log, f"step {step}, world {b}: events"
            result = engines[b].result()
            if result is not None:
                assert batch.lost_causes[b] == {
                    s: c for s, c in result.causes.items() if c["cause"] == "flag_at_base"
                }, f"step {step}, world {b}: causes"


def test_a_flag_beside_a_base_is_the_event_and_the_cause() -> None:
    # A flag of player 0 formed beside player 1's base: player 0 is out, and says so.
    picture = """
    . . . . .
    . G0 * B1 .
    . . ~ . .
    A0 . . . A1
    """
    engine = engine_from(picture, 2)
    first = engine.apply({})
    assert [e["kind"] for e in first.log] == ["flag_formed"]
    assert first.log[0] == {"kind": "flag_formed", "tick": 1, "seat": 0, "cell": [2, 1]}
    second = engine.apply({})
    assert second.log == [
        {"kind": "flag_at_base", "tick": 2, "seat": 0, "flag": [2, 1], "base": [3, 1], "by": 1},
        {"kind": "out", "tick": 2, "seat": 0, "cause": "flag_at_base"},
    ]
    result = engine.result()
    assert result is not None and result.winner == 1
    assert result.causes[0]["cause"] == "flag_at_base" and result.causes[0]["by"] == 1
    assert result.causes[1] == {"cause": "last_player_standing", "tick": 2}
    said = causes.sentence(0, result.causes[0], ["raider", "builder"])
    assert said == "raider is out at tick 2: its flag at (2, 1) touched builder's base at (3, 1)"


def test_hits_that_blank_a_cell_are_events_of_the_hitter_or_the_flag_owner() -> None:
    picture = """
    . F1:3 . #:3 .
    . A0^ . A1^ .
    """
    engine = engine_from(picture, 2, max_ticks=10)
    hit = int(Move.HIT)
    log = engine.apply({0: {0: hit}, 1: {0: hit}}).log
    assert log == [
        {"kind": "flag_destroyed", "tick": 0, "seat": 1, "cell": [1, 0], "how": "hit", "by": 0},
        {"kind": "cell_destroyed", "tick": 0, "seat": 1, "cell": [3, 0], "was": "conductor"},
    ]


def test_the_tick_cap_is_every_survivors_cause() -> None:
    engine = engine_from(". A0 . A1 .", 2, max_ticks=2)
    while engine.result() is None:
        engine.apply({})
    result = engine.result()
    assert result is not None
    assert {s: c["cause"] for s, c in result.causes.items()} == {0: "tick_cap", 1: "tick_cap"}


@both_backends
def test_slot_batch_and_vector_env_give_the_engines_events(backend: str) -> None:
    """A whole duel, the built-in map, with random moves: the slot batch's events and result causes
    are the engine's; the vector environment hands the same events to a trainer in ``infos``."""
    use(backend)
    rng = np.random.default_rng(3)
    config = {"map": "duel", "max_ticks": 300}
    engine, twin = RezzoEngine.new(config), RezzoEngine.new(config)
    world = SlotBatch(twin, 2, backend=backend).join(twin)
    assert world is not None
    env = RezzoVectorEnv(1, config, backend=backend, events=True)
    env.reset(seed=0)
    quiet = RezzoVectorEnv(1, config, backend=backend)
    quiet.reset(seed=0)
    seen = 0
    while engine.result() is None:
        moves = rng.choice([0, 1, 2, 3, 4, 5, 5], size=env.num_envs)
        k = env.agents_per_player
        actions = {p: {i: int(moves[p * k + i]) for i in range(k)} for p in engine.frame()["alive"]}
        log = engine.apply(actions).log
        assert world.apply(actions).log == log
        *_, infos = env.step(moves)
        assert infos.get("events", {}).get(0, []) == log
        assert "events" not in quiet.step(moves)[-1]  # off unless asked for
        seen += len(log)
    assert seen > 0
    assert world.result() == engine.result()


BLOCKED_BOARD = """
A0^ # A1<
A0^ . A1<
"""


def test_agents_that_could_not_move_are_one_event_per_seat_and_tick() -> None:
    # Seat 0: one agent advances off the world, the other into its teammate; seat 1: one builds into
    # wire, the other hits a blank cell (illegal, but it was no move, so not blocked).
    engine = engine_from(BLOCKED_BOARD, 2, max_ticks=10)
    adv, build, hit = int(Move.ADVANCE), int(Move.BUILD), int(Move.HIT)
    events = engine.apply({0: {0: adv, 1: build}, 1: {0: build, 1: hit}})
    assert events.illegal == {0: 2, 1: 2}
    assert events.log == [
        {"kind": "blocked", "tick": 0, "seat": 0, "count": 2},
        {"kind": "blocked", "tick": 0, "seat": 1, "count": 1},
    ]
    assert engine.apply({0: {0: int(Move.RIGHT)}}).log == []  # turning is never blocked


@both_backends
def test_the_batched_step_counts_blocked_agents_as_the_engine_does(backend: str) -> None:
    engine = engine_from(BLOCKED_BOARD, 2, max_ticks=10)
    batch = BatchedRezzo([engine_from(BLOCKED_BOARD, 2, max_ticks=10)] * 3, backend=use(backend))
    adv, build, hit = int(Move.ADVANCE), int(Move.BUILD), int(Move.HIT)
    want = engine.apply({0: {0: adv, 1: build}, 1: {0: build, 1: hit}}).log
    moves = np.array([[adv, build, build, hit], [0, 0, 0, 0], [0, adv, 0, 0]])
    batch.step(moves)
    assert batch.events[0] == want
    assert batch.blocked.tolist() == [[2, 1], [0, 0], [1, 0]]
    assert batch.events[1] == []
    assert batch.events[2] == [{"kind": "blocked", "tick": 0, "seat": 0, "count": 1}]
