"""The TCP listener: handshakes, seating bots into matches, spectators, and running the matches.

Every connection's handshake runs as a task in the lobby's nursery, and every match runs in it too,
so one misbehaving client can only ever close its own connection: errors are caught per connection
and logged, and the accept loop, the other seats and the other matches go on. Once its hello is in,
a connection has no task of its own: the lobby's `Poller` reads and writes it when its socket is
ready (see `poller` for why).
"""

from __future__ import annotations

import bisect
import collections
import contextlib
import errno
import logging
import socket
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import trio

from cellarena.sdk import protocol
from cellarena.server.connection import DEFAULT_MAX_BACKLOG, Connection
from cellarena.server.games import get_engine
from cellarena.server.games.base import Engine
from cellarena.server.match import Match, MatchOutcome, Recorder, TickDriver, TickSettings
from cellarena.server.poller import Poller

log = logging.getLogger("cellarena.server")
#: Outcomes an endless server keeps in memory (`on_result` sees every one as it comes).
KEEP_OUTCOMES = 1000

MAX_NAME = 64
#: Connections accepted in one go before the running matches get their turn.
ACCEPT_BATCH = 16
#: Fixed-rate matches start their ticks in one of this many evenly spaced phases of the period.
PHASES = 16
_BITS = (PHASES - 1).bit_length()
_SLOT_ORDER = sorted(range(PHASES), key=lambda i: int(f"{i:0{_BITS}b}"[::-1], 2))
#: Errors from accept() that concern one connection only, not the listener.
_TRANSIENT_ACCEPT = {
    errno.ECONNABORTED,
    errno.EPROTO,
    errno.EMFILE,
    errno.ENFILE,
    errno.ENOBUFS,
    errno.ENOMEM,
}


@dataclass
class LobbyConfig:
    """What a server runs. ``tokens`` (token -> seat) reserves seats, as `cellarena match` does."""

    game: str
    engine_config: dict[str, Any]
    settings: TickSettings = field(default_factory=TickSettings)
    host: str = "127.0.0.1"
    port: int = 7777
    matches: int | None = None
    seed: int = 0
    hello_timeout: float = 10.0
    tokens: dict[str, int] | None = None
    #: With tokens: how long to wait for every reserved seat before starting without the missing ones.
    seat_timeout: float | None = None
    #: With tokens: each reserved seat's name, used in results whatever name its bot says in hello.
    seat_names: list[str] | None = None
    #: Bytes of unsent frames kept per client before it is dropped as a slow reader.
    max_backlog: int = DEFAULT_MAX_BACKLOG
    #: The kernel's send buffer per client (SO_SNDBUF), or None for the system default.
    send_buffer: int | None = None
    #: Makes the replay writer of a match: (match number, engine, seat names, seed) -> writer.
    recorder: Callable[[int, Engine, list[str], int], Recorder | None] | None = None
    on_result: Callable[[MatchOutcome], None] | None = None
    on_tick: Callable[[Engine], None] | None = None


@dataclass(frozen=True)
class Refusal:
    """A hello refused from the bot of a reserved seat: the error it was sent, and the game it asked for."""

    code: str
    message: str
    game: Any


