"""The trio server under good and bad clients.

Every bad-input test runs a match between two well-behaved clients at the same time and checks that
it loses no tick: the offender only ever costs itself.
"""

from __future__ import annotations

import socket
from typing import Any

import msgpack
import pytest
import trio
from trio.testing import MockClock
from wire_client import Client

from cellarena.sdk import protocol
from cellarena.sdk.protocol import encode
from cellarena.server.games.rezzo.batch.slot_batch import SlotBatch
from cellarena.server.net.connection import Connection
from cellarena.server.net.poller import Poller
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import TickSettings
from cellarena.server.play.seat import Seat
from cellarena.server.play.seating import ReservedSeating
from cellarena.server.play.ticking import PHASES, FixedRateDriver

TICKS = 30
# Tests where a seat never answers in time wait out the budget on every tick (in virtual time, so
# neither the budget nor the ticks cost real time).
WAITING_TICKS = 8
WAITING_BUDGET_MS = 250


# Every test here runs under trio's MockClock (each async test takes `autojump_clock`) and the server
# judges lateness by trio's clock too (conftest's `virtual_wall`): budgets, tick rates, hello timeouts
# and late answers play out in virtual time, the same on an idle or a busy machine, with the real
# lobby, poller and loopback sockets.
pytestmark = pytest.mark.usefixtures("virtual_wall")


async def start(
    nursery: trio.Nursery,
    *,
    matches: int | None = 1,
    tick_rate: float = 30.0,
    map_: str = "duel",
    ticks: int = TICKS,
    budget_ms: float | None = None,
    fast: bool = False,
    seating: Any = None,
    **kw: Any,
) -> Lobby:
    """A lobby on a free port, fixed-rate by default so that a good match outlasts the offence."""
    config = LobbyConfig(
        "rezzo",
        {"map": map_, "max_ticks": ticks},
        TickSettings(tick_rate=tick_rate, budget_ms=budget_ms, fast=fast),
        host="127.0.0.1",
        port=0,
        matches=matches,
        **kw,
    )
    lobby = Lobby(config, seating)
    await nursery.start(lobby.serve)
    return lobby


async def good_match(lobby: Lobby, results: list[dict[str, Any]], started: trio.Event | None = None) -> None:
    """Two good clients play a whole match; their `end` messages go to ``results``."""
    a, b = await Client.connect(lobby.port), await Client.connect(lobby.port)
    await a.hello("good-a")
    await b.hello("good-b")

    async def play(client: Client) -> None:
        results.append(await client.play())

    async with trio.open_nursery() as n:
        n.start_soon(play, a)
        n.start_soon(play, b)
        if started is not None:
            # Started, not running: a fast match may already be over by the time this looks.
            while not lobby.matches_started:
                await trio.sleep(0.005)
            started.set()


def assert_no_tick_lost(results: list[dict[str, Any]], ticks: int = TICKS) -> None:
    assert len(results) == 2
    for end in results:
        assert end["ticks"] == ticks
        assert end["late"] == 0 and end["invalid"] == 0


async def with_good_match(offender: Any, **kw: Any) -> Any:
    """Run ``offender(port)`` while a good match plays; returns what the offender returned."""
    results: list[dict[str, Any]] = []
    out: list[Any] = []
    async with trio.open_nursery() as nursery:
        lobby = await start(nursery, **kw)
        started = trio.Event()
        async with trio.open_nursery() as both:
            both.start_soon(good_match, lobby, results, started)
            await started.wait()
            out.append(await offender(lobby.port))
        nursery.cancel_scope.cancel()  # a lobby without a match limit would serve forever
    assert_no_tick_lost(results, lobby.config.engine_config["max_ticks"])
    return out[0]


# ------------------------------------------------------------------------------------ the happy path
async def test_two_clients_play_a_whole_match(autojump_clock: MockClock) -> None:
    results: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        lobby = await start(nursery)
        await good_match(lobby, results)
    assert_no_tick_lost(results)
    assert {r["result"] for r in results} == {"draw"}
    assert len(lobby.outcomes) == 1 and lobby.outcomes[0].names == ["good-a", "good-b"]


async def test_bots_are_seated_in_the_order_their_hellos_arrived(autojump_clock: MockClock) -> None:
    async with trio.open_nursery() as nursery:
        lobby = await start(nursery, fast=True)
        early, late = await Client.connect(lobby.port), await Client.connect(lobby.port)
        await late.hello("second-to-connect")  # connected last, said hello first
        while not lobby.seating.waiting():
            await trio.sleep(0.005)
        await early.hello("first-to-connect")
        for client in (early, late):
            nursery.start_soon(client.play)
    assert lobby.outcomes[0].names == ["second-to-connect", "first-to-connect"]


