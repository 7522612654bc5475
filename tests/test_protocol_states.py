"""The protocol's one table of states (`cellarena.sdk.protocol.states`): on its own, then as the
server's connection owners and the SDK's client follow it."""

from __future__ import annotations

import socket
from typing import Any

import pytest
import trio
from test_server import start
from trio.testing import MockClock
from wire_client import Client as WireClient

from cellarena.sdk import protocol
from cellarena.sdk.client import Client
from cellarena.sdk.protocol import State, advance, client_refusal, server_refusal

S = State


# ------------------------------------------------------------------------------------ the table
def walk(steps: list[tuple[str, str]], role: str = "bot") -> list[State]:
    state, seen = S.HELLO, []
    for sender, kind in steps:
        state = advance(state, sender, kind, role=role)  # type: ignore[arg-type]
        seen.append(state)
    return seen


def test_a_bot_and_a_spectator_walk_the_documented_paths() -> None:
    bot = [
        ("client", "hello"),
        ("server", "welcome"),
        ("server", "tick"),
        ("client", "moves"),
        ("server", "end"),
    ]
    assert walk(bot) == [S.WAITING, S.PLAYING, S.PLAYING, S.PLAYING, S.DONE]
    watcher = [("client", "hello"), ("server", "welcome"), ("server", "frame"), ("server", "end")]
    assert walk(watcher, "spectator") == [S.WATCHING_SOON, S.WATCHING, S.WATCHING, S.DONE]
    assert walk([("client", "hello"), ("server", "redirect")]) == [S.WAITING, S.DONE]
    for state in (S.HELLO, S.WAITING, S.PLAYING, S.WATCHING_SOON, S.WATCHING):
        assert advance(state, "server", "error") is S.DONE
    # What the table does not allow leaves the state alone (the caller refuses or ignores it).
    assert advance(S.PLAYING, "server", "welcome") is S.PLAYING
    assert advance(S.HELLO, "client", "hello", role="referee") is S.HELLO


@pytest.mark.parametrize(
    ("state", "kind", "code", "words"),
    [
        (S.HELLO, "moves", protocol.BAD_HELLO, "the first message must be 'hello', got 'moves'"),
        (S.HELLO, None, protocol.BAD_HELLO, "the first message must be 'hello', got None"),
        (S.HELLO, ["x"], protocol.BAD_HELLO, "got ['x']"),
        (S.WAITING, "moves", protocol.BAD_MESSAGE, "'moves' before the match started; wait for 'welcome'"),
        (S.WAITING, "hello", protocol.BAD_MESSAGE, "before the match started"),
        (S.PLAYING, "hello", protocol.BAD_MESSAGE, "hello was already received; send moves"),
        (S.PLAYING, "dance", protocol.UNKNOWN_TYPE, "unknown message type 'dance'; a bot sends 'moves'"),
        (S.PLAYING, 7, protocol.UNKNOWN_TYPE, "unknown message type 7"),
        (S.WATCHING_SOON, "moves", protocol.UNKNOWN_TYPE, "spectators send nothing after hello, got 'moves'"),
        (S.WATCHING, "hello", protocol.UNKNOWN_TYPE, "spectators send nothing after hello, got 'hello'"),
        (S.DONE, "moves", protocol.BAD_MESSAGE, "out of order"),
    ],
)
def test_each_client_message_out_of_order_has_its_code_and_words(
    state: State, kind: Any, code: str, words: str
) -> None:
    refusal = client_refusal(state, kind)
    assert refusal is not None and refusal[0] == code and words in refusal[1]


def test_what_a_client_may_send() -> None:
    assert protocol.client_sends(S.PLAYING) == {"moves"} and protocol.client_sends(S.HELLO) == {"hello"}
    assert protocol.client_sends(S.WAITING) == protocol.client_sends(S.WATCHING) == frozenset()
    for state in S:
        for kind in protocol.CLIENT_TYPES:
            assert (kind in protocol.client_sends(state)) == (client_refusal(state, kind) is None)
    assert client_refusal(S.HELLO, "hello") is None
    assert client_refusal(S.PLAYING, "moves") is None
    allowed = {(st, k) for st in S for k in protocol.CLIENT_TYPES if client_refusal(st, k) is None}
    assert allowed == {(S.HELLO, "hello"), (S.PLAYING, "moves")}


