"""Rezzo viewports (resolutions 13-14) with hand-checked expectations, and the layout of pending().

V[r][c] = world[P + (12 - r)·F + (c - 6)·Rv]: the agent is at the bottom centre, looking up. The world
positions below were worked out by hand from that formula, not computed with it.
"""

from __future__ import annotations

import numpy as np
import pytest
from rezzo_boards import engine_from, parse_board, render
from rezzo_reference import reference_viewport

from cellarena.sdk.games.rezzo import VIEW_SIZE, Cell, Facing, Move

OOB = int(Cell.OOB)
A, B, F, G = int(Cell.AGENT), int(Cell.BASE), int(Cell.FLAG), int(Cell.GEYSER)


def blank_board(size: int) -> list[list[str]]:
    return [["." for _ in range(size)] for _ in range(size)]


def picture(rows: list[list[str]]) -> str:
    return "\n".join(" ".join(row) for row in rows)


# ------------------------------------------------------------------------------ rotation, full view

# A 27x27 world, the agent of player 0 at (13, 13): every facing sees a full 13x13 window.
# Its four diagonal neighbours and four orthogonal neighbours hold distinct states, and the far
# corners of each facing's window hold a flag / geyser whose owner names that facing.
CENTRE = 13
MARKERS = {
    (12, 12): "@:2",  # NW, with damage
    (14, 12): "~",  # NE
    (14, 14): "*",  # SE
    (12, 14): "#",  # SW
    (13, 12): "B1",  # N
    (14, 13): "B2",  # E
    (13, 14): "B3",  # S
    (12, 13): "A1",  # W
    # V[0][0] (12 ahead, 6 to the left) and V[0][12] (12 ahead, 6 to the right) of each facing
    (7, 1): "F0",
    (19, 1): "G0",  # N
    (25, 7): "F1",
    (25, 19): "G1",  # E
    (19, 25): "F2",
    (7, 25): "G2",  # S
    (1, 19): "F3",
    (1, 7): "G3",  # W
}

# facing -> {(row, col): code}, worked out by hand.
EXPECTED = {
    Facing.N: {(11, 6): B + 1, (12, 5): A + 1, (12, 7): B + 2, (11, 5): Cell.ELECTRON, (11, 7): Cell.TAIL},
    Facing.E: {(11, 6): B + 2, (12, 5): B + 1, (12, 7): B + 3, (11, 5): Cell.TAIL, (11, 7): Cell.PHOTON},
    Facing.S: {(11, 6): B + 3, (12, 5): B + 2, (12, 7): A + 1, (11, 5): Cell.PHOTON, (11, 7): Cell.CONDUCTOR},
    Facing.W: {
        (11, 6): A + 1,
        (12, 5): B + 3,
        (12, 7): B + 1,
        (11, 5): Cell.CONDUCTOR,
        (11, 7): Cell.ELECTRON,
    },
}


def rotation_board(facing: Facing) -> str:
    rows = blank_board(27)
    for (x, y), token in MARKERS.items():
        rows[y][x] = token
    rows[CENTRE][CENTRE] = "A0" + "^>v<"[facing]
    return picture(rows)


@pytest.mark.parametrize("facing", list(Facing))
def test_viewport_rotates_with_the_facing(facing: Facing) -> None:
    engine = engine_from(rotation_board(facing), 4)
    codes, damage = engine.viewport(0, 0)
    assert codes.shape == damage.shape == (VIEW_SIZE, VIEW_SIZE)
    assert codes.dtype == damage.dtype == np.uint8
    assert codes[12, 6] == A + 0
    for (r, c), code in EXPECTED[facing].items():
        assert codes[r, c] == code, f"V[{r}][{c}] facing {facing.name}:\n{render(codes)}"
    assert codes[0, 0] == F + facing and codes[0, 12] == G + facing
    # Exactly one flag and one geyser are in view: nothing is duplicated or mirrored in.
    kinds = np.where(codes >= A, codes & 0xF8, codes)
    assert np.count_nonzero(kinds == F) == 1 and np.count_nonzero(kinds == G) == 1
    assert not np.any(codes == OOB)
    # The damaged electron sits front-left facing N, front-right facing W, and behind otherwise.
    where = {Facing.N: (11, 5), Facing.W: (11, 7)}.get(facing)
    assert int(damage.sum()) == (2 if where else 0)
    if where:
        assert damage[where] == 2


