"""A ladder's local worker process (`ladder serve --workers N`): one lobby that hosts many ladder matches.

The ladder (`worker_pool.LocalWorkers`) starts N of these with ``python -m
cellarena.arena.ladder.hosting.worker_process`` and talks to each over its standard input and
output: length-prefixed pickles of `WorkerSetup` (first), then `HostedMatch` jobs and cancels in;
``ready``, ``reserved`` and ``result`` messages out. Pickle is safe here because both ends are the
same cellarena, one the other's parent, over a pipe no other process holds; nothing from a bot is unpickled.

Unlike a cluster's worker (`cellarena.server.play.hosted.host_match`, one lobby per match), this process
keeps one lobby listening on one port for all its matches: each job reserves seats by the digests of
its seat tokens (`HostedMatches`), the ladder sends the bots a ``redirect`` here, and the match
starts once its bots are in, so the lobby's one poller, one tick driver and its batched slots serve
every match of the process.

The worker stops when its standard input ends: the ladder closed it, or the ladder died (its end of
the pipe closes with it), so a worker never outlives its ladder. It ignores SIGTERM and SIGINT, which
are the ladder's to act on.
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import shutil
import signal
import struct
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from cellarena.arena.ladder.hosting.seat_launch import SeatBots, launches_of
from cellarena.sdk.protocol import BAD_HELLO, SEAT_TAKEN
from cellarena.server.games import causes
from cellarena.server.games.base import Engine
from cellarena.server.net.connection import Connection
from cellarena.server.play.hosted import DEFAULT_CONNECT_TIMEOUT, HostedMatch, HostedResult, token_digest
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import Match, MatchOutcome, Recorder, TickSettings
from cellarena.server.play.seating import Seating, WaitingRoom
from cellarena.server.replay import ReplayWriter
from cellarena.server.scratch_folders import owned_folder

log = logging.getLogger("cellarena.ladder.worker")

#: How often reservations are looked at: bots that did not come in time, matches gone without a result.
CHECK_EVERY = 0.25
#: A message's length prefix: 4 bytes, big-endian.
_LENGTH = struct.Struct(">I")


@dataclass(frozen=True)
class WorkerSetup:
    """What every match of a worker shares: the ladder's game, base config, pacing and listening."""

    game: str
    engine_config: dict[str, Any]
    settings: TickSettings
    #: Where the lobby listens (the ladder's own ``--host``), on a free port.
    bind_host: str
    tls_cert: str | None = None
    tls_key: str | None = None
    max_connections_per_address: int | None = None
    #: None as a rule: the ladder relays its spectators from here, from one address, having counted
    #: them by theirs; a direct one still counts in ``max_connections_per_address``.
    max_spectators_per_address: int | None = None
    #: The worker's number (1..N), in its log lines.
    number: int = 1
    verbose: bool = False
    #: The level of the 'cellarena' logger, when the ladder's is not the default (a benchmark's).
    log_level: int | None = None
    #: Where the worker writes its matches' replays until it sends them (the ladder's, so that the
    #: ladder removes what a killed worker left); None: a temporary folder of its own.
    folder: str | None = None


#: A submitted bot that could not be built or started where its match ran, as its seat's cause says.
LOST_HERE = "it could not be built or started where its match ran; its owner's log of the match says why"


@dataclass
class _Reservation:
    """One hosted match: its seats by token digest until its bots are in, then its match."""

    job: HostedMatch
    deadline: float
    replay: Path
    room: WaitingRoom
    seated: dict[int, Connection] = field(default_factory=dict)
    came: set[int] = field(default_factory=set)
    match: Match | None = None
    #: When its match started (trio's clock), for the job's time limit.
    started: float = 0.0
    #: Seats whose bot this process was to start and could not (`gave_up`).
    lost: set[int] = field(default_factory=set)


