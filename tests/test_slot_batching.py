"""The match server steps the Rezzo matches of one phase slot as one batch (`ticking`,
`slot_batch`): real matches over TCP, their replays re-simulated by the plain engine tick by tick."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from test_rezzo_batched import use
from trio.testing import MockClock
from wire_client import Client

from cellarena.sdk import protocol
from cellarena.server.games.base import Engine
from cellarena.server.games.rezzo.batch import batched, slot_batch
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import TickSettings
from cellarena.server.play.ticking import PHASES
from cellarena.server.replay import ReplayWriter, read_replay, verify

#: Long enough (4 s at 20 Hz) that the matches of a slot overlap. The matches play in virtual time
#: (conftest's `virtual_wall` and trio's MockClock), so their schedule is the same on a busy machine.
TICKS = 80


def moves_for(tick: int, seat: int, agents: list[int]) -> Any:
    """Moves that change the world (walk, turn, build, hit), now and then a malformed answer."""
    if (tick + seat) % 11 == 0:
        return "no"  # invalid as a whole
    return [(tick * 7 + seat * 3 + k) % 6 if (tick + k) % 13 else 99 for k in agents]  # 99: a bad code


async def bot(port: int, name: str) -> dict[str, Any]:
    client = await Client.connect(port)
    await client.hello(name)
    seat = -1
    while (msg := await client.recv(timeout=30)) is not None:
        if msg["type"] == "welcome":
            seat = msg["seat"]
        elif msg["type"] == "tick":
            await client.send(protocol.moves(msg["tick"], moves_for(msg["tick"], seat, msg["agents"])))
        elif msg["type"] == "end":
            return msg
    raise AssertionError(f"{name}: the connection closed before the end")


@pytest.mark.usefixtures("virtual_wall")
@pytest.mark.parametrize("mode", ["numba", "behind", "numpy", "off"])
async def test_matches_of_a_slot_step_as_one_and_their_replays_verify(
    tmp_path: Path, mode: str, monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    """More matches than phase slots, so that some slots hold two: every match's replay re-simulates
    on the plain engine (each tick's hash), with the same counts the bots were told.

    numba: every match is batched from its second tick. behind: the same with a budget longer than
    the period, so that a batch still collects a period when the next one is due, as on an
    overloaded server: a match of its slot joins it all the same. numpy: a slot's batch opens only
    once it pays (`NUMPY_BATCH_FROM` matches, here made 2), so only the slots with two matches
    batch. off: `LobbyConfig.batch` False, every match on its own."""
    if mode in ("numba", "behind"):
        use("numba")
    if mode == "numpy":
        monkeypatch.setenv(batched.NO_NUMBA_VARIABLE, "1")
        monkeypatch.setattr(slot_batch, "NUMPY_BATCH_FROM", 2)
    batch = mode != "off"
    matches = PHASES + 4

    def recorder(number: int, engine: Engine, names: list[str], seed: int) -> ReplayWriter:
        return ReplayWriter(tmp_path / f"m{number}.replay", engine, seed=seed, names=names, events=True)

    config = LobbyConfig(
        "rezzo",
        {"map": "duel", "max_ticks": TICKS},
        TickSettings(tick_rate=20.0, budget_ms=60.0 if mode == "behind" else None),
        host="127.0.0.1",
        port=0,
        matches=matches,
        recorder=recorder,
        batch=batch,
    )
    lobby = Lobby(config)
    ends: list[dict[str, Any]] = []

    async def play(name: str) -> None:
        ends.append(await bot(lobby.port, name))

    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            await nursery.start(lobby.serve)  # returns once every match has ended
            for i in range(2 * matches):
                if i == 2 * PHASES:
                    # The last matches start periods later, so that they join batches under way.
                    await trio.sleep(0.5)
                nursery.start_soon(play, f"bot{i}")
    assert len(lobby.outcomes) == matches and len(ends) == 2 * matches
    driver = lobby.driver
    assert driver is not None
    every_tick_but_the_first = sum(o.ticks - 1 for o in lobby.outcomes)
    if mode in ("numba", "behind"):
        # Every match from its second tick on; a server running behind may play a tick of a match
        # on its own when its batch has begun already (`FixedRateDriver._join_batch`).
        assert 0.9 * every_tick_but_the_first <= driver.batched_ticks <= every_tick_but_the_first
        assert driver.widest_batch >= 2
    elif mode == "numpy":
        assert 0 < driver.batched_ticks < every_tick_but_the_first
        assert driver.widest_batch == 2
    else:
        assert driver.batched_ticks == 0
    for outcome in lobby.outcomes:
        replay = read_replay(tmp_path / f"m{outcome.number}.replay")
        report = verify(replay)
        assert report.ok, report.summary()
        assert replay.hashes == 2 and replay.result is not None
        assert replay.result["invalid"] == {s: n for s, n in enumerate(outcome.invalid) if n}
        assert replay.result["extra"]["illegal"] == outcome.illegal
        assert sum(outcome.illegal) > 0 and sum(outcome.invalid) > 0  # the counts were exercised
