"""A connection's lifecycle: one owner at a time, moved with `attach`; a seat's bot coming back.

These drive `Connection`, `Match` and the seating modes directly, over socket pairs, without a
listener: what they check is who hears a connection's messages and its end at each moment.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
import trio
from wire_client import FramedStream

from cellarena.sdk import protocol
from cellarena.server.games import get_engine
from cellarena.server.net.connection import UNOWNED, Connection
from cellarena.server.net.poller import Poller
from cellarena.server.play.match import Match, MatchOutcome, TickSettings
from cellarena.server.play.seating import WaitingRoom
from cellarena.server.play.ticking import play_fast


class Recorder:
    """An owner that writes down what it hears."""

    def __init__(self) -> None:
        self.messages: list[str] = []
        self.closed: list[Connection] = []

    def on_message(self, conn: Connection, message: dict[str, Any], arrival: float) -> None:
        self.messages.append(message["type"])

    def on_closed(self, conn: Connection) -> None:
        self.closed.append(conn)


class Peer(FramedStream):
    """The client end of a socket pair."""

    def __init__(self, sock: socket.socket) -> None:
        super().__init__(trio.SocketStream(trio.socket.from_stdlib_socket(sock)), protocol.MAX_SERVER_FRAME)


@pytest.fixture
async def poller() -> AsyncIterator[Poller[Connection]]:
    poller: Poller[Connection] = Poller()
    async with trio.open_nursery() as nursery:
        await nursery.start(poller.serve)
        yield poller
        nursery.cancel_scope.cancel()


def pair(poller: Poller[Connection]) -> tuple[Connection, Peer]:
    """A server connection and its client, over loopback TCP as in a real server."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        client_side = socket.create_connection(listener.getsockname())
        server_side, _ = listener.accept()
    conn = Connection(server_side, poller)
    conn.resume_reading()
    return conn, Peer(client_side)


async def settle() -> None:
    await trio.sleep(0.05)  # the poller's task reads what was sent


# ------------------------------------------------------------------------------------------- owners
async def test_only_the_owner_of_the_moment_hears_messages_and_the_end(poller: Poller[Connection]) -> None:
    conn, peer = pair(poller)
    first, second = Recorder(), Recorder()
    assert conn.owner is UNOWNED
    await peer.send(protocol.moves(1, [0]))
    await settle()  # nobody owns it yet: dropped
    assert conn.attach(first)
    await peer.send(protocol.moves(2, [0]))
    await settle()
    assert conn.attach(second)  # handed on: the first owner hears nothing more
    await peer.send(protocol.moves(3, [0]))
    await settle()
    conn.close("done")
    assert (first.messages, second.messages) == (["moves"], ["moves"])
    assert first.closed == [] and second.closed == [conn]
    assert not conn.attach(Recorder())  # a closed connection is adopted by no one
    assert conn.owner is UNOWNED


async def test_a_detached_connection_tells_nobody_of_its_end(poller: Poller[Connection]) -> None:
    conn, peer = pair(poller)
    owner = Recorder()
    conn.attach(owner)
    conn.detach()
    await peer.send(protocol.moves(1, [0]))
    await peer.stream.aclose()
    await settle()
    assert conn.closed and owner.messages == [] and owner.closed == []


async def test_a_waiting_room_forgets_who_leaves_and_refuses_early_talk(poller: Poller[Connection]) -> None:
    left: list[Connection] = []
    room = WaitingRoom(on_leave=left.append)
    quiet, quiet_peer = pair(poller)
    chatty, chatty_peer = pair(poller)
    assert room.add(quiet) and room.add(chatty)
    await chatty_peer.send(protocol.moves(0, [0]))
    error = await chatty_peer.recv()
    assert error is not None and error["code"] == protocol.BAD_MESSAGE
    assert "before the match started" in error["message"]
    assert room.conns == [quiet] and left == [chatty]
    await quiet_peer.stream.aclose()
    await settle()
    assert room.conns == [] and left == [chatty, quiet]


# ------------------------------------------------------------------------------------------- re-attach
async def answer(
    peer: Peer, *, until_tick: int | None = None, gate: tuple[int, trio.Event] | None = None
) -> list[dict[str, Any]]:
    """Answer every tick with no-ops (up to ``until_tick``, then hang up; from ``gate``'s tick on,
    once its event is set); what was received."""
    seen = []
    while (msg := await peer.recv()) is not None:
        seen.append(msg)
        if msg["type"] == "tick":
            if gate is not None and msg["tick"] >= gate[0]:
                await gate[1].wait()
            if until_tick is not None and msg["tick"] >= until_tick:
                await peer.stream.aclose()
                break
            await peer.send(protocol.moves(msg["tick"], [0] * len(msg["agents"])))
        elif msg["type"] == "end":
            break
    return seen


def rezzo_match(conns: list[Connection], settings: TickSettings, ticks: int = 40) -> Match:
    engine = get_engine("rezzo").new({"map": "duel", "max_ticks": ticks}, 0)
    return Match(1, engine, [(f"bot{i}", c) for i, c in enumerate(conns)], settings)


