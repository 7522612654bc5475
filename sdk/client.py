"""A blocking TCP client for the cellarena protocol: connect, send ``hello``, read and send messages.

Standard library sockets and `ssl` only (no trio, no threads): a bot is one process playing one
match at a time, and a blocking read is the simplest correct way to wait for the next request. The
framing rules live in `cellarena.sdk.protocol`, shared with the server, so both sides agree byte for
byte.

    with connect("127.0.0.1", 7777, name="me", game="rezzo") as client:
        for message in client.messages():
            ...

Over TLS, pass ``tls=tls_context()`` (the system's CA store) or ``tls_context("ca.pem")``; the server's
certificate must be valid for the host name connected to.

`Bot` and `run()` in `cellarena.sdk.bot` drive this loop for you; use the client directly only to
write your own loop.
"""

from __future__ import annotations

import contextlib
import ipaddress
import select
import socket
import ssl
from collections import deque
from collections.abc import Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any

from cellarena.sdk import protocol
from cellarena.sdk.protocol import MAX_CLIENT_FRAME, MAX_SERVER_FRAME, FrameReader, ProtocolError

#: Seconds to wait for the TCP connection to open.
CONNECT_TIMEOUT = 10.0
_RECV_SIZE = 1 << 16


class ClientError(Exception):
    """Base of the client's errors. ``str(exc)`` is one line that says what happened."""


class ConnectError(ClientError):
    """The TCP connection could not be opened (refused, timed out, unknown host)."""


class TLSError(ConnectError):
    """The TLS handshake failed: the certificate is not trusted or not for this host, or the server does
    not speak TLS. Trying again cannot help until the bot's settings (or the server's) change."""


