"""A slow, deliberately plain reference for Rezzo: the CA step, viewports and the agent phase.

Everything here is written straight from the rulebook (design/game-rules.md, "2. Rezzo": resolutions
1-8 for the step, 9, 11, 12 and 15 for the agent phase, 12-14 for viewports) with Python loops over
lists, so that it can be checked by eye. The fast engine is tested against it; it never imports it.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from cellarena.sdk.games.rezzo import FORWARD, RIGHTWARD, VIEW_SIZE, Cell, Facing

BLANK = int(Cell.BLANK)
CONDUCTOR = int(Cell.CONDUCTOR)
ELECTRON = int(Cell.ELECTRON)
TAIL = int(Cell.TAIL)
PHOTON = int(Cell.PHOTON)
OOB = int(Cell.OOB)
AGENT = int(Cell.AGENT)
FLAG = int(Cell.FLAG)
GEYSER = int(Cell.GEYSER)
BASE = int(Cell.BASE)

# The eight Moore offsets (dx, dy); the cell itself is not its own neighbour.
NEIGHBOUR_OFFSETS = [(dx, dy) for dy in (-1, 0, 1) for dx in (-1, 0, 1) if (dx, dy) != (0, 0)]


def kind_of(code: int) -> int:
    """The state without its owner (BLANK..PHOTON, AGENT, FLAG, GEYSER or BASE)."""
    return code if code < AGENT else code - code % 8


def owner_of(code: int) -> int:
    """The owner of an owned code (meaningless for unowned codes)."""
    return code % 8


def neighbours(grid: list[list[int]], x: int, y: int, torus: bool) -> list[int]:
    """The codes of the 8 neighbours of (x, y); off-world neighbours are skipped (they are nothing).

    On a torus every offset wraps, so on a board narrower than 3 the same cell may be counted twice
    (or the cell itself may appear): each of the eight offsets is one neighbour.
    """
    height = len(grid)
    width = len(grid[0])
    found = []
    for dx, dy in NEIGHBOUR_OFFSETS:
        nx, ny = x + dx, y + dy
        if torus:
            nx %= width
            ny %= height
        elif not (0 <= nx < width and 0 <= ny < height):
            continue
        found.append(grid[ny][nx])
    return found


def next_state(code: int, around: list[int]) -> int:
    """One cell's Wireworld-with-flags transition (resolutions 4-6), before any loss conversion."""
    k = kind_of(code)
    kinds = [kind_of(c) for c in around]
    if k == CONDUCTOR:
        electrons = kinds.count(ELECTRON)
        return ELECTRON if electrons in (1, 2) else CONDUCTOR
    if k == ELECTRON:
        # Resolution 5: any flag or geyser (any owner) and any tail, both at state t.
        near_flag_or_geyser = FLAG in kinds or GEYSER in kinds
        return PHOTON if near_flag_or_geyser and TAIL in kinds else TAIL
    if k == TAIL:
        return CONDUCTOR
    if k == PHOTON:
        # Resolution 4: the owners of neighbouring flags and geysers; agents and bases do not count.
        owners = {owner_of(c) for c in around if kind_of(c) in (FLAG, GEYSER)}
        if len(owners) == 1:
            return FLAG + owners.pop()
        return CONDUCTOR
    if k == FLAG:
        return CONDUCTOR if ELECTRON in kinds else code
    # Blank, agent, geyser and base never change (resolution 6: an agent is its own state).
    return code


def _losers(grid: list[list[int]], *, own_base_counts: bool, torus: bool) -> set[int]:
    """Resolutions 1-2: a flag at state t with a base neighbour at state t makes its owner lose."""
    losers: set[int] = set()
    for y, row in enumerate(grid):
        for x, code in enumerate(row):
            if kind_of(code) != FLAG:
                continue
            for other in neighbours(grid, x, y, torus):
                if kind_of(other) != BASE:
                    continue
                if own_base_counts or owner_of(other) != owner_of(code):
                    losers.add(owner_of(code))
    return losers