def _task_count() -> int:
    def count(task: trio.lowlevel.Task) -> int:
        return 1 + sum(count(t) for n in task.child_nurseries for t in n.child_tasks)

    return count(trio.lowlevel.current_root_task())


async def test_a_connection_costs_no_task_once_its_hello_is_in(autojump_clock: MockClock) -> None:
    # The lobby's one poller serves every connection. A task (and its nursery and cancel scope) per
    # client made each full garbage collection walk ~100 objects per client: 16-40 ms at 1,000 bots.
    with trio.fail_after(10):
        async with trio.open_nursery() as nursery:
            lobby = await start(nursery, matches=None)
            first = await Client.connect(lobby.port)
            await first.hello("watcher-0", role="spectator")
            while not lobby._spectators.conns:
                await trio.sleep(0.005)
            await trio.sleep(0.05)
            before = _task_count()
            clients = [await Client.connect(lobby.port) for _ in range(40)]
            for i, client in enumerate(clients, 1):
                await client.hello(f"watcher-{i}", role="spectator")
            while len(lobby._spectators.conns) < 41 or _task_count() > before:
                await trio.sleep(0.005)  # each handshake task ends once its hello is in
            assert _task_count() == before
            assert all(not c.closed for c in lobby._spectators.conns)
            nursery.cancel_scope.cancel()


async def test_welcome_and_tick_messages_follow_the_protocol(autojump_clock: MockClock) -> None:
    async with trio.open_nursery() as nursery:
        lobby = await start(nursery, tick_rate=15.0)
        a, b = await Client.connect(lobby.port), await Client.connect(lobby.port)
        await a.hello("first")
        await b.hello("second")
        welcome = await a.recv()
        assert (
            welcome["type"] == "welcome" and welcome["seat"] == 0 and welcome["names"] == ["first", "second"]
        )
        assert welcome["budget_ms"] == 63 and welcome["tick_rate"] == 15.0  # a period less the margin
        assert welcome["config"]["width"] == 32 and welcome["config"]["view_size"] == 13
        tick = await a.recv()
        assert tick["type"] == "tick" and tick["tick"] == 1 and tick["agents"] == [0]
        assert len(tick["cells"]) == len(tick["damage"]) == 169
        nursery.cancel_scope.cancel()


async def test_fixed_rate_paces_ticks_on_an_absolute_schedule(autojump_clock: MockClock) -> None:
    # A lower bound is exact (ticks never start early); the upper bound is generous.
    rate = 60.0
    results: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        lobby = await start(nursery, tick_rate=rate)
        t0 = trio.current_time()
        await good_match(lobby, results)
        elapsed = trio.current_time() - t0
    assert (TICKS - 1) / rate <= elapsed < TICKS / rate + 2.0


async def test_spectator_joining_mid_match_gets_frames_and_the_end(autojump_clock: MockClock) -> None:
    async def spectate(port: int) -> list[dict[str, Any]]:
        spectator = await Client.connect(port)
        await spectator.hello("watcher", role="spectator")
        seen = []
        while (msg := await spectator.recv()) is not None:
            seen.append(msg)
            if msg["type"] == "end":
                break
        return seen

    seen = await with_good_match(spectate)
    assert seen[0]["type"] == "welcome" and seen[0]["role"] == "spectator" and "seat" not in seen[0]
    frames = [m for m in seen if m["type"] == "frame" and not m["final"]]
    assert frames and [f["tick"] for f in frames] == sorted({f["tick"] for f in frames})
    assert frames[-1]["tick"] == TICKS
    assert seen[-2]["type"] == "frame" and seen[-2]["final"]
    assert len(frames[0]["cells"]) == frames[0]["width"] * frames[0]["height"]
    assert seen[-1]["type"] == "end"


