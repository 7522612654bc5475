"""`cellarena bench ladder`: the figures it reports come from matches really played and recorded."""

from __future__ import annotations

import json
import logging
import re

import pytest
from cellarena_cli import invoke

from cellarena.arena.ladder.ops import bench
from cellarena.arena.ladder.services.counters import LadderStats


def test_bench_ladder_plays_rated_matches_and_reports_them(caplog: pytest.LogCaptureFixture) -> None:
    code, out = invoke(
        "bench", "ladder", "--bots", "8", "--seconds", "3", "--warmup", "0", "--ticks", "15", "--json"
    )
    assert code == 0, out
    # The command quieted "cellarena" for its load only: a later warning in this process is logged.
    logging.getLogger("cellarena.server").warning("after the benchmark")
    assert "after the benchmark" in caplog.text
    report = json.loads(out)
    assert report["bots"] == 8
    # No warm-up asked for, but the figures start after a first match ended (not at a busy machine's
    # start-up, which measured nothing: seen beside two busy processes).
    assert report["ended_in_warmup"] >= 1 and report["warmup_s"] > 0
    # 15-tick matches at 15 Hz last about a second: four pairs play several each in 3 s.
    assert report["matches_per_minute"] >= 4 * 60 / 3
    assert 0 <= report["queue_wait_p50_s"] <= report["queue_wait_p95_s"]
    assert 0 <= report["on_time"] <= 1 and 0 <= report["matchmaking_share"] < 1
    assert report["cpu_us_per_agent_tick"] > 0
    # Each bot connected again after each of its matches; the tokens were all good.
    assert report["load"]["connections"] > 8
    assert "bad_hello" not in report["load"]["refused"]


def test_bench_ladder_on_a_cluster_compares_the_ladders_cpu_per_match() -> None:
    """With --cluster the load runs twice: matches here, then on a local Dask cluster, where the
    load bots follow the ladder's redirects."""
    args = ["--bots", "4", "--seconds", "3", "--warmup", "0", "--ticks", "15", "--cluster", "local:1"]
    code, out = invoke("bench", "ladder", *args, "--json")
    assert code == 0, out
    report = json.loads(out)
    there = report["cluster"]
    assert report["load"]["redirects"] == 0 and there["load"]["redirects"] > 0
    assert there["matches_per_minute"] > 0 and there["ladder_cpu_ms_per_match"] > 0
    assert (
        there["ladder_cpu_per_match_ratio"]
        == report["ladder_cpu_ms_per_match"] / there["ladder_cpu_ms_per_match"]
    )


def test_bench_ladder_with_workers_runs_one_beside_n_and_reports_cpu_apart() -> None:
    """With --workers 2 the load runs twice: every match in the ladder's process, then in two worker
    processes, where the load bots follow the redirects; the server's CPU (the ladder's and its
    workers') and the load generator's are reported apart."""
    args = ["--bots", "4", "--seconds", "3", "--warmup", "0", "--ticks", "15", "--workers", "2"]
    code, out = invoke("bench", "ladder", *args, "--json")
    assert code == 0, out
    report = json.loads(out)
    there = report["in_workers"]
    assert report["workers"] == 1 and there["workers"] == 2
    assert report["load"]["redirects"] == 0 and there["load"]["redirects"] > 0
    assert report["workers_cpu_share"] == 0 and there["workers_cpu_share"] > 0
    assert there["matches_per_minute"] > 0 and there["cpu_us_per_agent_tick"] > 0
    assert there["ended_in_warmup"] >= 1  # the window began once the workers played
    for run in (report, there):
        assert run["load_cpu_share"] > 0 and run["ladder_cpu_share"] > 0
        assert run["server_cpu_share"] == pytest.approx(run["ladder_cpu_share"] + run["workers_cpu_share"])


def test_a_run_whose_first_match_does_not_end_in_time_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    """A match of 15 ticks at 15 Hz takes most of a second: with 0.2 s to settle after no warm-up, no
    match has ended, and the command says so rather than report a window that measured nothing."""
    monkeypatch.setattr(bench, "SETTLE_S", 0.2)
    code, out = invoke("bench", "ladder", "--bots", "2", "--seconds", "1", "--warmup", "0", "--ticks", "15")
    assert code == 1, out
    said = " ".join(out.split())
    # The time it waited is measured (more than 0.2 s on a busy machine); the limits are the options'.
    assert re.search(r"no match ended in the ladder's process within \d+\.\d s of the load's start", said), (
        said
    )
    assert "(the warm-up, 0 s, and 0.2 s more): the machine is too busy" in said, said


def test_bench_ladder_refuses_bad_options() -> None:
    code, out = invoke("bench", "ladder", "--bots", "1")
    assert code == 2 and "--bots" in out
    code, out = invoke("bench", "ladder", "--cluster", "local:0")
    assert code == 2 and "--cluster" in out
    code, out = invoke("bench", "ladder", "--workers", "0")
    assert code == 2 and "--workers" in out
    code, out = invoke("bench", "ladder", "--workers", "2", "--cluster", "local:1")
    assert code == 2 and "--workers" in out and "not both" in out


def test_wait_percentiles() -> None:
    stats = LadderStats()
    assert stats.wait_percentile(50) is None
    stats.waits.extend(float(i) for i in range(1, 101))
    assert stats.wait_percentile(50) == 50.5
    assert 94 < (stats.wait_percentile(95) or 0) < 96