class HostedMatches(Seating):
    """Seats bots by their seat token's digest into the match that reserved it; starts a match once
    all its seats are in, or at its connect deadline with those that came (the others forfeit); a
    bot back within the grace takes its seat again, as in `cellarena.server.play.hosted.HostedSeating`.

    ``report(message)`` tells the ladder ``("started", ladder id, match number)`` as a match starts
    (its spectators ask for that number), and ``("result", HostedResult)`` once per job: its outcome
    and replay, or no outcome (nobody came, or the match ended without a result)."""

    def __init__(self, folder: Path, report: Callable[[tuple[Any, ...]], None]) -> None:
        self.folder = folder
        self.report = report
        self.reservations: dict[int, _Reservation] = {}
        #: Seat token digest -> (ladder id, seat). A dict lookup by digest leaks nothing of the token:
        #: finding a digest's neighbours would need SHA-256 preimages.
        self._seats: dict[str, tuple[int, int]] = {}
        self._by_number: dict[int, _Reservation] = {}
        #: Connections this process made for bots it started (`seat_launch`): (ladder id, seat) each.
        self._handed: dict[Connection, tuple[int, int]] = {}
        #: Set as each job ends (its result sent, or cancelled): the bots started for it then stop.
        self.ended: dict[int, trio.Event] = {}

    # ----------------------------------------------------------------- jobs
    def reserve(self, job: HostedMatch) -> None:
        """Hold ``job``'s seats for its bots, for ``job.connect_timeout`` seconds."""
        res = _Reservation(
            job,
            trio.current_time() + job.connect_timeout,
            self.folder / f"ladder-{job.ladder_id}.replay",
            WaitingRoom(on_leave=lambda conn: self._unseat(job.ladder_id, conn)),
        )
        self.reservations[job.ladder_id] = res
        self.ended[job.ladder_id] = trio.Event()
        for seat, digest in enumerate(job.token_digests):
            self._seats[digest] = (job.ladder_id, seat)

    def hand(self, conn: Connection, ladder_id: int, seat: int) -> None:
        """``conn`` was made for the bot this process starts in ``seat`` of match ``ladder_id``: its
        hello, with no token, takes that seat."""
        self._handed[conn] = (ladder_id, seat)

    def gave_up(self, ladder_id: int, seat: int, why: str) -> None:
        """The bot this process was to start in ``seat`` will not come (`why`, logged by the caller):
        its match waits no longer than bots sent by redirect are waited for, and starts without it."""
        res = self.reservations.get(ladder_id)
        if res is not None and res.match is None:
            res.lost.add(seat)
            res.deadline = min(res.deadline, trio.current_time() + DEFAULT_CONNECT_TIMEOUT)

    def cancel(self, ladder_id: int) -> None:
        """The ladder gave the match up: its waiting bots go, and nothing is reported."""
        res = self.reservations.get(ladder_id)
        if res is None:
            return
        self._forget(res)
        for conn in res.room.take():
            conn.close("the ladder gave this match up")
        if res.match is not None:
            for conn in res.match.connections():
                conn.close("the ladder gave this match up")

    def _forget(self, res: _Reservation) -> None:
        self.reservations.pop(res.job.ladder_id, None)
        ended = self.ended.pop(res.job.ladder_id, None)
        if ended is not None:
            ended.set()
        for conn in [c for c, (i, _) in self._handed.items() if i == res.job.ladder_id]:
            del self._handed[conn]
        for digest in res.job.token_digests:
            self._seats.pop(digest, None)
        if res.match is not None:
            self._by_number.pop(res.match.number, None)
        with contextlib.suppress(OSError):
            res.replay.unlink()

    def _finish(self, res: _Reservation, outcome: MatchOutcome | None) -> None:
        data = None
        if outcome is not None:
            # Read in the event loop: a ladder match's replay is small (tens of KiB for a duel).
            with contextlib.suppress(OSError):
                data = res.replay.read_bytes()
        self._forget(res)
        came = tuple(seat in res.came for seat in range(len(res.job.names)))
        self.report(
            ("result", HostedResult(res.job.ladder_id, outcome, came, data, res.job.public_host or "", 0))
        )

    # ----------------------------------------------------------------- the lobby's seating
    def _seat_of(
        self, hello: dict[str, Any], conn: Connection | None = None
    ) -> tuple[_Reservation, int] | None:
        handed = self._handed.get(conn) if conn is not None else None
        if handed is not None:
            res = self.reservations.get(handed[0])
            return None if res is None else (res, handed[1])
        token = hello.get("token")
        if not isinstance(token, str):
            return None
        found = self._seats.get(token_digest(token))
        if found is None:
            return None
        return self.reservations[found[0]], found[1]

    def _in_play(self, res: _Reservation, seat: int) -> bool:
        match = res.match
        return (
            match is not None
            and match in self.lobby.running
            and not match.over
            and match.seats[seat].forfeit_tick is None
        )

    def check(self, conn: Connection, hello: dict[str, Any]) -> tuple[str, str] | None:
        found = self._seat_of(hello, conn)
        if found is None:
            return BAD_HELLO, "this match host seats only the bots its ladder sent here: send their token"
        res, seat = found
        if res.match is not None and not self._in_play(res, seat):
            return SEAT_TAKEN, "that token's seat has forfeited or its match is over"
        return None

    def returning(self, hello: dict[str, Any]) -> bool:
        found = self._seat_of(hello)
        return found is not None and found[0].match is not None

    def admit(self, conn: Connection, hello: dict[str, Any]) -> None:
        found = self._seat_of(hello, conn)
        assert found is not None  # check() let it in
        res, seat = found
        res.came.add(seat)
        conn.name = res.job.names[seat]
        if res.match is not None:
            res.match.reattach(seat, conn)  # which closes the seat's old connection
            return
        old = res.seated.pop(seat, None)
        if old is not None:
            old.close("replaced by the bot's new connection")
        if res.room.add(conn):
            res.seated[seat] = conn
            if len(res.seated) == len(res.job.names):
                self._start(res)

    def _unseat(self, ladder_id: int, conn: Connection) -> None:
        res = self.reservations.get(ladder_id)
        if res is None or res.match is not None:
            return
        for seat, c in list(res.seated.items()):
            if c is conn:
                del res.seated[seat]

    def _start(self, res: _Reservation) -> None:
        job = res.job
        conns = [res.seated.get(i) for i in range(len(job.names))]
        res.room.take()

        def recorder(_number: int, engine: Engine, names: list[str], seed: int) -> Recorder:
            return ReplayWriter(res.replay, engine, seed=seed, names=names, events=True)

        async def explain_gone(seat: int) -> dict[str, Any] | None:
            # The public cause says where it failed, not why: the build's or start's error text is
            # its owner's (its private log has it).
            if seat not in res.lost:
                return None
            return causes.cause(causes.NEVER_CONNECTED, detail=LOST_HERE)

        match = self.lobby.start_match(
            conns,
            list(job.names),
            engine_config=job.engine_config,
            seed=job.seed,
            recorder=recorder,
            meta={"ladder match": job.ladder_id},
            explain_gone=explain_gone,
        )
        if match is None:  # the lobby logged why and told the bots
            self._finish(res, None)
            return
        res.match, res.started = match, trio.current_time()
        self._by_number[match.number] = res
        self.report(("started", job.ladder_id, match.number))

    def on_result(self, outcome: MatchOutcome) -> None:
        """The lobby's ``on_result``: a match ended with a result."""
        res = self._by_number.get(outcome.number)
        if res is not None:
            self._finish(res, outcome)

    async def run(self) -> None:
        """Start the matches whose bots did not all come in time, and report those that ended
        without a result (a bug in the match), every `CHECK_EVERY` seconds."""
        while True:
            await trio.sleep(CHECK_EVERY)
            now = trio.current_time()
            running = set(self.lobby.running)
            for res in list(self.reservations.values()):
                if res.match is None and now >= res.deadline:
                    if res.seated:
                        missing = [i for i in range(len(res.job.names)) if i not in res.seated]
                        log.warning(
                            "ladder match %d: seats %s did not connect within %g s; they forfeit",
                            res.job.ladder_id,
                            missing,
                            res.job.connect_timeout,
                        )
                        self._start(res)
                    else:
                        self._finish(res, None)
                elif res.match is not None and res.match not in running:
                    self._finish(res, None)
                elif res.match is not None and now - res.started > res.job.time_limit:
                    # A bound on a stuck match: it ends here without a result (the ladder voids it);
                    # its seats, their connections closed, forfeit in the lobby unheard.
                    log.error(
                        "ladder match %d outlasted its %g s limit; it ends without a result",
                        res.job.ladder_id,
                        res.job.time_limit,
                    )
                    for conn in res.match.connections():
                        conn.close("the match outlasted its time limit")
                    self._finish(res, None)


