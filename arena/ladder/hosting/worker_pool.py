"""The ladder's matches played in worker processes on this machine (`cellarena ladder serve --workers N`).

One ladder process plays its matches on one core. With ``--workers N`` (N >= 2) it keeps its queue,
matchmaker, database and pages, and starts N worker processes (`worker_process`),
each a lobby of its own on a free port of the ladder's address. A pairing whose bots all follow
redirects goes to the worker with the fewest matches under way: the worker reserves its seats by
the digests of fresh seat tokens, the starter sends each bot a ``redirect`` there, and the result
and the replay come back over the worker's pipe and are recorded as a match played here is. This
is the cluster's hand-off (`cluster_hand_off.HandOff`) without Dask: `LocalWorkers` is one more `HandsOff`.

The ladder starts, watches, restarts and stops its workers. A worker that dies costs only its
matches: each is void (`HandOffError` to the starter), its bots come back to the queue, and the
worker is started again after a wait that doubles from 0.5 s up to 10 s while it keeps dying. A
worker's standard input is its lifeline: it stops when the ladder closes it, or when the ladder
dies (the pipe closes with it), so no worker outlives its ladder. Workers run in sessions of their
own, so a Ctrl-C at the terminal stops the ladder, which then stops them in order.
"""

from __future__ import annotations

import contextlib
import logging
import math
import os
import shutil
import signal
import ssl
import subprocess
import sys
import tempfile
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path

import trio

from cellarena.arena.ladder.hosting.cluster_hand_off import HandOffError, Hosting
from cellarena.arena.ladder.hosting.seat_launch import connect_timeout
from cellarena.arena.ladder.hosting.worker_process import MessageReader, WorkerSetup, encode_message
from cellarena.sdk import protocol
from cellarena.sdk.protocol import State
from cellarena.server.net.connection import Connection
from cellarena.server.play.hosted import HostedMatch, HostedResult
from cellarena.server.play.seating import WaitingRoom

log = logging.getLogger("cellarena.ladder")

#: The most workers `--workers` takes (a guard against a typo, not a limit of the design).
MAX_WORKERS = 256
#: Seconds a new worker has to say it listens (it imports the engines first).
READY_TIMEOUT = 60.0
#: Seconds a worker has to take a match's reservation.
RESERVE_TIMEOUT = 10.0
#: Seconds a stopping worker has to exit once its input is closed, before it is killed.
STOP_TIMEOUT = 3.0
#: A dead worker is started again after this wait, doubled at each death in a row up to `RESTART_MAX`;
#: a worker that lived `RESTART_RESET` seconds starts the count again.
RESTART_FIRST = 0.5
RESTART_MAX = 10.0
RESTART_RESET = 30.0


def usable_cores() -> int:
    """The cores this process may run on (its affinity mask, else the machine's count)."""
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def parse_workers(text: str) -> int:
    """``--workers``: a whole number from 1 to `MAX_WORKERS`, or ``auto`` (one per usable core);
    ValueError says what is wrong."""
    value = text.strip().lower()
    if value == "auto":
        return usable_cores()
    try:
        count = int(value)
    except ValueError:
        raise ValueError(f"{text!r} is neither a number of worker processes nor 'auto'") from None
    if not 1 <= count <= MAX_WORKERS:
        raise ValueError(
            f"{count} is out of range: give 1 (every match in the ladder's process) to {MAX_WORKERS}, or auto"
        )
    return count


class WorkerStartError(RuntimeError):
    """A worker could not start when the ladder did; the message says why (the ladder does not serve)."""


@dataclass
class _Pending:
    """A match handed to a worker: its reservation, then its result (or why it has none)."""

    reserved: trio.Event = field(default_factory=trio.Event)
    #: Set when its match starts in the worker (``number``: its number there), or ends before that.
    started: trio.Event = field(default_factory=trio.Event)
    done: trio.Event = field(default_factory=trio.Event)
    number: int | None = None
    result: HostedResult | None = None
    failed: str | None = None

    def end(self) -> None:
        self.reserved.set()
        self.started.set()
        self.done.set()


