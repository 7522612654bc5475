"""One client connection: non-blocking socket I/O under trio, with kernel receive timestamps.

Why not trio's streams: a tick sends one frame to every seat, and awaiting `send_all` per client per
tick costs a task switch each (it topped out near 200 bots at 15 Hz). Here the tick loop writes
straight into the kernel's socket buffer with a non-blocking `send`, with no await per client. Only
when the kernel buffer is full does the rest go to a bounded backlog that a writer task drains when
the socket becomes writable. A client that does not read fills the backlog and is dropped with
`slow_reader` before our memory grows without bound.

Why kernel timestamps: a move is late if it *arrived* after its deadline, not if the server, busy
with other matches, read it late. With SO_TIMESTAMPNS the kernel stamps every received segment, so a
bot is never charged for the server's own delays. Where the option is missing, the read time is used.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import struct
import sys
import time
from collections.abc import Callable
from typing import Any

import trio

from cellarena.sdk import protocol
from cellarena.sdk.protocol import FrameReader, ProtocolError

log = logging.getLogger("cellarena.server")

# Linux's value; the socket module does not export it on every Python build.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
_TIMESPEC = struct.Struct("qq")
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
RECV_CHUNK = 256 * 1024
#: Unsent bytes we keep for a client beyond what the kernel buffers; past this it is a slow reader.
DEFAULT_MAX_BACKLOG = 4 * 1024 * 1024

#: Called with (connection, message, arrival time as time.time()) for every message received.
Handler = Callable[["Connection", dict[str, Any], float], None]


class Connection:
    """A connected peer. `run()` is its reader and writer; everything else is synchronous."""

    def __init__(
        self,
        sock: socket.socket,
        *,
        recv_limit: int = protocol.MAX_CLIENT_FRAME,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
    ) -> None:
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.kernel_timestamps = False
        if SO_TIMESTAMPNS is not None and _ANCILLARY:
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                self.kernel_timestamps = True
            except OSError:
                pass
        self.sock = sock
        try:
            host, port = sock.getpeername()[:2]
            self.peer = f"{host}:{port}"
        except OSError:
            self.peer = "?"
        self.name = self.peer  # replaced by the bot's name after its hello
        self.frames = FrameReader(recv_limit)
        self.max_backlog = max_backlog
        self.closed = False
        self.close_reason = ""
        self.handler: Handler = _ignore
        #: Called once when the connection closes, for whatever reason.
        self.on_close: Callable[[Connection], None] | None = None
        self._backlog = bytearray()
        self._backlog_event = trio.Event()
        self._cancel = trio.CancelScope()
        self.bytes_sent = 0

    # ----------------------------------------------------------------- tasks
    async def run(self) -> None:
        """Read and write until the connection closes. Never raises for peer misbehaviour."""
        with self._cancel:
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._write_loop)
                    await self._read_loop()
                    nursery.cancel_scope.cancel()
            except trio.ClosedResourceError:
                pass  # closed by us while a loop waited on the socket
            finally:
                self._close_socket("connection task ended")

    async def _read_loop(self) -> None:
        while not self.closed:
            await trio.lowlevel.wait_readable(self.sock)
            self.drain()

    def drain(self) -> None:
        """Read and handle everything the kernel holds for us now, without waiting.

        The match loop calls this at a deadline so that a move already received by the kernel, but
        not yet read because the server was busy, is judged by its arrival time.
        """
        while not self.closed:
            try:
                if self.kernel_timestamps:
                    data, ancdata, _, _ = self.sock.recvmsg(RECV_CHUNK, _ANCILLARY)
                else:
                    data, ancdata = self.sock.recv(RECV_CHUNK), []
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self.lost(f"receive failed: {exc}")
                return
            if not data:
                self.lost("peer closed the connection")
                return
            arrival = _arrival_time(ancdata)
            try:
                messages = self.frames.feed(data)
            except ProtocolError as exc:
                self.fail(exc.code, exc.message)
                return
            for message in messages:
                if self.closed:
                    return
                self.handler(self, message, arrival)

    async def _write_loop(self) -> None:
        while not self.closed:
            await self._backlog_event.wait()
            self._backlog_event = trio.Event()
            while self._backlog and not self.closed:
                await trio.lowlevel.wait_writable(self.sock)
                self._flush()

    def _flush(self) -> None:
        try:
            n = self.sock.send(self._backlog)
        except (BlockingIOError, InterruptedError):
            return
        except OSError as exc:
            self.lost(f"send failed: {exc}")
            return
        self.bytes_sent += n
        del self._backlog[:n]

    # ----------------------------------------------------------------- sending
    def send(self, frame: bytes) -> bool:
        """Queue one encoded frame without waiting. False if the connection is (now) closed."""
        if self.closed:
            return False
        if not self._backlog:
            try:
                n = self.sock.send(frame)
            except (BlockingIOError, InterruptedError):
                n = 0
            except OSError as exc:
                self.lost(f"send failed: {exc}")
                return False
            self.bytes_sent += n
            if n == len(frame):
                return True
            self._backlog += memoryview(frame)[n:]
            self._backlog_event.set()
        else:
            self._backlog += frame
        if len(self._backlog) > self.max_backlog:
            self.fail(
                protocol.SLOW_READER,
                f"{len(self._backlog)} bytes of frames are waiting for you to read them; read every frame",
            )
            return False
        return True

    def send_message(self, message: dict[str, Any]) -> bool:
        return self.send(protocol.encode(message))

    @property
    def backlog(self) -> int:
        return len(self._backlog)

    async def flush(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for queued frames to leave, before a graceful close."""
        with trio.move_on_after(timeout):
            while self._backlog and not self.closed:
                await trio.lowlevel.wait_writable(self.sock)
                self._flush()

    # ----------------------------------------------------------------- closing
    def fail(self, code: str, message: str) -> None:
        """Tell the peer what it did wrong (if its socket takes it) and close."""
        if self.closed:
            return
        log.warning("closing %s (%s): %s: %s", self.name, self.peer, code, message)
        frame = protocol.encode(protocol.error(code, message))
        with contextlib.suppress(OSError):
            # Best effort and non-blocking: a peer that does not read may never see it.
            self.sock.send(frame)
        self._close_socket(f"{code}: {message}")

    def lost(self, reason: str) -> None:
        if not self.closed:
            log.info("lost %s (%s): %s", self.name, self.peer, reason)
        self._close_socket(reason)

    def close(self, reason: str = "closed by the server") -> None:
        self._close_socket(reason)

    def _close_socket(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        self._backlog.clear()
        self._backlog_event.set()
        self._cancel.cancel()
        # Wake any task waiting on this socket before the descriptor goes away (trio requires it).
        with contextlib.suppress(RuntimeError):  # outside trio there are no waiters
            trio.lowlevel.notify_closing(self.sock)
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.on_close is not None:
            self.on_close(self)


def _ignore(_conn: Connection, _message: dict[str, Any], _arrival: float) -> None:
    """The handler of a connection nobody listens to yet: messages are dropped."""


def _arrival_time(ancdata: list[tuple[int, int, bytes]]) -> float:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return sec + nsec * 1e-9
    return time.time()
