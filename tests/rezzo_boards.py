"""Hand-drawn Rezzo boards for tests: a picture in, codes / damage / agents out (and back).

A picture is rows of whitespace-separated tokens, one per cell (x to the right, y down):

    .   blank           #   conductor       @   electron
    ~   tail            *   photon
    B0  base of 0       G0  geyser of 0     F0  flag of 0
    A0  agent of 0 facing N; A0> A0v A0< A0^ give its facing (E, S, W, N)

Any token may end in ``:d`` to give the cell damage d (0..3), e.g. ``#:2`` or ``F1:3``. Blank lines and
leading/trailing whitespace are ignored. Agents are listed in reading order, which is also the order
that gives each agent its index within its player.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from cellarena.sdk.games.rezzo import Cell, Facing
from cellarena.server.games.rezzo.engine import RezzoEngine

UNOWNED = {".": Cell.BLANK, "#": Cell.CONDUCTOR, "@": Cell.ELECTRON, "~": Cell.TAIL, "*": Cell.PHOTON}
OWNED = {"A": Cell.AGENT, "F": Cell.FLAG, "G": Cell.GEYSER, "B": Cell.BASE}
ARROWS = {"^": Facing.N, ">": Facing.E, "v": Facing.S, "<": Facing.W}


@dataclass
class Board:
    cells: np.ndarray  # (H, W) uint8 public codes
    damage: np.ndarray  # (H, W) uint8
    agents: list[tuple[int, int, int, int]]  # (player, x, y, facing) in reading order

    @property
    def height(self) -> int:
        return int(self.cells.shape[0])

    @property
    def width(self) -> int:
        return int(self.cells.shape[1])


def parse_token(token: str) -> tuple[int, int, int | None]:
    """(code, damage, facing or None for non-agents) of one picture token."""
    body, _, dmg = token.partition(":")
    damage = int(dmg) if dmg else 0
    if not 0 <= damage <= 3:
        raise ValueError(f"damage out of range in {token!r}")
    if body in UNOWNED:
        return int(UNOWNED[body]), damage, None
    kind = OWNED.get(body[:1])
    if kind is None or len(body) < 2 or not body[1].isdigit():
        raise ValueError(f"unknown board token {token!r}")
    code = int(kind) + int(body[1])
    rest = body[2:]
    if kind == Cell.AGENT:
        if rest and rest not in ARROWS:
            raise ValueError(f"bad agent facing in {token!r}")
        return code, damage, int(ARROWS.get(rest, Facing.N))
    if rest:
        raise ValueError(f"unknown board token {token!r}")
    return code, damage, None


def parse_board(picture: str) -> Board:
    """Turn a picture (see the module docstring) into a Board."""
    rows = [line.split() for line in picture.strip().splitlines() if line.strip()]
    width = len(rows[0])
    if any(len(row) != width for row in rows):
        raise ValueError("every row of a board picture needs the same number of cells")
    cells = np.zeros((len(rows), width), dtype=np.uint8)
    damage = np.zeros_like(cells)
    agents = []
    for y, row in enumerate(rows):
        for x, token in enumerate(row):
            code, dmg, facing = parse_token(token)
            cells[y, x] = code
            damage[y, x] = dmg
            if facing is not None:
                agents.append((code - int(Cell.AGENT), x, y, facing))
    return Board(cells, damage, agents)


def token_of(code: int, damage: int = 0) -> str:
    """The picture token of one cell (agents without facing)."""
    names = {int(v): k for k, v in UNOWNED.items()}
    if code in names:
        text = names[code]
    elif code == Cell.OOB:
        text = "X"
    else:
        letters = {int(v): k for k, v in OWNED.items()}
        text = f"{letters.get(code & 0xF8, '?')}{code & 7}"
    return f"{text}:{damage}" if damage else text


def render(cells: np.ndarray, damage: np.ndarray | None = None) -> str:
    """A picture of a board (OOB shown as X), for assertion messages."""
    lines = []
    for y in range(cells.shape[0]):
        tokens = [
            token_of(int(cells[y, x]), 0 if damage is None else int(damage[y, x]))
            for x in range(cells.shape[1])
        ]
        lines.append(" ".join(f"{t:5}" for t in tokens).rstrip())
    return "\n".join(lines)


def engine_from(picture: str | Board, players: int, **kwargs: Any) -> RezzoEngine:
    """A RezzoEngine whose world at the current decision point is the picture (agents as drawn)."""
    board = parse_board(picture) if isinstance(picture, str) else picture
    return RezzoEngine.from_board(
        board.cells.copy(), players=players, agents=board.agents, damage=board.damage.copy(), **kwargs
    )


def cells_of(picture: str) -> np.ndarray:
    """Just the codes of a picture."""
    return parse_board(picture).cells


def agent_at(engine: RezzoEngine, player: int, index: int) -> Any:
    """The engine's agent object for (player, index)."""
    for agent in engine.agents():
        if agent.player == player and agent.index == index:
            return agent
    raise LookupError(f"no agent {index} of player {player}")


def positions(engine: RezzoEngine) -> dict[tuple[int, int], tuple[int, int, int]]:
    """(player, index) -> (x, y, facing) of every live agent."""
    return {(a.player, a.index): (a.x, a.y, int(a.facing)) for a in engine.agents() if a.alive}
