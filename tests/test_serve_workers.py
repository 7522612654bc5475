"""`cellarena serve --workers N`: matches in worker processes, over real TCP (server/workers/front.py).

Behaviour only, never timing: the results and replays of matches played in two workers are those
of one process; spectators reach the match they ask for in whichever worker plays it; a worker
killed with SIGKILL costs only its match, which the front logs, and is started again; the front
stopped stops every worker; bad ``--workers`` values are refused naming the option.
"""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import threading
import urllib.request
from pathlib import Path
from typing import Any, Literal

import pytest
from bot_processes import alive
from cellarena_cli import invoke
from certificates import pem_files
from game_servers import Server, serve, wait_for

from cellarena.sdk import protocol
from cellarena.server.bench import loadgen
from cellarena.server.replay import read_replay, verify
from cellarena.server.workers.front import worker_count


def _bots(port: int, count: int) -> threading.Thread:
    """``count`` bots answering every tick with the no-op (the load benchmark's), in a thread."""
    thread = threading.Thread(target=loadgen.run, args=("127.0.0.1", port, count, "rezzo"), daemon=True)
    thread.start()
    return thread


class Spectator:
    """A spectator's connection (or a bot's that never answers), read in a thread: every message it
    got, until the end or an error."""

    def __init__(
        self, port: int, match: int | None = None, *, role: Literal["bot", "spectator"] = "spectator"
    ) -> None:
        self.sock = socket.create_connection(("127.0.0.1", port), timeout=120)
        hello = protocol.hello("watcher" if role == "spectator" else "mute", "rezzo", role=role, match=match)
        self.sock.sendall(protocol.encode(hello))
        self.messages: list[dict[str, Any]] = []
        self.thread = threading.Thread(target=self._read, daemon=True)
        self.thread.start()

    def _read(self) -> None:
        reader = protocol.FrameReader(protocol.MAX_SERVER_FRAME)
        with self.sock:
            while True:
                try:
                    data = self.sock.recv(1 << 16)
                except OSError:
                    return
                if not data:
                    return
                for message in reader.feed(data):
                    self.messages.append(message)
                    if message["type"] in ("end", "error"):
                        return

    def kinds(self) -> list[str]:
        return [m["type"] for m in self.messages]


def _results(server: Server) -> dict[int, dict[str, Any]]:
    lines = [json.loads(line) for line in server.stdout().splitlines() if line.startswith("{")]
    return {r["match"]: r for r in lines}


def _worker_pids(server: Server) -> list[int]:
    found = re.search(r"in \d+ worker processes \(pids ([\d, ]+)\)", server.stderr())
    assert found, server.stderr()
    return [int(p) for p in found.group(1).split(", ")]


#: 30 ticks at 10 Hz, each with 90 ms to answer: the bots (threads of this busy test process) are late
#: only if they stall for most of a tenth of a second.
ROOMY = ["--tick-rate", "10", "--budget-ms", "90"]


def _play(folder: Path, *workers: str) -> tuple[Server, dict[int, dict[str, Any]], Spectator]:
    """Two short matches of four no-op bots, with a spectator waiting before any match starts."""
    replays = str(folder / "replays")
    server = serve(folder, "--matches", "2", "--replay-dir", replays, "-v", *ROOMY, *workers, numba=True)
    try:
        spectator = Spectator(server.port)
        # Connected is not yet greeted: the bots start only once the server holds the spectator.
        wait_for(lambda: "waiting to watch the next match" in server.stderr(), "the spectator", 30)
        bots = _bots(server.port, 4)
        assert server.wait(120) == 0, server.stderr()
        bots.join(30)
        spectator.thread.join(30)
    finally:
        server.stop()
    return server, _results(server), spectator


def test_matches_in_two_workers_give_the_results_and_replays_of_one_process(tmp_path: Path) -> None:
    two, in_workers, watched = _play(tmp_path / "two", "--workers", "2")
    one, in_one, _ = _play(tmp_path / "one")

    err = two.stderr()
    assert "match 1 starts in worker 0" in err and "match 2 starts in worker 1" in err, err
    assert not any(alive(pid) for pid in _worker_pids(two)), "a worker outlived its server"
    assert sorted(in_workers) == sorted(in_one) == [1, 2], (two.stdout(), one.stdout())
    for number in (1, 2):
        a, b = in_workers[number], in_one[number]
        assert (a["ticks"], a["reason"], sorted(a["ranks"].values())) == (
            b["ticks"],
            b["reason"],
            sorted(b["ranks"].values()),
        )
        # A server that charged its bots for handing the match to a worker would make every tick of
        # theirs late; a busy machine stalls one now and then (seen: 2 of 30 a bot at 30 Hz, 25 ms budgets).
        assert a["forfeits"] == [] and max(a["late"].values(), default=0) <= a["ticks"] // 10, a
        name = f"match-{number:05d}.replay"
        replay_two = read_replay(tmp_path / "two" / "replays" / name)
        replay_one = read_replay(tmp_path / "one" / "replays" / name)
        assert verify(replay_two).ok and verify(replay_two).complete
        # The same seed, the same moves: the same states, tick by tick, in whichever process.
        assert [t.hash for t in replay_two.ticks] == [t.hash for t in replay_one.ticks]
        assert replay_two.header["seed"] == replay_one.header["seed"]

    # The spectator connected before any match: the front kept it and handed it with the first match.
    kinds = watched.kinds()
    assert kinds[0] == "welcome" and watched.messages[0]["match"] == 1, watched.messages[:1]
    assert "frame" in kinds and kinds[-1] == "end", kinds[-3:]