class ServerError(ClientError):
    """The server sent an ``error`` message; it closes the connection next."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(f"the server sent error {code!r}: {message}")
        self.code = code
        self.message = message


class ConnectionClosedError(ClientError):
    """The connection ended without an ``end`` or ``error`` message."""


class Client:
    """One open connection to a cellarena server. Make one with `connect()`.

    ``recv()`` blocks until the next message. An ``error`` message is raised as `ServerError`, a
    connection that ends early as `ConnectionClosedError`, and a malformed server frame as
    `ProtocolError`. The client closes its socket on any of them.
    """

    def __init__(self, sock: socket.socket, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._sock = sock
        #: True over TLS: `ssl` may hold decrypted bytes that `select` on the socket cannot see.
        self.tls = isinstance(sock, ssl.SSLSocket)
        self._first_read = True
        self._reader = FrameReader(MAX_SERVER_FRAME)
        self._inbox: deque[dict[str, Any]] = deque()
        self._eof = False
        self.closed = False
        #: Set once an ``end`` message has been read: the server closes the connection after it.
        self.ended = False
        #: Where the connection is in the protocol (`protocol.states`): a server message out of
        #: order there is a `ProtocolError`.
        self.state = protocol.State.HELLO

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    # ------------------------------------------------------------------ sending
    def send(self, message: Mapping[str, Any]) -> None:
        """Frame and send one message. Raises ValueError if it is over the client frame limit."""
        frame = protocol.encode(message)
        size = len(frame) - protocol.HEADER.size
        if size > MAX_CLIENT_FRAME:
            raise ValueError(f"a client frame may hold {MAX_CLIENT_FRAME} bytes at most, this one {size}")
        kind = message.get("type")
        if isinstance(kind, str):
            self.state = protocol.advance(self.state, "client", kind, role=str(message.get("role", "bot")))
        try:
            self._sock.sendall(frame)
        except OSError as exc:
            # The server may have explained itself just before it closed: report that, not the pipe,
            # and let an `end` that is already here be read as usual.
            self._read_available()
            self._raise_if_error_buffered()
            if self._inbox:
                return
            self.close()
            raise ConnectionClosedError(f"lost {self.address} while sending ({exc})") from None

    def hello(
        self,
        name: str,
        game: str,
        *,
        token: str | None = None,
        role: protocol.Role = "bot",
        accepts: Sequence[str] = (),
        version: str | None = None,
    ) -> None:
        """Send the ``hello`` that must open every connection (``accepts``, ``version``: see
        `protocol.Hello`)."""
        self.send(protocol.hello(name, game, token=token, role=role, accepts=accepts, version=version))

    # ------------------------------------------------------------------ receiving
    def recv(self) -> dict[str, Any]:
        """The next message, waiting as long as it takes (a bot may wait any time for its match)."""
        while not self._inbox:
            if self._eof:
                self.close()
                when = "after the match ended" if self.ended else "before the match ended"
                # A TLS server drops a plain client's hello without a word that this client could read.
                hint = (
                    "; if that port serves TLS, connect with --tls"
                    if self._first_read and not self.tls
                    else ""
                )
                raise ConnectionClosedError(
                    f"the server at {self.address} closed the connection {when}{hint}"
                )
            self._receive(block=True)
        return self._take()

    def poll(self) -> int:
        """Read whatever has already arrived, without waiting; the number of messages now buffered."""
        self._read_available()
        return len(self._inbox)

    def peek(self) -> dict[str, Any] | None:
        """The next buffered message without taking it, or None (call ``poll()`` first)."""
        return self._inbox[0] if self._inbox else None

    def messages(self) -> Iterator[dict[str, Any]]:
        """Every message up to and including ``end``; then the iteration stops."""
        while not self.ended:
            yield self.recv()

    def _take(self) -> dict[str, Any]:
        message = self._inbox.popleft()
        kind = message["type"]
        wrong = protocol.server_refusal(self.state, kind)
        if wrong is not None:
            self.close()
            raise ProtocolError(protocol.BAD_MESSAGE, wrong)
        self.state = protocol.advance(self.state, "server", kind)
        if kind == "error":
            self.close()
            raise ServerError(str(message.get("code", "?")), str(message.get("message", "")))
        if kind == "end":
            self.ended = True
        return message

    def _raise_if_error_buffered(self) -> None:
        for message in self._inbox:
            if message["type"] == "error":
                self.close()
                raise ServerError(str(message.get("code", "?")), str(message.get("message", "")))

    def _receive(self, *, block: bool) -> bool:
        """One read from the socket into the inbox; False if nothing was there (non-blocking)."""
        try:
            if not block and not self._buffered_by_tls() and not select.select([self._sock], [], [], 0)[0]:
                return False
            data = self._sock.recv(_RECV_SIZE)
        except OSError as exc:
            # A reset after the server's last frame still leaves that frame (often an error) to read.
            self._eof = True
            if self._inbox:
                return True
            self.close()
            raise ConnectionClosedError(f"the connection to {self.address} was lost ({exc})") from None
        if not data:
            self._eof = True
            return True
        if self._first_read:
            self._first_read = False
            self._refuse_tls_answer(data)
        try:
            self._inbox.extend(self._reader.feed(data))
        except ProtocolError:
            self.close()
            raise
        return True

    def _buffered_by_tls(self) -> bool:
        return self.tls and isinstance(self._sock, ssl.SSLSocket) and self._sock.pending() > 0

    def _refuse_tls_answer(self, data: bytes) -> None:
        """A TLS server answers a plain hello with a TLS record (type 21 or 22, version 3.x), which
        would read as a frame of over 300 MB: say what is wrong instead of `too_large`."""
        if not self.tls and len(data) >= 2 and data[0] in (0x15, 0x16) and data[1] == 0x03:
            self.close()
            raise ConnectError(
                f"the server at {self.address} speaks TLS; connect with --tls "
                "(and --tls-ca PATH if its certificate is not signed by a CA the system trusts)"
            )

    def _read_available(self) -> None:
        if self.closed:
            return
        try:
            while not self._eof and self._receive(block=False):
                pass
        except ConnectionClosedError:
            pass

    # ------------------------------------------------------------------ closing
    def close(self) -> None:
        if not self.closed:
            self.closed = True
            self._sock.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, _type: type[BaseException] | None, _exc: BaseException | None, _tb: TracebackType | None
    ) -> None:
        self.close()


def is_loopback(host: str) -> bool:
    """Whether ``host`` is this machine (a loopback address, or ``localhost``): the one place a
    token may go over plain TCP."""
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def tls_context(ca_file: str | None = None) -> ssl.SSLContext:
    """A client TLS context that checks the server's certificate and name: against the system's CA
    store, or against the CA certificates (PEM) in ``ca_file`` alone. A file that cannot be read is a
    `TLSError` naming it."""
    try:
        context = ssl.create_default_context(cafile=ca_file)
    except (OSError, ssl.SSLError) as exc:
        reason = getattr(exc, "strerror", None) or getattr(exc, "reason", None) or str(exc)
        raise TLSError(
            f"cannot read CA certificates from {ca_file}: {reason} (a PEM file is wanted)"
        ) from None
    if ca_file is not None:
        # A certificate in the file is trusted as it is, though no root signed it in the file: the
        # server's own certificate may be named (pinned), as a ladder tells its house bots.
        context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    return context


def open_connection(
    host: str,
    port: int,
    *,
    timeout: float = CONNECT_TIMEOUT,
    game: str = "",
    tls: ssl.SSLContext | None = None,
    tls_name: str | None = None,
) -> Client:
    """Open a TCP connection, with a TLS handshake when ``tls`` is given (the certificate checked for
    ``tls_name``, else ``host``); `ConnectError` explains a failure in one line, with what to try
    (`TLSError` when the handshake failed)."""
    address = f"{host}:{port}"
    serve = f"cellarena serve {game}" if game else "cellarena serve GAME"
    hint = (
        f"is a cellarena server listening there? Start one with `{serve}`, or point the bot elsewhere "
        "with --host/--port (or CELLARENA_HOST/CELLARENA_PORT)"
    )
    try:
        sock = socket.create_connection((host, port), timeout=timeout)
    except ConnectionRefusedError:
        raise ConnectError(f"could not connect to {address}: connection refused; {hint}") from None
    except TimeoutError:
        raise ConnectError(f"could not connect to {address}: no answer in {timeout:g} s; {hint}") from None
    except socket.gaierror as exc:
        raise ConnectError(f"could not connect to {address}: unknown host ({exc.strerror})") from None
    except OSError as exc:
        raise ConnectError(f"could not connect to {address}: {exc.strerror or exc}; {hint}") from None
    # Small moves frames must not sit in Nagle's buffer.
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    _keep_alive(sock)
    if tls is not None:
        sock = _handshake(sock, tls, tls_name or host, address, timeout)
    # Reads wait for as long as the match takes.
    sock.settimeout(None)
    return Client(sock, host, port)


def handed_connection(fd: int) -> Client:
    """A `Client` over descriptor ``fd``: a connection to the match server that the program which
    started this bot made and handed over (CELLARENA_SOCKET_FD, docs/protocol.md). It already owns the
    bot's seat: send ``hello`` on it, without a token. ValueError when ``fd`` is not an open socket."""
    try:
        sock = socket.socket(fileno=fd)
    except OSError as exc:
        raise ValueError(f"descriptor {fd} is not an open socket ({exc.strerror or exc})") from None
    if sock.type != socket.SOCK_STREAM:
        sock.detach()
        raise ValueError(f"descriptor {fd} is not a stream socket")
    sock.settimeout(None)
    with contextlib.suppress(OSError):  # a Unix socket has no Nagle to turn off
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        host, port = sock.getpeername()[:2]
    except (OSError, ValueError):
        host, port = "the handed-over connection", 0
    return Client(sock, str(host), int(port))


