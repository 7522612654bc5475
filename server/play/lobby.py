"""The lobby: the listener, spectators, and running the matches.

The lobby binds the listener and runs, in its nursery, the accept loop (`accepting`), the poller,
the fixed-rate driver, the seating's task, every connection's handshake (`handshake`: per-address
caps, PROXY headers, the hello's checks) and every match, so one misbehaving client can only ever
close its own connection: errors are caught per connection and logged, and the accept loop, the
other seats and the other matches go on. Once its hello is in, a connection has no task of its
own: the lobby's `Poller` reads and writes it when its socket is ready (see `poller` for why).

Who a connection belongs to is always one owner (`Connection.attach`): its handshake until its
hello, then a waiting room of the lobby's `Seating` (`seating`: first come, reserved seats, a
ladder's queue) or the spectators' room, then a match's seat or spectator list. The handshake
hands each greeted connection to the lobby (`Lobby._greeted`), which routes a spectator to a
match and gives a bot to its seating.

A server facing the internet is one that runs out of descriptors first, so it raises its own
open-file limit at start (`file_limit`) and, when accept() fails all the same, backs off with one
log line per burst (`accepting.AcceptErrors`).
"""

from __future__ import annotations

import collections
import contextlib
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Unpack

import trio

from cellarena.sdk import protocol
from cellarena.server.games import get_engine
from cellarena.server.games.base import Engine
from cellarena.server.net.accepting import AcceptErrors, accept_connections
from cellarena.server.net.connection import DEFAULT_MAX_BACKLOG, Connection
from cellarena.server.net.file_limit import raise_file_limit
from cellarena.server.net.handshake import Handshakes
from cellarena.server.net.poller import Poller
from cellarena.server.net.trusted_proxies import TrustedProxies
from cellarena.server.play.match import (
    ExplainGone,
    Match,
    MatchOutcome,
    Recorder,
    RecorderFactory,
    TickSettings,
)
from cellarena.server.play.seating import (
    FirstComeSeating,
    MatchHost,
    MatchOptions,
    Seating,
    Seats,
    WaitingRoom,
)
from cellarena.server.play.start import MatchStart
from cellarena.server.play.ticking import FixedRateDriver, play_fast, warm_up_batches

log = logging.getLogger("cellarena.server")
#: Outcomes an endless server keeps in memory (`on_result` sees every one as it comes).
KEEP_OUTCOMES = 1000


@dataclass
class LobbyConfig:
    """What a server runs; how it seats bots is its `Seating`, given beside this."""

    game: str
    engine_config: dict[str, Any]
    settings: TickSettings = field(default_factory=TickSettings)
    host: str = "127.0.0.1"
    port: int = 7777
    matches: int | None = None
    seed: int = 0
    hello_timeout: float = 10.0
    #: Bytes of unsent frames kept per client before it is dropped as a slow reader.
    max_backlog: int = DEFAULT_MAX_BACKLOG
    #: The kernel's send buffer per client (SO_SNDBUF), or None for the system default.
    send_buffer: int | None = None
    #: Makes the replay writer of a match: (match number, engine, seat names, seed) -> writer.
    recorder: RecorderFactory | None = None
    on_result: Callable[[MatchOutcome], None] | None = None
    on_tick: Callable[[Engine], None] | None = None
    #: Called once per match as it ends, with its outcome or None (cut short, or an internal error):
    #: a worker process tells its front this way (`workers`).
    on_finished: Callable[[int, MatchOutcome | None], None] | None = None
    #: Listen on host:port. A worker process does not: its connections are handed to it (`adopt`).
    listen: bool = True
    #: Asked at each match's end why a seat's connection went (`match.ExplainGone`; the launcher's
    #: lobby plays one match, so a seat index names one bot).
    explain_gone: ExplainGone | None = None
    #: Serve TLS with this context (`server.tls.server_context`), or plain TCP when None.
    tls: ssl.SSLContext | None = None
    #: Step the fixed-rate matches of a phase slot together where the game offers batches (Rezzo);
    #: a lobby of one match never does.
    batch: bool = True
    #: Connections open at once from one client address, counted from accept (None: no cap).
    max_connections_per_address: int | None = None
    #: Of those, spectators (None: no cap of their own).
    max_spectators_per_address: int | None = None
    #: Peers whose connections start with a PROXY header naming the client (`trusted_proxies`).
    trusted_proxies: TrustedProxies = field(default_factory=TrustedProxies)
    #: The match's first engine and its scripted seats instead of a fresh engine (`replay fork`).
    start: MatchStart | None = None