class Lobby:
    """Accepts bots and spectators and runs matches until ``matches`` have finished (or forever)."""

    def __init__(self, config: LobbyConfig) -> None:
        self.config = config
        self.engine_class = get_engine(config.game)
        # Build one engine up front so a bad config fails before anyone connects.
        self.players = self.engine_class.new(config.engine_config, config.seed).players
        self.port: int | None = None
        #: Every match's outcome; a server without a match limit keeps only the latest (it runs for months).
        self.outcomes: collections.deque[MatchOutcome] = collections.deque(
            maxlen=None if config.matches is not None else KEEP_OUTCOMES
        )
        #: With tokens: reserved seats whose bot's hello was refused, so the launcher can say why.
        self.refusals: dict[int, Refusal] = {}
        self._waiting: list[Connection] = []
        self._reserved: dict[int, Connection] = {}
        self._spectators: list[Connection] = []
        self._running: list[Match] = []
        self._started = 0
        self._gone: set[int] = set()
        self._all_done = trio.Event()
        #: Every open connection, for its readiness and so that a shutdown can tell each one.
        self._poller: Poller[Connection] | None = None
        self._match_scopes: dict[Match, trio.CancelScope] = {}
        self.stopping = False
        self._nursery: trio.Nursery | None = None
        self._epoch = 0.0  # trio time the phases of fixed-rate matches count from
        self._driver = TickDriver()  # runs every fixed-rate match's ticks from one task

    # ----------------------------------------------------------------- serving
    async def serve(
        self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
    ) -> list[MatchOutcome]:
        """Listen, report the bound port through ``task_status``, and return every match's outcome."""
        listener = socket.socket(socket.AF_INET6 if ":" in self.config.host else socket.AF_INET)
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            listener.bind((self.config.host, self.config.port))
        except OSError as exc:
            listener.close()
            raise OSError(
                exc.errno, f"cannot listen on {self.config.host}:{self.config.port}: {exc.strerror}"
            ) from None
        listener.listen(4096)  # the kernel caps it at somaxconn; a full backlog drops SYNs for 1 s
        listener.setblocking(False)
        self.port = listener.getsockname()[1]
        try:
            self._poller = Poller[Connection]()
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                self._epoch = trio.current_time()
                await nursery.start(self._poller.serve)
                if not self.config.settings.fast:
                    nursery.start_soon(self._driver.serve)
                nursery.start_soon(self._accept_loop, listener)
                if self.config.tokens is not None and self.config.seat_timeout is not None:
                    nursery.start_soon(self._seat_deadline, self.config.seat_timeout)
                task_status.started(self.port)
                await self._all_done.wait()
                nursery.cancel_scope.cancel()
        finally:
            with contextlib.suppress(RuntimeError):
                trio.lowlevel.notify_closing(listener)
            listener.close()
            for conn in [*self._waiting, *self._reserved.values(), *self._spectators]:
                conn.fail(protocol.SHUTDOWN, "the server is stopping")
        return list(self.outcomes)

    async def _accept_loop(self, listener: socket.socket) -> None:
        while True:
            await trio.lowlevel.wait_readable(listener)
            for _ in range(ACCEPT_BATCH):
                try:
                    sock, _ = listener.accept()
                except (BlockingIOError, InterruptedError):
                    break
                except OSError as exc:
                    if exc.errno in _TRANSIENT_ACCEPT:
                        log.warning("accept failed: %s", exc)
                        await trio.sleep(0.01)  # out of descriptors: let connections close first
                        break
                    raise
                # Registered now, in accept order, so that hellos already waiting are read in that order.
                conn = self._connect(sock)
                if conn is not None:
                    self._nursery.start_soon(self._handshake, conn)
            else:
                # A flood of connections is taken a batch at a time, so that the handshakes of
                # hundreds of new clients do not hold up the ticks of the matches already running.
                await trio.lowlevel.checkpoint()

    def _connect(self, sock: socket.socket) -> Connection | None:
        if self.config.send_buffer is not None:
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, self.config.send_buffer)
        try:
            return Connection(sock, self._poller, max_backlog=self.config.max_backlog)
        except OSError as exc:  # reset before we even looked at it
            log.info("lost a new connection at once: %s", exc)
            sock.close()
            return None

    async def shutdown(self, grace: float = 2.0) -> int:
        """Stop serving: running matches end now, without a result (they are nobody's fault, so no
        seat forfeits), and every client is told `shutdown`. Waits up to ``grace`` seconds for those
        frames to leave, then makes `serve` return. Returns how many matches were cut short.
        """
        self.stopping = True
        cut = len(self._running)
        playing: set[Connection] = set()
        for match in list(self._running):
            log.warning("match %d ends without a result: the server is stopping", match.number)
            self._match_scopes[match].cancel()
            playing.update(s.conn for s in match.seats if s.conn is not None)
            playing.update(match.spectators)
        poller = self._poller
        if poller is not None:
            for conn in poller.targets:
                why = "; your match ends without a result" if conn in playing else ""
                conn.fail(protocol.SHUTDOWN, "the server is stopping" + why)
            with trio.move_on_after(grace):
                await poller.wait_empty()
        self._all_done.set()
        return cut

    async def _handshake(self, conn: Connection) -> None:
        """Wait up to the hello timeout for the connection's hello; the poller serves it after that.

        The hello is checked and the bot seated right where it is read (in the poller's task), so
        bots are seated in the order their hellos arrived, not in the order tasks happen to wake.
        """
        done = trio.Event()

        def first(_c: Connection, message: dict[str, Any], arrival: float) -> None:
            # Called from the poller: a bug here costs this connection alone (`Connection.on_ready`).
            conn.handler = _too_early
            conn.on_close = None
            done.set()
            self._hello(conn, message, arrival)

        conn.handler = first
        conn.on_close = lambda _c: done.set()
        conn.resume_reading()
        with trio.move_on_after(self.config.hello_timeout):
            await done.wait()
        if not done.is_set():
            conn.on_close = None
            conn.fail(protocol.TIMEOUT, f"no hello within {self.config.hello_timeout:g} s of connecting")

    def _hello(self, conn: Connection, hello: dict[str, Any], arrival: float) -> None:
        problem = self._check_hello(hello)
        if problem is not None:
            self._note_refusal(conn, hello, *problem)
            conn.fail(*problem)
            return
        conn.joined = arrival
        self._admit(conn, hello)

    def _note_refusal(self, conn: Connection, hello: dict[str, Any], code: str, message: str) -> None:
        """Blame a refused hello on its reserved seat when it carried one's token."""
        tokens, token = self.config.tokens, hello.get("token")
        if tokens is None or not isinstance(token, str) or token not in tokens:
            return
        seat = tokens[token]
        if seat in self._reserved or self._started:
            return  # a second connection for a seat that is taken: the seat itself is fine
        if self.config.seat_names is not None:
            conn.name = self.config.seat_names[seat]  # the log line then names the bot
        self.refusals[seat] = Refusal(code, message, hello.get("game"))

    def _check_hello(self, hello: dict[str, Any]) -> tuple[str, str] | None:
        if hello["type"] != "hello":
            return protocol.BAD_HELLO, f"the first message must be 'hello', got {hello['type']!r}"
        version = hello.get("protocol")
        if version != protocol.PROTOCOL_VERSION:
            return (
                protocol.BAD_VERSION,
                f"protocol {version!r} is not spoken here; this server speaks {protocol.PROTOCOL_VERSION}",
            )
        name = hello.get("name")
        if not isinstance(name, str) or not 1 <= len(name) <= MAX_NAME or not name.isprintable():
            return protocol.BAD_HELLO, f"'name' must be printable text of 1 to {MAX_NAME} characters"
        if hello.get("game") != self.config.game:
            return protocol.BAD_HELLO, f"this server plays {self.config.game!r}, not {hello.get('game')!r}"
        role = hello.get("role", "bot")
        if role not in ("bot", "spectator"):
            return protocol.BAD_HELLO, f"'role' must be 'bot' or 'spectator', got {role!r}"
        if role == "bot" and self.config.tokens is not None:
            token = hello.get("token")
            if not isinstance(token, str) or token not in self.config.tokens:
                return protocol.BAD_HELLO, "this server reserves its seats: send the 'token' you were given"
            if self.config.tokens[token] in self._reserved:
                return protocol.BAD_HELLO, "that token's seat is already taken"
        return None

    # ----------------------------------------------------------------- seating
    def _admit(self, conn: Connection, hello: dict[str, Any]) -> None:
        conn.name = hello["name"]
        if hello.get("role", "bot") == "spectator":
            if self._running:
                self._running[-1].add_spectator(conn)
            else:
                self._spectators.append(conn)
                conn.handler = _too_early
                conn.on_close = lambda c: self._spectators.remove(c) if c in self._spectators else None
            return
        if self.stopping:
            conn.fail(protocol.SHUTDOWN, "the server is stopping")
            return
        if self._limit_reached():
            conn.fail(protocol.SHUTDOWN, "this server has started all the matches it will play")
            return
        log.info("%s (%s) is waiting for a match", conn.name, conn.peer)
        if self.config.tokens is not None:
            self._reserved[self.config.tokens[hello["token"]]] = conn
            conn.on_close = self._unreserve
            if len(self._reserved) + len(self._gone - set(self._reserved)) >= self.players:
                self._start([self._reserved.get(i) for i in range(self.players)])
            return
        # In the order the hellos arrived (kernel stamps), whatever order they were read in.
        bisect.insort(self._waiting, conn, key=lambda c: c.joined)
        conn.on_close = lambda c: self._waiting.remove(c) if c in self._waiting else None
        if len(self._waiting) >= self.players:
            seated, self._waiting = self._waiting[: self.players], self._waiting[self.players :]
            self._start(seated)

    def _unreserve(self, conn: Connection) -> None:
        for seat, c in list(self._reserved.items()):
            if c is conn:
                del self._reserved[seat]

    async def _seat_deadline(self, timeout: float) -> None:
        """With reserved seats: start after ``timeout`` even if some bots never connected."""
        await trio.sleep(timeout)
        if self._started == 0:
            missing = [i for i in range(self.players) if i not in self._reserved]
            log.warning("seats %s did not connect within %g s; they forfeit", missing, timeout)
            self._start([self._reserved.get(i) for i in range(self.players)])

    def _limit_reached(self) -> bool:
        return self.config.matches is not None and self._started >= self.config.matches

    def _start(self, conns: list[Connection | None]) -> None:
        self._started += 1
        number = self._started
        for conn in conns:
            if conn is not None:
                conn.on_close = None
        if self.config.tokens is not None:
            self._reserved = {}
        seed = self.config.seed + number - 1
        if self.config.seat_names is not None:
            names = list(self.config.seat_names)
        else:
            names = [c.name if c is not None else f"seat{i}" for i, c in enumerate(conns)]
        try:
            engine = self.engine_class.new(self.config.engine_config, seed)
            match = Match(
                number,
                engine,
                list(zip(names, conns, strict=True)),
                self.config.settings,
                recorder=self._recorder(number, engine, names, seed),
                on_tick=self.config.on_tick,
            )
        except Exception:  # a bug must cost this match, not the server or the bots waiting for others
            log.exception("match %d could not start", number)
            for conn in conns:
                if conn is not None:
                    conn.fail(protocol.INTERNAL, "the server could not start this match (an internal error)")
            if self._limit_reached() and not self._running:
                self._all_done.set()
            return
        if not self.config.settings.fast:
            match.phase_origin = self._epoch + self._free_phase()
            match.driver = self._driver
        for spectator in self._spectators:
            spectator.on_close = None
            match.add_spectator(spectator)
        self._spectators = []
        self._running.append(match)
        log.info("match %d starts: %s", number, ", ".join(names))
        self._nursery.start_soon(self._run_match, match)

    def _recorder(self, number: int, engine: Engine, names: list[str], seed: int) -> Recorder | None:
        """The match's replay writer; without one if it cannot be made (the match is what counts)."""
        if self.config.recorder is None:
            return None
        try:
            return self.config.recorder(number, engine, names, seed)
        except OSError as exc:
            log.error("match %d: cannot write its replay (%s); it is played unrecorded", number, exc)
            return None

    def _free_phase(self) -> float:
        """A phase (0 <= phase < period) for a new fixed-rate match: the least used of PHASES slots.

        Matches whose ticks start at the same moment queue behind each other on the one thread, so
        they are spread over the period. A few slots rather than any phase: the matches of one slot
        share one wake-up of the tick driver. Ties go to the slot farthest from the used ones (the
        slots in bit-reversed order: 0, 1/2, 1/4, 3/4, ...).
        """
        period = self.config.settings.period
        counts = [0] * PHASES
        for m in self._running:
            if m.phase_origin is not None:
                counts[round((m.phase_origin - self._epoch) % period / period * PHASES) % PHASES] += 1
        slot = min(_SLOT_ORDER, key=lambda i: counts[i])
        return slot * period / PHASES

    async def _run_match(self, match: Match) -> None:
        outcome = None
        try:
            with trio.CancelScope() as self._match_scopes[match]:
                outcome = await match.run()
        except Exception:
            # A bug in one match must not stop the others; it is logged loudly and has no result.
            log.exception("match %d failed with an internal error", match.number)
            outcome = None
        finally:
            self._running.remove(match)
            del self._match_scopes[match]
        if outcome is not None:
            self.outcomes.append(outcome)
            if self.config.on_result is not None:
                self.config.on_result(outcome)
        if self._limit_reached() and not self._running:
            self._all_done.set()

    def seat_gone(self, seat: int) -> None:
        """A reserved seat's bot will never connect (its process ended): do not wait for it."""
        self._gone.add(seat)
        if self._started == 0 and len(self._reserved) + len(self._gone - set(self._reserved)) >= self.players:
            self._start([self._reserved.get(i) for i in range(self.players)])


def _too_early(conn: Connection, message: dict[str, Any], _arrival: float) -> None:
    """Before a match starts, a bot has nothing to say."""
    conn.fail(protocol.BAD_MESSAGE, f"{message['type']!r} before the match started; wait for 'welcome'")