# ------------------------------------------------------------------------------------------ pipes
def encode_message(message: object) -> bytes:
    body = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
    return _LENGTH.pack(len(body)) + body


class MessageReader:
    """Length-prefixed pickles from a byte stream."""

    def __init__(self, stream: trio.abc.ReceiveStream) -> None:
        self.stream = stream
        self.buffer = bytearray()

    async def _fill(self, size: int) -> bool:
        while len(self.buffer) < size:
            data = await self.stream.receive_some(1 << 20)
            if not data:
                return False
            self.buffer += data
        return True

    async def receive(self) -> Any:
        """The next message, or None at the end of the stream."""
        if not await self._fill(_LENGTH.size):
            return None
        (size,) = _LENGTH.unpack_from(self.buffer)
        if not await self._fill(_LENGTH.size + size):
            return None
        body = bytes(self.buffer[_LENGTH.size : _LENGTH.size + size])
        del self.buffer[: _LENGTH.size + size]
        return pickle.loads(body)


async def serve_worker(inbox: trio.abc.ReceiveStream, outbox: trio.abc.SendStream) -> None:
    """Read the setup, listen, say ``ready``, then host jobs until ``inbox`` ends."""
    reader = MessageReader(inbox)
    setup = await reader.receive()
    if not isinstance(setup, WorkerSetup):
        raise SystemExit("cellarena ladder worker: the first message must be its setup")
    if setup.log_level is not None:
        logging.getLogger("cellarena").setLevel(setup.log_level)
    tls = None
    if setup.tls_cert is not None:
        from cellarena.server.net.tls import server_context

        tls = server_context(setup.tls_cert, setup.tls_key or setup.tls_cert)
    send, outgoing = trio.open_memory_channel[object](float("inf"))

    with contextlib.ExitStack() as stack:
        if setup.folder is not None:
            stack.callback(_remove, Path(setup.folder))
        folder = setup.folder or stack.enter_context(owned_folder("cellarena-worker-"))
        seating = HostedMatches(Path(folder), send.send_nowait)
        lobby = Lobby(
            LobbyConfig(
                setup.game,
                setup.engine_config,
                setup.settings,
                host=setup.bind_host,
                port=0,
                matches=None,
                on_result=seating.on_result,
                tls=tls,
                max_connections_per_address=setup.max_connections_per_address,
                max_spectators_per_address=setup.max_spectators_per_address,
            ),
            seating,
        )

        bots = SeatBots(lobby, seating.hand, seating.gave_up)

        async def write() -> None:
            async for message in outgoing:
                await outbox.send_all(encode_message(message))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(write)
            port = await nursery.start(lobby.serve)
            send.send_nowait(("ready", os.getpid(), port))
            while True:
                message = await reader.receive()
                if message is None:  # the ladder closed our input, or died
                    break
                kind = message[0]
                if kind == "host":
                    job: HostedMatch = message[1]
                    seating.reserve(job)
                    send.send_nowait(("reserved", job.ladder_id))
                    for seat, launch in launches_of(job):
                        ended = seating.ended[job.ladder_id]
                        nursery.start_soon(bots.play, job.ladder_id, seat, launch, ended)
                elif kind == "cancel":
                    seating.cancel(message[1])
            log.info("ladder worker %d: its ladder closed the pipe; stopping", setup.number)
            with trio.move_on_after(2):
                await lobby.shutdown(1.0)
            nursery.cancel_scope.cancel()


