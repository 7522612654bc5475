"""The accept loop: sockets off a listener, each handed to a callback in accept order.

A small function with no lobby state, as trio's `serve_listeners` is: what becomes of a socket is
the caller's (`handshake.Handshakes.accepted`), and any task that socket needs runs in the handler
nursery the caller gives, so that one client's trouble is its task's alone. The callback runs at
once, before the next accept, so that connections are registered in the order they were accepted
(hellos already waiting are read in that order); only the task it returns waits for its turn.

A server facing the internet is one that runs out of descriptors first: when accept() fails for
want of one, the loop backs off with one log line per burst (`AcceptErrors`), and takes a flood a
batch at a time so that the matches already running get their ticks.
"""

from __future__ import annotations

import errno
import logging
import socket
import time
from collections.abc import Awaitable, Callable
from typing import Any, Protocol

import trio

log = logging.getLogger("cellarena.server")

#: Connections accepted in one go before the running matches get their turn.
ACCEPT_BATCH = 16
#: Errors from accept() that concern one connection only, not the listener.
_TRANSIENT_ACCEPT = {
    errno.ECONNABORTED,
    errno.EPROTO,
    errno.EMFILE,
    errno.ENFILE,
    errno.ENOBUFS,
    errno.ENOMEM,
}
#: The wait after a failed accept(), doubled at each failure in a row up to the longest: a full
#: descriptor table is not freed by retrying at once (it logged 934 lines in 10 s).
ACCEPT_BACKOFF_FIRST = 0.01
ACCEPT_BACKOFF_MAX = 0.5

#: A task for one accepted socket (its handshake), run in the handler nursery.
Handler = Callable[[], Awaitable[object]]
#: What to do with an accepted socket and its peer address: called at once, in accept order; the
#: task it returns, if any, is started in the handler nursery.
OnAccept = Callable[[socket.socket, Any], "Handler | None"]


class Listener(Protocol):
    """What the loop needs of a listening socket (a test gives one whose accept() fails)."""

    def fileno(self) -> int: ...

    def accept(self) -> tuple[socket.socket, Any]: ...


class AcceptErrors:
    """Failed accepts in a row: how long to wait before the next try, and one log line per burst
    (at its start; its end, with how many failed and for how long, at info level)."""

    def __init__(self) -> None:
        self.count = 0
        self.since = 0.0

    def failed(self, exc: OSError) -> float:
        """Note a failure; the seconds to wait before accepting again."""
        if self.count == 0:
            self.since = time.monotonic()
            log.warning("accept failed: %s; waiting to accept again (failures in a row are not logged)", exc)
        self.count += 1
        return min(ACCEPT_BACKOFF_MAX, ACCEPT_BACKOFF_FIRST * 2 ** min(self.count - 1, 16))

    def succeeded(self) -> None:
        if self.count:
            log.info(
                "accepting again after %d failed accept(s) in %.1f s",
                self.count,
                time.monotonic() - self.since,
            )
            self.count = 0


async def accept_connections(
    listener: Listener, nursery: trio.Nursery, on_accept: OnAccept, errors: AcceptErrors
) -> None:
    """Accept from the non-blocking ``listener`` until cancelled: each socket goes to ``on_accept``,
    and the task it returns runs in ``nursery``. An accept() error that concerns one connection
    only is backed off through ``errors``; any other is the listener's and ends the loop."""
    while True:
        await trio.lowlevel.wait_readable(listener)
        for _ in range(ACCEPT_BATCH):
            try:
                sock, address = listener.accept()
            except (BlockingIOError, InterruptedError):
                break
            except OSError as exc:
                if exc.errno in _TRANSIENT_ACCEPT:
                    # Out of descriptors: let connections close first, and say so once.
                    await trio.sleep(errors.failed(exc))
                    break
                raise
            errors.succeeded()
            handler = on_accept(sock, address)
            if handler is not None:
                nursery.start_soon(handler)
        else:
            # A flood of connections is taken a batch at a time, so that the handshakes of
            # hundreds of new clients do not hold up the ticks of the matches already running.
            await trio.lowlevel.checkpoint()
