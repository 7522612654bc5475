"""The accept loop and the handshake on their own, without a lobby (issue 26: a narrow lobby).

`accepting.accept_connections` knows nothing but a listener, a callback and a nursery; a
`handshake.Handshakes` knows nothing of matches: it hands each greeted connection to one callback.
The lobby's use of both is covered by the server's tests (test_server.py, test_connection_limits.py).
"""

from __future__ import annotations

import errno
import socket
from dataclasses import dataclass, field
from typing import Any

import pytest
import trio
from wire_client import Client

from cellarena.sdk import protocol
from cellarena.server.net.accepting import AcceptErrors, Handler, accept_connections
from cellarena.server.net.connection import Connection
from cellarena.server.net.handshake import Handshakes
from cellarena.server.net.poller import Poller
from cellarena.server.net.trusted_proxies import TrustedProxies


def _listener() -> socket.socket:
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.setblocking(False)
    return listener


async def test_each_socket_goes_to_the_callback_in_accept_order_and_its_task_to_the_nursery() -> None:
    listener = _listener()
    clients = []
    for _ in range(3):  # connected one after another: the kernel's queue keeps that order
        client = socket.create_connection(listener.getsockname())
        clients.append(client)
    ports = [c.getsockname()[1] for c in clients]
    seen: list[int] = []
    handled: list[int] = []
    accepted: list[socket.socket] = []

    def on_accept(sock: socket.socket, address: Any) -> Handler | None:
        seen.append(address[1])
        accepted.append(sock)
        if len(seen) == 2:
            return None  # nothing to run for this one: no task is started

        async def handle() -> None:
            handled.append(address[1])

        return handle

    async with trio.open_nursery() as handlers:
        handlers.start_soon(accept_connections, listener, handlers, on_accept, AcceptErrors())
        with trio.fail_after(10):
            while len(handled) < 2:
                await trio.sleep(0.01)
        handlers.cancel_scope.cancel()
    assert seen == ports
    assert sorted(handled) == sorted([ports[0], ports[2]])
    for sock in [*accepted, *clients, listener]:
        sock.close()


class _BrokenListener:
    """A listener that is readable but whose accept() fails as a closed listener's would."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock

    def fileno(self) -> int:
        return self.sock.fileno()

    def accept(self) -> tuple[socket.socket, Any]:
        raise OSError(errno.EBADF, "Bad file descriptor")


async def test_an_error_of_the_listener_itself_ends_the_loop() -> None:
    listener = _listener()
    client = socket.create_connection(listener.getsockname())  # so that it is readable
    with pytest.raises(ExceptionGroup) as caught, trio.fail_after(10):
        async with trio.open_nursery() as handlers:
            await accept_connections(_BrokenListener(listener), handlers, lambda s, a: None, AcceptErrors())
    (error,) = caught.value.exceptions
    assert isinstance(error, OSError) and error.errno == errno.EBADF
    client.close()
    listener.close()


@dataclass
class _Settings:
    """The handshake's settings, from no lobby."""

    game: str = "rezzo"
    hello_timeout: float = 10.0
    max_backlog: int = 1 << 20
    send_buffer: int | None = None
    tls: Any = None
    max_connections_per_address: int | None = None
    max_spectators_per_address: int | None = None
    trusted_proxies: TrustedProxies = field(default_factory=TrustedProxies)


class _Seating:
    """Records what the handshake asks; refuses bots named ``mallory``."""

    def __init__(self) -> None:
        self.connected_from: list[str] = []
        self.refusals: list[tuple[str, str]] = []

    def connected(self, conn: Connection) -> None:
        self.connected_from.append(conn.host)

    def check(self, conn: Connection, hello: dict[str, Any]) -> tuple[str, str] | None:
        if hello["name"] == "mallory":
            return protocol.SEAT_TAKEN, "mallory has no seat here"
        return None

    def refused(self, conn: Connection, hello: dict[str, Any], code: str, message: str) -> None:
        self.refusals.append((hello["name"], code))


async def test_a_greeted_connection_goes_to_one_callback_and_a_refused_one_to_the_seating() -> None:
    seating = _Seating()
    greeted: list[tuple[Connection, dict[str, Any]]] = []
    handshakes = Handshakes(_Settings(), seating, lambda conn, hello: greeted.append((conn, hello)))
    listener = _listener()
    async with trio.open_nursery() as nursery:
        poller = handshakes.poller = Poller[Connection]()
        await nursery.start(poller.serve)
        nursery.start_soon(accept_connections, listener, nursery, handshakes.accepted, AcceptErrors())
        port = listener.getsockname()[1]
        with trio.fail_after(10):
            alice = await Client.connect(port)
            await alice.hello("alice")
            while not greeted:
                await trio.sleep(0.01)
            conn, hello = greeted[0]
            assert conn.name == "alice" and hello["name"] == "alice" and conn.joined > 0
            assert handshakes.connections_from("127.0.0.1") == 1

            wrong_game = await Client.connect(port)
            await wrong_game.hello("carol", game="cata")
            refusal = await wrong_game.expect_error(protocol.BAD_HELLO)
            assert "this server plays 'rezzo'" in refusal["message"]
            mallory = await Client.connect(port)
            await mallory.hello("mallory")
            assert (await mallory.expect_error(protocol.SEAT_TAKEN))["message"] == "mallory has no seat here"
            assert seating.refusals == [("carol", protocol.BAD_HELLO), ("mallory", protocol.SEAT_TAKEN)]
            assert seating.connected_from == ["127.0.0.1"] * 3
            assert len(greeted) == 1

            conn.close()
            await alice.stream.aclose()
            while handshakes.connections_from("127.0.0.1"):
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    listener.close()
