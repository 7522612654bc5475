"""Binding and running the app under hypercorn's trio worker.

The socket is bound here, before hypercorn starts, so that a port in use is a clear error for the
command line (not a traceback from inside the server), and ``--port 0`` reports the port it got.
"""

from __future__ import annotations

import errno
import os
import socket
from collections.abc import Callable

from hypercorn.config import Config
from hypercorn.trio import serve
from starlette.applications import Starlette


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


async def run(
    app: Starlette,
    sock: socket.socket,
    ready: Callable[[], None] | None = None,
    *,
    tls: tuple[str, str] | None = None,
) -> None:
    """Serve ``app`` on the bound ``sock`` until cancelled; with ``tls`` (certificate chain, key: PEM
    files, checked by the caller), over HTTPS only."""
    config = Config()
    if tls is not None:
        config.certfile, config.keyfile = tls
    # hypercorn wraps the fd in a socket of its own and closes it when it stops: hand it a duplicate,
    # so that the caller's `sock.close()` afterwards closes its own fd, not a number by then free
    # (EBADF on Ctrl-C) or reused by another file.
    config.bind = [f"fd://{os.dup(sock.fileno())}"]
    config.accesslog = None
    config.errorlog = "-"
    config.loglevel = "WARNING"
    config.graceful_timeout = 1.0
    if ready is not None:
        ready()
    await serve(app, config, mode="asgi")  # type: ignore[arg-type]


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
