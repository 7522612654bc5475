"""The reserved seats' deadline in virtual time (issue 38): a launched bot that connects and never
says hello, or never connects, is given up at the connect timeout as ``never_connected`` with a
detail saying which, its silent connection is told why and closed, and the match starts without it.

The lobby serves real loopback sockets, but every byte is there at once, so trio's `MockClock`
moves the 15 s default deadline only while everything waits on it."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import trio
import trio.testing
from wire_client import Client

from cellarena.sdk import protocol
from cellarena.server.bots.launcher import DEFAULT_CONNECT_TIMEOUT, _handover, seat_cause
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import MatchOutcome, TickSettings
from cellarena.server.play.seating import ReservedSeating

# Under autojump_clock (each test takes it), and the server judges lateness by trio's clock too
# (conftest's `virtual_wall`), so a fast-mode budget and its late answers are on the one clock.
pytestmark = pytest.mark.usefixtures("virtual_wall")

TIMEOUT = DEFAULT_CONNECT_TIMEOUT


def _lobby(seating: ReservedSeating, outcomes: list[MatchOutcome]) -> Lobby:
    """A one-match lobby as `play_match` makes it: a handed connection has the connect timeout to
    say hello, and the seating says why a seat it gave up never took it."""
    return Lobby(
        LobbyConfig(
            "rezzo",
            {"map": "duel", "max_ticks": 5},
            TickSettings(fast=True, budget_ms=1000),
            port=0,
            matches=1,
            hello_timeout=TIMEOUT,
            on_result=outcomes.append,
            explain_gone=lambda seat: _explained(seating, seat),
        ),
        seating,
    )


async def _explained(seating: ReservedSeating, seat: int) -> dict[str, Any] | None:
    return seat_cause(seating, seat, "rezzo")


def _stream(sock: socket.socket) -> Client:
    return _patient(Client(trio.SocketStream(trio.socket.from_stdlib_socket(sock))))


def _patient(client: Client) -> Client:
    client.timeout = 2 * TIMEOUT  # its reads wait out the deadline (in virtual time)
    return client


async def test_a_handed_connection_without_hello_is_given_up_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seating = ReservedSeating({}, ["good", "mute"], timeout=TIMEOUT)
    outcomes: list[MatchOutcome] = []
    lobby = _lobby(seating, outcomes)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lobby.serve)
        opened = trio.current_time()
        # A launched bot's process takes a moment to start, so its connection's own hello timeout
        # ends after the seating's deadline. Handed over at the very instant the lobby opened, both
        # ended at once, and trio's scheduler picked which ran first (and so the detail below).
        await trio.sleep(0.1)
        good, mute = (_stream(_handover(seating, seat, port)) for seat in (0, 1))
        await good.hello("good")
        await trio.sleep_until(opened + TIMEOUT - 0.1)
        assert not lobby.matches_started  # the seat is held until the deadline...
        error = await mute.expect_error(protocol.TIMEOUT)  # ...then its bot is told, and hung up on
        assert trio.current_time() - TIMEOUT < 0.5 and lobby.matches_started
        assert f"no hello within {TIMEOUT:g} s" in error["message"]
        assert (await good.play())["result"] == "win"
    [outcome] = outcomes
    detail = f"its connection was open, but no hello came within {TIMEOUT:g} s"
    assert outcome.forfeits == [1]
    assert outcome.result.causes[1] == {"cause": "never_connected", "detail": detail, "tick": 1}
    assert seating.abandoned[1]["detail"] == detail


async def test_a_seat_nobody_connects_for_is_given_up_at_the_deadline(
    autojump_clock: trio.testing.MockClock,
) -> None:
    seating = ReservedSeating({"t0": 0, "t1": 1}, ["good", "absent"], timeout=TIMEOUT)
    outcomes: list[MatchOutcome] = []
    lobby = _lobby(seating, outcomes)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lobby.serve)
        good = _patient(await Client.connect(port))
        await good.hello("good", token="t0")
        assert (await good.play())["result"] == "win"
        assert trio.current_time() - TIMEOUT < 0.5
    [outcome] = outcomes
    detail = f"it had no connection open and no hello came within {TIMEOUT:g} s"
    assert outcome.result.causes[1] == {"cause": "never_connected", "detail": detail, "tick": 1}


async def test_a_seat_whose_process_ended_is_not_waited_for_nor_given_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """`seat_gone` (the launcher saw the process end) starts the match at once; its launcher then
    says how the process ended (``exited``), so the seating names no cause of its own."""
    seating = ReservedSeating({}, ["good", "quits"], timeout=TIMEOUT)
    outcomes: list[MatchOutcome] = []
    lobby = _lobby(seating, outcomes)
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lobby.serve)
        good, quits = (_stream(_handover(seating, seat, port)) for seat in (0, 1))
        await good.hello("good")
        await quits.stream.aclose()
        seating.seat_gone(1)
        assert (await good.play())["result"] == "win"
        assert trio.current_time() < 1
    assert seating.abandoned == {} and outcomes[0].forfeits == [1]
