"""Connections the ladder makes for the isolated submitted bots it starts (arena/ladder/services/handed.py):
a loopback TCP pair, the server's end served as the launch's, its hello seated by the launch's secret and
never redirected. The whole path (an isolated Python and Java bot playing rated matches) is
tests/test_ladder_submitted_e2e.py's."""

from __future__ import annotations

import socket
from typing import Any

from cellarena.arena.ladder.services.handed import HandedConnections, loopback_pair
from cellarena.arena.ladder.services.seating import LadderSeating


def test_a_loopback_pair_is_one_tcp_connection_the_bot_gets_blocking() -> None:
    ours, theirs = loopback_pair()
    with ours, theirs:
        assert theirs.type == socket.SOCK_STREAM and theirs.family == socket.AF_INET
        assert theirs.getpeername() == ours.getsockname() and theirs.gettimeout() is None
        theirs.sendall(b"hello")
        assert ours.recv(5) == b"hello"


class _Conn:
    closed = False


def test_a_handed_connection_stands_for_its_launchs_secret_until_forgotten() -> None:
    served: list[socket.socket] = []

    def accept(sock: socket.socket) -> Any:
        served.append(sock)
        return _Conn()

    handed = HandedConnections(accept)
    made = handed.make("s3cret")
    assert made is not None
    conn, theirs = made
    with served[0], theirs:
        assert handed.secret(conn) == "s3cret" and handed.secret(_Conn()) is None  # type: ignore[arg-type]
        handed.forget(conn)
        assert handed.secret(conn) is None
    refused = HandedConnections(lambda sock: sock.close())
    assert refused.make("x") is None


def test_its_hello_gets_the_secret_and_loses_redirect_others_are_untouched() -> None:
    seating = LadderSeating.__new__(LadderSeating)  # only the hello's rewriting is under test
    mine, other = _Conn(), _Conn()
    seating.handed_secret = lambda conn: "s3cret" if conn is mine else None
    hello = {"name": "bot", "game": "rezzo", "accepts": ["redirect", "debug"]}
    assert seating._with_secret(mine, hello) == {**hello, "token": "s3cret", "accepts": ["debug"]}  # type: ignore[arg-type]
    assert seating._with_secret(other, hello) is hello  # type: ignore[arg-type]
