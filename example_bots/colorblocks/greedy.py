"""Greedy: captures when it can, fights what it touches, paints the most, and marches on the objective.

Each turn, in order: a capture if a unit stands next to the enemy objective; fighters strike
adjacent enemies; the placement converting the most blocks (enemy blocks count double, ties go to
the one nearest the enemy objective); every unit steps as close to the enemy objective as it can and
paves or shoots the cell that brings it nearer; a guard goes next to its own objective. It spawns
pavers, with a fighter every third turn. No lookahead: each choice is the best one right now.

    python example_bots/colorblocks/greedy.py --port 7777
"""

from __future__ import annotations

from typing import Any

from cellarena.sdk import run
from cellarena.sdk.games.colorblocks import STEPS, Block, ColorblocksBot, View, color, objective


def approach_map(view: View) -> dict[tuple[int, int], int]:
    """Steps from each cell to a cell next to the enemy objective, over cells a unit could walk once
    painted (not dead blocks, objectives or the enemy spawn). Unreachable cells are left out."""
    board, seat = view.board, view.seat
    walls = {Block.DEAD, Block.OBJECTIVE_RED, Block.OBJECTIVE_BLUE, Block.SPAWN_RED + (1 - seat)}
    goals = board.find(objective(1 - seat))
    frontier = [
        (x + dx, y + dy)
        for x, y in goals
        for dx, dy in STEPS
        if board.inside(x + dx, y + dy) and board.blocks[y + dy, x + dx] not in walls
    ]
    dist = dict.fromkeys(frontier, 0)
    while frontier:
        nxt = []
        for x, y in frontier:
            for dx, dy in STEPS:
                c = (x + dx, y + dy)
                if c not in dist and board.inside(*c) and board.blocks[c[1], c[0]] not in walls:
                    dist[c] = dist[(x, y)] + 1
                    nxt.append(c)
        frontier = nxt
    return dist


def greedy_turn(view: View) -> list[list[Any]]:
    """The greedy bot's turn for ``view`` (applied to ``view.board`` as it goes)."""
    seat, board = view.seat, view.board
    approach = approach_map(view)
    far = board.width + board.height

    def _dist(cell: tuple[int, int]) -> int:
        return approach.get(cell, far)

    home = board.find(objective(seat))
    out: list[list[Any]] = []

    def play(action: list[Any]) -> bool:
        if view.play(action):
            out.append(action)
            return True
        return False

    def options(verb: str, uid: int | None = None) -> list[list[Any]]:
        return [a for a in view.legal_actions() if a[0] == verb and (uid is None or a[1] == uid)]

    # 1. Capture: the game ends at once.
    for action in options("move"):
        if board.blocks[action[3], action[2]] == objective(1 - seat):
            play(action)
            return out
    # 2. Fighters strike enemies next to them.
    for action in options("act"):
        unit = board.units.get(action[1])
        target = board.unit_at(action[2], action[3])
        if unit and unit.kind == "fighter" and target is not None and target.owner != seat:
            play(action)
    # 3. The biggest colour change.
    enemy = color(1 - seat)

    def gain(action: list[Any]) -> tuple[int, int]:
        trial = board.copy()
        before = trial.blocks.copy()
        trial.play(seat, action)
        changed = before != trial.blocks
        neutral = int((changed & (before == Block.NEUTRAL)).sum())
        return 2 * int((changed & (before == enemy)).sum()) + neutral, -_dist((action[1], action[2]))

    places = options("place")
    if places:
        play(max(places, key=gain))
    # 4. Units march on the objective, then pave or shoot towards it.
    for unit in sorted(view.my_units, key=lambda u: _dist((u.x, u.y))):
        if unit.id not in board.units:
            continue
        here = _dist((unit.x, unit.y))
        moves = options("move", unit.id)
        if moves:
            best = min(moves, key=lambda a: _dist((a[2], a[3])))
            if _dist((best[2], best[3])) < here:
                play(best)
        if unit.kind in ("paver", "shooter"):
            acts = options("act", unit.id)
            if acts:
                play(min(acts, key=lambda a: _dist((a[2], a[3]))))
    # 5. A guard next to its own objective, where enemy units would have to stand.
    guards = [a for a in options("guard") if len(a) == 3]
    near = [a for a in guards if any(abs(a[1] - hx) + abs(a[2] - hy) == 1 for hx, hy in home)]
    if near:
        play(near[0])
    out.append(["spawn", "fighter" if view.turn % 3 == 0 else "paver"])
    return out


class Greedy(ColorblocksBot):
    def on_tick(self, view: View) -> list[list[Any]]:
        return greedy_turn(view)


if __name__ == "__main__":
    raise SystemExit(run(Greedy))