def test_a_killed_worker_costs_only_its_match_and_is_started_again(tmp_path: Path) -> None:
    server = serve(
        tmp_path, "--workers", "2", "-v", "--max-ticks", "240", "--web", "--web-port", "0", numba=True
    )
    try:
        pids = _worker_pids(server)
        every = re.search(r"every match under way at (\S+)/live/all", server.stderr())
        assert every, server.stderr()
        _bots(server.port, 4)
        wait_for(lambda: "match 2 starts in worker" in server.stderr(), "both matches to start", 60)
        # The live view lists the matches of every worker.
        with urllib.request.urlopen(f"{every.group(1)}/api/live", timeout=30) as page:
            assert [m["match"] for m in json.load(page)] == [1, 2]
        found = re.search(r"match 1 starts in worker (\d)", server.stderr())
        assert found, server.stderr()
        doomed = int(found.group(1))
        os.kill(pids[doomed], signal.SIGKILL)

        # The other worker's match goes on: a spectator can watch it to its end.
        watcher = Spectator(server.port, match=2)
        reported = ("match 1 (", "started again")
        wait_for(lambda: all(text in server.stderr() for text in reported), "the report", 60)
        err = server.stderr()
        assert re.search(rf"worker {doomed} \(pid {pids[doomed]}\) was killed by signal SIGKILL", err), err
        assert "match 1 (load" in err and "ends without a result: its worker" in err, err

        # The new worker plays: two more bots get match 3.
        _bots(server.port, 2)
        wait_for(lambda: {2, 3} <= set(_results(server)), "matches 2 and 3 to end", 120)
        assert 1 not in _results(server)
        assert _results(server)[2]["ticks"] == 240
        watcher.thread.join(30)
        assert watcher.messages[0]["type"] == "welcome" and watcher.messages[0]["match"] == 2
        assert watcher.kinds()[-1] == "end"

        # A spectator asking for a match that is not under way is told which are.
        lost = Spectator(server.port, match=1)
        lost.thread.join(30)
        assert lost.messages[-1]["type"] == "error" and lost.messages[-1]["code"] == protocol.BAD_HELLO
        assert "no match 1 is running here" in lost.messages[-1]["message"]

        restarted = re.search(rf"worker {doomed} started again \(pid (\d+)\)", server.stderr())
        assert restarted, server.stderr()
        pids[doomed] = int(restarted.group(1))

        # Stopped with two matches under way (four bots that never answer, in both workers, the
        # new one too): every client is told, and every worker stops.
        bots = [Spectator(server.port, role="bot") for _ in range(4)]
        wait_for(lambda: "match 5 starts in worker" in server.stderr(), "matches 4 and 5 to start", 60)
        assert {int(w) for w in re.findall(r"match [45] starts in worker (\d)", server.stderr())} == {0, 1}
    finally:
        status = server.stop()
    assert status == 0, server.stderr()
    assert "stopped; 2 match(es) under way ended without a result" in server.stderr()
    for bot in bots:
        bot.thread.join(30)
        last = bot.messages[-1]
        assert last["type"] == "error" and last["code"] == protocol.SHUTDOWN, bot.messages[-2:]
        assert "your match ends without a result" in last["message"]
    assert not any(alive(pid) for pid in pids), "a worker outlived its server"


def test_workers_stop_when_their_front_is_killed(tmp_path: Path) -> None:
    server = serve(tmp_path, "--workers", "2", numba=True)
    pids = _worker_pids(server)
    server.proc.kill()
    server.proc.wait()
    # Nobody would hear their results: each worker sees its front gone and exits by itself.
    wait_for(lambda: not any(alive(pid) for pid in pids), "the workers to exit", 60)


@pytest.mark.parametrize("value", ["0", "-2", "two", "1.5", ""])
def test_bad_workers_values_are_refused_naming_the_option(value: str) -> None:
    code, out = invoke("serve", "rezzo", "--workers", value)
    assert code == 2, out
    assert "--workers" in out and "give a whole number from 1, or auto" in out, out


def test_workers_are_refused_with_tls(tmp_path: Path) -> None:
    _, chain, key = pem_files(tmp_path, "127.0.0.1")
    code, out = invoke("serve", "rezzo", "--workers", "2", "--tls-cert", str(chain), "--tls-key", str(key))
    assert code == 2, out
    assert "--workers" in out and "TLS" in out and "proxy" in out, out