@pytest.mark.parametrize("facing", list(Facing))
def test_viewport_front_left_marker(facing: Facing) -> None:
    """A single marker one step ahead and one to the left of the agent shows at V[11][5]."""
    # (x, y) of the cell ahead-and-left of an agent at (2, 2): N -> NW, E -> NE, S -> SE, W -> SW
    x, y = {Facing.N: (1, 1), Facing.E: (3, 1), Facing.S: (3, 3), Facing.W: (1, 3)}[facing]
    rows = blank_board(5)
    rows[2][2] = "A0" + "^>v<"[facing]
    rows[y][x] = "G1"
    codes, _ = engine_from(picture(rows), 2).viewport(0, 0)
    assert codes[11, 5] == G + 1
    assert np.count_nonzero(codes == G + 1) == 1


# ------------------------------------------------------------------------------ edges and corners

# A 5x5 world with markers at three corners; the agent takes the fourth (or another) spot.
CORNERS = {(4, 0): "B1", (0, 4): "G1", (4, 4): "F1"}


def corner_board(agent_x: int, agent_y: int, facing: Facing) -> str:
    rows = blank_board(5)
    for (x, y), token in CORNERS.items():
        rows[y][x] = token
    rows[agent_y][agent_x] = "A0" + "^>v<"[facing]
    return picture(rows)


def view_with(cells: dict[tuple[int, int], int], blank: list[tuple[int, int]]) -> np.ndarray:
    """An all-OOB viewport with the given blank cells and cells set."""
    out = np.full((VIEW_SIZE, VIEW_SIZE), OOB, np.uint8)
    for rc in blank:
        out[rc] = Cell.BLANK
    for rc, code in cells.items():
        out[rc] = code
    return out


def block(rows: range, cols: range) -> list[tuple[int, int]]:
    return [(r, c) for r in rows for c in cols]


@pytest.mark.parametrize(
    ("x", "y", "facing", "expected"),
    [
        # Top-left corner facing N: only the agent's own row, to its right, is inside.
        pytest.param(
            0,
            0,
            Facing.N,
            view_with({(12, 6): A, (12, 10): B + 1}, block(range(12, 13), range(7, 11))),
            id="NW-N",
        ),
        # Top-left facing S: the whole world, turned half round, fills V[8..12][2..6].
        pytest.param(
            0,
            0,
            Facing.S,
            view_with(
                {(12, 6): A, (12, 2): B + 1, (8, 6): G + 1, (8, 2): F + 1}, block(range(8, 13), range(2, 7))
            ),
            id="NW-S",
        ),
        # Bottom-right facing E: nothing ahead; the agent's row is the column x = 4.
        pytest.param(
            4,
            4,
            Facing.E,
            view_with({(12, 6): A, (12, 2): B + 1}, block(range(12, 13), range(2, 7))),
            id="SE-E",
        ),
        # Top-right facing W: the world lies ahead and to the right.
        pytest.param(
            4,
            0,
            Facing.W,
            view_with({(12, 6): A, (8, 2): G + 1, (12, 2): F + 1}, block(range(8, 13), range(2, 7))),
            id="NE-W",
        ),
        # Middle of the bottom edge facing S: everything ahead is outside.
        pytest.param(
            2,
            4,
            Facing.S,
            view_with({(12, 6): A, (12, 4): F + 1, (12, 8): G + 1}, block(range(12, 13), range(4, 9))),
            id="S-S",
        ),
    ],
)
def test_viewport_edges_and_corners_show_oob(x: int, y: int, facing: Facing, expected: np.ndarray) -> None:
    engine = engine_from(corner_board(x, y, facing), 2)
    codes, damage = engine.viewport(0, 0)
    assert np.array_equal(codes, expected), f"\nwant:\n{render(expected)}\ngot:\n{render(codes)}"
    assert not damage.any()  # OOB has no damage


