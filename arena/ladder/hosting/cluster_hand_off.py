"""The ladder's matches played on a Dask cluster (`cellarena ladder serve --cluster ...`).

A ladder's bots are connected to the ladder, so a match can be played elsewhere only if its bots go
there. For each pairing whose bots all said they follow a ``redirect`` (docs/protocol.md), the
ladder submits a `HostedMatch` to the cluster; the worker that takes it opens a lobby for that one
match (`cellarena.server.play.hosted.host_match`) and publishes its address through a Dask `Variable`
named for the match; the ladder sends each bot a ``redirect`` there with a fresh seat token, and
records the result and the replay when the worker returns them. The job carries only the tokens'
digests: no secret crosses the cluster's own channels.

Why a Variable: the task runs until the match is over, but its address is needed as soon as it
listens, and a Variable is Dask's one-value mailbox between a task and the client.

A worker that dies mid-match is run again by Dask's scheduler elsewhere; the bots are not sent
there again, nobody comes, and the match is void (`HostedResult.anybody_came`).
"""

from __future__ import annotations

import contextlib
import logging
import math
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import trio

from cellarena.arena.cluster import ClusterError, ClusterSpec, open_cluster
from cellarena.arena.ladder.hosting.seat_launch import SeatBots, connect_timeout, launches_of
from cellarena.arena.ladder.hosting.worker_process import HostedMatches
from cellarena.sdk.client import is_loopback
from cellarena.server.play.hosted import HostedMatch, HostedResult, host_match
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.scratch_folders import owned_folder

log = logging.getLogger("cellarena.ladder")

#: Seconds to wait for a worker to take a match and listen.
LISTEN_TIMEOUT = 30.0
#: Matches one worker process of a local cluster hosts at once. A hosted match holds a worker thread
#: for its whole length (its own trio loop) but mostly waits for its bots, whose programs run
#: elsewhere; for a remote cluster, `dask worker --nthreads` says it (docs/ladder.md).
LOCAL_THREADS_PER_WORKER = 16


class HandOffError(RuntimeError):
    """The cluster did not host a match; the message says why (the ladder then plays it itself)."""


@dataclass(frozen=True)
class Hosting:
    """Where a handed-off match is, once a worker listens for its bots."""

    host: str
    port: int
    tls: bool


@dataclass(frozen=True)
class HandOffConfig:
    """How the ladder's cluster hosts matches."""

    #: The address bots are sent to; None: each worker's own address on the cluster.
    public_host: str | None = None
    tls_cert: str | None = None
    tls_key: str | None = None
    insecure: bool = False
    connect_timeout: float = 15.0