async def test_a_spectator_that_comes_while_a_match_ends_watches_the_next_one(
    autojump_clock: MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A spectator whose hello lands while the only match is ending (`Match.close` letting its last
    frames leave) waits for the next match and watches it. Given the ending match, it got a welcome,
    then nothing, for good: a ladder's live page drew no frame in a minute, in a run under load."""
    ending, go_on = trio.Event(), trio.Event()
    real_flush = Connection.flush

    async def held_flush(self: Connection, timeout: float) -> None:  # the ending match, held there
        ending.set()
        await go_on.wait()
        await real_flush(self, timeout)

    monkeypatch.setattr(Connection, "flush", held_flush)
    results: list[dict[str, Any]] = []
    async with trio.open_nursery() as nursery:
        lobby = await start(nursery, matches=2, ticks=5)
        nursery.start_soon(good_match, lobby, results)
        await ending.wait()
        assert [m.number for m in lobby.running] == [1]  # ending, and still under way to the lobby
        spectator = await Client.connect(lobby.port)
        await spectator.hello("watcher", role="spectator")
        await trio.sleep(1)  # its hello read and routed while match 1 ends
        go_on.set()
        nursery.start_soon(good_match, lobby, results)
        seen = []
        while (msg := await spectator.recv(timeout=30)) is not None:
            seen.append(msg)
            if msg["type"] == "end":
                break
    assert seen[0]["type"] == "welcome" and seen[0]["match"] == 2, seen[:2]
    assert [m["tick"] for m in seen if m["type"] == "frame" and not m["final"]][-1] == 5
    assert seen[-1]["type"] == "end" and len(results) == 4


# ------------------------------------------------------------------------------------ bad input
async def test_malformed_msgpack_gets_bad_frame(autojump_clock: MockClock) -> None:
    async def offend(port: int) -> None:
        c = await Client.connect(port)
        await c.stream.send_all(protocol.HEADER.pack(3) + b"\xc1\xc1\xc1")  # 0xc1 is never valid
        await c.expect_error(protocol.BAD_FRAME)

    await with_good_match(offend)


#: Maps whose keys are an array or a map: valid msgpack that Python cannot hold as a dict.
UNHASHABLE_KEYS = [b"\x81\x91\x01\x01", b"\x81\x80\x01"]


@pytest.mark.parametrize("body", UNHASHABLE_KEYS)
async def test_a_map_with_an_unhashable_key_gets_bad_frame(body: bytes, autojump_clock: MockClock) -> None:
    async def offend(port: int) -> None:
        c = await Client.connect(port)
        await c.stream.send_all(protocol.HEADER.pack(len(body)) + body)
        await c.expect_error(protocol.BAD_FRAME)

    await with_good_match(offend)


@pytest.mark.parametrize("fast", [True, False])
async def test_a_bad_frame_mid_match_costs_only_its_sender(fast: bool, autojump_clock: MockClock) -> None:
    """At a fixed rate the match loop itself reads the answers: a bad frame must not end the match."""

    async def offend(c: Client, _lobby: Lobby) -> None:
        assert (await c.recv())["type"] == "welcome"
        await c.recv()  # the first tick
        body = UNHASHABLE_KEYS[0]
        await c.stream.send_all(protocol.HEADER.pack(len(body)) + body)
        await c.expect_error(protocol.BAD_FRAME)

    _, rival, lobby = await seat_offender(offend, fast=fast, tick_rate=30.0)
    assert rival[0]["result"] == "win" and "disconnected" in rival[0]["reason"]
    assert len(lobby.outcomes) == 2


class _BrokenReader:
    """Stands in for one connection's frame reader: a decoder with a bug."""

    buffered = True  # so the one-whole-frame shortcut is not taken either
    limit = protocol.MAX_CLIENT_FRAME

    def feed(self, _data: Any) -> list[dict[str, Any]]:
        raise RuntimeError("a decoder bug")


async def test_a_decoder_bug_costs_only_the_connection_it_reads(autojump_clock: MockClock) -> None:
    """Defence in depth: whatever escapes the decoder ends that one connection with `internal`."""

    async def offend(c: Client, lobby: Lobby) -> None:
        assert (await c.recv())["type"] == "welcome"
        tick = await c.recv()
        seat = next(s for m in lobby.running for s in m.seats if s.name == "offender")
        seat.conn.frames = _BrokenReader()
        await c.send(protocol.moves(tick["tick"], [0]))
        await c.expect_error(protocol.INTERNAL)

    _, rival, lobby = await seat_offender(offend, fast=False, tick_rate=30.0)
    assert rival[0]["result"] == "win" and "disconnected" in rival[0]["reason"]
    assert len(lobby.outcomes) == 2


async def test_a_handler_bug_costs_only_the_connection_it_reads(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    """In fast mode the poller's task calls the match's handler: a bug there ends one connection."""
    on_message = Seat.on_message

    def buggy(seat: Seat, conn: Any, message: dict[str, Any], arrival: float) -> None:
        if seat.name == "offender":
            raise RuntimeError("a bug in the handler")
        on_message(seat, conn, message, arrival)

    monkeypatch.setattr(Seat, "on_message", buggy)

    async def offend(c: Client, _lobby: Lobby) -> None:
        assert (await c.recv())["type"] == "welcome"
        tick = await c.recv()
        await c.send(protocol.moves(tick["tick"], [0]))
        await c.expect_error(protocol.INTERNAL)

    _, rival, lobby = await seat_offender(offend)
    assert rival[0]["result"] == "win" and "disconnected" in rival[0]["reason"]
    assert len(lobby.outcomes) == 2


async def test_a_poller_callback_that_raises_costs_only_its_own_target(autojump_clock: MockClock) -> None:
    class Target:
        def __init__(self, sock: socket.socket, *, broken: bool) -> None:
            self.sock, self.broken, self.seen, self.aborted = sock, broken, 0, False

        def fileno(self) -> int:
            return self.sock.fileno()

        def on_ready(self, readable: bool, writable: bool) -> None:
            self.sock.recv(100)
            self.seen += 1
            if self.broken:
                raise RuntimeError("a bug")

        def on_deadline(self) -> None:
            raise RuntimeError("another bug")

        def abort(self) -> None:
            self.aborted = True

    pairs = [socket.socketpair() for _ in range(3)]
    poller: Poller[Target] = Poller()
    broken, healthy, late = (Target(pairs[i][0], broken=i == 0) for i in range(3))
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            await nursery.start(poller.serve)
            for target in (broken, healthy, late):
                poller.add(target)
            poller.watch(broken, read=True, write=False)
            poller.watch(healthy, read=True, write=False)
            poller.set_deadline(late, trio.current_time() + 0.05)
            for _ in range(3):
                pairs[0][1].send(b"x")
                pairs[1][1].send(b"x")
                await trio.sleep(0.05)
            assert broken.seen == 1 and broken.aborted  # dropped at its first bug
            assert healthy.seen == 3 and not healthy.aborted
            assert late.aborted and poller.targets == {healthy}
            nursery.cancel_scope.cancel()
    assert healthy.aborted  # a poller that stops closes what it still holds
    for a, b in pairs:
        a.close()
        b.close()


async def test_frame_over_the_limit_is_refused_from_its_header(autojump_clock: MockClock) -> None:
    async def offend(port: int) -> None:
        c = await Client.connect(port)
        await c.stream.send_all(protocol.HEADER.pack(protocol.MAX_CLIENT_FRAME + 1))  # no body needed
        msg = await c.expect_error(protocol.TOO_LARGE)
        assert str(protocol.MAX_CLIENT_FRAME) in msg["message"]

    await with_good_match(offend)


@pytest.mark.parametrize("value", [[1, 2, 3], "hello", 42, None])
async def test_a_message_that_is_not_a_map_gets_bad_frame(value: Any, autojump_clock: MockClock) -> None:
    async def offend(port: int) -> None:
        c = await Client.connect(port)
        body = msgpack.packb(value)
        await c.stream.send_all(protocol.HEADER.pack(len(body)) + body)
        await c.expect_error(protocol.BAD_FRAME)

    await with_good_match(offend)


async def test_unknown_first_message_is_a_bad_hello(autojump_clock: MockClock) -> None:
    async def offend(port: int) -> None:
        c = await Client.connect(port)
        await c.send({"type": "dance"})
        await c.expect_error(protocol.BAD_HELLO)

    await with_good_match(offend)


@pytest.mark.parametrize(
    ("fields", "code", "words"),
    [
        ({"protocol": 7}, protocol.BAD_VERSION, "speaks 1"),
        ({"game": "chess"}, protocol.BAD_HELLO, "plays 'rezzo'"),
        ({"name": ""}, protocol.BAD_HELLO, "name"),
        ({"name": 12}, protocol.BAD_HELLO, "name"),
        ({"role": "referee"}, protocol.BAD_HELLO, "role"),
    ],
)
async def test_bad_hello_fields_are_named(
    fields: dict[str, Any], code: str, words: str, autojump_clock: MockClock
) -> None:
    async def offend(port: int) -> None:
        c = await Client.connect(port)
        await c.send({**protocol.hello("x", "rezzo"), **fields})
        msg = await c.expect_error(code)
        assert words in msg["message"]

    await with_good_match(offend)


async def test_no_hello_within_the_timeout(autojump_clock: MockClock) -> None:
    async def offend(port: int) -> None:
        c = await Client.connect(port)
        msg = await c.expect_error(protocol.TIMEOUT)
        assert "hello" in msg["message"]

    await with_good_match(offend, hello_timeout=0.3)


async def test_messages_before_the_match_starts_are_refused(autojump_clock: MockClock) -> None:
    async def offend(port: int) -> None:
        c = await Client.connect(port)
        await c.hello("eager")
        await c.send(protocol.moves(1, [1]))
        await c.expect_error(protocol.BAD_MESSAGE)

    await with_good_match(offend, matches=None)


async def test_two_hundred_connects_and_disconnects(autojump_clock: MockClock) -> None:
    async def offend(port: int) -> int:
        for i in range(200):
            s = socket.create_connection(("127.0.0.1", port))
            if i % 3 == 1:
                s.sendall(protocol.HEADER.pack(20))  # half a frame, then gone
            elif i % 3 == 2:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")  # RST
            s.close()
            if i % 20 == 0:
                await trio.sleep(0)
        return 200

    async with trio.open_nursery() as nursery:
        lobby = await start(nursery, matches=2)
        results: list[dict[str, Any]] = []
        async with trio.open_nursery() as inner:
            inner.start_soon(good_match, lobby, results)
            await offend(lobby.port)
        assert_no_tick_lost(results)
        # The server still seats and plays after the storm, and forgot every dead connection.
        results.clear()
        await good_match(lobby, results)
        assert_no_tick_lost(results)
        assert lobby.seating.waiting() == [] and lobby._spectators.conns == []


# ------------------------------------------------------------------------------------ bad seats
async def seat_offender(
    behave: Any, *, offender: Client | None = None, **kw: Any
) -> tuple[Any, list[dict[str, Any]], Lobby]:
    """Match 1: two good clients. Match 2: the offender and a good client. Returns what behave
    returned, the good opponent's `end` in match 2, and the lobby.

    Fast mode with a generous budget (unless the test says otherwise), so that a garbage collection
    pause in this busy test process never makes a good in-process client late.
    """
    kw.setdefault("fast", True)
    kw.setdefault("budget_ms", 300)
    results: list[dict[str, Any]] = []
    opponent: list[dict[str, Any]] = []
    out: list[Any] = []
    async with trio.open_nursery() as nursery:
        lobby = await start(nursery, matches=2, **kw)
        started = trio.Event()
        nursery.start_soon(good_match, lobby, results, started)
        await started.wait()
        bad = await Client.connect(lobby.port) if offender is None else await offender(lobby.port)
        await bad.hello("offender")
        rival = await Client.connect(lobby.port)
        await rival.hello("rival")

        async def rival_plays() -> None:
            opponent.append(await rival.play())

        nursery.start_soon(rival_plays)
        out.append(await behave(bad, lobby))
    assert_no_tick_lost(results, lobby.config.engine_config["max_ticks"])
    return out[0], opponent, lobby


async def test_flooding_client_is_dropped_and_forfeits(autojump_clock: MockClock) -> None:
    async def flood(c: Client, _lobby: Lobby) -> None:
        assert (await c.recv())["type"] == "welcome"
        tick = await c.recv()
        # One write, past the burst allowance: the server hangs up mid-way, so later writes would fail.
        await c.stream.send_all(encode(protocol.moves(tick["tick"], [0])) * 100)
        await c.expect_error(protocol.FLOOD)

    _, rival, _ = await seat_offender(flood)
    assert rival[0]["result"] == "win" and "disconnected" in rival[0]["reason"]


async def test_a_bot_that_fell_behind_may_answer_a_burst_of_old_ticks(autojump_clock: MockClock) -> None:
    async def laggard(c: Client, _lobby: Lobby) -> dict[str, Any]:
        ticks = []
        while True:
            msg = await c.recv()
            if msg["type"] == "tick":
                ticks.append(msg["tick"])
                if len(ticks) % 4 == 0:  # answer four ticks at once, as a bot back from a long pause would
                    await c.stream.send_all(b"".join(encode(protocol.moves(t, [0])) for t in ticks[-4:]))
            elif msg["type"] == "end":
                return msg

    end, _, lobby = await seat_offender(laggard, budget_ms=WAITING_BUDGET_MS, ticks=WAITING_TICKS)
    assert end["ticks"] == WAITING_TICKS and end["late"] >= WAITING_TICKS * 3 // 4  # late, not disconnected
    assert not [o for o in lobby.outcomes if o.forfeits]


async def test_unknown_message_type_mid_match(autojump_clock: MockClock) -> None:
    async def odd(c: Client, _lobby: Lobby) -> None:
        assert (await c.recv())["type"] == "welcome"
        await c.send({"type": "chat", "text": "hi"})
        await c.expect_error(protocol.UNKNOWN_TYPE)

    _, rival, _ = await seat_offender(odd)
    assert rival[0]["result"] == "win"


async def test_silent_seat_plays_noops_and_every_tick_counts_late(autojump_clock: MockClock) -> None:
    async def silent(c: Client, _lobby: Lobby) -> dict[str, Any]:
        return await c.play(answer=False)

    end, rival, _ = await seat_offender(silent, budget_ms=WAITING_BUDGET_MS, ticks=WAITING_TICKS)
    assert end["late"] == WAITING_TICKS and end["ticks"] == WAITING_TICKS
    assert rival[0]["late"] == 0


async def test_malformed_moves_are_invalid_noops(autojump_clock: MockClock) -> None:
    async def sloppy(c: Client, _lobby: Lobby) -> dict[str, Any]:
        while True:
            msg = await c.recv()
            if msg["type"] == "tick":
                bad = [{"moves": "advance"}, {"moves": [1, 2]}, {"moves": [99]}][msg["tick"] % 3]
                await c.send({"type": "moves", "tick": msg["tick"], **bad})
            elif msg["type"] == "end":
                return msg

    end, _, _ = await seat_offender(sloppy)
    assert end["invalid"] == TICKS and end["late"] == 0


async def test_answers_for_the_wrong_tick_are_late(autojump_clock: MockClock) -> None:
    async def confused(c: Client, _lobby: Lobby) -> dict[str, Any]:
        while True:
            msg = await c.recv()
            if msg["type"] == "tick":
                await c.send(protocol.moves(msg["tick"] + 1000, [1]))
            elif msg["type"] == "end":
                return msg

    end, _, _ = await seat_offender(confused, budget_ms=WAITING_BUDGET_MS, ticks=WAITING_TICKS)
    assert end["late"] == WAITING_TICKS


async def tiny_receive_buffer(port: int) -> Client:
    """A client whose kernel receive buffer is as small as Linux allows, so it fills fast."""
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    sock.connect(("127.0.0.1", port))
    return Client(trio.SocketStream(trio.socket.from_stdlib_socket(sock)))


async def test_bot_that_never_reads_is_dropped_as_a_slow_reader(autojump_clock: MockClock) -> None:
    # A generous budget keeps the rival on time even on a loaded machine; small buffers make the
    # deaf seat's frames pile up within a few dozen ticks.
    async with trio.open_nursery() as nursery:
        lobby = await start(
            nursery, ticks=400, tick_rate=50.0, budget_ms=100, max_backlog=2048, send_buffer=4096
        )
        deaf = await tiny_receive_buffer(lobby.port)
        await deaf.hello("deaf")  # and never read again
        rival = await Client.connect(lobby.port)
        await rival.hello("rival")
        end = await rival.play()
    (outcome,) = lobby.outcomes
    assert outcome.forfeits == [0], outcome.to_json()
    assert outcome.ticks < 400  # dropped long before the end
    assert end["result"] == "win" and end["late"] == 0


async def test_spectator_that_never_reads_is_dropped_and_the_match_goes_on(autojump_clock: MockClock) -> None:
    async def deaf_spectator(port: int) -> str:
        c = await tiny_receive_buffer(port)
        await c.hello("deaf", role="spectator")
        await trio.sleep(1.0)  # frames of the whole world pile up meanwhile
        # Now read what made it through. The 1 KiB window reopens by the kernel's zero-window
        # probes, on its own (real) timers: virtual time waits for them rather than leaping to the
        # read's timeout while every task waits on the socket.
        autojump_clock.autojump_threshold = 0.25
        try:
            while (msg := await c.recv()) is not None:
                if msg["type"] == "error":
                    return msg["code"]
            return "closed"
        finally:
            autojump_clock.autojump_threshold = 0.0

    code = await with_good_match(
        deaf_spectator, map_="field", ticks=60, max_backlog=16 * 1024, send_buffer=4096
    )
    assert code == protocol.SLOW_READER


# ------------------------------------------------------------------------------ many matches, one driver


async def doomed_beside_good(
    doomed_match: list[Any], **kw: Any
) -> tuple[Lobby, list[dict[str, Any]], list[Any]]:
    """Match 1: two clients that answer no-ops to the end or until hung up on (its `Match` goes into
    ``doomed_match`` once it runs); match 2: two good clients. The lobby, the good clients' `end`
    messages, and the last message each doomed client got (None: hung up on)."""
    results: list[dict[str, Any]] = []
    doomed_ends: list[Any] = []

    async def doomed(port: int) -> None:
        clients = [await Client.connect(port) for _ in range(2)]
        for i, c in enumerate(clients):
            await c.hello(f"doomed-{i}")

        async def answer(c: Client) -> None:
            while (msg := await c.recv(timeout=30)) is not None and msg["type"] != "end":
                if msg["type"] == "tick":
                    await c.send(protocol.moves(msg["tick"], [0] * len(msg["agents"])))
            doomed_ends.append(msg)

        async with trio.open_nursery() as n:
            for c in clients:
                n.start_soon(answer, c)

    async with trio.open_nursery() as nursery:
        lobby = await start(nursery, matches=2, **kw)
        async with trio.open_nursery() as both:
            both.start_soon(doomed, lobby.port)
            while not lobby.running:
                await trio.sleep(0.005)
            doomed_match.append(lobby.running[0])
            both.start_soon(good_match, lobby, results)
    return lobby, results, doomed_ends


async def test_a_match_that_fails_mid_tick_ends_alone_and_the_others_play_on(
    autojump_clock: MockClock,
) -> None:
    # Fixed-rate matches share one tick driver: a bug in one match's tick must end that match only.
    doomed_match: list[Any] = []

    def on_tick(engine: Any) -> None:
        # The match's engine, not the one it started with: from tick 2 its world is in a slot batch.
        if doomed_match and engine is doomed_match[0].engine and engine.tick == 5:
            raise RuntimeError("a bug in this match")

    lobby, results, _ = await doomed_beside_good(doomed_match, on_tick=on_tick)
    assert_no_tick_lost(results)
    assert len(lobby.outcomes) == 1  # the failed match has no result


async def test_a_batch_step_that_fails_ends_its_matches_alone(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    # The Rezzo matches of a phase slot step as one batch: a bug in that step ends that batch's
    # matches (with no result), not the driver, nor the matches of other slots.
    doomed_match: list[Any] = []
    real_step = SlotBatch.step

    def step(batch: SlotBatch) -> None:
        if doomed_match and doomed_match[0].engine in batch._members and doomed_match[0].engine.tick == 5:
            raise RuntimeError("a bug in the batched step")
        real_step(batch)

    monkeypatch.setattr(SlotBatch, "step", step)
    lobby, results, doomed_ends = await doomed_beside_good(doomed_match)
    assert_no_tick_lost(results)
    assert [o.number for o in lobby.outcomes] == [2]  # the failed match has no result
    assert doomed_ends == [None, None]  # its bots were hung up on, not sent a result
    assert lobby.driver is not None and lobby.driver.batched_ticks > 0


def test_new_fixed_rate_matches_take_the_least_used_phase_slots() -> None:
    driver = FixedRateDriver(tick_rate=10.0)
    slots = [driver.take_slot() for _ in range(2 * PHASES)]
    assert slots[:4] == [0, PHASES // 2, PHASES // 4, 3 * PHASES // 4]  # each in the widest gap
    assert sorted(slots[:PHASES]) == list(range(PHASES))
    assert sorted(slots[PHASES:]) == list(range(PHASES))


# ------------------------------------------------------------------------------------ reserved seats
@pytest.mark.parametrize("token", [["a", "list"], {"a": 1}, 7, None])
async def test_a_token_of_the_wrong_type_is_a_bad_hello(token: Any, autojump_clock: MockClock) -> None:
    async with trio.open_nursery() as nursery:
        lobby = await start(nursery, seating=ReservedSeating({"t0": 0, "t1": 1}, ["a", "b"]))
        c = await Client.connect(lobby.port)
        await c.send({**protocol.hello("x", "rezzo"), "token": token})
        msg = await c.expect_error(protocol.BAD_HELLO)
        assert "token" in msg["message"]
        assert lobby.seating.refusals == {}  # no seat to blame
        nursery.cancel_scope.cancel()


async def test_a_seated_bot_refused_at_hello_is_named(autojump_clock: MockClock) -> None:
    async with trio.open_nursery() as nursery:
        lobby = await start(nursery, seating=ReservedSeating({"t0": 0, "t1": 1}, ["a", "b"]))
        c = await Client.connect(lobby.port)
        await c.send({**protocol.hello("x", "cata"), "token": "t1"})
        await c.expect_error(protocol.BAD_HELLO)
        refusal = lobby.seating.refusals[1]
        assert refusal.code == protocol.BAD_HELLO and refusal.game == "cata"
        assert "plays 'rezzo', not 'cata'" in refusal.message
        # A second connection for a seat already taken is refused, but the seat is not to blame.
        first, second = await Client.connect(lobby.port), await Client.connect(lobby.port)
        await first.send({**protocol.hello("y", "rezzo"), "token": "t0"})
        while 0 not in lobby.seating.seated:
            await trio.sleep(0.01)
        await second.send({**protocol.hello("y", "rezzo"), "token": "t0"})
        await second.expect_error(protocol.SEAT_TAKEN)
        assert 0 not in lobby.seating.refusals
        nursery.cancel_scope.cancel()


# ------------------------------------------------------------------------------------ replays that fail
class _FailingRecorder:
    """A replay writer whose disk fills up at ``tick``."""

    def __init__(self, tick: int) -> None:
        self.tick, self.ticks, self.finished = tick, 0, False

    def record(self, tick: int, moves: dict[int, Any], engine: Any, **_: Any) -> None:
        if tick >= self.tick:
            raise OSError(28, "No space left on device")
        self.ticks += 1

    def finish(self, result: Any, extra: dict[str, Any]) -> None:
        self.finished = True


async def _two_good_matches(results: list[dict[str, Any]], **kw: Any) -> Lobby:
    async with trio.open_nursery() as nursery:
        lobby = await start(nursery, matches=2, **kw)
        await good_match(lobby, results)
        await good_match(lobby, results)
    return lobby


@pytest.mark.parametrize("fast", [True, False])
async def test_a_replay_that_cannot_be_written_costs_the_match_nothing(
    fast: bool, autojump_clock: MockClock
) -> None:
    made: list[_FailingRecorder] = []

    def recorder(number: int, *_args: Any) -> _FailingRecorder:
        if number == 1:
            raise OSError(13, "Permission denied")  # cannot even be created
        made.append(_FailingRecorder(tick=3))
        return made[-1]

    results: list[dict[str, Any]] = []
    with trio.fail_after(60):
        lobby = await _two_good_matches(results, fast=fast, recorder=recorder)
    assert len(results) == 4 and all(r["ticks"] == TICKS for r in results)
    assert [o.ticks for o in lobby.outcomes] == [TICKS, TICKS]
    assert made[0].ticks == 2 and not made[0].finished  # it stopped at its fault, the match did not


async def test_a_match_that_cannot_start_ends_its_seats_and_the_server_goes_on(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    results: list[dict[str, Any]] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            lobby = await start(nursery, matches=2)
            real_new = lobby.engine_class.new
            monkeypatch.setattr(lobby.engine_class, "new", classmethod(lambda *_a: 1 / 0))
            a, b = await Client.connect(lobby.port), await Client.connect(lobby.port)
            await a.hello("a")
            await b.hello("b")
            for client in (a, b):
                msg = await client.expect_error(protocol.INTERNAL)
                assert "could not start" in msg["message"]
            monkeypatch.setattr(lobby.engine_class, "new", real_new)
            await good_match(lobby, results)  # the second match plays, and the lobby ends after it
    assert_no_tick_lost(results)
    assert len(lobby.outcomes) == 1


async def test_an_endless_server_keeps_only_its_latest_outcomes(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: MockClock
) -> None:
    monkeypatch.setattr("cellarena.server.play.lobby.KEEP_OUTCOMES", 2)
    results: list[dict[str, Any]] = []
    seen: list[int] = []
    with trio.fail_after(60):
        async with trio.open_nursery() as nursery:
            lobby = await start(nursery, matches=None, fast=True, on_result=lambda o: seen.append(o.number))
            for _ in range(3):
                await good_match(lobby, results)
            nursery.cancel_scope.cancel()
    assert seen == [1, 2, 3]  # on_result saw every one
    assert [o.number for o in lobby.outcomes] == [2, 3]


# ------------------------------------------------------------------------------------ shutdown
@pytest.mark.parametrize("fast", [True, False])
async def test_shutdown_ends_running_matches_without_a_result_and_tells_everyone(
    fast: bool, autojump_clock: MockClock
) -> None:
    async def until_error(client: Client) -> dict[str, Any]:
        while (msg := await client.recv()) is not None:
            if msg["type"] in ("error", "end"):
                return msg
        raise AssertionError("closed without a word")

    with trio.fail_after(30):
        async with trio.open_nursery() as nursery:
            lobby = await start(nursery, matches=None, fast=fast, ticks=100_000)
            a, b, spectator, waiting = [await Client.connect(lobby.port) for _ in range(4)]
            await a.hello("a")
            await b.hello("b")
            while not lobby.running:
                await trio.sleep(0.01)
            await spectator.hello("watcher", role="spectator")
            await waiting.hello("waiting")
            while len(lobby.seating.waiting()) < 1:
                await trio.sleep(0.01)
            for client in (a, b):  # a few ticks under way (the answers do not matter here)
                assert (await client.recv())["type"] == "welcome"
            assert await lobby.shutdown() == 1
            ends = [await until_error(c) for c in (a, b, spectator, waiting)]
    assert [e["type"] for e in ends] == ["error"] * 4 and {e["code"] for e in ends} == {protocol.SHUTDOWN}
    assert [e["message"].endswith("without a result") for e in ends] == [True, True, True, False]
    assert list(lobby.outcomes) == [] and not lobby.running