def test_viewport_on_a_torus_wraps_instead_of_oob() -> None:
    engine = engine_from(corner_board(0, 0, Facing.N), 2, torus=True)
    codes, _ = engine.viewport(0, 0)
    assert not np.any(codes == OOB)
    assert codes[12, 6] == A
    assert codes[11, 6] == G + 1  # (0, -1) wraps to (0, 4)
    assert codes[12, 5] == B + 1  # (-1, 0) wraps to (4, 0)
    assert codes[11, 5] == F + 1  # (-1, -1) wraps to (4, 4)
    # The 5x5 world repeats: V[r][c] and V[r-5][c] and V[r][c+5] show the same cell.
    assert np.array_equal(codes[5:, :], codes[:-5, :])
    assert np.array_equal(codes[:, :-5], codes[:, 5:])


def test_viewport_of_a_one_cell_torus_is_all_self() -> None:
    engine = engine_from("A2", 3, torus=True)
    codes, _ = engine.viewport(2, 0)
    assert np.all(codes == A + 0)


# ------------------------------------------------------------------------------ relative owners


@pytest.mark.parametrize(
    ("viewer", "expected_row11", "expected_row12"),
    [
        # columns 5..9 of rows 11 and 12, by hand: owner o shows as (o - viewer) mod 3
        (0, [0, B + 2, F + 0, G + 1, 0], [0, A + 0, A + 1, A + 2, 0]),
        (1, [B + 1, F + 2, G + 0, 0, 0], [A + 2, A + 0, A + 1, 0, 0]),
        (2, [F + 1, G + 2, 0, 0, 0], [A + 2, A + 0, 0, 0, 0]),
    ],
)
def test_viewport_owners_are_relative_to_the_viewer(
    viewer: int, expected_row11: list[int], expected_row12: list[int]
) -> None:
    board = parse_board(". . B2 F0 G1 . . . .\n. . A0 A1 A2 . . . .")
    engine = engine_from(board, 3)
    codes, _ = engine.viewport(viewer, 0)
    # The viewer stands at x = 2 + viewer, so column c shows x = c - 4 + viewer.
    assert codes[11, 5:10].tolist() == expected_row11
    assert codes[12, 5:10].tolist() == expected_row12
    # cells() keeps absolute owners.
    assert np.array_equal(engine.cells(), board.cells)


def test_viewport_shows_damage_of_every_kind() -> None:
    engine = engine_from(". #:1 @:2 ~:3 F1:2 *:1 .\n. . . A0 . . .", 2)
    codes, damage = engine.viewport(0, 0)
    assert damage[11, 4:9].tolist() == [1, 2, 3, 2, 1]
    assert codes[11, 4:9].tolist() == [Cell.CONDUCTOR, Cell.ELECTRON, Cell.TAIL, F + 1, Cell.PHOTON]


# ------------------------------------------------------------------------------ pending()


def test_pending_concatenates_row_major_viewports_in_agent_order() -> None:
    engine = engine_from(
        """
        .    #:2  .    .    .
        A0^  .    A1<  .    B1
        .    .    .    A0>  G0
        A1v  .    .    .    .
        """,
        2,
    )
    pending = engine.pending()
    assert sorted(pending) == [0, 1]
    for seat in (0, 1):
        request = pending[seat]
        assert request["tick"] == 0
        assert request["agents"] == [0, 1]
        cells, damage = request["cells"], request["damage"]
        assert isinstance(cells, bytes) and isinstance(damage, bytes)
        assert len(cells) == len(damage) == 2 * VIEW_SIZE * VIEW_SIZE
        for k in (0, 1):
            codes, dmg = engine.viewport(seat, k)
            chunk = slice(k * 169, (k + 1) * 169)
            assert cells[chunk] == codes.tobytes() and damage[chunk] == dmg.tobytes()
            assert cells[k * 169 + 12 * 13 + 6] == A + 0  # the agent itself, row 12 column 6
    # Hand-checked bytes: agent 0 of player 0 (at (0,1) facing N) has the damaged wire front-right,
    # agent 1 of player 0 (at (3,2) facing E) has G0 in front, agent 0 of player 1 (at (2,1) facing W)
    # has a blank in front and player 0's first agent two ahead.
    p0, p1 = pending[0], pending[1]
    assert p0["cells"][11 * 13 + 7] == Cell.CONDUCTOR and p0["damage"][11 * 13 + 7] == 2
    assert p0["cells"][169 + 11 * 13 + 6] == G + 0
    assert p1["cells"][11 * 13 + 6] == Cell.BLANK and p1["cells"][10 * 13 + 6] == A + 1
    # Player 1's base is ahead-left of player 0's second agent, as relative owner 1.
    assert p0["cells"][169 + 11 * 13 + 5] == B + 1


