"""A trio server whose connections follow a script each: refuse with an `error` frame, or play a short
Rezzo match with real viewports. For testing clients that come back: each connection's time and
hello are recorded, so a test can check how long the client waited before coming back."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from functools import partial
from typing import Any

import trio
from wire_client import FramedStream

from cellarena.sdk import protocol
from cellarena.sdk.protocol import MAX_CLIENT_FRAME
from cellarena.server.games.rezzo.engine import RezzoEngine


class Peer(FramedStream):
    """One accepted connection, framed."""

    def __init__(self, stream: trio.SocketStream) -> None:
        super().__init__(stream, MAX_CLIENT_FRAME, timeout=15)


Script = Callable[[Peer], Awaitable[None]]


def refuse(code: str, message: str) -> Script:
    """Answer the hello with an error frame, then close."""

    async def script(peer: Peer) -> None:
        await peer.send(protocol.error(code, message))

    return script


def match(ticks: int = 3, *, drop_after: int | None = None) -> Script:
    """A two-seat Rezzo match on `duel` with the client in seat 0 and an idle seat 1: welcome, ``ticks``
    ticks (each waits for the client's moves and applies them), end. With ``drop_after``, the
    connection closes after that many ticks instead, as when a network drops it."""

    async def script(peer: Peer) -> None:
        engine = RezzoEngine.new({"map": "duel", "max_ticks": ticks})
        config = {
            "map": "duel",
            "width": engine.width,
            "height": engine.height,
            "agents_per_player": engine.agents_per_player,
            "view_size": 13,
            "max_ticks": ticks,
            "torus": engine.torus,
            "own_base_counts": True,
        }
        welcome = protocol.welcome(
            seat=0,
            game="rezzo",
            match=1,
            players=2,
            names=["bot", "idle"],
            tick_rate=0.0,
            budget_ms=1000,
            config=config,
        )
        await peer.send(welcome)
        for sent in range(ticks):
            if sent == drop_after:
                return
            await peer.send(protocol.tick(engine.tick, 1000, engine.pending()[0]))
            answer = await peer.recv()
            assert answer is not None and answer["type"] == "moves", answer
            engine.apply({0: answer["moves"]})
        end = protocol.end(
            ticks=ticks, result="draw", rank=1, ranks=[1, 1], winner=None, reason="tick cap reached"
        )
        await peer.send(end)

    return script


@dataclass
class ScriptedServer:
    """Connection n follows ``scripts[n]``; any connection past the last is a test failure.

    With ``expect``, a connection whose hello names another bot is a stranger: closed, and neither
    seen nor given a script. In a full run of the suite, a bot of another test, coming back after
    its own server stopped, may knock at the port this server took over from it; without the name
    check it would take the script of the bot under test, which then never finished."""

    scripts: list[Script]
    #: The name the bot under test says in its hello (None: take every connection).
    expect: str | None = None
    #: (trio.current_time(), hello) of each connection, in order.
    seen: list[tuple[float, dict[str, Any] | None]] = field(default_factory=list)
    port: int = 0
    failures: list[str] = field(default_factory=list)
    #: The hellos of strangers, closed unanswered.
    strangers: list[dict[str, Any] | None] = field(default_factory=list)

    async def start(self, nursery: trio.Nursery) -> int:
        listeners = await nursery.start(partial(trio.serve_tcp, self._handle, 0, host="127.0.0.1"))
        self.port = listeners[0].socket.getsockname()[1]
        return self.port

    @property
    def done(self) -> bool:
        return len(self.seen) >= len(self.scripts)

    async def _handle(self, stream: trio.SocketStream) -> None:
        number = len(self.seen)
        peer = Peer(stream)
        try:
            hello = await peer.recv()
            if self.expect is not None and (hello or {}).get("name") != self.expect:
                self.strangers.append(hello)
                return
            number = len(self.seen)  # in the order of the hellos
            self.seen.append((trio.current_time(), hello))
            if number >= len(self.scripts):
                self.failures.append(f"connection {number + 1} came after the script's last")
                return
            await self.scripts[number](peer)
        except (trio.BrokenResourceError, trio.TooSlowError, AssertionError) as exc:
            self.failures.append(f"connection {number + 1}: {exc!r}")
        finally:
            await trio.aclose_forcefully(stream)
