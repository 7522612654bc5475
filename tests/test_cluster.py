"""Tournaments on a real Dask cluster (`--cluster`): a local cluster of worker processes, and the
docs/scaling.md recipe (`dask scheduler` and two `dask worker` processes) started as a user starts
them, once for the module: the tests that need a cluster but not a local one play on it, and the
one that kills a worker runs last. The drop2df example bots are deterministic, so a tournament's
standings are exactly the same wherever its matches ran."""

from __future__ import annotations

import contextlib
import json
import os
import re
import shlex
import signal
import socket
import sqlite3
import subprocess
import sys
import time
import urllib.request
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from cellarena_cli import CLI, ROOT, cellarena, invoke, refused
from game_servers import wait_for
from test_ladder_community_processes import stop

from cellarena.arena.cluster import ClusterError, ClusterSpec, check_workers, open_cluster
from cellarena.arena.runner import TournamentSpec
from cellarena.server.bots.launcher import BotSpec
from cellarena.server.net.socket_owner import LISTEN, tcp_sockets
from cellarena.server.play.match import TickSettings
from cellarena.server.replay import read_replay, verify

DASK = [str(Path(sys.executable).parent / "dask")]
BOTS = ["--bots-dir", "example_bots", "--rounds", "2"]


def tournament(out: Path, *extra: str, timeout: float = 240) -> dict[str, object]:
    done = cellarena("tournament", "drop2df", *BOTS, "--out", str(out), "--json", *extra, timeout=timeout)
    assert done.returncode == 0, done.stderr
    result: dict[str, object] = json.loads(done.stdout)
    return result


def recorded(out: Path) -> list[str]:
    with sqlite3.connect(out / "results.sqlite") as db:
        return [row[0] for row in db.execute("SELECT key FROM matches ORDER BY key")]


@pytest.fixture(scope="module")
def local(tmp_path_factory: pytest.TempPathFactory) -> dict[str, object]:
    """The tournament on the local pool, which the cluster's tournaments must equal: played once."""
    return tournament(tmp_path_factory.mktemp("local") / "out", "--jobs", "2")


def test_a_local_cluster_gives_the_standings_of_the_local_pool(
    tmp_path: Path, local: dict[str, object]
) -> None:
    # One worker: the matches spread over two workers are the recipe's (tcp://) test below.
    cluster = tournament(tmp_path / "cluster", "--cluster", "local:1")
    assert cluster["standings"] == local["standings"]
    assert cluster["played"] == local["played"] == 4 and cluster["failed"] == []
    # The worker shipped replays and logs back; the coordinator wrote them under --out.
    replays = sorted((tmp_path / "cluster" / "matches").glob("*/match.replay"))
    assert len(replays) == 4
    # In this process: `replay verify` the command is test_replay.py's.
    assert all(verify(read_replay(replay)).ok for replay in replays)


#: The traceback CPython's multiprocessing resource tracker sometimes prints as a local cluster's
#: processes exit (a KeyError on a name unregistered twice): not cellarena's.
_TRACKER_NOISE = re.compile(
    r"Traceback \(most recent call last\):\n(?:[ ]+.*\n)*?[ ]+File \".*resource_tracker\.py\".*\n"
    r"(?:[ ]+.*\n)*KeyError: '/mp-[^']*'\n?"
)