def test_server_messages_out_of_order_and_unknown_ones() -> None:
    assert server_refusal(S.WAITING, "tick") == "a tick arrived before the welcome"
    assert server_refusal(S.PLAYING, "redirect") == "a redirect arrived in the middle of a match"
    assert server_refusal(S.WATCHING, "tick") == "a 'tick' message arrived while watching"
    # A type this side does not know is a later server's addition: a client ignores it.
    assert server_refusal(S.PLAYING, "chat") is None
    for state in S:
        for kind in protocol.SERVER_TYPES:
            assert (server_refusal(state, kind) is None) == (
                (state, "server", kind) in protocol.states.TRANSITIONS
            )


# ------------------------------------------------------------------------------------ the SDK's client
def client_fed(*messages: dict[str, Any]) -> tuple[Client, socket.socket]:
    """A client over a socket pair whose other end has already sent ``messages``."""
    ours, theirs = socket.socketpair()
    for message in messages:
        theirs.sendall(protocol.encode(message))
    return Client(ours, "test", 0), theirs


def welcome() -> dict[str, Any]:
    return dict(
        protocol.welcome(
            seat=0, game="rezzo", match=1, players=2, names=["a", "b"], tick_rate=0.0, budget_ms=50, config={}
        )
    )


def test_the_client_follows_the_table() -> None:
    tick = {"type": "tick", "tick": 1, "budget_ms": 50}
    client, peer = client_fed(welcome(), tick, {"type": "chat", "text": "hi"}, tick)
    with client, peer:
        client.hello("a", "rezzo")
        assert client.state is S.WAITING
        assert client.recv()["type"] == "welcome" and client.state is S.PLAYING
        assert client.recv()["type"] == "tick"
        assert client.recv()["type"] == "chat"  # unknown: passed on, for the bot loop to ignore
        client.send(protocol.moves(1, [0]))
        assert client.recv()["type"] == "tick" and client.state is S.PLAYING


@pytest.mark.parametrize(
    ("messages", "words"),
    [
        ([{"type": "tick", "tick": 1, "budget_ms": 50}], "a tick arrived before the welcome"),
        ([welcome(), {"type": "redirect", "host": "h", "port": 1, "token": "t", "tls": False}], "redirect"),
        ([welcome(), welcome()], "a second welcome"),
    ],
)
def test_the_client_refuses_a_server_message_out_of_order(messages: list[dict[str, Any]], words: str) -> None:
    client, peer = client_fed(*messages)
    with client, peer:
        client.hello("a", "rezzo")
        with pytest.raises(protocol.ProtocolError, match=words) as caught:
            for _ in messages:
                client.recv()
        assert caught.value.code == protocol.BAD_MESSAGE and client.closed


# ------------------------------------------------------------------------------------ the server
@pytest.mark.usefixtures("virtual_wall")
async def test_a_spectator_waiting_for_a_match_that_talks_is_refused_as_documented(
    autojump_clock: MockClock,
) -> None:
    """docs/protocol.md: a spectator that sends anything after its hello gets unknown_type, also while
    it waits for the next match (the waiting room once answered bad_message)."""
    async with trio.open_nursery() as nursery:
        lobby = await start(nursery)
        watcher = await WireClient.connect(lobby.port)
        await watcher.hello("watcher", role="spectator")
        await trio.sleep(0.05)  # in the waiting room: no match runs
        await watcher.send(protocol.moves(1, [0]))
        error = await watcher.expect_error(protocol.UNKNOWN_TYPE)
        assert "spectators send nothing after hello" in error["message"]
        nursery.cancel_scope.cancel()
