"""Binding and running the app under hypercorn's trio worker.

The socket is bound here, before hypercorn starts, so that a port in use is a clear error for the
command line (not a traceback from inside the server), and ``--port 0`` reports the port it got.

Every page cellarena serves (`ladder web`, `cellarena web`, `replay view`, the live view, `/health`)
runs through `run`, which holds two promises hypercorn's own ``serve`` does not:

- **One connection's fault costs that connection only.** hypercorn runs each connection in its
  server's nursery, so an exception that escapes a connection's handling (its HTTP/2 side raised
  KeyError on a request body that came after the answer, pgjones/hypercorn#197 and #329) ended the
  whole process. Here each connection runs under `_contained`, which logs the fault in one line and
  closes that connection.
- **HTTP/1.1 only.** That HTTP/2 fault is closed at its root by not speaking HTTP/2: TLS offers
  ``http/1.1`` alone in ALPN, the prior-knowledge preface (``PRI * HTTP/2.0``) is answered 505 and
  closed, and ``Upgrade: h2c`` is ignored (RFC 9110 7.8 lets a server answer in the protocol it
  was asked in). The pages are small and few per visit, so HTTP/2's multiplexing buys them
  little; a host that wants it puts a proxy in front (docs/ladder.md).
"""

from __future__ import annotations

import errno
import logging
import socket
from collections.abc import Callable
from typing import Any

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config
from hypercorn.events import RawData
from hypercorn.protocol.h11 import H11Protocol
from hypercorn.trio.lifespan import Lifespan
from hypercorn.trio.task_group import TaskGroup
from hypercorn.trio.tcp_server import TCPServer
from hypercorn.trio.worker_context import WorkerContext
from hypercorn.typing import ConnectionState, LifespanState
from hypercorn.utils import parse_socket_addr
from starlette.applications import Starlette

log = logging.getLogger("cellarena.web")

#: What a client that opens with HTTP/2's preface is told before the connection closes.
_HTTP2_REFUSED = (
    b"HTTP/1.1 505 HTTP Version Not Supported\r\ncontent-type: text/plain; charset=utf-8\r\n"
    b"connection: close\r\ncontent-length: 44\r\n\r\nThis server speaks HTTP/1.1 only (not h2c).\n"
)


class BindError(Exception):
    """The address cannot be listened on; ``str()`` names it and says what to do."""


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on ``host:port``; BindError if it is in use or not this machine's."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise BindError(f"--host {host}: not an address of this machine ({exc.strerror})") from None
    family, _, _, _, addr = infos[0]
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(addr)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise BindError(
                f"--port {port}: {host}:{port} is already in use; pick another with --port (0: any free port)"
            ) from None
        raise BindError(f"--host {host} --port {port}: cannot listen there ({exc.strerror})") from None
    sock.set_inheritable(True)
    return sock


def url_of(sock: socket.socket, path: str = "/", *, tls: bool = False) -> str:
    host, port = sock.getsockname()[:2]
    shown = f"[{host}]" if ":" in host else host
    return f"{'https' if tls else 'http'}://{shown}:{port}{path}"


class _HTTP2PrefaceError(Exception):
    """A connection opened with HTTP/2's preface: it was told so and is closed."""


class _HTTP11Only(H11Protocol):
    """hypercorn's HTTP/1.1 side, without its two ways over to HTTP/2 (see the module's docstring)."""

    async def _check_protocol(self, event: Any) -> None:
        if event.method == b"PRI" and event.target == b"*" and event.http_version == b"2.0":
            await self.send(RawData(data=_HTTP2_REFUSED))
            raise _HTTP2PrefaceError
        # `Upgrade: h2c` (hypercorn would answer 101 and switch): ignored, answered in HTTP/1.1.


