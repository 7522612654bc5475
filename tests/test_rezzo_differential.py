"""The fast Rezzo CA and viewports must agree with the slow reference on random boards.

Boards are drawn by hypothesis as a few parameters (size, players, variant, per-state weights and an RNG
seed); the cells come from a seeded numpy RNG, which keeps drawing fast on boards of 1000+ cells.
Widths straddle the 64-bit word boundaries of the bit-plane CA.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rezzo_backends import use
from rezzo_boards import render
from rezzo_reference import RefAgent, reference_agent_phase, reference_step, reference_viewport

from cellarena.sdk.games.rezzo import VIEW_SIZE, Cell, Facing, Move
from cellarena.server.games.rezzo.ca import BitWorld
from cellarena.server.games.rezzo.engine import RezzoEngine

# Kinds in the order of the weights below; owned kinds get a random owner.
KINDS = [
    Cell.BLANK,
    Cell.CONDUCTOR,
    Cell.ELECTRON,
    Cell.TAIL,
    Cell.PHOTON,
    Cell.AGENT,
    Cell.FLAG,
    Cell.GEYSER,
    Cell.BASE,
]
# Only these states can carry damage (resolution 8: photons keep what their electron had).
DAMAGEABLE = [Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL, Cell.PHOTON]


def slow(examples: int) -> settings:
    """Settings for tests whose examples take tens of milliseconds (the reference is plain Python)."""
    return settings(max_examples=examples, deadline=None, suppress_health_check=[HealthCheck.too_slow])


@dataclass
class World:
    cells: np.ndarray
    damage: np.ndarray
    players: int
    torus: bool
    own_base_counts: bool

    def __repr__(self) -> str:  # hypothesis prints this for a failing example
        return (
            f"World(players={self.players}, torus={self.torus}, own_base_counts={self.own_base_counts},"
            f" size={self.cells.shape[1]}x{self.cells.shape[0]})\n{render(self.cells, self.damage)}"
        )


def random_board(
    rng: np.random.Generator, height: int, width: int, players: int, weights: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """Cells of every state and owner, and damage 0..3 on the states that can carry it."""
    p = np.array(weights, dtype=float)
    kinds = np.array([int(k) for k in KINDS], dtype=np.uint8)[
        rng.choice(len(KINDS), size=(height, width), p=p / p.sum())
    ]
    owners = rng.integers(0, players, size=(height, width), dtype=np.uint8)
    cells = np.where(kinds >= Cell.AGENT, kinds + owners, kinds).astype(np.uint8)
    can_carry = np.isin(cells, [int(k) for k in DAMAGEABLE]) | ((cells >= Cell.FLAG) & (cells < Cell.GEYSER))
    damage = np.where(can_carry, rng.integers(0, 4, size=(height, width)), 0).astype(np.uint8)
    return cells, damage


# Sizes: mostly any, often right at a word boundary, sometimes degenerate (1 wide or 1 high).
WORD_EDGES = [63, 64, 65, 66, 127, 128, 129]
widths = st.one_of(st.integers(1, 70), st.sampled_from([1, 2, 3, *WORD_EDGES]))
heights = st.one_of(st.integers(1, 20), st.sampled_from([1, 2, 3]))
# Each state's weight; 0 often, so that some boards lack bases, flags, electrons...
weight = st.sampled_from([0, 0, 1, 3, 10])


@st.composite
def worlds(draw: st.DrawFn) -> World:
    width = draw(widths)
    height = draw(heights)
    players = draw(st.integers(2, 8))
    weights = [draw(weight) for _ in KINDS]
    if sum(weights) == 0:
        weights[1] = 1
    seed = draw(st.integers(0, 2**32 - 1))
    cells, damage = random_board(np.random.default_rng(seed), height, width, players, weights)
    return World(cells, damage, players, torus=draw(st.booleans()), own_base_counts=draw(st.booleans()))


def first_difference(
    old: np.ndarray, old_damage: np.ndarray, want: np.ndarray, got: np.ndarray, what: str
) -> str:
    """A readable account of where two boards differ, with the old neighbourhood of that cell."""
    ys, xs = np.nonzero(want != got)
    y, x = int(ys[0]), int(xs[0])
    y0, x0 = max(0, y - 1), max(0, x - 1)
    around = render(old[y0 : y + 2, x0 : x + 2], old_damage[y0 : y + 2, x0 : x + 2])
    return (
        f"{len(ys)} {what} differ; first at (x={x}, y={y}): reference {want[y, x]}, fast {got[y, x]}\n"
        f"old 3x3 around it (edges clipped):\n{around}"
    )


def assert_same_board(
    old: np.ndarray, old_damage: np.ndarray, want: np.ndarray, got: np.ndarray, *, what: str, step: int
) -> None:
    assert got.shape == want.shape, f"step {step}: {what} shape {got.shape} != {want.shape}"
    if not np.array_equal(got, want):
        pytest.fail(f"step {step}: " + first_difference(old, old_damage, want, got, what))


# ---------------------------------------------------------------------------------------- BitWorld


@slow(300)
@given(world=worlds(), steps=st.integers(1, 4))
def test_bitworld_step_matches_reference(world: World, steps: int) -> None:
    """Both backends (numpy's ufunc passes, numba's compiled step) against the reference, and the
    flags each finds (the events' source) against each other."""
    fast, compiled = (
        BitWorld.from_codes(
            world.cells.copy(),
            world.players,
            torus=world.torus,
            own_base_counts=world.own_base_counts,
            backend=backend,
        )
        for backend in ("numpy", use("numba"))
    )
    assert np.array_equal(fast.codes(), world.cells), "from_codes/codes() does not round-trip"
    cells, damage = world.cells, world.damage
    for step in range(1, steps + 1):
        want, want_damage, want_losers = reference_step(
            cells, damage, world.players, own_base_counts=world.own_base_counts, torus=world.torus
        )
        found: list[tuple[int, int, int, int]] = []
        found_compiled: list[tuple[int, int, int, int]] = []
        losers = fast.step(found)
        assert compiled.step(found_compiled) == losers, f"step {step}: the backends' losers differ"
        assert found_compiled == found, f"step {step}: the backends found different flags"
        for got in (fast, compiled):
            assert_same_board(cells, damage, want, got.codes(), what=f"{got.backend} cells", step=step)
        assert sorted(losers) == want_losers, f"step {step}: losers {losers} != reference {want_losers}"
        cells, damage = want, want_damage


@pytest.mark.parametrize("backend", ["numpy", "numba"])
@pytest.mark.parametrize("width", [63, 64, 65, 127, 128, 129, 130])
@pytest.mark.parametrize("torus", [False, True])
def test_bitworld_word_boundaries(width: int, torus: bool, backend: str) -> None:
    """Busy wire-heavy boards exactly at and around 64-bit word edges, for several steps."""
    rng = np.random.default_rng(width * 2 + torus)
    cells, damage = random_board(rng, 6, width, 3, [2, 10, 4, 3, 2, 1, 2, 1, 0])
    # One base far from everything would end the game early for someone; keep a few anyway.
    cells[0, width - 1] = Cell.BASE + 1
    cells[5, 0] = Cell.BASE + 2
    fast = BitWorld.from_codes(cells.copy(), 3, torus=torus, backend=use(backend))
    for step in range(1, 7):
        want, want_damage, want_losers = reference_step(cells, damage, 3, torus=torus)
        losers = fast.step()
        assert_same_board(cells, damage, want, fast.codes(), what="cells", step=step)
        assert sorted(losers) == want_losers
        cells, damage = want, want_damage


# ---------------------------------------------------------------------------------------- engine


@slow(200)
@given(world=worlds(), steps=st.integers(1, 3))
def test_engine_step_matches_reference(world: World, steps: int) -> None:
    """With every agent idle, one apply() is exactly one reference step, damage included."""
    engine = RezzoEngine.from_board(
        world.cells.copy(),
        players=world.players,
        damage=world.damage.copy(),
        torus=world.torus,
        own_base_counts=world.own_base_counts,
    )
    assert np.array_equal(engine.cells(), world.cells)
    assert np.array_equal(engine.damage(), world.damage)
    cells, damage = world.cells, world.damage
    lost: set[int] = set()
    for step in range(1, steps + 1):
        if engine.result() is not None:
            break  # the match is over; nothing steps any more
        want, want_damage, want_losers = reference_step(
            cells, damage, world.players, own_base_counts=world.own_base_counts, torus=world.torus
        )
        events = engine.apply({})
        assert_same_board(cells, damage, want, engine.cells(), what="cells", step=step)
        assert_same_board(cells, damage, want_damage, engine.damage(), what="damage values", step=step)
        assert sorted(events.losers) == want_losers
        assert not events.malformed and not events.illegal
        lost |= set(want_losers)
        for agent in engine.agents():
            assert agent.alive == (agent.player not in lost)
            if agent.alive:
                assert want[agent.y, agent.x] == Cell.AGENT + agent.player
        cells, damage = want, want_damage


# ---------------------------------------------------------------------------------------- play


@dataclass
class Game:
    world: World
    agents: list[tuple[int, int, int, int]]  # (player, x, y, facing); index = order within the player
    start_tick: int
    moves: list[dict[int, list[Any]]]  # per tick: seat -> one raw move per agent index

    def __repr__(self) -> str:
        return f"Game(start_tick={self.start_tick}, agents={self.agents}, moves={self.moves})\n{self.world!r}"


@st.composite
def games(draw: st.DrawFn, *, crowded: bool = False) -> Game:
    """Random boards with K agents per player and a few ticks of random moves.

    Crowded games (tiny, mostly blank boards without bases, many agents, mostly advancing) make agents
    contend for cells and follow each other, which is where the move order and live-world legality show.
    """
    width = draw(st.integers(2, 4) if crowded else st.one_of(st.integers(1, 40), st.sampled_from(WORD_EDGES)))
    height = draw(st.integers(1, 4) if crowded else st.integers(1, 12))
    players = draw(st.integers(2, 4) if crowded else st.integers(2, 6))
    if crowded:
        weights = [20, 1, 1, 1, 0, 0, 0, 0, 0]
    else:
        weights = [draw(weight) for _ in KINDS]
        weights[0] += 3  # room to move
        weights[5] = 0  # agents are placed below
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    cells, damage = random_board(rng, height, width, players, weights)
    # K agents each (fewer for some players when the board is too small), on distinct random cells;
    # a crowded board keeps at least one cell free.
    per_player = draw(st.integers(1, 4))
    count = min(players * per_player, width * height - crowded)
    if crowded:  # about two thirds of the board, whatever K that gives
        count = min(width * height - 1, max(players, (2 * width * height) // 3))
    spots = [(int(i) % width, int(i) // width) for i in rng.choice(width * height, size=count, replace=False)]
    agents = []
    for i, (x, y) in enumerate(spots):
        player = i % players
        cells[y, x] = Cell.AGENT + player
        damage[y, x] = 0
        facing = Facing(int(rng.integers(4))) if crowded else draw(st.sampled_from(list(Facing)))
        agents.append((player, x, y, facing))
    counts = [sum(a[0] == p for a in agents) for p in range(players)]
    # Mostly busy moves, some of any kind, now and then a malformed one (7, -1, "x").
    busy = [Move.ADVANCE] * 4 + [Move.LEFT, Move.RIGHT] if crowded else [Move.ADVANCE, Move.BUILD, Move.HIT]
    move = st.one_of(
        st.sampled_from(busy).map(int),
        st.sampled_from(busy).map(int),
        st.integers(0, 5),
        st.sampled_from([7, -1, "x"]),
    )
    ticks = draw(st.integers(1, 8 if crowded else 6))
    if crowded:  # uniform, not hypothesis-shaped: mostly advancing, so agents keep bumping into each other
        moves = [
            {p: [int(rng.choice(busy)) for _ in range(counts[p])] for p in range(players)}
            for _ in range(ticks)
        ]
    else:
        moves = [{p: [draw(move) for _ in range(counts[p])] for p in range(players)} for _ in range(ticks)]
    world = World(cells, damage, players, torus=draw(st.booleans()), own_base_counts=draw(st.booleans()))
    return Game(world, agents, draw(st.integers(0, 20)), moves)


@slow(400)
@given(game=st.one_of(games(), games(crowded=True)))
def test_engine_play_matches_reference(game: Game) -> None:
    """Random moves, checked tick by tick against the reference agent phase plus the reference step."""
    world = game.world
    engine = RezzoEngine.from_board(
        world.cells.copy(),
        players=world.players,
        agents=game.agents,
        damage=world.damage.copy(),
        tick=game.start_tick,
        torus=world.torus,
        own_base_counts=world.own_base_counts,
    )
    ref_agents: list[RefAgent] = []
    for player, x, y, facing in game.agents:
        ref_agents.append(RefAgent(player, sum(a.player == player for a in ref_agents), x, y, int(facing)))
    cells, damage = world.cells, world.damage
    alive = set(range(world.players))
    for step, raw in enumerate(game.moves, start=1):
        if engine.result() is not None:
            break
        tick = engine.tick
        assert tick == game.start_tick + step - 1
        actions = {p: m for p, m in raw.items() if p in alive}
        moves = {p: {k: v for k, v in enumerate(m) if v in range(6)} for p, m in actions.items()}
        malformed = {p: n for p, m in actions.items() if (n := sum(v not in range(6) for v in m))}
        events = engine.apply(actions)

        mid_cells, mid_damage, illegal = reference_agent_phase(
            cells, damage, ref_agents, moves, tick, world.players, torus=world.torus
        )
        want, want_damage, losers = reference_step(
            mid_cells, mid_damage, world.players, own_base_counts=world.own_base_counts, torus=world.torus
        )
        assert events.malformed == malformed, f"step {step}"
        assert events.illegal == illegal, f"step {step}"
        assert sorted(events.losers) == losers, f"step {step}"
        assert_same_board(mid_cells, mid_damage, want, engine.cells(), what="cells", step=step)
        assert_same_board(
            mid_cells, mid_damage, want_damage, engine.damage(), what="damage values", step=step
        )
        for a in ref_agents:
            a.alive = a.alive and a.player not in losers
        alive -= set(losers)
        got = sorted((a.player, a.index, a.x, a.y, int(a.facing), a.alive) for a in engine.agents())
        assert got == sorted((a.player, a.index, a.x, a.y, a.facing, a.alive) for a in ref_agents), (
            f"step {step}"
        )
        assert (engine.result() is not None) == (len(alive) <= 1), f"step {step}"
        cells, damage = want, want_damage


# ---------------------------------------------------------------------------------------- viewports


@st.composite
def viewport_cases(draw: st.DrawFn) -> tuple[World, list[tuple[int, int, int, int]]]:
    width = draw(st.one_of(st.integers(1, 30), st.sampled_from(WORD_EDGES)))
    height = draw(st.integers(1, 30))
    players = draw(st.integers(2, 8))
    weights = [draw(weight) for _ in KINDS]
    weights[5] = 0  # agents are placed below, with known facings
    if sum(weights) == 0:
        weights[0] = 1
    cells, damage = random_board(
        np.random.default_rng(draw(st.integers(0, 2**32 - 1))), height, width, players, weights
    )
    # Agent positions: biased towards edges and corners, where the OOB border shows.
    xs = st.one_of(st.integers(0, width - 1), st.sampled_from(sorted({0, width - 1})))
    ys = st.one_of(st.integers(0, height - 1), st.sampled_from(sorted({0, height - 1})))
    spots = draw(st.lists(st.tuples(xs, ys), min_size=1, max_size=6, unique=True))
    agents = []
    for x, y in spots:
        player = draw(st.integers(0, players - 1))
        cells[y, x] = Cell.AGENT + player
        damage[y, x] = 0
        agents.append((player, x, y, draw(st.sampled_from(list(Facing)))))
    world = World(cells, damage, players, torus=draw(st.booleans()), own_base_counts=True)
    return world, agents


@slow(250)
@given(case=viewport_cases())
def test_viewports_match_reference(case: tuple[World, list[tuple[int, int, int, int]]]) -> None:
    world, agents = case
    engine = RezzoEngine.from_board(
        world.cells.copy(),
        players=world.players,
        agents=agents,
        damage=world.damage.copy(),
        torus=world.torus,
    )
    index_of: dict[int, int] = {}
    expected: dict[int, list[tuple[np.ndarray, np.ndarray]]] = {}
    for player, x, y, facing in agents:
        k = index_of.get(player, 0)
        index_of[player] = k + 1
        want_codes, want_damage = reference_viewport(
            world.cells, world.damage, x, y, facing, player, world.players, torus=world.torus
        )
        codes, dmg = engine.viewport(player, k)
        assert codes.shape == dmg.shape == (VIEW_SIZE, VIEW_SIZE)
        assert np.array_equal(codes, want_codes), (
            f"agent {k} of {player} at ({x},{y}) facing {Facing(facing).name}:\n"
            f"reference\n{render(want_codes)}\nfast\n{render(codes)}"
        )
        assert np.array_equal(dmg, want_damage)
        expected.setdefault(player, []).append((want_codes, want_damage))

    # pending(): every seat, its agents in index order, each viewport 169 row-major bytes.
    pending = engine.pending()
    assert set(expected) <= set(pending)
    for seat, request in pending.items():
        views = expected.get(seat, [])  # a seat without agents may be listed with none
        assert request["tick"] == 0
        assert request["agents"] == list(range(len(views)))
        assert request["cells"] == b"".join(c.tobytes() for c, _ in views)
        assert request["damage"] == b"".join(d.tobytes() for _, d in views)