def _keep_alive(sock: socket.socket) -> None:
    """TCP keep-alive probes after 30 s of silence: a bot waiting in a ladder's queue hears nothing for
    minutes, and without probes a network that silently dropped the connection would leave it waiting
    forever instead of connecting again."""
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE, 1)
    for option, value in (("TCP_KEEPIDLE", 30), ("TCP_KEEPINTVL", 10), ("TCP_KEEPCNT", 3)):
        if hasattr(socket, option):  # Linux; elsewhere the system's defaults apply
            sock.setsockopt(socket.IPPROTO_TCP, getattr(socket, option), value)


def _handshake(
    sock: socket.socket, tls: ssl.SSLContext, host: str, address: str, timeout: float
) -> socket.socket:
    """The TLS handshake, within the connect timeout (still set on ``sock``)."""
    check = (
        "check that --tls-ca names the CA that signed the server's certificate (without it the system's "
        "CA store is used) and that --host is a name the certificate is for"
    )
    try:
        return tls.wrap_socket(sock, server_hostname=host)
    except ssl.SSLCertVerificationError as exc:
        raise TLSError(
            f"TLS handshake with {address} failed: the server's certificate was refused "
            f"({exc.verify_message or exc.reason}); {check}"
        ) from None
    except (ssl.SSLEOFError, ssl.SSLZeroReturnError):
        # The server hung up mid-handshake (restarting, overloaded): worth another try, unlike the rest.
        raise ConnectError(f"TLS handshake with {address} failed: the server closed the connection") from None
    except ssl.SSLError as exc:
        raise TLSError(
            f"TLS handshake with {address} failed ({exc.reason or exc}): is that port serving TLS? "
            f"If it is, {check}; if it is a plain server, drop --tls"
        ) from None
    except TimeoutError:
        raise ConnectError(f"TLS handshake with {address} failed: no answer in {timeout:g} s") from None
    except OSError as exc:
        raise ConnectError(
            f"TLS handshake with {address} failed: {exc.strerror or exc} (is that port serving TLS?)"
        ) from None
    finally:
        sock.close()  # wrap_socket detached it on success; on failure it is ours to close


def connect(
    host: str,
    port: int,
    *,
    name: str,
    game: str,
    token: str | None = None,
    role: protocol.Role = "bot",
    timeout: float = CONNECT_TIMEOUT,
    tls: ssl.SSLContext | None = None,
    accepts: Sequence[str] = (),
    version: str | None = None,
    tls_name: str | None = None,
) -> Client:
    """Open a connection (over TLS when ``tls`` is given, see `tls_context`) and send ``hello`` at once
    (the server wants it within 10 s); ``accepts`` lists the later messages the caller handles, and
    ``version`` is the bot's version."""
    client = open_connection(host, port, timeout=timeout, game=game, tls=tls, tls_name=tls_name)
    try:
        client.hello(name, game, token=token, role=role, accepts=accepts, version=version)
    except BaseException:
        client.close()
        raise
    return client