def test_auto_is_one_worker_per_usable_core() -> None:
    assert worker_count("auto") == len(os.sched_getaffinity(0))
    assert worker_count(" AUTO ") == worker_count("auto")
    assert worker_count("3") == 3


def test_bench_server_compares_workers_with_one_process_in_json() -> None:
    code, out = invoke(
        "bench", "server", "--workers", "2", "--levels", "16", "--seconds", "1", "--repeat", "2", "--json"
    )
    assert code == 0, out
    report = json.loads(out)
    assert report["workers"] == 2 and set(report["max_agents_at_15hz"]) == {"one", "workers"}
    (level,) = report["levels"]
    one, many = level["one"], level["workers"]
    # Two tries each; the result is each server's best, and the host's speed was probed before each.
    tries = level["tries_on_time"]
    assert len(tries["one"]) == len(tries["workers"]) == 2
    assert (one["on_time"], many["on_time"]) == (max(tries["one"]), max(tries["workers"]))
    probe = report["host_loop_ms"]
    assert 0 < probe["fastest"] <= probe["slowest"]
    assert probe["fastest"] <= min(one["host_loop_ms"], many["host_loop_ms"])
    assert (one["workers"], many["workers"]) == (1, 2)
    for run in (one, many):
        # Every match played to its end; the server's CPU and the load generator's are read apart.
        assert run["agents"] == 16 and run["ticks"] == 2 * 15, run
        # (/proc counts in clock ticks of 10 ms: the load's few ms in one second may read as 0)
        assert run["server_cpu_share"] > 0 and run["load_cpu_share"] is not None, run
    assert one["workers_cpu_share"] is None and many["workers_cpu_share"] is not None
    assert many["server_cpu_share"] == pytest.approx(many["front_cpu_share"] + many["workers_cpu_share"])
    assert level["cpu_workers_over_one"] == many["cpu_us_per_agent_tick"] / one["cpu_us_per_agent_tick"]


def test_bench_server_refuses_tries_without_workers_to_compare() -> None:
    code, out = invoke("bench", "server", "--repeat", "3", "--levels", "16")
    assert code == 2
    assert "--repeat" in out and "add --workers 2" in out


def test_a_config_that_cannot_reach_a_worker_is_refused_before_any_worker_starts() -> None:
    from cellarena.server.play.lobby import LobbyConfig
    from cellarena.server.workers.front import WorkerLobby

    def recorder(number: int, engine: Any, names: list[str], seed: int) -> None:  # a closure: no pickle
        return None

    config = LobbyConfig("rezzo", {}, recorder=recorder)
    with pytest.raises(ValueError, match="cannot go to a worker process"):
        WorkerLobby(config, 2)


def test_workers_that_cannot_start_are_one_clear_error(monkeypatch: pytest.MonkeyPatch) -> None:
    import sys

    from cellarena.server.cli.run import run_trio
    from cellarena.server.play.lobby import LobbyConfig
    from cellarena.server.workers.front import WorkerPool, WorkerStartError

    monkeypatch.setattr(sys, "executable", "/bin/false")  # each worker exits at once with status 1
    pool = WorkerPool(LobbyConfig("rezzo", {}), 2, on_finished=lambda number, outcome: None)
    with pytest.raises(WorkerStartError) as raised:  # one error, as `serve` reports it, not a group
        run_trio(pool.run)
    assert "did not start: it exited with status 1" in str(raised.value)


def test_bench_server_report_lists_every_try_and_the_hosts_speed(capsys: pytest.CaptureFixture[str]) -> None:
    from cellarena.server.bench.server import _report_workers

    def run(on_time: float, cpu: float) -> dict[str, Any]:
        return {
            "on_time": on_time,
            "cpu_us_per_agent_tick": cpu,
            "server_cpu_share": 0.8,
            "load_cpu_share": 0.3,
        }

    level = {
        "agents": 2048,
        "one": run(1.0, 38.0),
        "workers": run(0.982, 44.0),
        "tries_on_time": {"one": [0.71, 0.992, 1.0], "workers": [0.982, 0.96, 0.765]},
        "cpu_workers_over_one": 44.0 / 38.0,
    }
    _report_workers(
        {
            "workers": 2,
            "repeat": 3,
            "host_loop_ms": {"fastest": 8.3, "slowest": 15.9},
            "levels": [level],
            "max_agents_at_15hz": {"one": 2048, "workers": 0},
            "agents_workers_over_one": 0.0,
            "cpu_workers_over_one": None,
            "goals_met": {"agents": False, "cpu": False},
        },
        as_json=False,
    )
    out = " ".join(capsys.readouterr().out.split())  # rich wraps at the terminal's width
    assert "best of 3 tries per level" in out
    assert "2048 agents: one process 71.0%, 99.2%, 100.0%; 2 workers 98.2%, 96.0%, 76.5%" in out
    assert "a fixed loop took 8.3 to 15.9 ms before the runs (1.92x" in out
