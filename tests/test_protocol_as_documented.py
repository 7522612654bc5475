"""The server does what docs/protocol.md says, seen through the wire as a client written from the doc.

Each test is one place where a client written from the doc alone once found the server doing
something else (issue 16, "The protocol as documented").
"""

from __future__ import annotations

from typing import Any

import msgpack
import pytest
import trio
from test_server import TICKS, WAITING_BUDGET_MS, WAITING_TICKS, seat_offender, with_good_match
from trio.testing import MockClock
from wire_client import Client

from cellarena.sdk import protocol
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import TickSettings

# In-process lobbies in virtual time, as in test_server.py (conftest's `virtual_wall`; each test takes
# `autojump_clock`).
pytestmark = pytest.mark.usefixtures("virtual_wall")


async def answer_with(c: Client, fields: dict[str, Any]) -> dict[str, Any]:
    """Answer every tick with ``fields`` beside the tick until `end`."""
    while True:
        msg = await c.recv()
        assert msg is not None
        if msg["type"] == "tick":
            await c.send({"type": "moves", "tick": msg["tick"], **fields})
        elif msg["type"] == "end":
            return msg


# ------------------------------------------------------------------------------------ moves
async def test_an_answer_without_moves_is_invalid_not_late(autojump_clock: MockClock) -> None:
    async def sloppy(c: Client, _lobby: Lobby) -> dict[str, Any]:
        return await answer_with(c, {})

    end, _, _ = await seat_offender(sloppy)
    assert end["invalid"] == TICKS and end["late"] == 0


async def test_a_nil_moves_is_invalid_in_rezzo_not_late(autojump_clock: MockClock) -> None:
    async def nil(c: Client, _lobby: Lobby) -> dict[str, Any]:
        return await answer_with(c, {"moves": None})

    end, _, _ = await seat_offender(nil)
    assert end["invalid"] == TICKS and end["late"] == 0


@pytest.mark.parametrize(
    ("tick", "words"), [("5", "got str '5'"), (True, "got bool"), (2.0, "got float"), (None, "")]
)
async def test_a_tick_of_the_wrong_type_is_bad_message(
    tick: Any, words: str, autojump_clock: MockClock
) -> None:
    async def odd(c: Client, _lobby: Lobby) -> dict[str, Any]:
        assert (await c.recv())["type"] == "welcome"
        await c.recv()  # the first tick
        await c.send({"type": "moves", "moves": [0], **({} if tick is None else {"tick": tick})})
        return await c.expect_error(protocol.BAD_MESSAGE)

    error, rival, _ = await seat_offender(odd)
    assert "moves: the field 'tick'" in error["message"] and words in error["message"]
    assert ("is missing" if tick is None else "must be an int") in error["message"]
    assert rival[0]["result"] == "win"


async def test_drop2df_passes_with_nil_and_an_empty_list_never_late(autojump_clock: MockClock) -> None:
    turns = 6
    config = LobbyConfig(
        "drop2df",
        {"turns": turns},
        TickSettings(tick_rate=2.0, budget_ms=1000, fast=True),
        host="127.0.0.1",
        port=0,
        matches=1,
    )
    ends: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        lobby = Lobby(config, None)
        await nursery.start(lobby.serve)
        a, b = await Client.connect(lobby.port), await Client.connect(lobby.port)
        await a.hello("nil", "drop2df")
        await b.hello("empty", "drop2df")

        async def play(c: Client, moves: Any) -> None:
            ends.append(await answer_with(c, {"moves": moves}))

        nursery.start_soon(play, a, None)
        nursery.start_soon(play, b, [])
    assert len(ends) == 2
    for end in ends:
        assert end["ticks"] == turns and end["late"] == 0 and end["invalid"] == 0 and end["illegal"] == 0
        assert end["result"] == "draw"


