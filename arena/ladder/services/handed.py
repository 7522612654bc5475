"""Connections the ladder makes for bots it starts that cannot connect themselves.

An isolated submitted bot runs in a network namespace of its own, with nothing in it (docs/security.md):
it cannot reach the ladder's port. So the ladder makes a loopback TCP connection, serves its own end as
if the bot had connected (`Lobby.accept_handed`, never TLS: it never leaves this machine) and hands the
other end to the bot as its standard input, as `cellarena match` hands every bot its connection
(docs/protocol.md, CELLARENA_SOCKET_FD). TCP, not a Unix socket pair: the kits take a handed TCP
socket (Java's inherited channel offers no other). The bot says hello with no token; the ladder
knows the connection is its launch's and reads that launch's one-time secret for it
(`LadderSeating.handed_secret`).
"""

from __future__ import annotations

import socket
from collections.abc import Callable

from cellarena.arena.ladder.hosting.seat_launch import loopback_pair
from cellarena.server.net.connection import Connection

#: `Lobby.accept_handed`'s shape: the server's end, served from now on.
Accept = Callable[[socket.socket], Connection | None]


class HandedConnections:
    """Connections for launches, and the secret each launch's connection stands for."""

    def __init__(self, accept: Accept) -> None:
        self.accept = accept
        self._secrets: dict[Connection, str] = {}

    def make(self, secret: str) -> tuple[Connection, socket.socket] | None:
        """(the served connection, the bot's end) for a launch with ``secret``; None if the lobby
        would not take it (it is stopping)."""
        ours, theirs = loopback_pair()
        conn = self.accept(ours)
        if conn is None:
            theirs.close()
            return None
        self._secrets[conn] = secret
        return conn, theirs

    def secret(self, conn: Connection) -> str | None:
        """The secret of the launch that ``conn`` was made for, or None: any other connection."""
        return self._secrets.get(conn)

    def forget(self, conn: Connection | None) -> None:
        """``conn``'s launch is over."""
        if conn is not None:
            self._secrets.pop(conn, None)