def without_resource_tracker_noise(stderr: str) -> str:
    return _TRACKER_NOISE.sub("", stderr)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def recipe_commands() -> tuple[list[list[str]], list[str]]:
    """docs/scaling.md's recipe: (the background commands, the tournament command), as written."""
    text = (ROOT / "docs" / "scaling.md").read_text()
    block = text.split("## The recipe", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    lines = [line.strip() for line in block.splitlines() if line.strip()]
    background = [shlex.split(line.removesuffix("&")) for line in lines if line.endswith("&")]
    (foreground,) = [shlex.split(line) for line in lines if not line.endswith("&")]
    return background, foreground


def _await_listening(port: int, proc: subprocess.Popen[bytes], timeout: float = 60) -> None:
    """Until something accepts connections on ``port`` (the scheduler has bound), under a deadline."""

    def listening() -> bool:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        except OSError:
            assert proc.poll() is None, f"the dask scheduler exited ({proc.returncode}): see dask.log"
            return False
        return True

    wait_for(listening, f"a dask scheduler on {port}", timeout)


class Recipe:
    """docs/scaling.md's recipe: a scheduler and two workers on this machine, as separate processes,
    with a free port for the doc's 8786 (and extra worker flags for the tests that want them)."""

    def __init__(self, folder: Path, *worker_flags: str) -> None:
        self.port = free_port()
        self.http_port = free_port()  # the doc's 8787: two clusters on one machine would share it
        self.address = f"tcp://127.0.0.1:{self.port}"
        background, self.tournament = recipe_commands()
        log = (folder / "dask.log").open("wb")
        #: The processes' temporary folder: what their jobs leave in it is theirs.
        self.tmp = folder / "tmp"
        self.tmp.mkdir()
        env = {**os.environ, "TMPDIR": str(self.tmp)}
        self.processes = []
        for written in background:
            words = [a.replace("8786", str(self.port)).replace("8787", str(self.http_port)) for a in written]
            assert words[0] == "dask", words
            kind = words[1]
            argv = [*DASK, *words[1:], *(worker_flags if kind == "worker" else ())]
            self.processes.append(subprocess.Popen(argv, stdout=log, stderr=log, cwd=ROOT, env=env))
            if kind == "scheduler":
                _await_listening(self.port, self.processes[-1])  # before the workers dial it
        self.scheduler = self.processes[0]
        self.workers = self.processes[1:]

    def stop(self) -> None:
        """The workers first, then the scheduler: a worker stopped after its scheduler keeps trying
        to say goodbye to it (Dask's 30 s connect timeout), which had teardowns wait 20 s and kill."""
        for group in (self.workers, [self.scheduler]):
            stop(*group, timeout=20)


@pytest.fixture(scope="module")
def recipe(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Recipe]:
    cluster = Recipe(tmp_path_factory.mktemp("recipe"))
    try:
        with_workers(cluster.address)
        yield cluster
    finally:
        cluster.stop()


def with_workers(address: str) -> None:
    """Until both of the recipe's workers are there (again, after a test that killed one)."""
    from dask.distributed import Client

    with Client(address, timeout=60) as client:
        client.wait_for_workers(2, timeout=60)


def test_the_scaling_recipe_runs_as_written(tmp_path: Path, recipe: Recipe, local: dict[str, object]) -> None:
    argv = [a.replace("8786", str(recipe.port)) for a in recipe.tournament]
    assert argv[:3] == ["cellarena", "tournament", "drop2df"] and argv[-2:] == ["--cluster", recipe.address]
    out = tmp_path / "remote"
    done = cellarena(*argv[1:], "--out", str(out), "--json", timeout=240)  # plus where its results go
    assert done.returncode == 0, done.stderr
    remote = json.loads(done.stdout)
    assert remote["standings"] == local["standings"] and remote["played"] == 4
    # The workers shipped their replays back, whole.
    replays = sorted((out / "matches").glob("*/match.replay"))
    assert len(replays) == 4 and all(verify(read_replay(replay)).ok for replay in replays)
    # The scheduler's HTTP server (health, metrics) is where the recipe put it, on loopback only.
    with urllib.request.urlopen(f"http://127.0.0.1:{recipe.http_port}/health", timeout=30) as answer:
        assert answer.read() == b"ok"
    assert listening_on(recipe.http_port) == {"127.0.0.1"}


def listening_on(port: int) -> set[str]:
    """The addresses something listens on at TCP ``port``, from the kernel's tables."""
    return {s.local_address for s in tcp_sockets() if s.state == LISTEN and s.local_port == port}


def test_bench_tournament_compares_the_cluster_with_the_local_pool(tmp_path: Path, recipe: Recipe) -> None:
    bots = tmp_path / "bots"
    bots.mkdir()
    for name in ("random_walker.py", "builder.py"):
        (bots / name).write_bytes((ROOT / "example_bots" / "rezzo" / name).read_bytes())
    args = ["--bots-dir", str(bots), "--rounds", "1", "--max-ticks", "20", "--jobs", "1"]
    with_workers(recipe.address)
    done = cellarena("bench", "tournament", *args, "--cluster", recipe.address, "--json", timeout=240)
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)
    on = report["cluster"]
    assert on["matches"] == report["matches"] == 4 and on["failed"] == 0 and on["jobs"] == 2
    assert on["where"] == recipe.address
    assert 0 <= on["overhead_fraction"] < 1 and on["matches_per_second"] > 0 and on["start_seconds"] > 0