def test_pending_follows_the_world_after_a_move() -> None:
    engine = engine_from(". # .\n. . .\n. A0 .\n. . A1", 2)
    before = engine.pending()[0]["cells"]
    engine.apply({0: [Move.ADVANCE]})
    after = engine.pending()[0]["cells"]
    assert before[11 * 13 + 6] == Cell.BLANK and before[10 * 13 + 6] == Cell.CONDUCTOR
    assert after[11 * 13 + 6] == Cell.CONDUCTOR
    assert engine.pending()[0]["tick"] == 1


@pytest.mark.parametrize("torus", [False, True])
def test_large_worlds_gather_viewports_cell_by_cell_and_agree_with_the_reference(torus: bool) -> None:
    # Past CELLS_PER_AGENT_TO_DECODE cells per agent the engine reads the planes at each viewport
    # cell instead of decoding the world; both ways must agree with the reference.
    from cellarena.server.bench.games.rezzo.engine import random_rezzo_codes
    from cellarena.server.games.rezzo.engine import RezzoEngine
    from cellarena.server.games.rezzo.viewports import CELLS_PER_AGENT_TO_DECODE

    rng = np.random.default_rng(7)
    cells = random_rezzo_codes(130, 3, rng)
    cells[(cells >= 8) & (cells < 16)] = 0  # agents come from the list below
    damage = np.where(
        (cells >= 1) & (cells <= 4) | ((cells >= 16) & (cells < 24)), rng.integers(0, 4, cells.shape), 0
    )
    spots = [(0, 0, 0), (129, 64, 1), (5, 129, 2), (70, 3, 3)]
    for player, (x, y, _) in enumerate(spots[:3]):
        cells[y, x] = 8 + player
    agents = [(p, x, y, f) for p, (x, y, f) in enumerate(spots[:3])]
    engine = RezzoEngine.from_board(
        cells, players=3, agents=agents, damage=damage.astype(np.uint8), torus=torus
    )
    assert cells.size > len(agents) * CELLS_PER_AGENT_TO_DECODE
    for player, x, y, facing in agents:
        got_cells, got_damage = engine.viewport(player, 0)
        want_cells, want_damage = reference_viewport(
            engine.cells(), engine.damage(), x, y, facing, player, 3, torus=torus
        )
        assert np.array_equal(got_cells, want_cells)
        assert np.array_equal(got_damage, want_damage)


# ------------------------------------------------------------------------------ cached requests


@pytest.mark.parametrize("torus", [False, True])
def test_pending_follows_every_move_turn_and_death(torus: bool) -> None:
    # pending() reuses its viewport indices until an agent moves, turns or dies; after random play
    # each request must still equal every agent's viewport computed afresh.
    import random

    from cellarena.server.bench.games.rezzo.load import bench_map
    from cellarena.server.games.rezzo.engine import RezzoEngine

    engine = RezzoEngine.new({"map": "bench", "map_text": bench_map(), "max_ticks": 200, "torus": torus})
    rng = random.Random(7)
    for _ in range(120):
        requests = engine.pending()
        if not requests:
            break
        for seat, request in requests.items():
            cells = np.frombuffer(request["cells"], np.uint8).reshape(-1, VIEW_SIZE, VIEW_SIZE)
            damage = np.frombuffer(request["damage"], np.uint8).reshape(-1, VIEW_SIZE, VIEW_SIZE)
            for i, k in enumerate(request["agents"]):
                want_cells, want_damage = engine.viewport(seat, k)
                assert np.array_equal(cells[i], want_cells), (engine.tick, seat, k)
                assert np.array_equal(damage[i], want_damage), (engine.tick, seat, k)
        engine.apply(
            {
                seat: {k: rng.choice([int(m) for m in Move]) for k in request["agents"]}
                for seat, request in requests.items()
            }
        )