# ------------------------------------------------------------------------------------ hello
@pytest.mark.parametrize(
    ("version", "code", "words"),
    [
        ("1", protocol.BAD_HELLO, "hello: the field 'protocol' must be an int (got str '1')"),
        (True, protocol.BAD_HELLO, "hello: the field 'protocol' must be an int (got bool True)"),
        (1.0, protocol.BAD_HELLO, "hello: the field 'protocol' must be an int (got float 1.0)"),
        (2, protocol.BAD_VERSION, "protocol 2 is not spoken here; this server speaks 1"),
    ],
)
async def test_hello_protocol_must_be_the_int_1(
    version: Any, code: str, words: str, autojump_clock: MockClock
) -> None:
    async def offend(port: int) -> None:
        c = await Client.connect(port)
        await c.send({**protocol.hello("x", "rezzo"), "protocol": version})
        assert (await c.expect_error(code))["message"] == words

    await with_good_match(offend)


async def test_a_map_with_a_bin_key_is_a_bad_frame(autojump_clock: MockClock) -> None:
    async def offend(port: int) -> None:
        c = await Client.connect(port)
        body = msgpack.packb({b"type": "hello", "protocol": 1, "name": "x", "game": "rezzo"})
        await c.stream.send_all(protocol.HEADER.pack(len(body)) + body)
        error = await c.expect_error(protocol.BAD_FRAME)
        assert "map keys must be strings or integers, got bytes b'type'" in error["message"]

    await with_good_match(offend)


async def test_serve_ignores_tokens_it_never_gave_out(autojump_clock: MockClock) -> None:
    """First-come seating (`cellarena serve`) has no tokens: a token in hello is ignored, as documented."""

    ends: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        config = LobbyConfig(
            "rezzo",
            {"map": "duel", "max_ticks": 3},
            TickSettings(fast=True, budget_ms=300),
            host="127.0.0.1",
            port=0,
            matches=1,
        )
        lobby = Lobby(config, None)
        await nursery.start(lobby.serve)
        a, b = await Client.connect(lobby.port), await Client.connect(lobby.port)
        await a.hello("a", token="made-up")
        await b.hello("b")

        async def play(c: Client) -> None:
            ends.append(await c.play())

        nursery.start_soon(play, a)
        nursery.start_soon(play, b)
    assert [e["ticks"] for e in ends] == [3, 3] and sorted(e["late"] for e in ends) == [0, 0]


# ------------------------------------------------------------------------------------ seats
@pytest.mark.parametrize("fast", [True, False])
async def test_a_match_left_with_one_seat_ends_with_the_tick_the_seat_left_in(
    fast: bool, autojump_clock: MockClock
) -> None:
    leave_at = 3

    async def quitter(c: Client, _lobby: Lobby) -> int:
        while True:
            msg = await c.recv()
            assert msg is not None
            if msg["type"] == "tick":
                if msg["tick"] == leave_at:
                    await c.stream.aclose()
                    return int(msg["tick"])
                await c.send(protocol.moves(msg["tick"], [0]))

    left, rival, lobby = await seat_offender(
        quitter, fast=fast, budget_ms=WAITING_BUDGET_MS, ticks=WAITING_TICKS * 4
    )
    # The seat forfeits at the tick it left in; that tick is played (its agents do noops) and no
    # later tick is sent: `end` says ticks = that tick + 1.
    assert rival[0]["ticks"] == left + 1 and rival[0]["result"] == "win"
    (outcome,) = [o for o in lobby.outcomes if "offender" in o.names]
    assert outcome.forfeits == [outcome.names.index("offender")] and outcome.ticks == left + 1


# ------------------------------------------------------------------------------------ spectators
@pytest.mark.parametrize("message", [{"type": "moves", "tick": 1, "moves": [1]}, {"type": "hello"}])
async def test_a_spectator_that_sends_anything_is_dropped_and_the_match_goes_on(
    message: dict[str, Any], autojump_clock: MockClock
) -> None:
    async def offend(port: int) -> None:
        c = await Client.connect(port)
        await c.hello("watcher", role="spectator")
        assert (await c.recv())["type"] == "welcome"
        await c.send(message)
        error = await c.expect_error(protocol.UNKNOWN_TYPE)
        assert "spectators send nothing after hello" in error["message"]

    await with_good_match(offend)
