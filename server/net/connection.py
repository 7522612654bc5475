"""One client connection: non-blocking socket I/O driven by the `Poller`, with kernel receive stamps.

Why not trio's streams: a tick sends one frame to every seat, and awaiting `send_all` per client per
tick costs a task switch each (it topped out near 200 bots at 15 Hz). Here the tick loop writes
straight into the kernel's socket buffer with a non-blocking `send`, with no await per client. Only
when the kernel buffer is full does the rest go to a bounded backlog, which the poller's task drains
when the socket becomes writable. A client that does not read fills the backlog and is dropped with
`slow_reader` before our memory grows without bound. A connection has no task of its own (see
`poller` for why): the poller calls it back when its socket is ready.

Why kernel timestamps: a move is late if it *arrived* after its deadline, not if the server, busy
with other matches, read it late. With SO_TIMESTAMPNS the kernel stamps every received segment, so a
bot is never charged for the server's own delays. Where the option is missing, the read time is used.
"""

from __future__ import annotations

import contextlib
import logging
import socket
import ssl
import struct
import sys
import threading
from collections.abc import Callable, Mapping
from typing import Any, Protocol

import trio

from cellarena.sdk import protocol
from cellarena.sdk.protocol import HEADER as _HEADER
from cellarena.sdk.protocol import FrameReader, ProtocolError, decode_body
from cellarena.server import wall_clock
from cellarena.server.net.poller import Poller
from cellarena.server.net.send_backlog import SendBacklog

log = logging.getLogger("cellarena.server")

# Linux's value; the socket module does not export it on every Python build.
SO_TIMESTAMPNS = getattr(socket, "SO_TIMESTAMPNS", 35 if sys.platform.startswith("linux") else None)
_TIMESPEC = struct.Struct("qq")
_HEADER_SIZE = _HEADER.size
_ANCILLARY = socket.CMSG_SPACE(_TIMESPEC.size) if hasattr(socket, "CMSG_SPACE") else 0
RECV_CHUNK = 256 * 1024
#: Unsent bytes we keep for a client beyond what the kernel buffers; past this it is a slow reader.
DEFAULT_MAX_BACKLOG = 4 * 1024 * 1024
#: How long a connection closed for cause stays open to deliver its error frame.
ERROR_LINGER = 5.0

#: One receive buffer per thread, reused by every connection: `recvmsg` with a fresh RECV_CHUNK-sized
#: bytes object each call costs several times the syscall itself (a large allocation, then a shrink).
_buffers = threading.local()


def _receive_buffer() -> tuple[bytearray, memoryview]:
    try:
        return _buffers.pair
    except AttributeError:
        buf = bytearray(RECV_CHUNK)
        _buffers.pair = (buf, memoryview(buf))
        return _buffers.pair


class Owner(Protocol):
    """Whoever a connection belongs to right now: a handshake, a waiting room, a seat, a spectator list.

    A connection has exactly one owner at a time, set with `Connection.attach`; only that owner
    hears its messages and its end. Moving a connection (from the waiting room to a seat, from a
    lost seat's old socket to its new one) is one `attach`, so who may act on a socket is never in
    doubt and no callback of a previous owner can fire late.
    """

    def on_message(self, conn: Connection, message: dict[str, Any], arrival: float) -> None:
        """A message arrived (``arrival``: its kernel receive stamp as time.time(), or `wall_clock`'s)."""

    def on_closed(self, conn: Connection) -> None:
        """The connection closed, for whatever reason; called once, on the owner of that moment."""


