"""Cloth of Gold: the step against the reference, the decision table, Life, territory and placement."""

from __future__ import annotations

import itertools

import cloth_reference as ref
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cellarena.sdk.games import cloth
from cellarena.sdk.games.cloth import EMPTY, A, B, C, ClothWorld, D, legal_cells, place, step, territory


@st.composite
def boards(draw: st.DrawFn, max_h: int = 12, max_w: int = 140) -> np.ndarray:
    h = draw(st.integers(1, max_h))
    w = draw(st.integers(1, max_w))
    seed = draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    weights = rng.dirichlet(np.ones(5))
    return rng.choice(5, size=(h, w), p=weights).astype(np.uint8)


@settings(max_examples=60, deadline=None)
@given(boards())
def test_the_fast_step_equals_the_reference(board: np.ndarray) -> None:
    want = ref.step(ref.step(board.tolist()))
    assert step(board, 2).tolist() == want


@settings(max_examples=25, deadline=None)
@given(boards(max_h=40, max_w=70))
def test_the_step_in_bands_of_rows_equals_the_reference(board: np.ndarray) -> None:
    # Big boards are stepped band by band; force it on a small one.
    world = ClothWorld.from_codes(board, band=8)
    want = board.tolist()
    for _ in range(3):  # the bands' halo rows are refreshed from both buffers
        world.step()
        want = ref.step(want)
        assert world.codes().tolist() == want


@settings(max_examples=30, deadline=None)
@given(boards(max_h=20, max_w=80))
def test_field_equals_the_reference(board: np.ndarray) -> None:
    for code in (A, B):
        assert cloth.field(board, code).tolist() == ref.field(board.tolist(), code)


# ---------------------------------------------------------------------------------------- the table
#: The normative table, column by column: N<2 or N>3 | 2<=N<=3 with N_A>N_B | N_A=N_B | N_A<N_B.
TABLE = {
    EMPTY: (EMPTY, A, EMPTY, B),  # births need N = 3 exactly (checked below)
    A: (EMPTY, A, A, D),
    B: (EMPTY, D, B, B),
    C: (EMPTY, A, C, B),
    D: (EMPTY, D, D, D),
}


def expected(w: int, na: int, nb: int, nc: int) -> int:
    n = na + nb + nc
    if n < 2 or n > 3:
        return TABLE[w][0]
    if w == EMPTY and n == 2:
        return EMPTY
    return TABLE[w][1 if na > nb else 2 if na == nb else 3]