class HandOff:
    """Submits ladder matches to a Dask client; `start` says where each one listens, `result` waits
    for it to end. The trio side never blocks on Dask: the short wait for an address runs in a
    thread, and a match's end arrives by Dask's callback, so no thread is held for a match's length."""

    def __init__(self, client: Any, config: HandOffConfig) -> None:
        self.client = client
        self.config = config
        self._futures: dict[int, Any] = {}
        # Waits on the cluster get threads of their own, so that a hundred matches under way never
        # hold up the store's calls, which share trio's default limiter.
        self._limiter = trio.CapacityLimiter(math.inf)

    def job(self, match: HostedMatch) -> HostedMatch:
        """``match`` with this cluster's listening settings."""
        c = self.config
        return replace(
            match,
            public_host=c.public_host,
            tls_cert=c.tls_cert,
            tls_key=c.tls_key,
            insecure=c.insecure,
            connect_timeout=connect_timeout(match, c.connect_timeout),
        )

    async def start(self, match: HostedMatch) -> Hosting:
        """Submit ``match`` and wait until a worker listens for it; `HandOffError` if none does."""
        job = self.job(match)
        mailbox = f"cellarena-ladder-{match.ladder_id}-{uuid.uuid4().hex}"
        future = self.client.submit(run_on_worker, job, mailbox, pure=False)
        self._futures[match.ladder_id] = future
        variable = _variable(mailbox, self.client)
        waiting = [True]

        def wake(_done: Any = None) -> None:
            # Whatever ends the wait (the task failed, the listen timeout) sets the mailbox, so the
            # thread blocked in get() returns: a get() with a timeout makes the scheduler log an
            # error each time it expires. Once the address is in, the mailbox is gone: leave it so.
            if waiting[0]:
                with contextlib.suppress(Exception):
                    variable.set(None)

        def wait() -> tuple[str, int] | None:
            try:
                found = variable.get()
                waiting[0] = False
                return None if found is None else (str(found[0]), int(found[1]))
            finally:
                with contextlib.suppress(Exception):
                    variable.delete()

        future.add_done_callback(wake)
        try:
            with trio.fail_after(LISTEN_TIMEOUT):
                where = await trio.to_thread.run_sync(wait, limiter=self._limiter, abandon_on_cancel=True)
        except trio.TooSlowError:
            wake()
            self.cancel(match.ladder_id)
            raise HandOffError(f"no worker listened for the match within {LISTEN_TIMEOUT:g} s") from None
        except BaseException:
            wake()
            raise
        if where is None:  # the task ended before it listened: its error says why
            self._futures.pop(match.ladder_id, None)
            try:
                future.result()
            except Exception as exc:
                raise HandOffError(f"the worker could not host it: {exc}") from None
            raise HandOffError("the worker ended the match before it listened")
        host, port = where
        return Hosting(host, port, job.tls)

    async def result(self, ladder_id: int) -> HostedResult:
        """The result of a started match, once it is over; `HandOffError` if its worker failed.

        No thread waits out the match: Dask's callback wakes this task when the future is done."""
        future = self._futures[ladder_id]
        done = trio.Event()
        token = trio.lowlevel.current_trio_token()

        def wake(_future: Any) -> None:
            with contextlib.suppress(trio.RunFinishedError):
                token.run_sync_soon(done.set)

        future.add_done_callback(wake)
        try:
            await done.wait()
            result: HostedResult = await trio.to_thread.run_sync(
                future.result, limiter=self._limiter, abandon_on_cancel=True
            )
        except Exception as exc:
            raise HandOffError(f"the worker failed: {exc}") from None
        finally:
            self._futures.pop(ladder_id, None)
        return result

    def cancel(self, ladder_id: int) -> None:
        future = self._futures.pop(ladder_id, None)
        if future is not None:
            with contextlib.suppress(Exception):
                self.client.cancel([future], force=True)

    def cancel_all(self) -> None:
        for ladder_id in list(self._futures):
            self.cancel(ladder_id)


def run_on_worker(job: HostedMatch, mailbox: str) -> HostedResult:
    """The task a worker runs: host the match, and put its address in the ``mailbox`` Variable."""
    from dask.distributed import get_worker

    def publish(host: str, port: int) -> None:
        _variable(mailbox).set((host, port))

    host = worker_host(get_worker().address)
    if launches_of(job):
        return trio.run(host_launching, job, publish, job.public_host or host)
    return host_match(job, publish, host=host)


