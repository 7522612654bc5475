"""Matches in worker processes: `cellarena serve --workers N` plays its matches on N cores.

Bots of one match must meet in one process, so listeners sharing the port (SO_REUSEPORT) do not fit:
the kernel spreads connections by a hash of their addresses, not by match. Redirecting bots to a
worker's own port (the protocol's ``redirect``, as a ladder's cluster does) would cost every bot a
second connection and lose the bots that do not follow redirects. So the front, this process, keeps
the one listening port: it accepts every connection, reads its hello and seats the bots as one
process would (first come, first seated), and when a match is made it hands each seat's socket to a
worker over a Unix socket (SCM_RIGHTS), with the bytes read past the hello, before anything has been
sent to the bot. The bot sees one TCP connection throughout. Spectators are handed the same way to
the worker that plays the match they watch. A TLS session cannot move between processes, so
`WorkerLobby` refuses TLS: a TLS-terminating proxy in front of the port serves that case.

`WorkerPool` is the service, with one lifecycle: `run` starts N worker processes
(``python -m cellarena.server.workers.process``), `hand_match` and `hand_spectator` give them work, each
worker is watched (one that dies costs only its matches: each is reported as ended without a
result, and a new worker takes its place), and `stop` ends them all; whatever way `run` ends, no
worker outlives it. The messages between the front and a worker are pickled (the socket pair is
private to the two processes) over SOCK_SEQPACKET, so each message arrives whole with its
descriptors. `WorkerLobby` is `serve`'s lobby over the pool; any lobby that makes its matches in
one place and can let them be played elsewhere (a ladder's queue) can hand them to a pool the same
way.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import logging
import pickle
import signal
import socket
import subprocess
import sys
from collections import deque
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Unpack

import trio

from cellarena.sdk import protocol
from cellarena.server.net.connection import Connection
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import Match, MatchOutcome, RecorderFactory
from cellarena.server.play.seating import MatchOptions, Seating, Seats

log = logging.getLogger("cellarena.server")

#: The largest message between a front and a worker (an engine config with a big map's text fits).
MAX_MESSAGE = 1 << 20
#: Descriptors in one message: the kernel's own cap (SCM_MAX_FD) is 253.
MAX_FDS = 253
#: Seconds a worker has to import, load its compiled kernels and say it is ready.
START_TIMEOUT = 120.0
#: Seconds a worker has, after being told to stop, before it is killed.
STOP_TIMEOUT = 10.0
#: The wait before starting a worker again after one failed to start, doubled up to the longest.
RESTART_BACKOFF_FIRST = 0.5
RESTART_BACKOFF_MAX = 30.0


def worker_count(value: str) -> int:
    """``--workers``' value: a whole number from 1, or ``auto`` (the cores this process may use);
    ValueError saying what is allowed."""
    if value.strip().lower() == "auto":
        import os

        return max(
            1, len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
        )
    try:
        count = int(value)
    except ValueError:
        raise ValueError(
            f"{value!r} is not a number of worker processes: give a whole number from 1, or auto"
        ) from None
    if count < 1:
        raise ValueError(f"{count} worker processes cannot play a match: give a whole number from 1, or auto")
    return count


class Channel:
    """One end of a SOCK_SEQPACKET socket pair: pickled messages, each with the sockets it hands over.

    `post` never blocks (the front posts from the poller's callbacks): messages wait in an outbox
    that `send_all`, a task, hands to the kernel when the socket has room. A socket handed over is
    closed here once its message is sent; the other process holds it from then on.
    """

    def __init__(self, sock: socket.socket) -> None:
        sock.setblocking(False)
        for option in (socket.SO_SNDBUF, socket.SO_RCVBUF):
            with contextlib.suppress(OSError):
                sock.setsockopt(socket.SOL_SOCKET, option, 2 * MAX_MESSAGE)
        self.sock = sock
        self._outbox: deque[tuple[bytes, list[socket.socket]]] = deque()
        self._more = trio.Event()
        self._sent = trio.Event()
        self.gone = False

    def post(self, message: Mapping[str, Any], socks: Sequence[socket.socket] = ()) -> None:
        """Queue ``message`` and the sockets it hands over; sent in order by `send_all`."""
        if self.gone:
            _close_all(socks)
            return
        self._outbox.append((pickle.dumps(dict(message), protocol=pickle.HIGHEST_PROTOCOL), list(socks)))
        self._more.set()

    async def send_all(self) -> None:
        """Send what is posted, until cancelled or the peer is gone (then the rest is dropped)."""
        while True:
            while self._outbox:
                data, socks = self._outbox[0]
                try:
                    if socks:
                        socket.send_fds(self.sock, [data], [s.fileno() for s in socks])
                    else:
                        self.sock.send(data)
                except (BlockingIOError, InterruptedError):
                    await trio.lowlevel.wait_writable(self.sock)
                    continue
                except OSError as exc:
                    if exc.errno == errno.EMSGSIZE:  # one message too big: it alone is lost
                        log.error(
                            "a message of %d bytes to a worker process is over what this system's socket "
                            "buffers take (sysctl net.core.wmem_max); it is lost, with its connections",
                            len(data),
                        )
                        self._outbox.popleft()
                        _close_all(socks, told=_UNDELIVERED)
                        continue
                    self._drop()
                    return
                self._outbox.popleft()
                _close_all(socks)
            self._sent.set()
            self._more = trio.Event()
            await self._more.wait()

    async def flush(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for the outbox to empty."""
        with trio.move_on_after(timeout):
            while self._outbox and not self.gone:
                self._sent = trio.Event()
                await self._sent.wait()

    def _drop(self) -> None:
        self.gone = True
        while self._outbox:
            _close_all(self._outbox.popleft()[1], told=_UNDELIVERED)

    async def receive(self) -> tuple[dict[str, Any], list[socket.socket]] | None:
        """The next message and the sockets it carries; None once the peer is gone."""
        while True:
            try:
                data, fds, flags, _ = socket.recv_fds(self.sock, MAX_MESSAGE, MAX_FDS)
            except (BlockingIOError, InterruptedError):
                await trio.lowlevel.wait_readable(self.sock)
                continue
            except OSError:
                self.gone = True
                return None
            socks = [socket.socket(fileno=fd) for fd in fds]
            if not data:
                _close_all(socks)
                self.gone = True
                return None
            if flags & (socket.MSG_TRUNC | socket.MSG_CTRUNC):
                log.error("a message from another process was cut short; it is dropped")
                _close_all(socks)
                continue
            return pickle.loads(data), socks

    def close(self) -> None:
        self._drop()
        with contextlib.suppress(RuntimeError):
            trio.lowlevel.notify_closing(self.sock)
        self.sock.close()


#: What a client whose socket never reached its worker (the worker died first) is told, if it can be.
_UNDELIVERED = protocol.encode(
    protocol.error(
        protocol.INTERNAL,
        "the server process that was to serve this connection is gone; connect again in a few seconds",
    )
)


def _close_all(socks: Sequence[socket.socket], *, told: bytes = b"") -> None:
    """Close ``socks``, having tried to send ``told`` on each first (never waiting)."""
    for sock in socks:
        if told:
            with contextlib.suppress(OSError):
                sock.setblocking(False)
                sock.send(told)
        with contextlib.suppress(OSError):
            sock.close()


def handed(conn: Connection, leftover: bytes) -> dict[str, Any]:
    """What a worker needs to serve ``conn`` as the front did: who it is, and the bytes read past its
    hello (`Connection.release`)."""
    peer: tuple[str, int] | None = None
    host, _, port = conn.peer.rpartition(":")
    if host and port.isdigit():
        peer = (host, int(port))
    return {"peer": peer, "via": conn.via, "name": conn.name, "joined": conn.joined, "leftover": leftover}


@dataclass
class Worker:
    """One worker process as the front sees it: its channel and the matches it plays."""

    index: int
    process: trio.Process
    channel: Channel
    #: Match number -> seat names, for every match handed to it and not yet ended.
    matches: dict[int, list[str]] = field(default_factory=dict)
    pid: int = 0
    ready: bool = False

    def describe_exit(self) -> str:
        code = self.process.returncode
        if code is None:
            return "stopped answering"
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"was killed by signal {signal.Signals(-code).name}"
            return f"was killed by signal {-code}"
        return f"exited with status {code}"


class WorkerStartError(RuntimeError):
    """A worker process did not start (its own error is on the terminal, above)."""


class WorkerPool:
    """N worker processes that play the matches a front makes (see the module's docstring).

    ``config`` is what each worker's lobby runs (its callbacks, TLS and match limit are dropped: the
    front keeps those; its replay writer maker must pickle, as `replay.ReplayFolder` does).
    ``on_finished(number, outcome)`` is called once per match handed, as it ends: with its outcome,
    or None when it ended without one (cut short by a stop, an internal error, or its worker died).
    """

    def __init__(
        self,
        config: LobbyConfig,
        count: int,
        *,
        on_finished: Callable[[int, MatchOutcome | None], None],
    ) -> None:
        if count < 1:
            raise ValueError(f"a worker pool needs at least one worker, not {count}")
        self.worker_config = dataclasses.replace(
            config,
            # A server of one match batches nothing (`Lobby`); its workers, told no match limit, would.
            batch=config.batch and (config.matches is None or config.matches > 1),
            on_result=None,
            on_tick=None,
            on_finished=None,
            tls=None,
            matches=None,
            listen=False,
            port=0,
        )
        try:
            pickle.dumps(self.worker_config)
        except Exception as exc:
            raise ValueError(f"this server's config cannot go to a worker process: {exc}") from None
        self.count = count
        #: The workers log at this process's level for the server's logger (`serve -v`: every
        #: connection; a benchmark: errors only).
        self.log_level = log.getEffectiveLevel()
        self.on_finished = on_finished
        self.workers: list[Worker | None] = [None] * count
        self._where: dict[int, Worker] = {}
        self._stopping = False
        self._exited = [trio.Event() for _ in range(count)]
        self._stop_requested = trio.Event()
        self._start_errors: list[str] = []

    # ----------------------------------------------------------------- the service
    async def run(self, *, task_status: trio.TaskStatus[list[int]] = trio.TASK_STATUS_IGNORED) -> None:
        """Start every worker, report their pids through ``task_status`` once all are ready, then keep
        them (a dead one is reported and started again) until `stop` or cancellation. No worker
        outlives this call: those still running on the way out are killed."""
        ready = trio.Semaphore(0)
        async with trio.open_nursery() as nursery:
            for index in range(self.count):
                nursery.start_soon(self._slot, index, ready)
            with trio.fail_after(START_TIMEOUT + 5):
                for _ in range(self.count):
                    await ready.acquire()
            if self._start_errors:  # one error, however many failed (the others are stopped)
                raise WorkerStartError("; ".join(self._start_errors))
            task_status.started(self.pids)

    @property
    def pids(self) -> list[int]:
        """The worker processes' pids, in worker order (0 for one being started again)."""
        return [w.pid if w is not None else 0 for w in self.workers]

    async def _slot(self, index: int, ready: trio.Semaphore) -> None:
        """Worker ``index``: started, served until it ends, and started again unless stopping."""
        first = True
        backoff = RESTART_BACKOFF_FIRST
        while not self._stopping:
            try:
                await self._serve_one(index, ready if first else None)
            except WorkerStartError as exc:
                if first:
                    self._start_errors.append(str(exc))
                    ready.release()
                    break
                log.error("%s; trying again in %.1f s", exc, backoff)
                with trio.move_on_after(backoff):
                    await self._stop_requested.wait()
                backoff = min(RESTART_BACKOFF_MAX, backoff * 2)
                continue
            first = False
            backoff = RESTART_BACKOFF_FIRST
        self._exited[index].set()

    async def _serve_one(self, index: int, ready: trio.Semaphore | None) -> None:
        front, back = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        try:
            process = await trio.lowlevel.open_process(
                [sys.executable, "-m", "cellarena.server.workers.process", str(back.fileno())],
                pass_fds=(back.fileno(),),
                stdin=subprocess.DEVNULL,
            )
        except OSError:
            front.close()
            raise
        finally:
            back.close()
        worker = Worker(index, process, Channel(front))
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(worker.channel.send_all)
                worker.channel.post(
                    {
                        "kind": "config",
                        "config": self.worker_config,
                        "index": index,
                        "log_level": self.log_level,
                    }
                )
                first, failed = None, ""
                with trio.move_on_after(START_TIMEOUT):
                    first = await worker.channel.receive()
                if first is None or first[0].get("kind") != "ready":
                    with trio.move_on_after(5):
                        await process.wait()
                    failed = f"worker {index} (pid {process.pid}) did not start: it {worker.describe_exit()}"
                    nursery.cancel_scope.cancel()
                else:
                    await self._serve_ready(worker, first[0]["pid"], ready)
                    nursery.cancel_scope.cancel()
            if failed:  # raised here, not in the nursery, so that it is not wrapped in a group
                raise WorkerStartError(failed)
        finally:
            self.workers[index] = None
            # Its end of the pair closed: it is exiting (or dead), and may finish. Otherwise this is
            # cancellation (a second signal) or an error here: it is killed at once.
            exiting = worker.channel.gone
            worker.channel.close()
            with trio.CancelScope(shield=True):
                if exiting:
                    with trio.move_on_after(STOP_TIMEOUT):
                        await process.wait()
                if process.returncode is None:
                    process.kill()
                    await process.wait()
        if worker.ready:
            self._lost(worker)

    async def _serve_ready(self, worker: Worker, pid: int, ready: trio.Semaphore | None) -> None:
        """A worker that said it is ready: hear it until it ends."""
        worker.pid, worker.ready = pid, True
        self.workers[worker.index] = worker
        if ready is None:
            log.warning("worker %d started again (pid %d)", worker.index, pid)
        else:
            log.info("worker %d started (pid %d)", worker.index, pid)
            ready.release()
        if self._stopping:  # told to stop while it started
            worker.channel.post({"kind": "stop", "grace": 0.0})
        while (got := await worker.channel.receive()) is not None:
            self._heard(worker, *got)

    def _heard(self, worker: Worker, message: dict[str, Any], socks: list[socket.socket]) -> None:
        _close_all(socks)  # a worker hands nothing back
        kind = message.get("kind")
        if kind == "finished":
            number = message["number"]
            worker.matches.pop(number, None)
            self._where.pop(number, None)
            self._report(number, message["outcome"])

    def _lost(self, worker: Worker) -> None:
        """``worker`` ended: each match it still held ends without a result, reported here."""
        lost = dict(worker.matches)
        worker.matches.clear()
        if self._stopping and not lost:
            return
        log_at = log.info if self._stopping else log.error
        log_at(
            "worker %d (pid %d) %s; %d match(es) it played end without a result%s",
            worker.index,
            worker.pid,
            worker.describe_exit(),
            len(lost),
            "" if self._stopping else "; starting it again",
        )
        for number, names in sorted(lost.items()):
            self._where.pop(number, None)
            log_at(
                "match %d (%s) ends without a result: its worker %d ended",
                number,
                ", ".join(names),
                worker.index,
            )
            self._report(number, None)

    def _report(self, number: int, outcome: MatchOutcome | None) -> None:
        try:
            self.on_finished(number, outcome)
        except Exception:  # a bug in reporting one match must not cost a worker its other matches
            log.exception("match %d: its end could not be reported", number)

    async def stop(self, grace: float = 2.0) -> int:
        """Tell every worker to stop (its matches end without a result, its clients are told
        `shutdown`), and wait for them to exit; one still running after `STOP_TIMEOUT` is killed.
        Returns how many matches were cut short."""
        if self._stopping:
            return 0
        self._stopping = True
        self._stop_requested.set()
        cut = len(self._where)
        for worker in self.workers:
            if worker is not None:
                worker.channel.post({"kind": "stop", "grace": grace})
        with trio.move_on_after(grace + STOP_TIMEOUT):
            for exited in self._exited:
                await exited.wait()
        for worker in self.workers:
            if worker is not None and worker.process.returncode is None:
                log.warning("worker %d (pid %d) did not stop in time; killing it", worker.index, worker.pid)
                worker.process.kill()
        for exited in self._exited:
            await exited.wait()
        return cut

    # ----------------------------------------------------------------- work
    def _least_busy(self) -> Worker | None:
        live = [w for w in self.workers if w is not None and w.ready and not w.channel.gone]
        return min(live, key=lambda w: (len(w.matches), w.index), default=None)

    def hand_match(
        self,
        number: int,
        seed: int,
        conns: Sequence[Connection | None],
        names: list[str],
        *,
        engine_config: dict[str, Any] | None = None,
        recorder: RecorderFactory | None = None,
        meta: Mapping[str, Any] | None = None,
    ) -> int | None:
        """Hand match ``number`` (its seats' connections, None for a seat nobody took) to the least
        busy worker; that worker's index, or None if no worker is up (the connections stay here)."""
        worker = self._least_busy()
        if worker is None or self._stopping:
            return None
        seats: list[dict[str, Any] | None] = []
        socks: list[socket.socket] = []
        for conn in conns:
            try:
                if conn is None:
                    raise ValueError
                sock, leftover = conn.release()
            except ValueError:  # gone since it was seated: its seat forfeits, as it would here
                seats.append(None)
                continue
            seats.append(handed(conn, leftover))
            socks.append(sock)
        worker.channel.post(
            {
                "kind": "match",
                "number": number,
                "seed": seed,
                "names": names,
                "seats": seats,
                "engine_config": engine_config,
                "recorder": recorder,
                "meta": dict(meta) if meta else None,
            },
            socks,
        )
        worker.matches[number] = list(names)
        self._where[number] = worker
        return worker.index

    def hand_spectator(self, conn: Connection, number: int | None) -> bool:
        """Hand spectator ``conn`` to the worker of match ``number`` (None: the newest match); False
        if no such match is under way (the connection stays here)."""
        chosen = max(self._where, default=None) if number is None else number
        worker = self._where.get(chosen) if chosen is not None else None
        if worker is None or worker.channel.gone:
            return False
        try:
            sock, leftover = conn.release()
        except ValueError:
            return True  # closed meanwhile: nobody to hand
        message = {
            "kind": "watch",
            "number": chosen,
            "asked": number is not None,
            "conn": handed(conn, leftover),
        }
        worker.channel.post(message, [sock])
        return True

    def running_names(self) -> list[tuple[int, list[str]]]:
        """The matches under way in every worker, oldest first, as (number, seat names)."""
        return sorted((n, names) for w in self.workers if w is not None for n, names in w.matches.items())


class WorkerLobby(Lobby):
    """A lobby that accepts, checks hellos and seats bots here, and hands every match it starts to a
    `WorkerPool` of ``workers`` processes (see the module's docstring). Results come back to
    ``config.on_result`` here, as from a lobby that plays its matches itself."""

    plays_matches = False

    def __init__(self, config: LobbyConfig, workers: int, *, seating: Seating | None = None) -> None:
        if config.tls is not None:
            raise ValueError(
                "a TLS session cannot move to a worker process: serve TLS with one worker, or run "
                "the workers behind a proxy that ends TLS"
            )
        super().__init__(config, seating)
        self.pool = WorkerPool(config, workers, on_finished=self._finished)
        self._worker_pids: list[int] = []

    async def serve(
        self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED
    ) -> list[MatchOutcome]:
        """Start the workers, then listen and seat as `Lobby.serve` does; the workers stop with it."""
        async with trio.open_nursery() as nursery:
            self._worker_pids = await nursery.start(self.pool.run)
            outcomes = await super().serve(task_status=task_status)
            await self.pool.stop()
            nursery.cancel_scope.cancel()
        return outcomes

    @property
    def running(self) -> list[Match]:
        """No match runs in this process (see `running_names`)."""
        return []

    def running_names(self) -> list[tuple[int, list[str]]]:
        return self.pool.running_names()

    def worker_pids(self) -> list[int]:
        """The worker processes' pids as they started (empty before `serve` has started them)."""
        return list(self._worker_pids)

    def start_match(
        self, conns: Seats, names: list[str] | None = None, **options: Unpack[MatchOptions]
    ) -> Match | None:
        """Hand the match to a worker (see `Lobby.start_match` for the arguments); None always, as
        the match is not in this process. ``explain_gone`` is not asked: the match ends in the
        worker, which cannot call back here, so a gone seat stays ``disconnected``."""
        number, seed, names = self._next_match(conns, names, options)
        meta = options.get("meta")
        index = self.pool.hand_match(
            number,
            seed,
            conns,
            names,
            engine_config=options.get("engine_config"),
            recorder=options.get("recorder"),
            meta=meta,
        )
        if index is None:
            log.error("match %d could not start: no worker process is up", number)
            for conn in conns:
                if conn is not None:
                    conn.fail(
                        protocol.INTERNAL,
                        "the server could not start this match (its worker processes are starting again); "
                        "connect again in a few seconds",
                    )
            self._check_done()
            return None
        about = ", ".join(f"{key} {value}" for key, value in (meta or {}).items())
        log.info(
            "match %d starts in worker %d: %s%s",
            number,
            index,
            ", ".join(names),
            f" ({about})" if about else "",
        )
        for spectator in self._spectators.take():
            if not self.pool.hand_spectator(spectator, number):
                self._spectators.add(spectator)
        return None

    def watch(self, conn: Connection, wanted: int | None) -> None:
        if self.pool.hand_spectator(conn, wanted):
            return
        if wanted is not None:
            running = ", ".join(str(n) for n, _ in self.pool.running_names()) or "none"
            conn.fail(
                protocol.BAD_HELLO,
                f"no match {wanted} is running here (running: {running}); "
                "leave 'match' out to watch the newest",
            )
        else:
            self._wait_to_watch(conn)

    def _finished(self, number: int, outcome: MatchOutcome | None) -> None:
        if outcome is not None:
            self.outcomes.append(outcome)
            if self.config.on_result is not None:
                self.config.on_result(outcome)
        if self.config.on_finished is not None:
            self.config.on_finished(number, outcome)
        self._check_done()

    def _check_done(self) -> None:
        if self._limit_reached() and not self.pool.running_names():
            self._all_done.set()

    async def shutdown(self, grace: float = 2.0) -> int:
        """Stop the workers (their matches end without a result, their clients are told), then the
        connections still here, as `Lobby.shutdown` does."""
        self.stopping = True
        cut = await self.pool.stop(grace)
        await super().shutdown(grace)
        return cut
