"""Every new connection up to its hello: per-address caps, PROXY headers, the hello's checks.

A socket the accept loop took (`accepting`), or one another process handed over (`Lobby.adopt`),
becomes a `Connection` here, counted against its client's address from that moment, hello or not:
the socket's peer, or what a trusted proxy's PROXY header says (`trusted_proxies`,
`proxy_protocol`). Each connection then has one short task, its handshake, that waits up to the
hello timeout; the hello itself is read where it arrives (in the poller's task), checked for what
every server refuses and what the seating refuses, and a greeted connection (its name and arrival
set) goes to the lobby through one callback, `on_hello`. From there the lobby routes spectators and
seats bots; nothing here knows of matches.
"""

from __future__ import annotations

import collections
import contextlib
import functools
import logging
import socket
import ssl
from collections.abc import Callable
from typing import Any, Protocol

import trio

from cellarena.sdk import protocol
from cellarena.server.net.accepting import Handler
from cellarena.server.net.connection import Connection, TlsConnection
from cellarena.server.net.poller import Poller
from cellarena.server.net.proxy_protocol import ProxyHeaderError, read_proxy_header
from cellarena.server.net.trusted_proxies import TrustedProxies

log = logging.getLogger("cellarena.server")

#: Seconds a TLS connection past its address's cap has to say hello, so that it can be told why
#: it is refused (nothing can be said before its handshake) and not take the caps' descriptors long.
OVER_CAP_HELLO_TIMEOUT = 2.0


class HandshakeSettings(Protocol):
    """What the handshake reads of the server's settings (`lobby.LobbyConfig` has them all)."""

    game: str
    hello_timeout: float
    max_backlog: int
    send_buffer: int | None
    tls: ssl.SSLContext | None
    max_connections_per_address: int | None
    max_spectators_per_address: int | None
    trusted_proxies: TrustedProxies


class SeatingChecks(Protocol):
    """What the handshake asks of the lobby's way of seating bots (`seating.Seating` is one)."""

    def connected(self, conn: Connection) -> None:
        """A connection was accepted, before its hello."""

    def check(self, conn: Connection, hello: dict[str, Any]) -> tuple[str, str] | None:
        """What it refuses in a bot's hello that passed the protocol's checks: (code, message)."""

    def refused(self, conn: Connection, hello: dict[str, Any], code: str, message: str) -> None:
        """A hello was refused with ``code`` (the handshake fails the connection)."""


class _Handshake:
    """The owner of a new connection until its hello: the hello is read right where it arrives (in
    the poller's task), so bots are seated in the order their hellos arrived."""

    def __init__(self, handshakes: Handshakes) -> None:
        self.handshakes = handshakes
        self.done = trio.Event()

    def on_message(self, conn: Connection, message: dict[str, Any], arrival: float) -> None:
        # Called from the poller: a bug here costs this connection alone (`Connection.on_ready`).
        self.done.set()
        conn.detach()
        self.handshakes.hello(conn, message, arrival)

    def on_closed(self, conn: Connection) -> None:
        self.done.set()