@dataclass
class _Worker:
    number: int
    process: trio.Process | None = None
    pid: int | None = None
    port: int | None = None
    send: trio.MemorySendChannel[object] | None = None
    #: The matches it holds now, by ladder id.
    pending: dict[int, _Pending] = field(default_factory=dict)
    started_at: float = 0.0
    restarts: int = 0

    @property
    def ready(self) -> bool:
        return self.port is not None and self.send is not None


class LocalWorkers:
    """N worker processes on this machine, and the `HandsOff` that plays ladder matches in them (module
    docstring). ``public_host`` is the address the bots are sent to (the ladder's own); ``notify``
    gets a line per worker start and death, for the terminal."""

    def __init__(
        self,
        count: int,
        setup: WorkerSetup,
        *,
        public_host: str,
        connect_timeout: float = 15.0,
        time_limit: float = 3600.0,
        notify: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.count = count
        #: Seconds the bots of a match have to reach their worker (the cluster's 15 s).
        self.connect_timeout = connect_timeout
        #: Seconds after which a match is given up in its worker, whatever happens (a stuck match).
        self.time_limit = time_limit
        self.setup = setup
        self.public_host = public_host
        self.notify = notify
        self.workers = [_Worker(i + 1) for i in range(count)]
        #: Ladder match id -> the worker playing it, while it does.
        self._where: dict[int, _Worker] = {}
        #: Every match handed to a worker until `result` or `cancel` takes it (it may end first).
        self._pending: dict[int, _Pending] = {}
        self._stopping = False
        #: The workers' folders (replays being written), each removed when its worker ends; made by `run`.
        self.folder: Path | None = None

    @property
    def tls(self) -> bool:
        return self.setup.tls_cert is not None

    def pids(self) -> list[int]:
        """The process ids of the workers running now."""
        return [w.pid for w in self.workers if w.pid is not None and w.ready]

    # ----------------------------------------------------------------- the workers' lives
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Start every worker, report started once all listen (`WorkerStartError` if one cannot),
        then keep them running until cancelled, which stops them."""
        self.folder = Path(tempfile.mkdtemp(prefix="cellarena-ladder-workers-"))
        try:
            async with trio.open_nursery() as nursery:
                for worker in self.workers:
                    await nursery.start(self._keep, worker)
                task_status.started()
        finally:
            self._stopping = True
            shutil.rmtree(self.folder, ignore_errors=True)

    async def _keep(
        self, worker: _Worker, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED
    ) -> None:
        """Run ``worker_process``, and start it again whenever it dies, until cancelled."""
        first = True
        wait = RESTART_FIRST
        while True:
            why = await self._life(worker, task_status if first else trio.TASK_STATUS_IGNORED, first=first)
            first = False
            if self._stopping:
                return
            lived = trio.current_time() - worker.started_at
            if lived >= RESTART_RESET:
                wait = RESTART_FIRST
            worker.restarts += 1
            self.notify(f"ladder: worker {worker.number} {why}; starting it again in {wait:g} s")
            await trio.sleep(wait)
            wait = min(RESTART_MAX, wait * 2)

    async def _life(self, worker: _Worker, task_status: trio.TaskStatus[None], *, first: bool) -> str:
        """One worker process, from its start to its end; what ended it. At the ladder's start a
        worker that does not come up is the ladder's error (`WorkerStartError`)."""
        command = [sys.executable, "-m", "cellarena.arena.ladder.hosting.worker_process"]
        if self.setup.verbose:
            command.append("-v")
        try:
            process = await trio.lowlevel.open_process(
                command, stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True
            )
        except OSError as exc:  # no process left to start (EAGAIN, EMFILE): try again later
            why = f"could not be started ({exc})"
            if first:
                raise WorkerStartError(f"worker {worker.number} {why}") from None
            return why
        assert process.stdin is not None and process.stdout is not None
        worker.process, worker.pid, worker.started_at = process, process.pid, trio.current_time()
        assert self.folder is not None  # `run` made it
        folder = self.folder / f"worker-{worker.number}-{process.pid}"  # what it leaves goes with it
        folder.mkdir(parents=True)  # the last worker to stop removes the parent
        send, outgoing = trio.open_memory_channel[object](math.inf)
        reader = MessageReader(process.stdout)
        why = ""
        try:
            async with trio.open_nursery() as nursery:

                async def write() -> None:
                    assert process.stdin is not None
                    try:
                        async for message in outgoing:
                            await process.stdin.send_all(encode_message(message))
                    except (trio.BrokenResourceError, trio.ClosedResourceError):
                        pass  # it died: its reader says so

                nursery.start_soon(write)
                send.send_nowait(replace(self.setup, number=worker.number, folder=str(folder)))
                why = await self._serve(worker, process, reader, send, task_status, first=first)
                nursery.cancel_scope.cancel()
        finally:
            if trio.current_effective_deadline() == -math.inf:  # cancelled: the ladder stops its workers
                self._stopping = True
            worker.port = worker.send = None
            send.close()
            with trio.CancelScope(shield=True):
                await self._stop(process)
            worker.process = None
            shutil.rmtree(folder, ignore_errors=True)
            self._lost(
                worker, f"worker {worker.number} (pid {process.pid}) {why or _status(process.returncode)}"
            )
        return why or _status(process.returncode)

    async def _serve(
        self,
        worker: _Worker,
        process: trio.Process,
        reader: MessageReader,
        send: trio.MemorySendChannel[object],
        task_status: trio.TaskStatus[None],
        *,
        first: bool,
    ) -> str:
        """Wait for the worker to listen, then take its messages until it ends; "" when its output
        ended (`_status` says how it ended), or what else went wrong."""
        hello = None
        try:
            with trio.move_on_after(READY_TIMEOUT):
                hello = await reader.receive()
        except Exception as exc:  # what it printed instead: a start that failed, not the ladder's error
            hello = ("garbled", exc)
        if hello is None or hello[0] != "ready":
            why = f"did not start (pid {process.pid}): see the errors above"
            if first:
                raise WorkerStartError(f"worker {worker.number} {why}")
            return why
        worker.port, worker.send = hello[2], send
        self.notify(
            f"ladder: worker {worker.number} (pid {process.pid}) ready at "
            f"{self.setup.bind_host}:{worker.port}"
        )
        task_status.started()
        try:
            while (message := await reader.receive()) is not None:
                self._received(worker, message)
        except Exception as exc:  # a garbled message costs that worker, not the ladder
            log.exception("ladder: worker %d sent what the ladder cannot read", worker.number)
            return f"sent what the ladder cannot read ({type(exc).__name__}) and was stopped"
        return ""

    async def _stop(self, process: trio.Process) -> None:
        """Close the worker's input (it stops by itself), and kill it if it has not within `STOP_TIMEOUT`."""
        if process.stdin is not None:
            with contextlib.suppress(trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                await process.stdin.aclose()
        with trio.move_on_after(STOP_TIMEOUT):
            await process.wait()
        if process.returncode is None:
            log.warning("ladder worker (pid %d) did not stop within %g s: killed", process.pid, STOP_TIMEOUT)
            process.kill()
            await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()

    def _received(self, worker: _Worker, message: tuple[object, ...]) -> None:
        kind = message[0]
        if kind == "reserved":
            pending = worker.pending.get(int(message[1]))  # type: ignore[call-overload]
            if pending is not None:
                pending.reserved.set()
        elif kind == "started":
            pending = worker.pending.get(int(message[1]))  # type: ignore[call-overload]
            if pending is not None:
                pending.number = int(message[2])  # type: ignore[call-overload]
                pending.started.set()
        elif kind == "result":
            result = message[1]
            assert isinstance(result, HostedResult)
            pending = worker.pending.pop(result.ladder_id, None)
            self._where.pop(result.ladder_id, None)
            if pending is not None:
                pending.result = result
                pending.end()

    def _lost(self, worker: _Worker, why: str) -> None:
        """``worker_process`` ended: every match it held ends without a result."""
        lost = list(worker.pending.items())
        worker.pending.clear()
        for ladder_id, pending in lost:
            self._where.pop(ladder_id, None)
            pending.failed = f"{why} while it hosted the match"
            pending.end()
        if lost and not self._stopping:
            log.error("ladder: %s; its %d match(es) under way are void", why, len(lost))

    # ----------------------------------------------------------------- HandsOff
    async def start(self, match: HostedMatch) -> Hosting:
        """Reserve ``match``'s seats on the worker with the fewest matches under way; where its bots
        go. `HandOffError` if no worker runs or it does not take the match in time."""
        ready = [w for w in self.workers if w.ready]
        if not ready:
            raise HandOffError("no worker process is running now")
        worker = min(ready, key=lambda w: len(w.pending))
        assert worker.send is not None and worker.port is not None
        pending = worker.pending[match.ladder_id] = self._pending[match.ladder_id] = _Pending()
        self._where[match.ladder_id] = worker
        port = worker.port
        wait = connect_timeout(match, self.connect_timeout)  # a bot started there is built first
        job = replace(match, connect_timeout=wait, time_limit=self.time_limit)
        worker.send.send_nowait(("host", job))
        with trio.move_on_after(RESERVE_TIMEOUT):
            await pending.reserved.wait()
        if pending.failed is not None:
            self._pending.pop(match.ladder_id, None)
            raise HandOffError(pending.failed)
        if not pending.reserved.is_set():
            self.cancel(match.ladder_id)
            raise HandOffError(f"worker {worker.number} did not take the match within {RESERVE_TIMEOUT:g} s")
        return Hosting(self.public_host, port, self.tls)

    async def result(self, ladder_id: int) -> HostedResult:
        pending = self._pending.get(ladder_id)
        if pending is None:
            raise HandOffError("the match is not under way on any worker")
        try:
            await pending.done.wait()
        finally:
            self._pending.pop(ladder_id, None)
        if pending.result is None:
            raise HandOffError(pending.failed or "the worker ended the match without a result")
        return pending.result

    def cancel(self, ladder_id: int) -> None:
        pending = self._pending.pop(ladder_id, None)
        worker = self._where.pop(ladder_id, None)
        if worker is not None:
            worker.pending.pop(ladder_id, None)
            if worker.send is not None:
                worker.send.send_nowait(("cancel", ladder_id))
        if pending is not None:
            pending.failed = "the ladder gave the match up"
            pending.end()

    # ----------------------------------------------------------------- spectators
    async def relay(self, ladder_id: int, conn: Connection) -> bool:
        """Let spectator ``conn`` (on the ladder's port) watch match ``ladder_id`` in its worker: the
        ladder watches it there as a spectator and passes the worker's bytes on unchanged (its
        welcome, frames and end), then closes ``conn``. False, with ``conn`` untouched, if the match
        ended before it started."""
        pending = self._pending.get(ladder_id)
        worker = self._where.get(ladder_id)
        if pending is None or worker is None or worker.port is None:
            return False
        port = worker.port
        await pending.started.wait()
        if pending.number is None or conn.closed:
            return False
        room = WaitingRoom(state=State.WATCHING)  # owns ``conn``: a spectator may say nothing more
        if not room.add(conn):
            return True
        try:
            stream = await self._open(port)
        except OSError as exc:
            log.warning("ladder: cannot watch match %d in worker %d: %s", ladder_id, worker.number, exc)
            conn.close("its match's worker cannot be watched")
            return True
        async with stream:
            try:
                hello = protocol.hello(
                    "ladder relay", self.setup.game, role="spectator", match=pending.number
                )
                await stream.send_all(protocol.encode(hello))
                while not conn.closed and (data := await stream.receive_some(1 << 16)):
                    conn.send(bytes(data))  # frames pass through whole or in pieces: the bytes are the stream
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
                log.info("ladder: the relay of match %d broke: %s", ladder_id, exc)
        await conn.flush(1.0)
        conn.close("its match is over")
        return True

    async def _open(self, port: int) -> trio.abc.Stream:
        """A connection to a worker's lobby, from this machine."""
        host = self.setup.bind_host
        if host in ("0.0.0.0", ""):
            host = "127.0.0.1"
        elif host == "::":
            host = "::1"
        stream: trio.abc.Stream = await trio.open_tcp_stream(host, port)
        if self.tls:
            # Our own child on this machine, reached at the address it binds, which the certificate
            # (made for the public name) need not name: the name is not checked, but the certificate
            # must be the ladder's own (pinned, as house bots pin it), not any a port could show.
            context = ssl.create_default_context(cafile=self.setup.tls_cert)
            context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
            context.check_hostname = False
            tls = trio.SSLStream(stream, context, server_hostname=host)
            await tls.do_handshake()
            stream = tls
        return stream


def _status(returncode: int | None) -> str:
    if returncode is None:
        return "was stopped"
    if returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        return f"died ({name})"
    return f"exited with status {returncode}"
