"""A test client that speaks the wire protocol over a trio stream, as a bot written from the doc would."""

from __future__ import annotations

from typing import Any

import trio

from cellarena.sdk import protocol
from cellarena.sdk.protocol import FrameReader, encode


class FramedStream:
    """Protocol frames over a trio stream, one message at a time: the end of every test's connection
    (a client here, a scripted server's peer, one end of a socket pair). ``limit`` is the largest frame
    the other side may send; ``timeout`` how long `recv` waits unless told."""

    def __init__(self, stream: trio.SocketStream, limit: int, timeout: float = 10.0) -> None:
        self.stream = stream
        self.reader = FrameReader(limit)
        self.inbox: list[dict[str, Any]] = []
        self.timeout = timeout

    async def send(self, *messages: dict[str, Any]) -> None:
        await self.stream.send_all(b"".join(encode(m) for m in messages))

    async def recv(self, timeout: float | None = None) -> dict[str, Any] | None:
        """The next message, or None once the other side closed the connection."""
        with trio.fail_after(self.timeout if timeout is None else timeout):
            while not self.inbox:
                try:
                    data = await self.stream.receive_some(1 << 16)
                except trio.BrokenResourceError:
                    return None
                if not data:
                    return None
                self.inbox.extend(self.reader.feed(data))
        return self.inbox.pop(0)


class Client(FramedStream):
    """A test client over a trio stream."""

    def __init__(self, stream: trio.SocketStream) -> None:
        super().__init__(stream, protocol.MAX_SERVER_FRAME)

    @classmethod
    async def connect(cls, port: int) -> Client:
        return cls(await trio.open_tcp_stream("127.0.0.1", port))

    async def hello(self, name: str, game: str = "rezzo", **fields: Any) -> None:
        await self.send({**protocol.hello(name, game), **fields})

    async def play(self, *, answer: bool = True) -> dict[str, Any]:
        """Answer every tick at once with no-ops until `end`; returns it."""
        while True:
            msg = await self.recv()
            assert msg is not None, "the server closed a good client's connection"
            if msg["type"] == "tick" and answer:
                await self.send(protocol.moves(msg["tick"], [0] * len(msg["agents"])))
            elif msg["type"] == "end":
                return msg

    async def expect_error(self, *codes: str) -> dict[str, Any]:
        """Read until the error message (one of ``codes``), then check the server closed the connection."""
        while True:
            msg = await self.recv()
            assert msg is not None, f"closed without an error frame (expected {' or '.join(codes)})"
            if msg["type"] == "error":
                assert msg["code"] in codes, msg
                assert await self.recv() is None  # and then it hung up
                return msg