def _remove(folder: Path) -> None:
    """Remove the worker's folder, and the ladder's folder of workers if it is the last (a ladder
    killed with SIGKILL cannot: its workers, which stop then, clean up after it)."""
    shutil.rmtree(folder, ignore_errors=True)
    with contextlib.suppress(OSError):
        folder.parent.rmdir()


def main() -> None:
    """``python -m cellarena.arena.ladder.hosting.worker_process``: the pipes are standard input and
    output. Output is kept for messages alone: anything printed goes to standard error instead."""
    import gc

    from cellarena.server.cli.run import configure_logging

    # The ladder stops its workers, by closing their input: a SIGTERM meant for the whole service
    # (systemd signals every process of the unit) must not kill them before the ladder voids and
    # records what they cut short. A kill -9 of the ladder still ends them, through the pipe.
    signal.signal(signal.SIGTERM, signal.SIG_IGN)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    out_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    configure_logging("-v" in sys.argv[1:])

    async def run() -> None:
        inbox = trio.lowlevel.FdStream(os.dup(0))
        outbox = trio.lowlevel.FdStream(out_fd)
        async with inbox, outbox:
            await serve_worker(inbox, outbox)

    gc.collect()
    gc.freeze()
    trio.run(run)


if __name__ == "__main__":
    # The module's own copy, not __main__'s: the pickles the ladder sends name its classes there.
    from cellarena.arena.ladder.hosting import worker_process

    worker_process.main()