async def host_launching(job: HostedMatch, publish: Callable[[str, int], None], host: str) -> HostedResult:
    """Host ``job`` as `host_match` does, and start its submitted bots here (`seat_launch`): a lobby
    of a local worker's kind (`worker_process.HostedMatches`) for this one match, which seats a
    connection it makes by the seat it is made for, and the others by their seat tokens."""
    from cellarena.server.play.hosted import HostingError, _bind_address

    if job.tls_cert is None and not is_loopback(host) and not job.insecure:
        raise HostingError(
            f"the match would take seat tokens in clear at {host}: give the ladder --tls-cert/--tls-key "
            "(present at the same paths on every worker), or --insecure on a network you trust"
        )
    tls = None
    if job.tls_cert is not None:
        from cellarena.server.net.tls import server_context

        tls = server_context(job.tls_cert, job.tls_key or job.tls_cert)
    results: list[HostedResult] = []
    with owned_folder("cellarena-hosted-") as folder:
        done = trio.Event()

        def report(message: tuple[Any, ...]) -> None:
            if message[0] == "result":
                results.append(message[1])
                done.set()

        seating = HostedMatches(Path(folder), report)
        lobby = Lobby(
            LobbyConfig(
                job.game, job.engine_config, job.settings, host=_bind_address(host), port=0,
                matches=None, on_result=seating.on_result, tls=tls,
            ),
            seating,
        )  # fmt: skip
        bots = SeatBots(lobby, seating.hand, seating.gave_up)
        async with trio.open_nursery() as nursery:
            port = await nursery.start(lobby.serve)
            nursery.start_soon(seating.run)
            seating.reserve(job)
            for seat, launch in launches_of(job):
                nursery.start_soon(bots.play, job.ladder_id, seat, launch, seating.ended[job.ladder_id])
            publish(host, port)
            with trio.move_on_after(job.connect_timeout + job.time_limit):
                await done.wait()
            seating.cancel(job.ladder_id)
            with trio.move_on_after(2):
                await lobby.shutdown(1.0)
            nursery.cancel_scope.cancel()
    if not results:
        return HostedResult(job.ladder_id, None, tuple(False for _ in job.names), None, host, port)
    found = results[0]
    return HostedResult(found.ladder_id, found.outcome, found.connected, found.replay, host, port)


def _variable(name: str, client: Any = None) -> Any:
    """Dask's `Variable` ``name`` (held as Any: Dask's API is not typed)."""
    import dask.distributed

    variable: Any = dask.distributed.Variable
    return variable(name, client=client)


def worker_host(address: str) -> str:
    """The host part of a Dask address (``tcp://10.0.0.5:40123`` -> ``10.0.0.5``)."""
    rest = address.split("://", 1)[-1]
    host = rest.rsplit(":", 1)[0]
    return host.strip("[]")


def check_hosting(client: Any, game: str, configs: Sequence[dict[str, Any]], config: HandOffConfig) -> None:
    """Ask every worker whether it can host this ladder's matches; a ClusterError lists what is
    missing where, before the ladder opens."""
    from cellarena.arena.ladder.store.ladder_store import cellarena_release

    answers: dict[str, list[str]] = client.run(
        hosting_problems, game, list(configs), cellarena_release(), config
    )
    problems = [f"worker {worker}: {p}" for worker, found in sorted(answers.items()) for p in found]
    if problems:
        raise ClusterError("the cluster cannot host this ladder's matches:\n  " + "\n  ".join(problems))


def hosting_problems(
    game: str, configs: Sequence[dict[str, Any]], release: str, config: HandOffConfig, dask_worker: Any
) -> list[str]:
    """What keeps this worker from hosting the ladder's matches (run on each worker by `Client.run`,
    which passes the worker as ``dask_worker``)."""
    from cellarena.arena.cluster import worker_problems

    problems = worker_problems(game, configs, [], release)
    host = config.public_host or worker_host(dask_worker.address)
    if config.tls_cert is None:
        if not is_loopback(host) and not config.insecure:
            problems.append(
                f"it would take seat tokens in clear at {host}: give --tls-cert/--tls-key (the same "
                "paths on every worker) or, on a network you trust, --insecure"
            )
    else:
        from cellarena.server.net.tls import TlsConfigError, server_context

        try:
            server_context(config.tls_cert, config.tls_key or config.tls_cert)
        except TlsConfigError as exc:
            problems.append(f"TLS: {exc}")
    return problems


@contextlib.contextmanager
def open_hand_off(
    spec: ClusterSpec, game: str, configs: Sequence[dict[str, Any]], config: HandOffConfig
) -> Iterator[HandOff]:
    """A `HandOff` over the cluster ``spec`` names, checked; the cluster (if local) stops on exit."""
    with open_cluster(spec, threads_per_worker=LOCAL_THREADS_PER_WORKER) as (executor, _threads, _workers):
        check_hosting(executor.client, game, configs, config)
        hand_off = HandOff(executor.client, config)
        try:
            yield hand_off
        finally:
            hand_off.cancel_all()
