"""A match's world in the server's slot batch must answer the match loop exactly as its own
`RezzoEngine` would: the same requests, events, frames, state hashes and results, tick by tick.

Each example runs twin worlds: one a plain engine, the other the same world moved into a
`SlotBatch` (at different ticks, leaving when its match ends and making room for others), both
given the same raw answers, well-formed or not. Both backends of the batched step run it.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from test_rezzo_batched import board_makers, both_backends, slow, use

from cellarena.server.games.base import Events
from cellarena.server.games.registry import batching_of
from cellarena.server.games.rezzo.batch.slot_batch import BATCHING, BatchedWorld, SlotBatch
from cellarena.server.games.rezzo.engine import RezzoEngine


def raw_answer(rng: np.random.Generator, request: dict[str, Any]) -> Any:
    """What a bot might send as `moves`: mostly move lists, sometimes a map, junk codes or junk."""
    n = len(request["agents"])
    roll = rng.random()
    if roll < 0.05:
        return None
    if roll < 0.1:
        return "advance"  # not a list: malformed as a whole
    if roll < 0.15:
        return [1] * (n + 1)  # the wrong length
    moves: list[Any] = [int(m) for m in rng.integers(0, 6, n)]
    if roll < 0.25 and n:
        moves[int(rng.integers(0, n))] = int(rng.choice([-1, 6, 99]))  # one bad code
    if roll < 0.3 and n:
        moves[0] = 2.0  # a float code
    return moves


def same_events(got: Events, want: Events, where: str) -> None:
    assert got.illegal == want.illegal, f"{where}: illegal {got.illegal} != {want.illegal}"
    assert got.malformed == want.malformed, f"{where}: malformed {got.malformed} != {want.malformed}"
    assert sorted(got.losers) == sorted(want.losers), f"{where}: losers"


def same_state(world: BatchedWorld, engine: RezzoEngine, where: str) -> None:
    """Everything the match loop reads; requests only while the world is in its batch (one that
    left is over for its match, and asks nothing)."""
    assert world.tick == engine.tick, where
    assert world.frame() == engine.frame(), f"{where}: frames differ"
    assert world.state_hash() == engine.state_hash(), f"{where}: hashes differ"
    assert world.result() == engine.result(), f"{where}: results differ"
    assert world.pending() == (engine.pending() if not world.left else {}), f"{where}: requests differ"
    assert np.array_equal(world.cells(), engine.cells()) and np.array_equal(world.damage(), engine.damage())
    assert world.agents() == engine.agents(), where


def play_twins(
    make: Any, worlds: int, ticks: int, seed: int, backend: str, *, capacity: int = 3, leave_at: float = 0.1
) -> None:
    """``worlds`` matches (each ``make()``), every one played as a plain engine and, from a random
    tick on, in one `SlotBatch` of ``capacity`` places: a match waits for a place, and leaves when it
    ends or at random (``leave_at``: the chance per tick), its twin then checked after it left too."""
    rng = np.random.default_rng(seed)
    first = make()
    batch = SlotBatch(first, capacity, backend=use(backend))
    assert batch.room == capacity and len(batch) == 0
    twins: list[dict[str, Any]] = [
        {"engine": make(), "mirror": make(), "join_at": int(rng.integers(0, 4)), "world": None, "done": False}
        for _ in range(worlds)
    ]
    for t in range(ticks):
        active = [tw for tw in twins if not tw["done"]]
        if not active:
            break
        _join_waiting(batch, active, t, ticks)
        staged: list[tuple[dict[str, Any], Events, Events]] = []
        for i, tw in enumerate(active):
            engine, where = tw["engine"], f"tick {t}, match {i}"
            current = tw["world"] if tw["world"] is not None else tw["mirror"]
            if tw["world"] is not None:
                same_state(tw["world"], engine, where)
            else:
                assert current.state_hash() == engine.state_hash(), where
            requests = engine.pending()
            if engine.result() is not None:
                tw["done"] = True
                if tw["world"] is not None:
                    batch.leave(tw["world"])
                    same_state(tw["world"], engine, f"{where}, after it left")
                    with pytest.raises(RuntimeError, match="left its batch"):
                        tw["world"].stage({})
                continue
            actions = _random_actions(rng, engine, current, requests)
            want = engine.apply(actions)
            if tw["world"] is not None:
                staged.append((tw, tw["world"].stage(actions), want))
            else:
                same_events(current.apply(actions), want, where)
        batch.step()
        for tw, got, want in staged:
            same_events(got, want, f"tick {t}")
            if rng.random() < leave_at and not tw["done"]:  # its match is cancelled: it leaves unfinished
                batch.leave(tw["world"])
                same_state(tw["world"], tw["engine"], f"tick {t}, left unfinished")
                tw["done"] = True
    assert len(batch) == sum(1 for tw in twins if tw["world"] is not None and not tw["world"].left)


def _join_waiting(batch: SlotBatch, active: list[dict[str, Any]], t: int, ticks: int) -> None:
    """Each match due to join the batch takes a place while there is one (if its world fits)."""
    for tw in active:
        if tw["world"] is None and t >= tw["join_at"] and batch.room:
            fits = tw["mirror"].batch_key() == batch.key  # not once a player is out
            tw["world"] = batch.join(tw["mirror"])
            assert (tw["world"] is not None) == fits
            if not fits:
                tw["join_at"] = ticks  # it plays on as a plain engine, as the server leaves it


def _random_actions(rng: Any, engine: Any, current: Any, requests: dict[int, Any]) -> dict[int, Any]:
    """Random answers decoded alike by the engine and its twin, now and then a malformed seat."""
    answers = {seat: raw_answer(rng, request) for seat, request in requests.items()}
    actions = {}
    for seat, answer in answers.items():
        action = engine.decode(seat, requests[seat], answer)
        assert current.decode(seat, requests[seat], answer) == action
        if action is not None:
            actions[seat] = action
    if rng.random() < 0.05:
        actions[engine.players] = [1]  # a seat that does not exist: malformed
    return actions


@st.composite
def boards(draw: st.DrawFn) -> tuple[Any, int]:
    """A maker of one random bounded world (every state and owner, damage, facings), and a seed:
    each call makes the same world anew."""
    make_random, seed = draw(board_makers())
    return lambda: make_random(np.random.default_rng(seed), 1), seed


@both_backends
@slow(60)
@given(case=boards(), worlds=st.integers(1, 5))
def test_batched_worlds_answer_as_their_engines_on_random_boards(
    backend: str, case: tuple[Any, int], worlds: int
) -> None:
    make, seed = case
    play_twins(make, worlds, 16, seed, backend)


@both_backends
@pytest.mark.parametrize("map_name", ["duel", "quad"])
def test_batched_matches_on_real_maps_answer_as_their_engines(backend: str, map_name: str) -> None:
    """Long matches on built-in maps, more than the batch holds: places are freed and taken again."""
    play_twins(
        lambda: RezzoEngine.new({"map": map_name, "max_ticks": 60}),
        5,
        160,
        7,
        backend,
        capacity=3,
        leave_at=0.02,
    )


def test_what_cannot_be_batched_is_refused() -> None:
    duel = RezzoEngine.new({"map": "duel"})
    assert RezzoEngine.new({"map": "duel", "torus": True}).batch_key() is None
    assert batching_of(duel) is BATCHING  # from Rezzo's plugin; the engine names no batch module
    assert BATCHING.key(duel) == duel.batch_key() is not None
    batch = BATCHING.new_batch(duel, 2)
    assert isinstance(batch, SlotBatch) and batch.room == 2
    assert batch.join(RezzoEngine.new({"map": "quad"})) is None  # another shape
    assert batch.join(RezzoEngine.new({"map": "duel", "own_base_counts": False})) is None  # other rules
    assert batch.join(duel) is not None and batch.join(RezzoEngine.new({"map": "duel"})) is not None
    assert batch.room == 0 and batch.join(RezzoEngine.new({"map": "duel"})) is None  # full
    with pytest.raises(ValueError, match="cannot be batched"):
        SlotBatch(RezzoEngine.new({"map": "duel", "torus": True}))


def test_a_world_made_on_its_own_plays_as_the_engine() -> None:
    """`BatchedWorld.new` (the engine interface's constructor): a batch of one, `apply` stepping it."""
    world, engine = (
        BatchedWorld.new({"map": "duel", "max_ticks": 30}),
        RezzoEngine.new({"map": "duel", "max_ticks": 30}),
    )
    while engine.result() is None:
        same_state(world, engine, f"tick {engine.tick}")
        actions = {seat: [4] * len(r["agents"]) for seat, r in engine.pending().items()}  # build
        same_events(world.apply(actions), engine.apply(actions), f"tick {engine.tick}")
    same_state(world, engine, "the end")