class Connection:
    """A connected peer. Everything here is synchronous; the `Poller` calls it back when it is ready.

    ``closed`` means closed for every purpose: no more sends, no more messages handled. When the
    server closes a connection for cause and the kernel cannot take the error frame at once (a slow
    reader's buffer is full), the socket itself stays open for up to ERROR_LINGER seconds while the
    poller delivers that frame, after any frame already half sent so the stream stays well formed.
    Reading starts with `resume_reading`. Messages go to the connection's one `Owner` (`attach`).

    ``peer`` is who the client is, when the socket's own peer is a trusted proxy that said so (the
    PROXY protocol, `proxy_protocol`); ``via`` is then that proxy's address.
    """

    def __init__(
        self,
        sock: socket.socket,
        poller: Poller[Connection],
        *,
        recv_limit: int = protocol.MAX_CLIENT_FRAME,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
        peer: tuple[str, int] | None = None,
        via: str | None = None,
    ) -> None:
        sock.setblocking(False)
        with contextlib.suppress(OSError):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.kernel_timestamps = False
        #: The wall clock its sends are stamped by (trio's in a virtual-time test: `wall_clock`).
        self.wall = wall_clock.source()
        if SO_TIMESTAMPNS is not None and _ANCILLARY and not wall_clock.is_virtual():
            try:
                sock.setsockopt(socket.SOL_SOCKET, SO_TIMESTAMPNS, 1)
                self.kernel_timestamps = True
            except OSError:
                pass
        self.sock = sock
        self._fd = sock.fileno()  # kept: a closed socket's fileno() is -1
        #: The peer's TCP port on this socket (None where there is none): how a launcher's handed-over
        #: socket is known. The socket's own, also behind a trusted proxy.
        self.peer_port: int | None = None
        try:
            own = sock.getpeername()[:2]
            self.peer_port = own[1]
        except (OSError, ValueError, IndexError):  # a Unix socket's peer has no (host, port)
            own = None
        if peer is None:
            peer = own
        #: The client's address (its IP address alone): what per-address limits count.
        self.host = "?" if peer is None else peer[0]
        self.peer = "?" if peer is None else f"{peer[0]}:{peer[1]}"
        #: The trusted proxy the client came through, or None for a direct connection.
        self.via = via
        #: Called once when the socket is closed (the lobby's per-address counts).
        self.on_gone: Callable[[Connection], None] | None = None
        self.name = self.peer  # replaced by the bot's name after its hello
        #: When its hello arrived (time.time(), kernel stamp): the lobby seats bots in this order.
        self.joined = 0.0
        self.frames = FrameReader(recv_limit)
        self.max_backlog = max_backlog
        self.closed = False
        self.close_reason = ""
        self.owner: Owner = UNOWNED
        #: Frames the kernel has not taken yet.
        self._backlog = SendBacklog()
        self._lingering = False
        self._socket_open = True
        self._reading = False
        self._flushed: trio.Event | None = None
        self._poller = poller
        #: time.time() when the last frame was handed to the kernel (or queued, if it could not be).
        self.last_send = 0.0
        poller.add(self)

    def fileno(self) -> int:
        return self._fd

    def __repr__(self) -> str:
        return f"<Connection {self.name} ({self.peer}){' closed' if self.closed else ''}>"

    # ----------------------------------------------------------------- ownership
    def attach(self, owner: Owner) -> bool:
        """Hand the connection to ``owner``, which from now on alone hears its messages and its end.

        The previous owner is simply forgotten: it let go by handing the connection on. False (and
        nothing changes) if the connection is already closed, so a new owner never adopts a dead peer.
        """
        if self.closed:
            return False
        self.owner = owner
        return True

    def detach(self) -> None:
        """Belong to nobody: messages are dropped until the next `attach`; a close tells no one."""
        self.owner = UNOWNED

    # ----------------------------------------------------------------- called by the poller
    def on_ready(self, readable: bool, writable: bool) -> None:
        try:
            if writable:
                self._flush()
            if readable and self._reading:
                self.drain()
        except Exception:  # a bug in an owner must cost this peer its connection, not the server
            log.exception("internal error on connection %s (%s)", self.name, self.peer)
            self.fail(protocol.INTERNAL, "the server hit an internal error on this connection")

    def on_deadline(self) -> None:
        """The linger time of an error frame ran out: give up on delivering it."""
        self.abort()

    def abort(self) -> None:
        """Close the socket now, lingering or not."""
        self._lingering = False
        self._close_socket(self.close_reason or "the server stopped")

    def _watch(self) -> None:
        if self._socket_open:
            self._poller.watch(self, read=self._reading and not self.closed, write=bool(self._backlog.frames))

    # ----------------------------------------------------------------- reading
    def pause_reading(self) -> None:
        """Stop reading when data arrives; the owner calls `drain()` itself (the fixed-rate match loop
        does, once per seat per tick, instead of handling every message as it comes)."""
        self._reading = False
        self._watch()

    def resume_reading(self) -> None:
        """Handle every message as it arrives."""
        self._reading = True
        self._watch()

    def drain(self) -> None:
        """Read and handle everything the kernel holds for us now, without waiting.

        The match loop calls this at a deadline so that a move already received by the kernel, but
        not yet read because the server was busy, is judged by its arrival time.
        """
        buf, view = _receive_buffer()
        while not self.closed:
            try:
                n, ancdata = self._receive(buf)
            except (BlockingIOError, InterruptedError):
                return
            except OSError as exc:
                self.lost(f"receive failed: {exc}")
                return
            if not n:
                self.lost("peer closed the connection")
                return
            arrival = _arrival_time(ancdata, self.wall)
            try:
                frames = self.frames
                if (
                    n > _HEADER_SIZE
                    and not frames.buffered
                    and _HEADER.unpack_from(buf)[0] == n - _HEADER_SIZE <= frames.limit
                ):
                    # The common case, exactly one whole frame: decode it without the reassembly buffer.
                    messages = [decode_body(bytes(view[_HEADER_SIZE:n]))]
                else:
                    messages = frames.feed(view[:n])  # copies: the buffer is free again after this
            except ProtocolError as exc:
                self.fail(exc.code, exc.message)
                return
            except Exception:  # a decoder bug must cost this peer its connection, not the match reading it
                log.exception("cannot decode what %s (%s) sent", self.name, self.peer)
                self.fail(protocol.INTERNAL, "the server could not decode your frame (an internal error)")
                return
            for message in messages:
                if self.closed:
                    return
                self.owner.on_message(self, message, arrival)
            if n < RECV_CHUNK and not self.buffered():
                return  # the kernel held no more than this: skip the call that would say EAGAIN

    def _receive(self, buf: bytearray) -> tuple[int, list[tuple[int, int, bytes]]]:
        """Bytes of the stream into ``buf``, with their ancillary data (the kernel's stamp)."""
        if self.kernel_timestamps:
            n, ancdata, _, _ = self.sock.recvmsg_into((buf,), _ANCILLARY)
            return n, ancdata
        return self.sock.recv_into(buf), []

    def buffered(self) -> bool:
        """Whether bytes already read from the socket still wait here to be handed out (TLS)."""
        return False

    # ----------------------------------------------------------------- sending
    def _flush(self) -> None:
        """Hand the kernel as much of the backlog as it takes now."""
        try:
            if not self._backlog.send_to(self.sock):
                return
        except OSError as exc:
            self._lingering = False
            self.lost(f"send failed: {exc}")
            return
        # All out: stop asking for writability, and tell whoever waits in flush().
        if self._lingering:
            self.abort()  # the error frame is out
            return
        self._watch()
        if self._flushed is not None:
            self._flushed.set()

    def send(self, frame: bytes) -> bool:
        """Queue one encoded frame without waiting. False if the connection is (now) closed."""
        return self._send_raw(frame)

    def _send_raw(self, frame: bytes) -> bool:
        """Queue bytes of the stream as they go on the wire (after TLS, if any)."""
        if self.closed:
            return False
        backlog = self._backlog
        if not backlog.frames:
            try:
                n = self.sock.send(frame)
                # Stamped right after the syscall, with no allocation in between, so that no garbage
                # collection can run there and make a bot's budget start late.
                self.last_send = self.wall()
            except (BlockingIOError, InterruptedError):
                n = 0
                self.last_send = self.wall()
            except OSError as exc:
                self.lost(f"send failed: {exc}")
                return False
            if n == len(frame):
                return True
            backlog.add(frame, n)
            self._watch()  # the poller sends the rest when the kernel has room
        else:
            self.last_send = self.wall()
            backlog.add(frame)
        if backlog.size > self.max_backlog:
            self.fail(
                protocol.SLOW_READER,
                f"{backlog.size} bytes of frames are waiting for you to read them; read every frame",
            )
            return False
        return True

    def send_message(self, message: Mapping[str, Any]) -> bool:
        return self.send(protocol.encode(message))

    async def flush(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for queued frames to leave, before a graceful close."""
        if not self._backlog.frames or self.closed:
            return
        if self._flushed is None or self._flushed.is_set():
            self._flushed = trio.Event()
        with trio.move_on_after(timeout):
            await self._flushed.wait()

    def release(self) -> tuple[socket.socket, bytes]:
        """Give the socket up without closing it, for another process to serve (`workers`): the socket
        and the bytes read from it that no frame holds yet. The connection is closed here from then on;
        no owner is told. ValueError if it cannot move: closed, under TLS (a session cannot move), or
        with bytes still waiting to be sent."""
        if self.closed or self.tls or self._backlog.frames:
            raise ValueError(f"connection {self.name} ({self.peer}) cannot be handed over")
        self.closed = True
        self.close_reason = "handed over to another process"
        self.owner = UNOWNED
        self._socket_open = False
        self._poller.remove(self)
        leftover = self.frames.take()
        if self.on_gone is not None:
            gone, self.on_gone = self.on_gone, None
            gone(self)
        return self.sock, leftover

    # ----------------------------------------------------------------- closing
    def fail(self, code: str, message: str, *, level: int = logging.WARNING) -> None:
        """Tell the peer what it did wrong and close (see the class docstring for the lingering).
        ``level``: the log line's (a refusal that a flood repeats is logged once by its caller)."""
        if self.closed:
            return
        log.log(level, "closing %s (%s): %s: %s", self.name, self.peer, code, message)
        if self.may_drop_queued:
            self._backlog.drop_whole_frames()
        sealed = self.seal(protocol.encode(protocol.error(code, message)))
        if sealed:
            self._backlog.add(sealed)
        reason = f"{code}: {message}"
        self._mark_closed(reason)
        self._flush()
        if self._backlog.frames and self._socket_open:
            self._lingering = True
            self._watch()
            self._poller.set_deadline(self, trio.current_time() + ERROR_LINGER)
        else:
            self._close_socket(reason)

    def lost(self, reason: str) -> None:
        if not self.closed:
            log.info("lost %s (%s): %s", self.name, self.peer, reason)
        self._close_socket(reason)

    def close(self, reason: str = "closed by the server") -> None:
        self._close_socket(reason)

    def _mark_closed(self, reason: str) -> None:
        if self.closed:
            return
        self.closed = True
        self.close_reason = reason
        owner, self.owner = self.owner, UNOWNED
        if self._flushed is not None:
            self._flushed.set()
        owner.on_closed(self)

    def _close_socket(self, reason: str) -> None:
        self._mark_closed(reason)
        if self._lingering or not self._socket_open:
            return  # a lingering socket closes once its error frame is out, or its time is up
        self._socket_open = False
        self._backlog.clear()
        self._poller.remove(self)
        with contextlib.suppress(OSError):
            self.sock.close()
        if self.on_gone is not None:
            gone, self.on_gone = self.on_gone, None
            gone(self)

    #: Whether the stream is TLS (`TlsConnection`): a ladder takes tokens in clear only from loopback.
    tls = False
    #: Whether whole frames still queued may be dropped to put an error frame first (not under TLS,
    #: where every record queued is part of the cipher stream).
    may_drop_queued = True

    def seal(self, frame: bytes) -> bytes:
        """A frame as it goes on the wire: as it is here; encrypted by `TlsConnection`."""
        return frame


class TlsConnection(Connection):
    """A connection whose stream is TLS, done sans-IO: Python's `ssl.SSLObject` over two memory BIOs.

    The socket, the poller and the kernel stamps stay exactly as for a plain connection, so TLS costs
    no task per connection either: ciphertext read from the socket goes into the incoming BIO and
    plaintext comes out (the handshake runs there too, under the lobby's hello timeout); a frame to
    send is encrypted and its records go to the socket or the backlog like any bytes. A peer that is
    not speaking TLS (or fails the handshake) is an `ssl.SSLError`, an OSError: its connection is
    lost, logged in one line, and nothing else is touched.
    """

    tls = True
    may_drop_queued = False

    def __init__(
        self,
        sock: socket.socket,
        poller: Poller[Connection],
        context: ssl.SSLContext,
        *,
        recv_limit: int = protocol.MAX_CLIENT_FRAME,
        max_backlog: int = DEFAULT_MAX_BACKLOG,
        peer: tuple[str, int] | None = None,
        via: str | None = None,
    ) -> None:
        self._incoming = ssl.MemoryBIO()
        self._outgoing = ssl.MemoryBIO()
        self._tls = context.wrap_bio(self._incoming, self._outgoing, server_side=True)
        self.handshake_done = False
        self._ancdata: list[tuple[int, int, bytes]] = []
        super().__init__(sock, poller, recv_limit=recv_limit, max_backlog=max_backlog, peer=peer, via=via)

    def _receive(self, buf: bytearray) -> tuple[int, list[tuple[int, int, bytes]]]:
        while True:
            if self.handshake_done:
                try:
                    # With a buffer, read() returns the count (typeshed says bytes).
                    n: int = self._tls.read(len(buf), buf)  # type: ignore[assignment]
                    if self._outgoing.pending:  # a TLS 1.3 key update to answer
                        self._push_records()
                    return n, self._ancdata  # 0: the peer ended the TLS session
                except ssl.SSLWantReadError:
                    pass
            else:
                try:
                    self._tls.do_handshake()
                    self.handshake_done = True
                    self._push_records()
                    continue
                except ssl.SSLWantReadError:
                    self._push_records()
            # More ciphertext needed; BlockingIOError when the kernel has none.
            if self.kernel_timestamps:
                data, ancdata, _, _ = self.sock.recvmsg(RECV_CHUNK, _ANCILLARY)
            else:
                data, ancdata = self.sock.recv(RECV_CHUNK), []
            if not data:
                return 0, []
            self._incoming.write(data)
            self._ancdata = ancdata  # the stamp of the segment that completed the record

    def buffered(self) -> bool:
        return self._tls.pending() > 0 or self._incoming.pending > 0

    def _push_records(self) -> None:
        records = self._outgoing.read()
        if records:
            self._send_raw(records)

    def seal(self, frame: bytes) -> bytes:
        if not self.handshake_done:
            return b""  # nothing can be said in TLS before the handshake: the peer just sees the close
        self._tls.write(frame)
        return self._outgoing.read()

    def send(self, frame: bytes) -> bool:
        if self.closed or not self.handshake_done:
            return False
        return self._send_raw(self.seal(frame))


class _Unowned:
    """The owner of a connection that belongs to nobody: its messages are dropped, its end told no one."""

    def on_message(self, conn: Connection, message: dict[str, Any], arrival: float) -> None:
        pass

    def on_closed(self, conn: Connection) -> None:
        pass

    def __repr__(self) -> str:
        return "UNOWNED"


UNOWNED: Owner = _Unowned()


def _arrival_time(ancdata: list[tuple[int, int, bytes]], wall: Callable[[], float]) -> float:
    for level, kind, data in ancdata:
        if level == socket.SOL_SOCKET and kind == SO_TIMESTAMPNS and len(data) >= _TIMESPEC.size:
            sec, nsec = _TIMESPEC.unpack_from(data)
            return sec + nsec * 1e-9
    return wall()