class _Connection(TCPServer):
    """One connection, served in HTTP/1.1 only: hypercorn's `TCPServer` with `_HTTP11Only` as its
    protocol, where hypercorn's own picks HTTP/2 by ALPN or by what the client sends."""

    async def run(self) -> None:
        if isinstance(self.stream, trio.SSLStream):
            try:
                with trio.fail_after(self.config.ssl_handshake_timeout):
                    await self.stream.do_handshake()
            except (trio.BrokenResourceError, trio.TooSlowError):
                return  # a client that never finishes its handshake: nothing to serve
            sock = self.stream.transport_stream.socket
            tls = True
        else:
            sock = self.stream.socket
            tls = False
        try:
            client = parse_socket_addr(sock.family, sock.getpeername())
            server = parse_socket_addr(sock.family, sock.getsockname())
            async with TaskGroup() as task_group:
                self._task_group = task_group
                protocol = _HTTP11Only(
                    self.app, self.config, self.context, task_group, ConnectionState(self.state.copy()),
                    tls, client, server, self.protocol_send,
                )  # fmt: skip
                self.protocol = protocol  # type: ignore[assignment]  # the same handle() as the wrapper's
                await protocol.initiate()
                await self.idle_task.restart(task_group, self._idle_timeout)
                await self._read_data()
        except OSError:
            pass  # the peer went: nothing to tell it
        finally:
            await self._close()


def _peer(stream: Any) -> str:
    inner = stream.transport_stream if isinstance(stream, trio.SSLStream) else stream
    try:
        host, port = inner.socket.getpeername()[:2]
    except (OSError, AttributeError):
        return "a client that has gone"
    return f"{host}:{port}"


async def _contained(connection: _Connection) -> None:
    """Serve one connection; whatever escapes its handling closes it alone, logged in one line (the
    traceback at debug level: a client that can cause the fault can also repeat it)."""
    peer = _peer(connection.stream)
    try:
        await connection.run()
    except* _HTTP2PrefaceError:
        log.info("%s opened with HTTP/2's preface: told 505 (HTTP/1.1 only) and closed", peer)
    except* Exception as group:
        faults = ", ".join(f"{type(e).__name__}: {e}" for e in group.exceptions)
        log.warning(
            "closed the connection from %s after a fault in the HTTP server (%s); serving on", peer, faults
        )
        log.debug("the fault's traceback", exc_info=group)
        with trio.CancelScope(shield=True), trio.move_on_after(1.0):
            await connection.stream.aclose()


async def run(
    app: Starlette,
    sock: socket.socket,
    ready: Callable[[], None] | None = None,
    *,
    tls: tuple[str, str] | None = None,
) -> None:
    """Serve ``app`` on the bound ``sock`` until cancelled; with ``tls`` (certificate chain, key: PEM
    files, checked by the caller), over HTTPS only. In HTTP/1.1, each connection contained (the
    module's docstring says why)."""
    config = Config()
    if tls is not None:
        config.certfile, config.keyfile = tls
    config.alpn_protocols = ["http/1.1"]
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    config.graceful_timeout = 1.0
    wrapped = ASGIWrapper(app)  # type: ignore[arg-type]
    context = WorkerContext(None)
    state: LifespanState = {}
    lifespan = Lifespan(wrapped, config, state)
    # trio wraps the fd in a socket of its own and closes it when it stops: hand it a duplicate, so
    # that the caller's `sock.close()` afterwards closes its own fd, not a number by then free (EBADF
    # on Ctrl-C) or reused by another file.
    plain = trio.SocketListener(trio.socket.from_stdlib_socket(sock.dup()))
    ssl_context = config.create_ssl_context()
    listener: trio.abc.Listener[Any] = (
        plain if ssl_context is None else trio.SSLListener(plain, ssl_context, https_compatible=True)
    )

    async def serve_one(stream: Any) -> None:
        await _contained(_Connection(wrapped, config, context, ConnectionState(state.copy()), stream))

    try:
        async with trio.open_nursery() as lifespan_nursery:
            await lifespan_nursery.start(lifespan.handle_lifespan)
            await lifespan.wait_for_startup()
            try:
                async with trio.open_nursery() as connections:
                    if ready is not None:
                        ready()
                    await trio.serve_listeners(serve_one, [listener], handler_nursery=connections)
            finally:
                with trio.CancelScope(shield=True), trio.move_on_after(config.graceful_timeout):
                    await context.terminated.set()
                    await lifespan.wait_for_shutdown()
                lifespan_nursery.cancel_scope.cancel()
    finally:
        await listener.aclose()


def serve_until_interrupted(
    app: Starlette, sock: socket.socket, message: str, url: str, open_browser: bool
) -> None:
    """What the commands do: print ``message`` once listening (and open ``url``), serve until Ctrl-C."""
    import sys

    import trio

    def ready() -> None:
        print(message, flush=True)
        if open_browser:
            import webbrowser

            webbrowser.open(url)

    try:
        trio.run(run, app, sock, ready)
    except KeyboardInterrupt:
        sys.stdout.flush()
    finally:
        sock.close()
