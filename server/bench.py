"""`cellarena bench server`: how many agents one server process serves at 15 Hz.

The server runs in this process; the bots run in a separate load process (`loadgen`) and answer at
once. For a rising number of agents (one agent per connection, eight seats per match), it runs
matches for a few seconds and counts the ticks in which every seat's answer arrived within its
budget and that started in its slot of the 15 Hz schedule (no more than a quarter period behind).
The largest load with at least 99% of such ticks is the result, along with the server's CPU time
per agent-tick at that load. Each level starts from a collected and frozen heap (`gc.freeze`, as a
long-running server would after start-up), so that the garbage of the previous level and the
objects of the imports are not scanned by the level's own collections.
"""

from __future__ import annotations

import gc
import math
import resource
import subprocess
import sys
import time
from collections.abc import Iterable
from typing import Any

import trio

from cellarena.server.lobby import Lobby, LobbyConfig
from cellarena.server.match import TickSettings

PLAYERS = 8
ON_TIME_GOAL = 0.99
#: The bots' budget at 15 Hz. A budget of a whole period leaves the server no time of its own, so
#: each tick would last the period plus the server's work and fall behind the schedule.
BUDGET_MS = 50.0


#: A ten-cell clock whose pulses leave along the wire at the right of its bottom row.
CLOCK = ("..@##", ".~...#", ".#...#", "..###.#####")


def bench_map(players: int = PLAYERS) -> str:
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


def _raise_file_limit() -> None:
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft < hard:
        resource.setrlimit(resource.RLIMIT_NOFILE, (hard, hard))


async def run_level(
    agents: int, seconds: float, tick_rate: float = 15.0, budget_ms: float = BUDGET_MS
) -> dict[str, Any]:
    """One load level: ``agents`` connections in matches of eight, for ``seconds`` of play."""
    matches = math.ceil(agents / PLAYERS)
    ticks = max(2, round(seconds * tick_rate))
    lobby = Lobby(
        LobbyConfig(
            "rezzo",
            {"map": "bench", "map_text": bench_map(), "max_ticks": ticks},
            TickSettings(tick_rate=tick_rate, budget_ms=budget_ms),
            host="127.0.0.1",
            port=0,
            matches=matches,
            hello_timeout=120.0,
        )
    )
    cpu = {}
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lobby.serve)
        load = await trio.lowlevel.open_process(
            [
                sys.executable,
                "-m",
                "cellarena.server.loadgen",
                "127.0.0.1",
                str(port),
                str(matches * PLAYERS),
            ],
            stdin=subprocess.DEVNULL,
        )

        async def measure() -> None:
            # CPU from the first match's start to the last one's end, against every agent-tick played.
            while not lobby.matches_started:
                await trio.sleep(0.005)
            cpu["start"], cpu["wall"] = time.process_time(), time.perf_counter()

        nursery.start_soon(measure)
    cpu["end"], cpu["wall_end"] = time.process_time(), time.perf_counter()
    with trio.move_on_after(30):
        await load.wait()
    if load.returncode is None:
        load.kill()
    played = sum(o.ticks for o in lobby.outcomes)
    late = sum(o.bad_ticks for o in lobby.outcomes)
    behind = sum(o.behind_ticks for o in lobby.outcomes)
    agent_ticks = sum(o.ticks * len(o.names) for o in lobby.outcomes)
    return {
        "agents": matches * PLAYERS,
        "matches": matches,
        "ticks": played,
        "on_time": 1 - late / played if played else 0.0,
        "behind_schedule": behind / played if played else 0.0,
        "cpu_us_per_agent_tick": (cpu["end"] - cpu["start"]) / agent_ticks * 1e6 if agent_ticks else 0.0,
        "server_cpu_share": (cpu["end"] - cpu["start"]) / (cpu["wall_end"] - cpu["wall"]),
    }


def run(
    levels: Iterable[int] = (64, 256, 512, 768, 1024, 1280, 1536, 1792, 2048),
    seconds: float = 4.0,
    tick_rate: float = 15.0,
) -> dict[str, Any]:
    """Step through the levels until one misses the on-time goal; the dict is the --json output."""
    _raise_file_limit()
    results = []
    best: dict[str, Any] | None = None
    for agents in levels:
        gc.collect()
        gc.freeze()
        level = trio.run(run_level, agents, seconds, tick_rate)
        results.append(level)
        if level["on_time"] < ON_TIME_GOAL:
            break
        best = level
    return {
        "budget_ms": BUDGET_MS,
        "max_agents_at_15hz": best["agents"] if best else 0,
        "cpu_us_per_agent_tick": best["cpu_us_per_agent_tick"] if best else None,
        "levels": results,
    }
