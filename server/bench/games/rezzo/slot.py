"""What the server gains by stepping the Rezzo matches of one phase slot as one batch.

The measurement behind docs/architecture.md's figures for the batched slots (`slot_batch`).
`cellarena bench server` plays matches of eight seats on the bench map, and its fixed-rate driver runs
every match of one of 16 phase slots at the same wake-up: at 2,000 agents, 250 matches, about 16 per
slot. Per tick, the server's engine work for one slot is, either way, what this times:

- separate: per match, `pending()` (the viewports and each seat's request), `decode()` of each seat's
  no-op answer, `apply()` (agent phase, transition, losses), as `Match.begin_tick`/`end_tick` do;
- batched: the server's way since it steps a slot's matches together (`slot_batch`): each match's
  `BatchedWorld` gives its requests from the slot's viewports (one gather) and stages its decoded
  answers, and one `SlotBatch.step()` resolves the slot.

Both contenders run side by side in one process, so their ratio holds on a shared machine. Only the
engine's share of the server's work can change; the sockets, encoding and bookkeeping stay.

    python -m cellarena.server.bench.games.rezzo.slot [--json] [--slots 4,16,32] [--seconds 1]
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable
from typing import Any

import click

from cellarena.sdk.games.rezzo import VIEW_SIZE
from cellarena.server.bench.games.rezzo.load import SERVER_SEATS, server_config
from cellarena.server.bench.harness import (
    calls_per_second,
    int_list_option,
    json_option,
    report,
    seconds_option,
)
from cellarena.server.games.rezzo.batch.slot_batch import SlotBatch
from cellarena.server.games.rezzo.engine import RezzoEngine

CELLS = VIEW_SIZE * VIEW_SIZE
#: What the load bots of `bench server` answer every tick: one no-op for their one agent.
ANSWER = [0]


def _separate(matches: int, config: dict[str, Any]) -> Callable[[], object]:
    engines = [RezzoEngine.new(config) for _ in range(matches)]

    def tick() -> None:
        for i in range(matches):
            if engines[i].result() is not None:
                engines[i] = RezzoEngine.new(config)
            engine = engines[i]
            requests = engine.pending()
            engine.apply({seat: engine.decode(seat, req, ANSWER) for seat, req in requests.items()})

    return tick


def _batched(matches: int, config: dict[str, Any]) -> Callable[[], object]:
    """The server's way (`ticking.FixedRateDriver` with a `SlotBatch`): every match's world in one
    batch, its requests and staged answers through its `BatchedWorld`, one step for the slot."""
    engines = [RezzoEngine.new(config) for _ in range(matches)]
    batch = SlotBatch(engines[0], matches)
    worlds = [batch.join(engine) for engine in engines]

    def tick() -> None:
        for i, playing in enumerate(worlds):
            assert playing is not None
            world = playing
            if playing.result() is not None:
                batch.leave(playing)
                joined = worlds[i] = batch.join(RezzoEngine.new(config))
                assert joined is not None
                world = joined
            requests = world.pending()
            world.stage({seat: world.decode(seat, req, ANSWER) for seat, req in requests.items()})
        batch.step()

    return tick


def run(slots: Iterable[int] = (4, 16, 32), budget_s: float = 1.0) -> dict[str, Any]:
    """Engine work per agent-tick for a slot of S bench-server matches, separate against batched."""
    config = server_config(10**6)
    out: dict[str, Any] = {"seats_per_match": SERVER_SEATS, "slots": {}}
    for matches in slots:
        agents = matches * SERVER_SEATS
        separate = calls_per_second(_separate(matches, config), budget_s)
        batched = calls_per_second(_batched(matches, config), budget_s)
        out["slots"][str(matches)] = {
            "agents": agents,
            "separate_us_per_agent_tick": 1e6 / (separate * agents),
            "batched_us_per_agent_tick": 1e6 / (batched * agents),
            "ratio": batched / separate,
        }
    return out


@click.command("slot")
@int_list_option("--slots", "4,16,32", "match counts", (1, 4096), "Matches per slot.")
@seconds_option()
@json_option
def command(slots: list[int], seconds: float, as_json: bool) -> None:
    """The engine work of one phase slot of bench-server matches: separate engines against one batch."""
    result = run(slots, budget_s=seconds)
    if as_json:
        click.echo(json.dumps(result))
        return
    report(
        "Engine work per agent-tick, one phase slot of bench-server matches (8 seats, no-op answers)",
        ("matches", "agents", "separate", "batched", "batched speed-up"),
        [
            (
                m,
                str(r["agents"]),
                f"{r['separate_us_per_agent_tick']:.1f} µs",
                f"{r['batched_us_per_agent_tick']:.1f} µs",
                f"{r['ratio']:.1f}x",
            )
            for m, r in result["slots"].items()
        ],
    )


if __name__ == "__main__":
    command()
