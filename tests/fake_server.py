"""A fake match server for testing clients (the Python SDK, the JavaScript example bot): a plain
blocking socket in a thread that frames messages with `cellarena.sdk.protocol`, runs a test's script
on one connection and records what the client sent. Blocking and threaded on purpose: the client
under test may be this very process, running its own blocking loop."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from cellarena.sdk.protocol import MAX_CLIENT_FRAME, FrameReader, encode

#: How long the server waits for the client to connect, and for each read; join() waits twice that.
IO_TIMEOUT = 15.0


@dataclass
class Session:
    """What the fake server saw from one client."""

    hello: dict[str, Any] | None = None
    requests: list[dict[str, Any]] = field(default_factory=list)  # ticks sent, where a script notes them
    answers: list[dict[str, Any]] = field(default_factory=list)  # messages after hello
    after_end: list[dict[str, Any]] = field(default_factory=list)  # messages after `end`
    error: BaseException | None = None


class Conn:
    """One accepted connection, with framing and a choice of how frames are written."""

    def __init__(self, sock: socket.socket, session: Session, write: Literal["whole", "bytewise"]) -> None:
        self.sock = sock
        self.session = session
        self.write = write
        self.reader = FrameReader(MAX_CLIENT_FRAME)
        self.inbox: list[dict[str, Any]] = []
        self.eof = False
        sock.settimeout(IO_TIMEOUT)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)

    def send(self, *messages: Mapping[str, Any]) -> None:
        """Send frames. `whole`: all of them in one write; `bytewise`: one byte per write, pausing
        inside the header and the body so the client surely gets frames in pieces."""
        if self.write != "bytewise":
            self.sock.sendall(b"".join(encode(m) for m in messages))
            return
        for m in messages:
            raw = encode(m)
            pauses = {2, 4, 4 + (len(raw) - 4) // 2}
            for i in range(len(raw)):
                if i in pauses:
                    time.sleep(0.002)
                self.sock.sendall(raw[i : i + 1])

    def recv(self) -> dict[str, Any] | None:
        """The next message from the client, or None once it hung up."""
        while not self.inbox:
            if self.eof:
                return None
            data = self.sock.recv(65536)
            if not data:
                self.eof = True
                assert self.reader.buffered == 0, "the client closed in the middle of a frame"
                continue
            self.inbox.extend(self.reader.feed(data))
        return self.inbox.pop(0)


class FakeServer:
    """Listens on 127.0.0.1 (``port``); accepts one client, reads its hello, then runs ``script`` on
    the connection in a thread and closes it. join() returns the session, or raises what went wrong
    in the thread (a failed assertion of the script included)."""

    def __init__(self, script: Callable[[Conn], None], write: Literal["whole", "bytewise"] = "whole") -> None:
        self.session = Session()
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(IO_TIMEOUT)
        self.port: int = self.listener.getsockname()[1]
        self.script = script
        self.write: Literal["whole", "bytewise"] = write
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        try:
            sock, _ = self.listener.accept()
            with sock:
                conn = Conn(sock, self.session, self.write)
                self.session.hello = conn.recv()
                assert self.session.hello is not None, "the client closed without sending hello"
                self.script(conn)
        except BaseException as exc:  # raised again by join(), in the test's thread
            self.session.error = exc
        finally:
            self.listener.close()

    def join(self) -> Session:
        self.thread.join(IO_TIMEOUT * 2)
        assert not self.thread.is_alive(), "the fake server is stuck"
        if self.session.error is not None:
            raise self.session.error
        return self.session