async def play(match: Match) -> MatchOutcome:
    match.open()
    await play_fast(match)
    return await match.close()


async def test_a_bot_that_comes_back_within_the_grace_keeps_its_seat(poller: Poller[Connection]) -> None:
    settings = TickSettings(fast=True, budget_ms=500, reconnect_grace=10.0)
    (a, peer_a), (b, peer_b) = pair(poller), pair(poller)
    match = rezzo_match([a, b], settings)
    back: list[dict[str, Any]] = []
    outcome: list[MatchOutcome] = []
    reattached = trio.Event()
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                outcome.append(await play(match))

            nursery.start_soon(run)
            # The rival holds on while the bot is away, so the match does not end meanwhile.
            nursery.start_soon(lambda: answer(peer_b, gate=(11, reattached)))
            first = await answer(peer_a, until_tick=10)  # a network blip at tick 10
            while not a.closed:
                await trio.sleep(0.01)
            a2, peer_a2 = pair(poller)
            match.reattach(0, a2)
            reattached.set()
            back = await answer(peer_a2)
    assert first[0]["type"] == "welcome" and first[0]["seat"] == 0
    assert back[0]["type"] == "welcome" and back[0]["seat"] == 0  # told its seat again
    assert back[-1]["type"] == "end" and back[-1]["ticks"] == 40
    (result,) = outcome
    assert result.forfeits == [] and result.ticks == 40
    assert result.late[0] >= 1  # the ticks it was away count as late
    assert match.seats[0].conn is a2


async def test_a_new_connection_replaces_one_still_open(poller: Poller[Connection]) -> None:
    settings = TickSettings(fast=True, budget_ms=500)
    (a, peer_a), (b, _peer_b) = pair(poller), pair(poller)
    match = rezzo_match([a, b], settings)
    match.open()
    a2, peer_a2 = pair(poller)
    match.reattach(0, a2)
    assert a.closed and a.owner is UNOWNED
    assert (await peer_a.recv())["type"] == "welcome"  # type: ignore[index]
    assert await peer_a.recv() is None  # and then the old connection was hung up
    assert (await peer_a2.recv())["seat"] == 0  # type: ignore[index]
    assert match.seats[0].forfeit_tick is None  # its old connection's end was not the seat's


async def test_a_bot_that_does_not_come_back_forfeits_after_the_grace(poller: Poller[Connection]) -> None:
    settings = TickSettings(fast=True, budget_ms=50, reconnect_grace=0.3)
    (a, peer_a), (b, peer_b) = pair(poller), pair(poller)
    match = rezzo_match([a, b], settings, ticks=1_000_000)  # fast ticks: the grace ends the match
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            outcome: list[MatchOutcome] = []

            async def run() -> None:
                outcome.append(await play(match))

            nursery.start_soon(run)
            nursery.start_soon(answer, peer_b)
            await answer(peer_a, until_tick=5)
    (result,) = outcome
    assert result.forfeits == [0] and result.result.winner == 1
    forfeit_tick = match.seats[0].forfeit_tick
    assert forfeit_tick is not None and forfeit_tick > 6  # it kept its seat for a while first
    assert result.late[0] >= forfeit_tick - 5


async def test_without_a_grace_a_lost_connection_forfeits_at_once(poller: Poller[Connection]) -> None:
    settings = TickSettings(fast=True, budget_ms=200)
    (a, peer_a), (b, peer_b) = pair(poller), pair(poller)
    match = rezzo_match([a, b], settings, ticks=1000)
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            outcome: list[MatchOutcome] = []

            async def run() -> None:
                outcome.append(await play(match))

            nursery.start_soon(run)
            nursery.start_soon(answer, peer_b)
            await answer(peer_a, until_tick=5)
    assert outcome[0].forfeits == [0] and match.seats[0].forfeit_tick == 5
    with pytest.raises(ValueError, match="forfeited at tick 5"):
        match.reattach(0, pair(poller)[0])


async def test_an_answer_whose_tick_is_true_answers_no_tick(poller: Poller[Connection]) -> None:
    # True == 1 in Python, but on the wire a bool is never a number: that answer is for no tick.
    settings = TickSettings(fast=True, budget_ms=200)
    (a, peer_a), (b, peer_b) = pair(poller), pair(poller)
    match = rezzo_match([a, b], settings, ticks=5)
    first_tick: list[int] = []

    async def confused(peer: Peer) -> None:
        while (msg := await peer.recv()) is not None and msg["type"] != "end":
            if msg["type"] == "tick":
                first_tick.append(msg["tick"])
                tick = True if msg["tick"] == 1 else msg["tick"]
                await peer.send({"type": "moves", "tick": tick, "moves": [0]})

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(confused, peer_a)
            nursery.start_soon(answer, peer_b)
            outcome = await play(match)
    assert first_tick[0] == 1
    # Its tick-1 answer was none: the server closed it, and it forfeits at tick 1 (no late answer).
    assert outcome.forfeits == [0] and outcome.result.causes[0]["tick"] == 1 and outcome.late == [0, 0]