class Handshakes:
    """The handshakes of one server's connections and their per-address counts. ``on_hello`` takes
    each greeted connection (a spectator's counted against its address's spectator cap already)."""

    def __init__(
        self,
        settings: HandshakeSettings,
        seating: SeatingChecks,
        on_hello: Callable[[Connection, dict[str, Any]], None],
    ) -> None:
        self.settings = settings
        self.seating = seating
        self.on_hello = on_hello
        #: Where connections are served; the lobby sets it as it starts serving.
        self.poller: Poller[Connection] | None = None
        #: Open connections (sockets, lingering ones too) and spectators, by client address.
        self._open_from: collections.Counter[str] = collections.Counter()
        self._watching_from: collections.Counter[str] = collections.Counter()
        self._watchers: set[Connection] = set()
        #: TLS connections past their address's cap: refused at their hello, once they can be told.
        self._over_cap: dict[Connection, tuple[str, str]] = {}
        #: Addresses refused for their cap since they were last under it: logged once, not per refusal.
        self._at_cap: set[str] = set()

    def connections_from(self, host: str) -> int:
        """Open connections from client address ``host``, hello or not (what the per-address cap counts)."""
        return self._open_from.get(host, 0)

    # ----------------------------------------------------------------- accepted
    def accepted(self, sock: socket.socket, address: Any) -> Handler | None:
        """A socket the accept loop took: its handshake's task (after its PROXY header's, from a
        trusted proxy), or None if it was lost or refused at once."""
        if self.settings.trusted_proxies and self.settings.trusted_proxies.trusts(address[0]):
            return functools.partial(self._proxied, sock, address[0])
        # Registered now, in accept order, so that hellos already waiting are read in that order.
        conn = self.connect(sock)
        if conn is not None:
            return functools.partial(self._handshake, conn)
        return None

    async def _proxied(self, sock: socket.socket, proxy: str) -> None:
        """A trusted proxy's connection: its PROXY header first (within the hello timeout), then the
        client's connection as any other, under the client's address."""
        handed_over = False
        try:
            sock.setblocking(False)
            header = await read_proxy_header(sock, self.settings.hello_timeout)
            conn = self.connect(sock, peer=header.client or _peer_of(sock), via=proxy)
            handed_over = True
            if conn is not None:
                await self._handshake(conn)
        except ProxyHeaderError as exc:
            log.warning("closing a connection from the trusted proxy %s: %s", proxy, exc)
        except OSError as exc:
            log.info("lost a new connection from the trusted proxy %s at once: %s", proxy, exc)
        finally:
            if not handed_over:
                with contextlib.suppress(RuntimeError):
                    trio.lowlevel.notify_closing(sock)
                sock.close()

    def connect(
        self,
        sock: socket.socket,
        *,
        peer: tuple[str, int] | None = None,
        via: str | None = None,
        plain: bool = False,
    ) -> Connection | None:
        """The connection over ``sock``, counted against its client's address; None if it was lost at
        once or refused at once (past its address's cap: told so, unless TLS must come first).
        ``plain``: this server's end of a loopback connection it made for a bot it starts, never TLS."""
        assert self.poller is not None
        settings = self.settings
        if settings.send_buffer is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, settings.send_buffer)
        conn: Connection
        try:
            if settings.tls is not None and not plain:
                conn = TlsConnection(
                    sock,
                    self.poller,
                    settings.tls,
                    max_backlog=settings.max_backlog,
                    peer=peer,
                    via=via,
                )
            else:
                conn = Connection(sock, self.poller, max_backlog=settings.max_backlog, peer=peer, via=via)
        except OSError as exc:  # reset before we even looked at it
            log.info("lost a new connection at once: %s", exc)
            sock.close()
            return None
        if conn.closed:  # the poller has stopped: the server is going away
            return None
        cap = settings.max_connections_per_address
        over = cap is not None and self._open_from[conn.host] >= cap
        self._open_from[conn.host] += 1
        conn.on_gone = self._gone
        if over:
            refusal = (
                protocol.TOO_MANY_CONNECTIONS,
                f"{conn.host} has {cap} connections open already; close one, or come back in a few seconds",
            )
            if conn.host not in self._at_cap:
                self._at_cap.add(conn.host)
                log.warning(
                    "%s has %d connections open, its cap: refusing more until one closes (logged once)",
                    conn.host,
                    cap,
                )
            if not conn.tls:
                conn.fail(*refusal, level=logging.INFO)
                return None
            self._over_cap[conn] = refusal  # told at its hello, once TLS can carry the frame
        self.seating.connected(conn)
        return conn

    def _gone(self, conn: Connection) -> None:
        """A connection's socket closed: it no longer counts against its address."""
        left = self._open_from[conn.host] - 1
        if left > 0:
            self._open_from[conn.host] = left
        else:
            del self._open_from[conn.host]
        cap = self.settings.max_connections_per_address
        if cap is not None and left < cap:
            self._at_cap.discard(conn.host)
        self._over_cap.pop(conn, None)
        if conn in self._watchers:
            self._watchers.discard(conn)
            left = self._watching_from[conn.host] - 1
            if left > 0:
                self._watching_from[conn.host] = left
            else:
                del self._watching_from[conn.host]

    def greeting(self, conn: Connection) -> Handler:
        """The task that awaits ``conn``'s hello, for a connection made here (`Lobby.accept_handed`)."""
        return functools.partial(self._handshake, conn)

    # ----------------------------------------------------------------- hello
    async def _handshake(self, conn: Connection) -> None:
        """Wait up to the hello timeout for the connection's hello; the poller serves it after that."""
        handshake = _Handshake(self)
        conn.attach(handshake)
        conn.resume_reading()
        timeout = self.settings.hello_timeout
        if conn in self._over_cap:
            timeout = min(timeout, OVER_CAP_HELLO_TIMEOUT)
        with trio.move_on_after(timeout):
            await handshake.done.wait()
        if not handshake.done.is_set():
            conn.detach()
            conn.fail(protocol.TIMEOUT, f"no hello within {timeout:g} s of connecting")

    def hello(self, conn: Connection, hello: dict[str, Any], arrival: float) -> None:
        """A connection's first message: refuse it, or greet it and hand it to ``on_hello``."""
        problem = self._over_cap.pop(conn, None) or self._check_hello(hello)
        if problem is None and hello.get("role", "bot") == "bot":
            problem = self.seating.check(conn, hello)
        if problem is not None:
            self.seating.refused(conn, hello, *problem)
            quiet = problem[0] == protocol.TOO_MANY_CONNECTIONS  # logged once per address at accept
            conn.fail(*problem, level=logging.INFO if quiet else logging.WARNING)
            return
        conn.joined = arrival
        conn.name = hello["name"]
        if hello.get("role", "bot") == "spectator":
            cap = self.settings.max_spectators_per_address
            if cap is not None and self._watching_from[conn.host] >= cap:
                conn.fail(
                    protocol.TOO_MANY_CONNECTIONS,
                    f"{conn.host} watches with {cap} connections already; close one to watch another match",
                )
                return
            self._watchers.add(conn)
            self._watching_from[conn.host] += 1
        self.on_hello(conn, hello)

    def _check_hello(self, hello: dict[str, Any]) -> tuple[str, str] | None:
        """What every server refuses in a hello (the protocol module's one check), as (code, text)."""
        try:
            protocol.check_hello(hello, game=self.settings.game)
        except protocol.ProtocolError as exc:
            return exc.code, exc.message
        return None


def _peer_of(sock: socket.socket) -> tuple[str, int] | None:
    """The socket's own peer (a proxy speaking for itself), or None if it is gone."""
    try:
        host, port = sock.getpeername()[:2]
    except OSError:
        return None
    return host, port
