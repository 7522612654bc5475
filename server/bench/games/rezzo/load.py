"""Rezzo as the load benchmarks play it (`cellarena bench server` and `bench tournament`).

`bench server` needs matches in which bots that answer every tick with no-ops still make the server
do a real match's work: `bench_map` gives every player a clock feeding a wire past its own geyser,
so flags form and are knocked back to wire all match long without anyone losing.
"""

from __future__ import annotations

from typing import Any

from cellarena.server.games.plugin import BenchLoad

#: Seats per match in `bench server`: one agent each, so seats are agents.
SERVER_SEATS = 8

#: A ten-cell clock whose pulses leave along the wire at the right of its bottom row.
CLOCK = ("..@##", ".~...#", ".#...#", "..###.#####")


def bench_map(players: int = SERVER_SEATS) -> str:
    """A point-symmetric map with ``players`` seats (half on top facing south), one agent each.

    Each player has a clock feeding a wire past their own geyser, so the automaton does the work
    of a real match (flags form and are knocked back to wire) without anyone losing.
    """
    half = players // 2
    width, height = 12 * half, 24
    top = [["." for _ in range(width)] for _ in range(height // 2)]
    for p in range(half):
        x0 = 12 * p
        top[1][x0 + 9] = "ABCDEFGH"[p]
        top[5][x0 + 9] = "abcdefgh"[p]
        top[9][x0 + 2] = str(p)
        for dy, row in enumerate(CLOCK):
            for dx, ch in enumerate(row[:11]):
                if ch != ".":
                    top[3 + dy][x0 + dx] = ch
    rows = ["".join(r) for r in top]
    swap = {}
    for p in range(half):
        for letters in ("ABCDEFGH", "abcdefgh", "01234567"):
            swap[letters[p]], swap[letters[p + half]] = letters[p + half], letters[p]
    bottom = ["".join(swap.get(c, c) for c in reversed(r)) for r in reversed(rows)]
    facing = " ".join(["S"] * half + ["N"] * half)
    header = f"rezzo-map 1\nname: Bench\nplayers: {players}\nagents: 1\nfacing: {facing}\n---\n"
    return header + "\n".join(rows + bottom) + "\n"


def server_config(ticks: int) -> dict[str, Any]:
    """One `bench server` match: eight seats on the bench map, ``ticks`` long."""
    return {"map": "bench", "map_text": bench_map(), "max_ticks": ticks}


def tournament_config(map_: str | None, cap: int) -> dict[str, Any]:
    """One `bench tournament` match on ``map_``, at most ``cap`` ticks."""
    return {"map": map_, "max_ticks": cap}


LOAD = BenchLoad(
    server_config=server_config,
    server_seats=SERVER_SEATS,
    tournament_maps=("duel", "field"),
    tournament_config=tournament_config,
)