def test_a_bot_missing_on_the_workers_stops_the_tournament_before_any_match(
    tmp_path: Path, recipe: Recipe
) -> None:
    spec = TournamentSpec(
        game="drop2df",
        bots=(
            BotSpec("passer", f"python {ROOT / 'example_bots' / 'drop2df' / 'passer.py'}"),
            BotSpec("ghost", "python /nowhere/ghost.py"),
        ),
        maps=((None, {}, 2),),
        rounds=1,
        seed=0,
        settings=TickSettings(fast=True),
    )
    # A local cluster binds no fixed port: its scheduler's HTTP server (there even without a
    # dashboard) took 8787, and a second cluster on the machine warned that it was in use.
    with contextlib.ExitStack() as stack:
        held = stack.enter_context(socket.socket())
        with contextlib.suppress(OSError):  # if another process holds it, it is in use all the same
            held.bind(("127.0.0.1", 8787))
            held.listen()
        warned = stack.enter_context(warnings.catch_warnings(record=True))
        warnings.simplefilter("always")
        executor, _, workers = stack.enter_context(open_cluster(ClusterSpec(local=1)))
        assert executor.client.cluster.scheduler.http_server.port != 8787
        with pytest.raises(ClusterError) as caught:
            check_workers(executor, spec)
    assert not [w for w in warned if "already in use" in str(w.message)], [str(w.message) for w in warned]
    message = str(caught.value)
    assert f"worker {workers[0]}: bot 'ghost': no file /nowhere/ghost.py" in message
    assert "passer" not in message and "nothing was played" in message
    # Through the command, on the recipe's cluster: the same error for each worker, and no match in
    # the results. (A local cluster's exit on this error, from a command: test_ladder_cluster's
    # refusal of tokens in clear.)
    out = tmp_path / "out"
    with_workers(recipe.address)
    done = cellarena(
        "tournament", "drop2df", "--bot", f"passer=python {ROOT / 'example_bots/drop2df/passer.py'}",
        "--bot", "ghost=python /nowhere/ghost.py", "--cluster", recipe.address, "--out", str(out),
    )  # fmt: skip
    assert done.returncode == 1 and done.stderr.count("no file /nowhere/ghost.py") == 2, done.stderr
    assert "Traceback" not in without_resource_tracker_noise(done.stderr)
    assert not (out / "results.sqlite").exists() or recorded(out) == []


def test_a_worker_killed_mid_match_costs_no_result_and_records_none_twice(
    tmp_path: Path, recipe: Recipe
) -> None:
    """On the recipe's cluster, last in this module: the killed worker's nanny starts another."""
    from dask.distributed import Client

    out = tmp_path / "out"
    with_workers(recipe.address)
    # Matches at a fixed 15 Hz, 30 turns: about two seconds each, long enough to be cut.
    args = [*BOTS, "--realtime", "--tick-rate", "15", "--budget-ms", "50"]
    proc = subprocess.Popen(
        [*CLI, "tournament", "drop2df", *args, "--out", str(out), "--json", "--cluster", recipe.address],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    killed = None
    with Client(recipe.address, timeout=30) as client:
        pids = client.run(os.getpid)
        deadline = time.monotonic() + 60
        while killed is None and time.monotonic() < deadline:
            busy = [w for w, keys in client.processing().items() if keys]
            if busy:
                time.sleep(0.5)  # into the match
                killed = busy[0]
                os.kill(pids[killed], signal.SIGKILL)
            time.sleep(0.05)
    out_text, err = proc.communicate(timeout=240)
    assert killed is not None, f"no worker was ever busy: {err}"
    assert proc.returncode == 0, err
    result = json.loads(out_text)
    assert result["played"] == result["total"] == 4 and result["failed"] == []
    keys = recorded(out)
    assert len(keys) == 4 and len(set(keys)) == 4
    # The killed worker's temporary folder (its match's replay and logs) went with the next job's
    # start (server/scratch_folders.py), where it once stayed for good; every other job removed its own.
    left = list(recipe.tmp.glob("cellarena-job-*"))
    assert left == [], left


def test_cluster_option_errors(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # In this process: both are refused before any cluster or match.
    bad = refused("tournament", "drop2df", *BOTS, "--cluster", "local:0", "--out", str(tmp_path))
    assert "--cluster" in bad.stderr and "local:N" in bad.stderr
    # Without the [dask] extra, --cluster says what to install (a `dask` that cannot be imported).
    for module in ("dask", "dask.distributed"):
        monkeypatch.setitem(sys.modules, module, None)
    code, out = invoke("tournament", "drop2df", *BOTS, "--cluster", "local:1", "--out", str(tmp_path))
    assert code == 1 and "pip install 'cellarena[dask]'" in out, out
