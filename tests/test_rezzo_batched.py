"""The batched Rezzo step must agree bit for bit with the single-world engine and the slow reference.

Each example is B random boards of one shape (every state and owner, damage, agents with random
facings), stepped with random moves in `BatchedRezzo` and in B separate `RezzoEngine`s side by side,
and without moves against `reference_step`. Every such test runs on both backends, numpy and numba
(`batched_kernel`); a missing numba skips the numba runs, except under CI, where it fails them.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rezzo_backends import both_backends, use
from rezzo_reference import reference_step
from test_rezzo_differential import KINDS, random_board

from cellarena.sdk.games.rezzo import VIEW_SIZE, Cell
from cellarena.server.games.rezzo.batch import batched
from cellarena.server.games.rezzo.batch.batched import BatchedRezzo
from cellarena.server.games.rezzo.engine import RezzoEngine

VIEW_CELLS = VIEW_SIZE * VIEW_SIZE


def slow(examples: int) -> settings:
    return settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@st.composite
def board_makers(draw: st.DrawFn) -> tuple[Any, int]:
    """A maker of engines on random boards of one drawn shape, player count and rule options (every
    state and owner, damage, agents with random facings), each from the given RNG; and a seed."""
    width, height = draw(st.integers(1, 24)), draw(st.integers(1, 16))
    players = draw(st.integers(2, 8))
    own_base_counts = draw(st.booleans())
    max_ticks = draw(st.integers(1, 8))
    weights = [draw(st.sampled_from([0, 0, 1, 3, 10])) for _ in KINDS]
    if sum(weights) == 0:
        weights[1] = 1
    seed = draw(st.integers(0, 2**32 - 1))

    def make(rng: np.random.Generator, tick: int) -> RezzoEngine:
        cells, damage = random_board(rng, height, width, players, weights)
        ys, xs = np.nonzero((cells >= Cell.AGENT) & (cells < Cell.FLAG))
        agents = [
            (int(cells[y, x]) - Cell.AGENT, int(x), int(y), int(rng.integers(0, 4)))
            for y, x in zip(ys, xs, strict=True)
        ]
        return RezzoEngine.from_board(
            cells,
            players=players,
            agents=agents,
            damage=damage,
            tick=tick,
            max_ticks=max_ticks,
            own_base_counts=own_base_counts,
        )

    return make, seed


@st.composite
def batches(draw: st.DrawFn) -> tuple[list[RezzoEngine], int]:
    """B engines on random boards of one shape, player count and rule options; and an RNG seed."""
    make, seed = draw(board_makers())
    rng = np.random.default_rng(seed)
    engines = [make(rng, int(rng.integers(0, 3))) for _ in range(draw(st.integers(1, 4)))]
    return engines, seed


def assert_same(batch: BatchedRezzo, engines: list[RezzoEngine], when: str) -> None:
    k = batch.agents_per_player
    for b, engine in enumerate(engines):
        where = f"{when}, world {b}"
        assert np.array_equal(batch.cells(b), engine.cells()), f"{where}: cells differ"
        assert np.array_equal(batch.damage(b), engine.damage()), f"{where}: damage differs"
        assert batch.tick[b] == engine.tick, where
        for a in engine.agents():
            i = a.player * k + a.index
            got = (batch.x[b, i], batch.y[b, i], batch.facing[b, i], batch.alive[b, i])
            assert got == (a.x, a.y, int(a.facing), a.alive), f"{where}: agent {a}"
        result = engine.result()
        assert batch.done[b] == (result is not None), where
        if result is not None:
            assert list(batch.ranks[b]) == [result.ranks[i] for i in range(engine.players)], where
            assert batch.winner(b) == result.winner, where


def assert_same_views(batch: BatchedRezzo, engines: list[RezzoEngine], when: str) -> None:
    codes, damage = batch.views()
    k = batch.agents_per_player
    for b, engine in enumerate(engines):
        for seat, request in engine.pending().items():
            for j, index in enumerate(request["agents"]):
                i = seat * k + index
                span = slice(j * VIEW_CELLS, (j + 1) * VIEW_CELLS)
                assert codes[b, i].tobytes() == request["cells"][span], f"{when}: world {b} view {i} codes"
                assert damage[b, i].tobytes() == request["damage"][span], f"{when}: world {b} view {i} dmg"


@both_backends
@slow(80)
@given(case=batches(), steps=st.integers(1, 6))
def test_batched_play_matches_engine(backend: str, case: tuple[list[RezzoEngine], int], steps: int) -> None:
    engines, seed = case
    batch = BatchedRezzo(engines, backend=use(backend))
    rng = np.random.default_rng(seed + 1)
    k = batch.agents_per_player
    assert_same(batch, engines, "after loading")
    for step in range(1, steps + 1):
        assert_same_views(batch, engines, f"step {step}")
        some = np.flatnonzero(rng.random(batch.batch) < 0.5)
        assert np.array_equal(batch.views_of(some), batch.observations[some]), f"step {step}: views_of"
        # Mostly legal-looking moves, hits and walks often, and now and then a code that is no move.
        moves = rng.choice([0, 1, 1, 2, 3, 4, 5, 5, 5, 9], size=(batch.batch, batch.n_agents))
        illegal_before = batch.illegal.copy()
        want_illegal: dict[int, dict[int, int]] = {}
        for b, engine in enumerate(engines):
            if engine.result() is not None:
                continue
            alive = engine.frame()["alive"]
            actions = {p: {i: int(moves[b, p * k + i]) for i in range(k)} for p in alive}
            want_illegal[b] = dict(engine.apply(actions).illegal)
        batch.step(moves)
        for b, want in want_illegal.items():
            got_illegal = {p: int(n) for p, n in enumerate(batch.illegal[b] - illegal_before[b]) if n}
            assert got_illegal == want, f"step {step}, world {b}: illegal moves"
        assert_same(batch, engines, f"step {step}")


@slow(30)
@given(case=batches(), steps=st.integers(1, 4))
def test_views_of_worlds_too_large_for_the_index_table(
    case: tuple[list[RezzoEngine], int], steps: int
) -> None:
    """Worlds whose viewport index table would be too large gather from a copy inside a wide border
    (the numpy backend's; the numba one needs no table)."""
    engines, seed = case
    saved = batched.VIEW_TABLE_MAX
    batched.VIEW_TABLE_MAX = 0
    try:
        batch = BatchedRezzo(engines, backend="numpy")
    finally:
        batched.VIEW_TABLE_MAX = saved
    assert batch._numpy_views._view_table is None
    rng = np.random.default_rng(seed)
    k = batch.agents_per_player
    for step in range(steps):
        assert_same_views(batch, engines, f"step {step}")
        both = batch.views_of(np.arange(batch.batch))
        assert np.array_equal(both, batch.observations), f"step {step}: views_of differs from views"
        moves = rng.choice([0, 1, 2, 3, 4, 5], size=(batch.batch, batch.n_agents))
        for b, engine in enumerate(engines):
            if engine.result() is None:
                engine.apply(
                    {p: [int(moves[b, p * k + i]) for i in range(k)] for p in engine.frame()["alive"]}
                )
        batch.step(moves)


@both_backends
@slow(80)
@given(case=batches(), steps=st.integers(1, 4))
def test_batched_transition_matches_reference(
    backend: str, case: tuple[list[RezzoEngine], int], steps: int
) -> None:
    engines, _ = case
    for engine in engines:
        engine.max_ticks = 1000
    batch = BatchedRezzo(engines, backend=use(backend))
    boards = [(e.cells(), e.damage()) for e in engines]
    noop = np.zeros((batch.batch, batch.n_agents), np.int64)
    for step in range(1, steps + 1):
        running = ~batch.done
        alive_before = batch.player_alive.copy()
        batch.step(noop)
        for b, (cells, damage) in enumerate(boards):
            if not running[b]:
                continue
            want, want_damage, losers = reference_step(
                cells, damage, batch.players, own_base_counts=batch.own_base_counts
            )
            assert np.array_equal(batch.cells(b), want), f"step {step}, world {b}: cells differ"
            assert np.array_equal(batch.damage(b), want_damage), f"step {step}, world {b}: damage differs"
            lost = sorted(int(o) for o in np.flatnonzero(alive_before[b] & ~batch.player_alive[b]))
            assert lost == losers, f"step {step}, world {b}: losers {lost} != reference {losers}"
            boards[b] = (want, want_damage)


@both_backends
def test_duel_many_worlds_match_engines_over_a_long_game(backend: str) -> None:
    """Eight duels with random moves for 300 ticks: losses, tick caps and results all agree."""
    engines = [RezzoEngine.new({"map": "duel", "max_ticks": 250}) for _ in range(8)]
    batch = BatchedRezzo(engines, backend=use(backend))
    rng = np.random.default_rng(7)
    for step in range(300):
        if step % 25 == 0:
            assert_same_views(batch, engines, f"tick {step}")
        moves = rng.choice([0, 1, 2, 3, 4, 5, 5, 5, 1, 1], size=(8, batch.n_agents))
        for b, engine in enumerate(engines):
            if engine.result() is None:
                engine.apply({p: [int(moves[b, p])] for p in engine.frame()["alive"]})
        batch.step(moves)
        assert_same(batch, engines, f"tick {step}")
    assert batch.done.all()


@slow(60)
@given(case=batches(), steps=st.integers(1, 8))
def test_backends_agree_on_every_array(case: tuple[list[RezzoEngine], int], steps: int) -> None:
    """numba and numpy side by side: the whole state, results, illegal-move counts and every viewport
    after each step, including the rows of dead agents and the border cells that no engine compares.
    numba on two threads (its worlds split into two runs, where there are two) gives the same, and
    the same events."""
    engines, seed = case
    fast, ref = BatchedRezzo(engines, backend=use("numba")), BatchedRezzo(engines, backend="numpy")
    split = BatchedRezzo(engines, backend="numba", threads=2)
    assert (fast.backend, ref.backend) == ("numba", "numpy")
    assert split.threads == min(2, len(engines))
    rng = np.random.default_rng(seed)
    names = ("codes", "dmg", "x", "y", "facing", "alive", "tick", "player_alive", "lost_at", "ranks", "done")
    for step in range(steps):
        assert np.array_equal(fast.views()[0], ref.views()[0]), f"step {step}: viewport codes"
        assert np.array_equal(fast.observations, ref.observations), f"step {step}: viewports"
        mask = rng.random(fast.batch) < 0.5
        for some in (np.flatnonzero(mask), mask, [-1]):  # indices, a mask, a negative index
            assert np.array_equal(fast.views_of(some), ref.views_of(some)), f"step {step}: views_of {some}"
        # Codes that are no move too, in any integer type a learner may hand over.
        moves = rng.choice([0, 1, 2, 3, 4, 5, 5, 9], size=(fast.batch, fast.n_agents))
        moves = moves.astype(rng.choice([np.uint8, np.int16, np.int32, np.int64]))
        ended = fast.step(moves)
        assert np.array_equal(ended, ref.step(moves)), f"step {step}: ended"
        assert np.array_equal(ended, split.step(moves)), f"step {step}: ended on two threads"
        assert split.events == fast.events == ref.events, f"step {step}: events"
        for name in (*names, "illegal"):
            assert np.array_equal(getattr(fast, name), getattr(ref, name)), f"step {step}: {name}"
            assert np.array_equal(getattr(split, name), getattr(fast, name)), (
                f"step {step}: {name}, 2 threads"
            )
        assert np.array_equal(split.views_of(mask), fast.views_of(mask)), f"step {step}: views on 2 threads"


def test_the_backend_is_chosen_by_argument_or_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    duel = RezzoEngine.new({"map": "duel"})
    assert BatchedRezzo([duel], backend="numpy").backend == "numpy"
    assert BatchedRezzo([duel], backend=use("numba")).backend == "numba"
    assert BatchedRezzo([duel]).backend == "numba"  # auto, where numba is installed
    monkeypatch.setenv(batched.NO_NUMBA_VARIABLE, "1")
    assert BatchedRezzo([duel]).backend == "numpy"
    assert BatchedRezzo([duel], backend="numba").backend == "numba"  # asked for by name
    with pytest.raises(ValueError, match="backend must be one of auto, numpy, numba, got 'fast'"):
        BatchedRezzo([duel], backend="fast")


def test_the_numba_backend_without_numba_says_what_to_install(monkeypatch: pytest.MonkeyPatch) -> None:
    """Without numba, "auto" falls back to numpy and "numba" names the extra to install."""
    import sys

    batched._kernels.cache_clear()
    batched.numba_available.cache_clear()
    monkeypatch.setitem(sys.modules, "numba", None)  # makes `import numba` raise ImportError
    try:
        duel = RezzoEngine.new({"map": "duel"})
        assert BatchedRezzo([duel]).backend == "numpy"
        with pytest.raises(ImportError, match=r"install the \[rl\] extra"):
            BatchedRezzo([duel], backend="numba")
    finally:
        batched._kernels.cache_clear()
        batched.numba_available.cache_clear()


def test_torus_and_mixed_shapes_are_refused() -> None:
    duel = RezzoEngine.new({"map": "duel"})
    with pytest.raises(ValueError, match="torus"):
        BatchedRezzo([RezzoEngine.new({"map": "duel", "torus": True})])
    with pytest.raises(ValueError, match="same size"):
        BatchedRezzo([duel, RezzoEngine.new({"map": "field"})])


def test_slot_bench_times_both_ways() -> None:
    """`slot_bench`'s batched side is the server's own (`SlotBatch`, whose worlds answer as their
    engines do: tests/test_rezzo_slot_batch.py); both sides report a figure."""
    from cellarena.server.bench.games.rezzo.slot import run

    figures = run([2], budget_s=0.05)["slots"]["2"]
    assert figures["agents"] == 16
    assert figures["separate_us_per_agent_tick"] > 0 and figures["batched_us_per_agent_tick"] > 0