def test_every_row_of_the_decision_table() -> None:
    """All 5 states x all 165 neighbourhoods (N_A, N_B, N_C with N <= 8), each in its own 3x3 patch."""
    cases = [
        (w, na, nb, nc)
        for w in (EMPTY, A, B, C, D)
        for na, nb, nc in itertools.product(range(9), repeat=3)
        if na + nb + nc <= 8
    ]
    assert len(cases) == 825
    per_row = 40
    rows = -(-len(cases) // per_row)
    board = np.zeros((3 * rows, 3 * per_row), np.uint8)
    ring = [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx]
    for i, (w, na, nb, nc) in enumerate(cases):
        cy, cx = 3 * (i // per_row) + 1, 3 * (i % per_row) + 1
        board[cy, cx] = w
        fill = [A] * na + [B] * nb + [C] * nc + [D] * (8 - na - nb - nc)  # d is never a neighbour
        for (dy, dx), code in zip(ring, fill, strict=True):
            board[cy + dy, cx + dx] = code
    after = step(board)
    for i, (w, na, nb, nc) in enumerate(cases):
        cy, cx = 3 * (i // per_row) + 1, 3 * (i % per_row) + 1
        assert after[cy, cx] == expected(w, na, nb, nc), (w, na, nb, nc)


# ---------------------------------------------------------------------------------------- Life
def life(board: np.ndarray) -> np.ndarray:
    """Conway's Life on a bounded board, the textbook way."""
    p = np.pad(board.astype(np.int64), 1)
    n = sum(p[1 + dy : 1 + dy + board.shape[0], 1 + dx : 1 + dx + board.shape[1]] for dy, dx in ring8())
    return ((n == 3) | ((board == 1) & (n == 2))).astype(np.uint8)


def ring8() -> list[tuple[int, int]]:
    return [(dy, dx) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if dy or dx]


def from_ascii(picture: str) -> np.ndarray:
    rows = [r.strip() for r in picture.strip().splitlines()]
    return np.array([[".abcd".index(ch) for ch in row] for row in rows], np.uint8)


@pytest.mark.parametrize("code", [A, B])
def test_one_population_is_conways_life(code: int) -> None:
    blinker = from_ascii(".....\n.....\n.aaa.\n.....\n.....") * code
    assert (step(blinker) == blinker.T).all()
    assert (step(blinker, 2) == blinker).all()
    block = from_ascii("....\n.aa.\n.aa.\n....") * code
    assert (step(block, 5) == block).all()
    glider = np.zeros((10, 10), np.uint8)
    for y, x in [(0, 1), (1, 2), (2, 0), (2, 1), (2, 2)]:
        glider[y, x] = code
    moved = np.zeros_like(glider)
    moved[1:, 1:] = glider[:-1, :-1]
    assert (step(glider, 4) == moved).all()


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 30), st.integers(1, 150), st.integers(0, 2**32 - 1))
def test_a_lone_population_follows_life_on_random_boards(h: int, w: int, seed: int) -> None:
    board = (np.random.default_rng(seed).random((h, w)) < 0.35).astype(np.uint8)
    assert (step(board * A) == life(board) * A).all()


# ---------------------------------------------------------------------------------------- territory
def test_a_lone_unit_holds_25_cells() -> None:
    board = np.zeros((15, 15), np.uint8)
    board[7, 7] = A
    terr = territory(board, A)
    assert terr.sum() == 25
    ys, xs = np.nonzero(terr)
    assert all((x - 7) ** 2 + (y - 7) ** 2 <= 8 for x, y in zip(xs, ys, strict=True))
    assert cloth.field(board, A)[7, 7] == 36**2  # 1.78 in units of the threshold 729


@pytest.mark.parametrize(("gap", "merged"), [(8, True), (9, False)])
def test_two_units_merge_at_distance_8_and_not_at_9(gap: int, merged: bool) -> None:
    board = np.zeros((15, 30), np.uint8)
    board[7, 5] = board[7, 5 + gap] = B
    terr = territory(board, B)
    row = terr[7, 5 : 5 + gap + 1]
    assert bool(row.all()) is merged  # one band of territory joins them
    if not merged:
        assert terr.sum() == 50  # two separate discs of 25


def test_contested_cells_are_in_both_territories() -> None:
    board = np.zeros((9, 20), np.uint8)
    board[4, 5], board[4, 9] = A, B
    both = cloth.contested(board)
    assert both.any()
    assert (both == (territory(board, A) & territory(board, B))).all()
    plane = cloth.territory_plane(board)
    assert ((plane == 3) == both).all()


# ---------------------------------------------------------------------------------------- placement
def test_every_refusal_with_its_reason() -> None:
    board = np.zeros((12, 20), np.uint8)
    board[2, 2] = A
    board[2, 3] = C
    board[3, 3] = D
    board[8, 8] = B
    units = [
        (2, 2),  # on a live cell
        (3, 3),  # on a dead cell
        (3, 2),  # on c
        (-1, 0),  # off the board
        (20, 0),
        (1, 2, 3),  # malformed
        ("x", 1),
        (7, 7),  # next to b
        (15, 2),  # outside A's territory
        (4, 2),  # fine: inside (d^2 = 4)
    ]
    placed, rejected = place(board, units, A, first=False)
    assert placed == [(4, 2)]
    reasons = [(r.index, r.reason) for r in rejected]
    assert reasons == [
        (0, cloth.OCCUPIED),
        (1, cloth.DEAD),
        (2, cloth.OCCUPIED),
        (3, cloth.OFF_BOARD),
        (4, cloth.OFF_BOARD),
        (5, cloth.MALFORMED),
        (6, cloth.MALFORMED),
        (7, cloth.NEXT_TO_OPPONENT),
        (8, cloth.OUTSIDE_TERRITORY),
    ]
    assert board[2, 4] == A


def test_contested_cells_are_refused() -> None:
    board = np.zeros((9, 20), np.uint8)
    board[4, 5], board[4, 9] = A, B
    cell = (7, 2)  # d^2 = 4 + 4 = 8 from both: in both territories, not adjacent to b
    assert territory(board, A)[2, 7] and territory(board, B)[2, 7]
    placed, rejected = place(board, [cell], A)
    assert placed == [] and rejected[0].reason == cloth.CONTESTED


def test_the_first_unit_goes_anywhere_and_the_batch_grows_from_it() -> None:
    board = np.zeros((20, 20), np.uint8)
    assert legal_cells(board, A, first=True).all()
    assert not legal_cells(board, A, first=False).any()
    # Each unit is checked against the board the earlier ones left: a line grows unit by unit.
    line = [(5 + i, 10) for i in range(10)]
    placed, rejected = place(board, line, A, first=True)
    assert placed == line and rejected == []
    # Without the exemption nothing can be placed on an empty board.
    placed, rejected = place(np.zeros((20, 20), np.uint8), [(3, 3)], B, first=False)
    assert placed == [] and rejected[0].reason == cloth.OUTSIDE_TERRITORY


def test_a_unit_on_its_own_batch_is_occupied() -> None:
    board = np.zeros((10, 10), np.uint8)
    placed, rejected = place(board, [(4, 4), (4, 4)], B, first=True)
    assert placed == [(4, 4)] and rejected[0].reason == cloth.OCCUPIED


def test_legal_cells_agree_with_place() -> None:
    rng = np.random.default_rng(3)
    board = rng.choice([0, 0, 0, 0, 1, 2, 3, 4], size=(16, 16)).astype(np.uint8)
    for me in (A, B):
        legal = legal_cells(board, me)
        for y, x in itertools.product(range(16), range(16)):
            trial = board.copy()
            placed, _ = place(trial, [(x, y)], me)
            assert bool(placed) == bool(legal[y, x]), (x, y)
