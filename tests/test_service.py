"""`serve_until_signalled`: a server stops on Ctrl-C or SIGTERM, gracefully, or at once on a second
signal, without click or a subprocess around it."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from functools import partial
from typing import Any

import pytest
import trio
from trio.testing import MockClock

from cellarena.sdk import protocol
from cellarena.sdk.protocol import FrameReader, encode
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import TickSettings
from cellarena.server.service import serve_until_signalled

# In virtual time (conftest's `virtual_wall`; each test takes `autojump_clock`): the lobbies tick at
# 30 and 100 Hz, and a graceful stop's grace period is waited out in no real time.
pytestmark = pytest.mark.usefixtures("virtual_wall")


class Bot:
    """A client that says hello and then reads whatever comes, answering nothing."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.reader = FrameReader(protocol.MAX_SERVER_FRAME)
        self.seen: list[dict[str, Any]] = []

    @classmethod
    async def join(cls, port: int, name: str) -> Bot:
        bot = cls(await trio.open_tcp_stream("127.0.0.1", port))
        await bot.stream.send_all(encode(protocol.hello(name, "rezzo")))
        return bot

    async def until(self, kind: str) -> dict[str, Any]:
        """Read until a message of type ``kind``; the connection must not close first."""
        while True:
            for msg in self.seen:
                if msg["type"] == kind:
                    return msg
            data = await self.stream.receive_some(1 << 16)
            assert data, f"closed before any {kind!r} message; saw {[m['type'] for m in self.seen]}"
            self.seen.extend(self.reader.feed(data))


def _lobby() -> Lobby:
    return Lobby(
        LobbyConfig(
            "rezzo",
            {"map": "duel", "max_ticks": 100_000},
            TickSettings(tick_rate=30.0),
            host="127.0.0.1",
            port=0,
            matches=None,
        )
    )


async def _serve(lobby: Lobby, on_listening: Callable[[int], None], notes: list[str]) -> None:
    await serve_until_signalled(lobby, on_listening=on_listening, notify=notes.append)


async def test_a_signal_ends_the_match_without_a_result_and_tells_every_bot(
    autojump_clock: MockClock,
) -> None:
    lobby = _lobby()
    notes: list[str] = []
    ports: list[int] = []
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            listening = trio.Event()

            def on_listening(port: int) -> None:
                ports.append(port)
                listening.set()

            nursery.start_soon(
                lambda: serve_until_signalled(lobby, on_listening=on_listening, notify=notes.append)
            )
            await listening.wait()
            a, b = await Bot.join(ports[0], "a"), await Bot.join(ports[0], "b")
            await a.until("tick")  # the match is under way
            waiting = await Bot.join(ports[0], "waiting")
            while len(lobby.seating.waiting()) < 1:
                await trio.sleep(0.01)
            os.kill(os.getpid(), signal.SIGTERM)
            ends = [await bot.until("error") for bot in (a, b, waiting)]
    # The nursery closed: serve_until_signalled returned by itself once the lobby had stopped.
    assert notes == [
        "stopping (again to stop at once)",
        "stopped; 1 match(es) under way ended without a result",
    ]
    assert {e["code"] for e in ends} == {protocol.SHUTDOWN}
    assert [e["message"].endswith("without a result") for e in ends] == [True, True, False]
    assert lobby.stopping and list(lobby.outcomes) == []


async def test_a_second_signal_stops_at_once(autojump_clock: MockClock) -> None:
    # The graceful stop is held up for good (a ladder's on_stop waiting on a database that hangs, or
    # clients slow to take their last frames): a second Ctrl-C must not wait for it. Held up by the
    # test itself, not by deaf clients' buffers, which the kernel sometimes drained first (then the
    # service had ended before the second signal, which the test's process then took itself).
    lobby = _lobby()
    notes: list[str] = []
    held = trio.Event()

    async def held_up() -> None:
        held.set()
        await trio.sleep_forever()

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            listening = trio.Event()
            nursery.start_soon(
                partial(
                    serve_until_signalled, lobby, on_listening=lambda port: listening.set(),
                    notify=notes.append, on_stop=held_up,
                )
            )  # fmt: skip
            await listening.wait()
            os.kill(os.getpid(), signal.SIGINT)
            await held.wait()
            started = trio.current_time()
            os.kill(os.getpid(), signal.SIGINT)
    assert notes == ["stopping (again to stop at once)", "stopping at once"]
    assert trio.current_time() - started < 1.0


async def test_a_lobby_that_ends_by_itself_ends_the_service(autojump_clock: MockClock) -> None:
    lobby = Lobby(
        LobbyConfig(
            "rezzo",
            {"map": "duel", "max_ticks": 5},
            TickSettings(fast=True),
            host="127.0.0.1",
            port=0,
            matches=1,
        )
    )
    notes: list[str] = []
    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            listening = trio.Event()
            ports: list[int] = []

            def on_listening(port: int) -> None:
                ports.append(port)
                listening.set()

            nursery.start_soon(
                lambda: serve_until_signalled(lobby, on_listening=on_listening, notify=notes.append)
            )
            await listening.wait()
            bots = [await Bot.join(ports[0], name) for name in ("a", "b")]
            for bot in bots:
                assert (await bot.until("end"))["type"] == "end"
    assert notes == [] and len(lobby.outcomes) == 1


async def test_on_stop_runs_at_the_first_signal_before_the_lobby_stops(autojump_clock: MockClock) -> None:
    # A ladder's services take no new work from here on (`Services.graceful_shutdown`).
    lobby = _lobby()
    seen: list[bool] = []

    async def on_stop() -> None:
        seen.append(lobby.stopping)

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            listening = trio.Event()
            nursery.start_soon(
                lambda: serve_until_signalled(
                    lobby, on_listening=lambda port: listening.set(), on_stop=on_stop
                )
            )
            await listening.wait()
            os.kill(os.getpid(), signal.SIGTERM)
    assert seen == [False] and lobby.stopping
