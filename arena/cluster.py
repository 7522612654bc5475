"""Tournaments on a Dask cluster: `cellarena tournament ... --cluster tcp://HOST:PORT` or `local:N`.

The coordinator stays what it is locally (`runner.run_tournament`: the schedule, the single writer
of results.sqlite, ratings in schedule order); only the executor changes. `open_cluster` connects a
Dask client (or starts a local cluster of N worker processes) and hands the runner an executor over
it, after `check_workers` has made sure that every worker can play every match: the same cellarena
release, the game installed, every map loadable and every bot's program and files present. A
problem there is a `ClusterError` naming the worker and what it lacks, before any match is played.

Matches on a cluster ship their files back (`MatchJob.ship_files`): a worker plays in a temporary
folder of its own and returns the replay and the bots' logs with the result, and the coordinator
writes them under the results folder. So workers need no shared disk, and a worker that dies
mid-match leaves nothing half-written where the results are. Dask runs the lost match again on
another worker (its scheduler retries a task whose worker died); the coordinator records a match
only once, when a result comes back.

Why Dask and not Ray: Dask's distributed scheduler installs from PyPI in seconds, starts from two
commands (`dask scheduler`, `dask worker`), and its client gives a `concurrent.futures` executor,
which is the runner's interface. Ray was not made an extra: it is a large install that could not be
tested end to end here, and an option shipped untested is worse than none (docs/scaling.md).
"""

from __future__ import annotations

import concurrent.futures as cf
import contextlib
import logging
import os
import shlex
import shutil
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

import click

from cellarena.server.cli.params import ParsedParam

if TYPE_CHECKING:
    from cellarena.arena.runner import TournamentSpec

F = TypeVar("F", bound=Callable[..., Any])

#: What `--cluster` takes, for messages.
CLUSTER_FORMS = "local:N (N worker processes on this machine) or tcp://HOST:PORT (a Dask scheduler)"
INSTALL_HINT = "pip install 'cellarena[dask]'"
#: Seconds to wait for a scheduler and its workers before giving up.
CONNECT_TIMEOUT = 10.0


class ClusterError(RuntimeError):
    """The cluster cannot run this tournament; the message names the worker and what is missing."""


@dataclass(frozen=True)
class ClusterSpec:
    """Where matches run: ``local`` workers started here, or the scheduler at ``address``."""

    local: int | None = None
    address: str | None = None

    @classmethod
    def parse(cls, text: str) -> ClusterSpec:
        """``local:N`` or ``tcp://HOST:PORT``; ValueError saying what is wrong."""
        if text.startswith("local:"):
            count = text.removeprefix("local:")
            if not count.isdigit() or not 1 <= int(count) <= 256:
                raise ValueError(f"{text!r}: local:N needs N from 1 to 256 worker processes")
            return cls(local=int(count))
        if text.startswith(("tcp://", "tls://")) and len(text.split("://", 1)[1]) > 0:
            return cls(address=text)
        raise ValueError(f"{text!r} is not a cluster; give {CLUSTER_FORMS}")

    def __str__(self) -> str:
        return f"local:{self.local}" if self.local is not None else str(self.address)


class ClusterParam(ParsedParam):
    """A ``--cluster`` value, read into a `ClusterSpec`."""

    name = "local:N|tcp://HOST:PORT"
    parsed = ClusterSpec

    def parse(self, text: str) -> ClusterSpec:
        return ClusterSpec.parse(text)


def cluster_option(help: str) -> Callable[[F], F]:
    """The ``--cluster`` option of every command that can play on a Dask cluster."""
    return click.option("--cluster", default=None, type=ClusterParam(), help=help)