class Lobby(MatchHost):
    """Accepts bots and spectators and runs matches until ``matches`` have finished (or forever).

    ``seating`` decides where bots wait and which play together (default: first come, first seated).
    """

    #: Whether this process plays the matches it starts (a front that hands them to worker processes
    #: does not, and needs no tick driver).
    plays_matches = True

    def __init__(self, config: LobbyConfig, seating: Seating | None = None) -> None:
        self.config = config
        self.engine_class = get_engine(config.game)
        # Build one engine up front so a bad config fails before anyone connects.
        engine = self.engine_class.new(config.engine_config, config.seed)
        self.players = engine.players
        self.seating = seating if seating is not None else FirstComeSeating()
        self.seating.bind(self)
        self.port: int | None = None
        #: Every match's outcome; a server without a match limit keeps only the latest (it runs for months).
        self.outcomes: collections.deque[MatchOutcome] = collections.deque(
            maxlen=None if config.matches is not None else KEEP_OUTCOMES
        )
        self.stopping = False
        #: Every new connection up to its hello, and the per-address counts (`handshake`).
        self.handshakes = Handshakes(config, self.seating, self._greeted)
        self._accept_errors = AcceptErrors()
        # Spectators waiting for the next match.
        self._spectators = WaitingRoom(state=protocol.State.WATCHING_SOON)
        self._running: dict[Match, trio.CancelScope] = {}
        self._started = 0
        self._all_done = trio.Event()
        #: Every open connection, for its readiness and so that a shutdown can tell each one.
        self._poller: Poller[Connection] | None = None
        self._nursery: trio.Nursery | None = None
        # Runs every fixed-rate match's ticks from one task.
        self._driver = None
        if not config.settings.fast and self.plays_matches:
            # A lobby of one match (`cellarena match`, a hosted ladder match) has nothing to batch it
            # with, and need not load the batch's compiled kernels.
            batch = config.batch and (config.matches is None or config.matches > 1)
            self._driver = FixedRateDriver(config.settings.tick_rate, batch=batch)
            if batch:
                warm_up_batches(engine)

    @property
    def driver(self) -> FixedRateDriver | None:
        """What paces the fixed-rate matches (None in fast mode): its batch counts, for benchmarks."""
        return self._driver

    @property
    def settings(self) -> TickSettings:
        return self.config.settings

    @property
    def matches_started(self) -> int:
        return self._started

    def connections_from(self, host: str) -> int:
        """Open connections from client address ``host``, hello or not (what the per-address cap counts)."""
        return self.handshakes.connections_from(host)

    @property
    def running(self) -> list[Match]:
        """The matches under way, oldest first."""
        return list(self._running)

    def running_names(self) -> list[tuple[int, list[str]]]:
        """The matches under way, oldest first, as (number, seat names): what the live view lists."""
        return [(m.number, [seat.name for seat in m.seats]) for m in self._running]

    def worker_pids(self) -> list[int]:
        """None: this lobby plays its matches itself."""
        return []

    # ----------------------------------------------------------------- serving
    async def serve(
        self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
    ) -> list[MatchOutcome]:
        """Listen, report the bound port through ``task_status``, and return every match's outcome.
        Without `LobbyConfig.listen`, reports port 0 and serves only the connections it is handed."""
        if not self.config.listen:
            await self._run(None, task_status)
            return list(self.outcomes)
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
        raise_file_limit()
        self.port = listener.getsockname()[1]
        try:
            await self._run(listener, task_status)
        finally:
            with contextlib.suppress(RuntimeError):
                trio.lowlevel.notify_closing(listener)
            listener.close()
        return list(self.outcomes)

    async def _run(self, listener: socket.socket | None, task_status: trio.TaskStatus[int]) -> None:
        """Serve until every match is done: the poller, the driver, the seating and, given a
        ``listener``, the connections it accepts; reports the port (0 without a listener)."""
        self._poller = self.handshakes.poller = Poller[Connection]()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            await nursery.start(self._poller.serve)
            if self._driver is not None:
                await nursery.start(self._driver.serve)
            if listener is not None:
                nursery.start_soon(
                    accept_connections, listener, nursery, self.handshakes.accepted, self._accept_errors
                )
            nursery.start_soon(self.seating.run)
            task_status.started(0 if listener is None else listener.getsockname()[1])
            await self._all_done.wait()
            nursery.cancel_scope.cancel()

    def adopt(
        self, sock: socket.socket, *, peer: tuple[str, int] | None = None, via: str | None = None
    ) -> Connection | None:
        """A connection another process accepted (and handed over a Unix socket), served here from
        now on as if accepted here; None if it was lost meanwhile (`workers`)."""
        return self.handshakes.connect(sock, peer=peer, via=via)

    def accept_handed(self, sock: socket.socket) -> Connection | None:
        """This server's end of a loopback connection it made for a bot it starts, whose other end the
        bot is handed (it may have no network of its own): served as if accepted here, its hello
        awaited as any connection's, never TLS (it does not leave this machine). None if the lobby is
        not serving or the connection was lost."""
        if self._nursery is None:
            sock.close()
            return None
        conn = self.handshakes.connect(sock, plain=True)
        if conn is not None:
            self._nursery.start_soon(self.handshakes.greeting(conn))
        return conn

    async def shutdown(self, grace: float = 2.0) -> int:
        """Stop serving: running matches end now, without a result (they are nobody's fault, so no
        seat forfeits), and every client is told `shutdown`. Waits up to ``grace`` seconds for those
        frames to leave, then makes `serve` return. Returns how many matches were cut short.
        """
        self.stopping = True
        cut = len(self._running)
        playing: set[Connection] = set()
        for match, scope in list(self._running.items()):
            log.warning("match %d ends without a result: the server is stopping", match.number)
            scope.cancel()
            playing.update(match.connections())
        poller = self._poller
        if poller is not None:
            for conn in poller.targets:
                why = "; your match ends without a result" if conn in playing else ""
                conn.fail(protocol.SHUTDOWN, "the server is stopping" + why)
            with trio.move_on_after(grace):
                await poller.wait_empty()
        self._all_done.set()
        return cut

    # ----------------------------------------------------------------- greeted
    def _greeted(self, conn: Connection, hello: dict[str, Any]) -> None:
        """A connection whose hello the handshake accepted: route the spectator, or seat the bot."""
        if hello.get("role", "bot") == "spectator":
            if self.seating.spectate(conn, hello):
                return
            self.watch(conn, hello.get("match"))
            return
        if self.stopping:
            conn.fail(protocol.SHUTDOWN, "the server is stopping")
        elif self._limit_reached() and not self.seating.returning(hello):
            conn.fail(protocol.SHUTDOWN, "this server has started all the matches it will play")
        else:
            self.seating.admit(conn, hello)

    def watch(self, conn: Connection, wanted: int | None) -> None:
        """Give spectator ``conn`` match ``wanted`` (None: the newest), or the next match if none runs.

        A match that is ending counts as over: its spectators are being told the end, and one
        given it now would wait for good (a live page that never drew a frame, seen under load)."""
        playing = [m for m in self._running if not m.closing]
        if wanted is not None:
            chosen = next((m for m in playing if m.number == wanted), None)
            if chosen is None:
                running = ", ".join(str(m.number) for m in playing) or "none"
                conn.fail(
                    protocol.BAD_HELLO,
                    f"no match {wanted} is running here (running: {running}); leave 'match' out to "
                    "watch the newest",
                )
            else:
                chosen.add_spectator(conn)
        elif playing:
            playing[-1].add_spectator(conn)
        else:
            self._wait_to_watch(conn)

    def _wait_to_watch(self, conn: Connection) -> None:
        """Keep spectator ``conn`` for the next match to start (no match is under way)."""
        self._spectators.add(conn)
        log.info("%s (%s) is waiting to watch the next match", conn.name, conn.peer)

    # ----------------------------------------------------------------- matches
    def _limit_reached(self) -> bool:
        return self.config.matches is not None and self._started >= self.config.matches

    def _next_match(
        self, conns: Seats, names: list[str] | None, options: MatchOptions
    ) -> tuple[int, int, list[str]]:
        """The next match's number (unless another process numbers them), its seed (default: the
        config's plus the number less one) and its seats' names (default: what each bot said)."""
        self._started += 1
        number = options.get("number")
        if number is None:
            number = self._started
        seed = options.get("seed")
        if seed is None:
            seed = self.config.seed + number - 1
        if names is None:
            names = [c.name if c is not None else f"seat{i}" for i, c in enumerate(conns)]
        return number, seed, names

    def start_match(
        self, conns: Seats, names: list[str] | None = None, **options: Unpack[MatchOptions]
    ) -> Match | None:
        """Start a match with ``conns`` in seat order (None: a seat whose bot never came, which
        forfeits), named ``names`` in results (default: what each bot said), as ``options`` say
        (`MatchOptions`); the match, or None if it could not start (its seats are told `internal`)."""
        assert self._nursery is not None
        number, seed, names = self._next_match(conns, names, options)
        engine_config, explain_gone = options.get("engine_config"), options.get("explain_gone")
        try:
            start = self.config.start
            if start is not None:
                engine = start.engine()
            else:
                engine = self.engine_class.new(
                    self.config.engine_config if engine_config is None else engine_config, seed
                )
            match = Match(
                number,
                engine,
                list(zip(names, conns, strict=True)),
                self.config.settings,
                recorder=self._recorder(options.get("recorder"), number, engine, names, seed),
                on_tick=self.config.on_tick,
                explain_gone=self.config.explain_gone if explain_gone is None else explain_gone,
                scripted=None if start is None else start.scripted,
            )
        except Exception:  # a bug must cost this match, not the server or the bots waiting for others
            log.exception("match %d could not start", number)
            for conn in conns:
                if conn is not None:
                    conn.fail(protocol.INTERNAL, "the server could not start this match (an internal error)")
            if self.config.on_finished is not None:
                self.config.on_finished(number, None)
            if self._limit_reached() and not self._running:
                self._all_done.set()
            return None
        for spectator in self._spectators.take():
            match.add_spectator(spectator)
        self._running[match] = trio.CancelScope()
        about = ", ".join(f"{key} {value}" for key, value in (options.get("meta") or {}).items())
        log.info("match %d starts: %s%s", number, ", ".join(names), f" ({about})" if about else "")
        self._nursery.start_soon(self._run_match, match)
        return match

    def _recorder(
        self, given: RecorderFactory | None, number: int, engine: Engine, names: list[str], seed: int
    ) -> Recorder | None:
        """The match's replay writer, from ``given`` or the config's maker; without one if it cannot
        be made (the match is what counts)."""
        make = given if given is not None else self.config.recorder
        if make is None:
            return None
        try:
            return make(number, engine, names, seed)
        except OSError as exc:
            log.error("match %d: cannot write its replay (%s); it is played unrecorded", number, exc)
            return None

    async def _run_match(self, match: Match) -> None:
        outcome = None
        try:
            with self._running[match]:
                match.open()
                if self._driver is not None:
                    await self._driver.play(match)
                else:
                    await play_fast(match)
                outcome = await match.close()
        except Exception:
            # A bug in one match must not stop the others; it is logged loudly and has no result.
            log.exception("match %d failed with an internal error", match.number)
            outcome = None
        finally:
            del self._running[match]
        if outcome is not None:
            self.outcomes.append(outcome)
            if self.config.on_result is not None:
                self.config.on_result(outcome)
        if self.config.on_finished is not None:
            self.config.on_finished(match.number, outcome)
        if self._limit_reached() and not self._running:
            self._all_done.set()