def reference_step(
    cells: np.ndarray,
    damage: np.ndarray,
    players: int,
    *,
    own_base_counts: bool = True,
    torus: bool = False,
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """One CA transition plus loss processing: (new cells, new damage, sorted losers)."""
    grid = [[int(v) for v in row] for row in cells]
    dmg = [[int(v) for v in row] for row in damage]
    height = len(grid)
    width = len(grid[0]) if height else 0
    for row in grid:
        for code in row:
            if code >= AGENT and owner_of(code) >= players:
                raise ValueError(f"code {code} names an owner outside 0..{players - 1}")

    # The synchronous transition reads only the old grid.
    new = [
        [next_state(grid[y][x], neighbours(grid, x, y, torus)) for x in range(width)] for y in range(height)
    ]

    losers = _losers(grid, own_base_counts=own_base_counts, torus=torus)

    # Resolution 3: convert the losers' cells in the *new* state (flags just made from photons too).
    for y in range(height):
        for x in range(width):
            code = new[y][x]
            k = kind_of(code)
            if k in (AGENT, FLAG, GEYSER, BASE) and owner_of(code) in losers:
                new[y][x] = CONDUCTOR if k == FLAG else BLANK

    # Resolution 8: damage rides along with the cell through every change; a blank cell has none.
    for y in range(height):
        for x in range(width):
            if new[y][x] == BLANK:
                dmg[y][x] = 0

    new_cells = np.array(new, dtype=np.uint8).reshape(height, width)
    new_damage = np.array(dmg, dtype=np.uint8).reshape(height, width)
    return new_cells, new_damage, sorted(losers)


def relative_code(code: int, viewer: int, players: int) -> int:
    """Resolution 14: owners in a viewport count from the viewer (0 = self, then rotating order)."""
    if code < AGENT:
        return code
    return kind_of(code) + (owner_of(code) - viewer) % players


def reference_viewport(
    cells: np.ndarray,
    damage: np.ndarray,
    x: int,
    y: int,
    facing: int,
    viewer: int,
    players: int,
    torus: bool = False,
) -> tuple[np.ndarray, np.ndarray]:
    """Resolution 13: V[r][c] = world[P + (12 - r)·F + (c - 6)·Rv], OOB (damage 0) off the world."""
    height, width = len(cells), len(cells[0])
    fx, fy = FORWARD[Facing(facing)]
    rx, ry = RIGHTWARD[Facing(facing)]
    codes = [[OOB] * VIEW_SIZE for _ in range(VIEW_SIZE)]
    dmg = [[0] * VIEW_SIZE for _ in range(VIEW_SIZE)]
    for r in range(VIEW_SIZE):
        ahead = VIEW_SIZE - 1 - r
        for c in range(VIEW_SIZE):
            side = c - VIEW_SIZE // 2
            wx = x + ahead * fx + side * rx
            wy = y + ahead * fy + side * ry
            if torus:
                wx %= width
                wy %= height
            elif not (0 <= wx < width and 0 <= wy < height):
                continue
            codes[r][c] = relative_code(int(cells[wy][wx]), viewer, players)
            dmg[r][c] = int(damage[wy][wx])
    return np.array(codes, dtype=np.uint8), np.array(dmg, dtype=np.uint8)


# ---------------------------------------------------------------------------------------- agent phase

MOVE_NOOP, MOVE_ADVANCE, MOVE_LEFT, MOVE_RIGHT, MOVE_BUILD, MOVE_HIT = range(6)
HITTABLE_KINDS = (CONDUCTOR, ELECTRON, TAIL, FLAG)


@dataclass
class RefAgent:
    player: int
    index: int
    x: int
    y: int
    facing: int
    alive: bool = True


def reference_order(agents: list[RefAgent], tick: int, players: int) -> list[RefAgent]:
    """Resolution 9/15: players from tick mod P, agents interleaved by index (P0a0, P1a0, P0a1, ...)."""
    most = max((a.index + 1 for a in agents), default=0)
    out = []
    for k in range(most):
        for i in range(players):
            player = (tick + i) % players
            for a in agents:
                if a.alive and a.player == player and a.index == k:
                    out.append(a)
    return out


def reference_agent_phase(
    cells: np.ndarray,
    damage: np.ndarray,
    agents: list[RefAgent],
    moves: dict[int, dict[int, int]],
    tick: int,
    players: int,
    *,
    torus: bool = False,
) -> tuple[np.ndarray, np.ndarray, dict[int, int]]:
    """Apply moves (player -> agent index -> Move value 0..5) one agent at a time on the live world.

    ``agents`` are updated in place. Returns (cells, damage, illegal count per player).
    """
    grid = [[int(v) for v in row] for row in cells]
    dmg = [[int(v) for v in row] for row in damage]
    height, width = len(grid), len(grid[0])
    illegal: dict[int, int] = {}
    for a in reference_order(agents, tick, players):
        move = moves.get(a.player, {}).get(a.index, MOVE_NOOP)
        if move == MOVE_NOOP:
            continue
        if move == MOVE_LEFT:
            a.facing = (a.facing + 3) % 4
            continue
        if move == MOVE_RIGHT:
            a.facing = (a.facing + 1) % 4
            continue
        dx, dy = FORWARD[Facing(a.facing)]
        fx, fy = a.x + dx, a.y + dy
        if torus:
            fx %= width
            fy %= height
        legal = 0 <= fx < width and 0 <= fy < height
        if legal and move in (MOVE_ADVANCE, MOVE_BUILD):
            legal = grid[fy][fx] == BLANK
            if legal:
                grid[fy][fx] = AGENT + a.player
                grid[a.y][a.x] = CONDUCTOR if move == MOVE_BUILD else BLANK
                dmg[a.y][a.x] = 0  # fresh wire, or blank
                a.x, a.y = fx, fy
        elif legal:  # hit
            legal = kind_of(grid[fy][fx]) in HITTABLE_KINDS
            if legal:
                dmg[fy][fx] += 1
                if dmg[fy][fx] == 4:
                    grid[fy][fx] = BLANK
                    dmg[fy][fx] = 0
        if not legal:
            illegal[a.player] = illegal.get(a.player, 0) + 1
    return np.array(grid, dtype=np.uint8), np.array(dmg, dtype=np.uint8), illegal