class DaskExecutor(cf.Executor):
    """The runner's executor over a Dask client. Every match is played (``pure=False``: never taken
    from a cache), one per worker thread; `interrupt` cancels what has not finished."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self._futures: list[Any] = []

    def submit(self, fn: Any, /, *args: Any, **kwargs: Any) -> cf.Future[Any]:
        future = self.client.submit(fn, *args, pure=False, **kwargs)
        self._futures = [f for f in self._futures if not f.done()]
        self._futures.append(future)
        return _as_concurrent(future)

    def interrupt(self) -> None:
        """Ctrl-C: cancel every match not yet finished (queued ones never start)."""
        with contextlib.suppress(Exception):
            self.client.cancel(self._futures, force=True)

    def shutdown(self, wait: bool = True, *, cancel_futures: bool = False) -> None:
        if cancel_futures:
            self.interrupt()


def _as_concurrent(future: Any) -> cf.Future[Any]:
    """A `concurrent.futures.Future` that follows a Dask future (what `cf.wait` in the runner needs)."""
    out: cf.Future[Any] = cf.Future()
    out.set_running_or_notify_cancel()

    def settle(done: Any) -> None:
        if out.done():
            return
        try:
            if done.status == "cancelled":
                out.set_exception(cf.CancelledError("the match was cancelled on the cluster"))
            else:
                out.set_result(done.result())
        except BaseException as exc:  # the match's own error, or the cluster's (a worker lost too often)
            out.set_exception(exc)

    future.add_done_callback(settle)
    return out


@contextlib.contextmanager
def open_cluster(
    spec: ClusterSpec, *, threads_per_worker: int = 1
) -> Iterator[tuple[DaskExecutor, int, list[str]]]:
    """(executor, worker threads, worker addresses) for ``spec``; a local cluster (of workers with
    ``threads_per_worker`` threads each) stops on exit."""
    try:
        from dask.distributed import Client, LocalCluster
    except ImportError:
        raise ClusterError(f"--cluster needs Dask distributed: {INSTALL_HINT}") from None
    import dask

    # A match that keeps killing its worker is given up after three (Dask's default, said here for
    # the local cluster's in-process scheduler; a remote scheduler keeps its own setting).
    dask.config.set({"distributed.scheduler.allowed-failures": 3})
    with contextlib.ExitStack() as stack:
        if spec.local is not None:
            cluster = stack.enter_context(
                LocalCluster(
                    n_workers=spec.local,
                    threads_per_worker=threads_per_worker,
                    processes=True,
                    dashboard_address=None,
                    # No dashboard, but the scheduler still serves HTTP (health, metrics), on 8787
                    # unless told: a second cluster on the machine then warns of a port in use.
                    scheduler_kwargs={"dashboard_address": "127.0.0.1:0"},
                    host="127.0.0.1",
                )
            )
            client = stack.enter_context(Client(cluster))
            # Runs first on exit (last in, first out): the workers are quiet before the scheduler goes.
            stack.callback(_quiet_local_workers, client)
        else:
            try:
                client = stack.enter_context(Client(spec.address, timeout=CONNECT_TIMEOUT))
            except OSError as exc:
                raise ClusterError(
                    f"cannot reach the Dask scheduler at {spec.address}: {exc}; is `dask scheduler` "
                    "running there, and the port open?"
                ) from None
        threads: dict[str, int] = client.nthreads()
        if not threads:
            with contextlib.suppress(Exception):
                client.wait_for_workers(1, timeout=CONNECT_TIMEOUT)
            threads = client.nthreads()
        if not threads:
            raise ClusterError(
                f"the cluster at {spec.address or 'local'} has no workers; start `dask worker`"
            )
        yield DaskExecutor(client), sum(threads.values()), sorted(threads)


def _silence_dask_logs() -> None:
    """On a worker of a local cluster about to stop: its heartbeat may race the scheduler's close and
    log the lost connection with a traceback, on the terminal of a command that ended as it should."""
    logging.getLogger("distributed").setLevel(logging.CRITICAL)


def _quiet_local_workers(client: Any) -> None:
    """`_silence_dask_logs` on every worker of a local cluster, and its nanny, before it stops. A
    worker already gone (a killed one) is nothing to quiet, hence no error here ever."""
    for nanny in (False, True):
        with contextlib.suppress(Exception):
            client.run(_silence_dask_logs, nanny=nanny, on_error="ignore")


def check_workers(executor: DaskExecutor, spec: TournamentSpec) -> None:
    """Ask every worker whether it can play every match of ``spec``; a ClusterError lists what is
    missing where. Run before any match, so a tournament never half-runs on a cluster that cannot."""
    from cellarena.arena.ladder.store.ladder_store import cellarena_release

    bots = [(b.name, b.command, b.cwd) for b in spec.bots]
    configs = [config for _, config, _ in spec.maps]
    answers: dict[str, list[str]] = executor.client.run(
        worker_problems, spec.game, configs, bots, cellarena_release()
    )
    problems = [f"worker {worker}: {p}" for worker, found in sorted(answers.items()) for p in found]
    if problems:
        raise ClusterError(
            "the cluster cannot play this tournament (nothing was played):\n  "
            + "\n  ".join(problems)
            + "\nEvery worker needs the same cellarena, and the bots at the same paths."
        )


def worker_problems(
    game: str, configs: Sequence[dict[str, Any]], bots: Sequence[tuple[str, str, str | None]], release: str
) -> list[str]:
    """What keeps this machine from playing the tournament (run on each worker); empty if nothing."""
    from cellarena.arena.ladder.store.ladder_store import cellarena_release
    from cellarena.server.bots.launcher import BotSpec
    from cellarena.server.games import get_engine

    problems = []
    if cellarena_release() != release:
        problems.append(f"cellarena {cellarena_release()} here, {release} on the coordinator")
    try:
        engine = get_engine(game)
    except Exception as exc:
        return [*problems, f"cannot load the game {game!r}: {exc}"]
    for config in configs:
        try:
            engine.new(dict(config), 0)
        except Exception as exc:
            problems.append(f"cannot load the {game} config {config}: {exc}")
    for name, command, cwd in bots:
        problems.extend(f"bot {name!r}: {p}" for p in _bot_problems(BotSpec(name, command, cwd)))
    return problems


def _bot_problems(bot: Any) -> list[str]:
    """A bot's folder, program and the files its command names, as this machine sees them."""
    if bot.cwd is not None and not os.path.isdir(bot.cwd):
        return [f"no folder {bot.cwd}"]
    base = bot.cwd or os.getcwd()
    argv = bot.argv()
    problems = []
    program = argv[0]
    if "/" in program:
        if not os.access(os.path.join(base, program), os.X_OK):
            problems.append(f"no program {os.path.join(base, program)}")
    elif shutil.which(program) is None:
        problems.append(f"no program {program!r} on the PATH")
    for arg in argv[1:]:
        if arg.startswith("-") or not ("/" in arg or arg.endswith((".py", ".js", ".mjs"))):
            continue  # an option or a word: only what names a file is checked
        if not os.path.exists(os.path.join(base, arg)):
            problems.append(f"no file {os.path.join(base, arg)} (from its command {shlex.join(argv)})")
    return problems
