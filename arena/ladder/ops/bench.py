"""`cellarena bench ladder`: one ladder process under many bots that queue again after every match.

The ladder runs in this process, as `cellarena ladder serve` runs it: the rated queue, the
matchmaker, a SQLite store in WAL mode, replays written for every match. The bots run in another
process (`bench_bots`), each with its own token, answering every tick with the game's no-op. After a
warm-up (``--warmup`` seconds at least, and until a first match has ended, so that a busy machine's
slow start is not measured; ``warmup_s`` in the output) the figures are taken over ``--seconds``:
matches per minute, the queue wait of the bots that were seated (p50, p95), the share of ticks on
time, the server's CPU per agent-tick (the whole process: event loop and database
threads), and the matchmaker's share of that CPU.

With ``--cluster``, the same load runs twice, side by side in one run: first with every match
played in the ladder's process, then with the matches handed to the cluster's workers (the load
bots follow redirects). The figure that says how far one ladder process then goes is its own CPU
per match: the ratio of the two is printed.

With ``--submitted N`` it measures instead what a submitted bot costs per match: a Python bot as
`cellarena new-bot` writes it, built as a submission is (`cellarena.arena.ladder.submissions.build`),
started N times as the ladder starts one, isolated, on a connection handed to it: the time from its
launch to its hello (median and p90; the goal is at most 1 s at the median).

With ``--workers N`` the load runs with one worker (every match in the ladder's process) and then
with N worker processes on this machine (`worker_pool`, as ``ladder serve --workers N``). Each run
reports the CPU of the server (the ladder's process and its workers, each read from /proc) apart
from the load generator's, since on one machine they share the cores.
"""

from __future__ import annotations

import contextlib
import gc
import json
import logging
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import click
import trio

from cellarena.arena.cluster import ClusterError, ClusterSpec, cluster_option
from cellarena.arena.ladder.hosting.cluster_hand_off import HandOffConfig, open_hand_off
from cellarena.arena.ladder.hosting.worker_pool import MAX_WORKERS, LocalWorkers
from cellarena.arena.ladder.hosting.worker_process import WorkerSetup
from cellarena.arena.ladder.ops.wiring import LadderConfig, build
from cellarena.arena.ladder.rules import LadderRules
from cellarena.arena.ladder.services.counters import LadderStats
from cellarena.arena.ladder.services.starter import HandsOff
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.server.bench.cpu import cpu_seconds
from cellarena.server.bench.harness import raise_file_limit
from cellarena.server.bench.server import load_games
from cellarena.server.bots.launcher import BotSpec, start_bot, stop_bot
from cellarena.server.cli.params import FiniteFloatRange, ranged_option
from cellarena.server.cli.run import quiet_logger
from cellarena.server.games import plugin
from cellarena.server.play.match import TickSettings

#: The issue's goals on a 2-core host: 500 bots in one process, 1,000 with workers.
GOAL_BOTS = 500
GOAL_BOTS_WORKERS = 1000
GOAL_ON_TIME = 0.99
GOAL_WAIT_P95_S = 5.0
GOAL_MATCHMAKING_SHARE = 0.02
#: A submitted Python bot's time from its launch to its hello, at the median (issue 41).
GOAL_HELLO_P50_S = 1.0
#: The bots' budget at 15 Hz: the period less the server's own share of it (see `bench server`).
BUDGET_MS = 50.0
#: How long past the warm-up a run waits for its first match to end before it gives up.
SETTLE_S = 120.0


class BenchError(Exception):
    """A run that could not measure what it came for; the message says why and what to do."""


def _cpu(pid: int) -> float:
    """`cpu_seconds` of ``pid``, 0 for a process that is gone (a worker restarted meanwhile)."""
    return cpu_seconds(pid) or 0.0


def _register(store: LadderStore, game: str, bots: int) -> list[str]:
    return [store.add_bot(f"load{i:05d}", game)[1].secret for i in range(bots)]


async def _settled(stats: LadderStats) -> bool:
    """Whether a first match ends within `SETTLE_S`. The figures are of steady play: on a busy
    machine the workers or the load's bots may not have played a match by the end of the warm-up,
    and a window that starts then measures their start-up, or nothing."""
    with trio.move_on_after(SETTLE_S):
        while stats.matches_ended == 0:
            await trio.sleep(0.05)
    return stats.matches_ended > 0


async def _stop_load(load: trio.Process) -> dict[str, Any]:
    """Stop the load generator (bench_bots stops on SIGTERM) and read its report."""
    assert load.stdout is not None
    load.send_signal(signal.SIGTERM)
    out = b""
    with trio.move_on_after(30):
        async for chunk in load.stdout:
            out += chunk
        await load.wait()
    if load.returncode is None:
        load.kill()
    return dict(json.loads(out or b"{}"))


async def _run(
    store: LadderStore,
    config: LadderConfig,
    tokens: list[str],
    seconds: float,
    warmup: float,
    hand_off: HandsOff | None = None,
) -> dict[str, Any]:
    lobby, seating = build(store, config, hand_off)
    stats = seating.queue.stats  # one LadderStats, shared by the queue and the starter (`build`)
    taken: dict[str, Any] = {}
    workers = hand_off if isinstance(hand_off, LocalWorkers) else None
    async with trio.open_nursery() as nursery:
        if workers is not None:
            await nursery.start(workers.run)
        port = await nursery.start(lobby.serve)  # which runs the seating's matchmaker too
        load = await trio.lowlevel.open_process(
            [
                sys.executable,
                "-m",
                "cellarena.arena.ladder.ops.bench_bots",
                "127.0.0.1",
                str(port),
                str(warmup + SETTLE_S + seconds),  # stopped by SIGTERM once measured
                config.game,
                *(["follow"] if hand_off is not None else []),
            ],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
        )
        assert load.stdin is not None and load.stdout is not None
        await load.stdin.send_all("".join(t + "\n" for t in tokens).encode())
        await load.stdin.aclose()
        began = trio.current_time()

        def snapshot() -> dict[str, Any]:
            return {
                "cpu": time.process_time(),
                "workers_cpu": sum(_cpu(pid) for pid in workers.pids()) if workers else 0.0,
                "load_cpu": _cpu(load.pid),
                "wall": time.perf_counter(),
                "mm_cpu": stats.matchmaking_cpu,
                "ended": stats.matches_ended,
                "agent_ticks": stats.agent_ticks,
                "ticks": stats.ticks,
                "bad": stats.bad_ticks,
                "behind": stats.behind_ticks,
            }

        await trio.sleep(warmup)
        if not await _settled(stats):
            taken["unsettled"] = trio.current_time() - began
            await _stop_load(load)  # stopped and waited for, its report unread
        else:
            taken["warmup_s"] = trio.current_time() - began
            start = snapshot()
            stats.waits.clear()
            await trio.sleep(seconds)
            end = snapshot()
            taken.update(start=start, end=end, p50=stats.wait_percentile(50), p95=stats.wait_percentile(95))
            taken["load"] = await _stop_load(load)
        nursery.cancel_scope.cancel()
    if "unsettled" in taken:
        where = f"in {workers.count} worker processes" if workers is not None else "in the ladder's process"
        raise BenchError(
            f"no match ended {where} within {taken['unsettled']:.1f} s of the load's start (the "
            f"warm-up, {warmup:g} s, and {SETTLE_S:g} s more): the machine is too busy, or the "
            "matches could not start (run `cellarena ladder serve` with the same options to see why)"
        )
    start, end = taken["start"], taken["end"]
    wall = end["wall"] - start["wall"]
    ladder_cpu = end["cpu"] - start["cpu"]
    workers_cpu = max(0.0, end["workers_cpu"] - start["workers_cpu"])  # a restarted worker starts at 0
    cpu = ladder_cpu + workers_cpu
    agent_ticks = end["agent_ticks"] - start["agent_ticks"]
    ticks = end["ticks"] - start["ticks"]
    ended = end["ended"] - start["ended"]

    return {
        "bots": len(tokens),
        "seconds": seconds,
        "warmup_s": taken["warmup_s"],
        "ended_in_warmup": start["ended"],
        "matches_per_minute": ended / (end["wall"] - start["wall"]) * 60,
        "workers": workers.count if workers is not None else 1,
        "ladder_cpu_ms_per_match": ladder_cpu / ended * 1e3 if ended else None,
        "queue_wait_p50_s": taken["p50"],
        "queue_wait_p95_s": taken["p95"],
        "on_time": 1 - (end["bad"] - start["bad"]) / ticks if ticks else 0.0,
        "behind_schedule": (end["behind"] - start["behind"]) / ticks if ticks else 0.0,
        "cpu_us_per_agent_tick": cpu / agent_ticks * 1e6 if agent_ticks else None,
        "server_cpu_share": cpu / wall,
        "ladder_cpu_share": ladder_cpu / wall,
        "workers_cpu_share": workers_cpu / wall,
        "load_cpu_share": (end["load_cpu"] - start["load_cpu"]) / wall,
        "matchmaking_share": (end["mm_cpu"] - start["mm_cpu"]) / ladder_cpu if ladder_cpu else 0.0,
        "load": taken["load"],
    }


def run(
    bots: int,
    seconds: float,
    ticks: int,
    warmup: float,
    game: str | None = None,
    cluster: ClusterSpec | None = None,
    workers: int = 1,
) -> dict[str, Any]:
    """One measured run (matches on the ``cluster`` if given, or in ``workers`` local worker
    processes if more than one); the dict is the --json output. ``game``: the first of `load_games`
    unless given."""
    game = game or load_games()[0]
    game_plugin = plugin(game)
    workload = game_plugin.load_profile()
    if workload is None:
        raise ValueError(f"{game} gives no load benchmark workload")
    cli = game_plugin.game_cli()
    raise_file_limit()
    with tempfile.TemporaryDirectory(prefix="cellarena-bench-ladder-") as tmp:
        store = LadderStore(Path(tmp) / "ladder.sqlite")
        try:
            tokens = _register(store, game, bots)
            maps = workload.tournament_maps[:1]
            config = LadderConfig(
                game,
                workload.tournament_config(None, ticks),
                map_key=cli.map_key,
                maps=tuple(maps),
                settings=TickSettings(tick_rate=15.0, budget_ms=BUDGET_MS, reconnect_grace=5.0),
                host="127.0.0.1",
                port=0,
                # Every bot connects from this machine: the per-address cap is for strangers.
                rules=LadderRules(max_queue=2 * bots + 16, max_connections_per_address=2 * bots + 16),
                replay_dir=Path(tmp) / "replays",
            )
            config.replay_dir.mkdir()  # type: ignore[union-attr]
            with contextlib.ExitStack() as stack:
                hand_off: HandsOff | None = None
                if workers > 1:
                    setup = WorkerSetup(
                        game,
                        config.config_for(config.maps[0]),
                        config.settings,
                        bind_host=config.host,
                        max_connections_per_address=config.rules.max_connections_per_address,
                        log_level=logging.getLogger("cellarena").getEffectiveLevel(),
                    )
                    hand_off = LocalWorkers(workers, setup, public_host=config.host)
                if cluster is not None:
                    configs = [config.config_for(m) for m in config.maps]
                    hand_off = stack.enter_context(open_hand_off(cluster, game, configs, HandOffConfig()))
                gc.collect()
                gc.freeze()
                try:
                    return trio.run(_run, store, config, tokens, seconds, warmup, hand_off)
                finally:
                    gc.unfreeze()
        finally:
            store.close()


def goals(result: dict[str, Any], bots: int = GOAL_BOTS) -> list[tuple[str, bool]]:
    """The goals at ``bots`` bots (`GOAL_BOTS` in one process, `GOAL_BOTS_WORKERS` with workers)."""
    p95 = result["queue_wait_p95_s"]
    return [
        (f"{bots} bots connected", result["bots"] >= bots),
        (f">= {GOAL_ON_TIME:.0%} of ticks on time", result["on_time"] >= GOAL_ON_TIME),
        (f"queue wait p95 < {GOAL_WAIT_P95_S:g} s", p95 is not None and p95 < GOAL_WAIT_P95_S),
        (
            f"matchmaking < {GOAL_MATCHMAKING_SHARE:.0%} of server CPU",
            result["matchmaking_share"] < GOAL_MATCHMAKING_SHARE,
        ),
    ]


async def _time_to_hello(spec: BotSpec, isolate: bool) -> float:
    """Seconds from asking the launcher to start ``spec`` on a handed connection to its first bytes
    (its hello); the bot is stopped then."""
    with socket.create_server(("127.0.0.1", 0)) as listener:
        port = listener.getsockname()[1]
        client = socket.create_connection(("127.0.0.1", port), timeout=5.0)
        server, _ = listener.accept()
    client.settimeout(None)
    began = time.perf_counter()
    with server, trio.fail_after(60):
        try:
            proc = await start_bot(spec, "127.0.0.1", port, None, isolate=isolate, connection=client)
        finally:
            client.close()  # the bot has its own copy
        try:
            await trio.lowlevel.wait_readable(server)
            if not server.recv(1, socket.MSG_PEEK):
                raise click.ClickException(f"the bot closed its connection before its hello; {spec}")
            return time.perf_counter() - began
        finally:
            await stop_bot(proc, patience=0.0)


def start_cost(starts: int, game: str, isolate: bool = True) -> dict[str, Any]:
    """Build a Python starter of ``game`` as a submission is built, then start it ``starts`` times as
    the ladder starts a submitted bot: its build's seconds and its times to hello (p50, p90)."""
    from cellarena.arena.cli.new_bot import write_bot
    from cellarena.arena.ladder.submissions.build import PYTHON_PACKAGES
    from cellarena.arena.ladder.submissions.build import build as build_bot
    from cellarena.server.bots.python_view import python_view

    with tempfile.TemporaryDirectory(prefix="cellarena-bench-submitted-") as tmp:
        folder = Path(tmp) / "bot"
        write_bot(game, "bench_bot", "python", folder)
        built = trio.run(build_bot, folder)
        if not built.ok or built.program is None:
            raise click.ClickException(f"the bot did not build: {built.reason}\n{built.log}")
        spec = built.program.spec(python_view(PYTHON_PACKAGES) if isolate else None)
        times = sorted(trio.run(_time_to_hello, spec, isolate) for _ in range(starts))
    return {
        "starts": starts,
        "isolated": isolate,
        "build_s": built.seconds,
        "hello_p50_s": times[len(times) // 2],
        "hello_p90_s": times[min(len(times) - 1, (len(times) * 9) // 10)],
        "hello_max_s": times[-1],
    }


def _report_start_cost(result: dict[str, Any]) -> None:
    from cellarena.server.bench.harness import report

    report(
        f"A submitted Python bot started {result['starts']} times as the ladder starts one"
        + (" (isolated)" if result["isolated"] else ""),
        ("build", "launch to hello p50", "p90", "max"),
        [
            (
                f"{result['build_s']:.2f} s",
                f"{result['hello_p50_s']:.3f} s",
                f"{result['hello_p90_s']:.3f} s",
                f"{result['hello_max_s']:.3f} s",
            )
        ],
        [(f"median launch to hello <= {GOAL_HELLO_P50_S:g} s", result["hello_p50_s"] <= GOAL_HELLO_P50_S)],
        ["build: the starter's build as a submission's (a Python bot: its files checked in the sandbox)"],
    )


@click.command("ladder")
@ranged_option("--bots", GOAL_BOTS, click.IntRange(2, 20_000), "Load bots.")
@ranged_option("--seconds", 60.0, FiniteFloatRange(1, 3600), "Measured time, after the warm-up.")
@ranged_option("--ticks", 150, click.IntRange(2, 100_000), "Ticks per match (150: 10 s at 15 Hz).")
@ranged_option(
    "--warmup",
    10.0,
    FiniteFloatRange(0, 600),
    "Seconds at least before the figures are taken (bots connect, matches begin), and until a first "
    "match has ended.",
)
@click.option(
    "--game",
    default=None,
    help="The game to play; its plugin must give a load benchmark. [default: the first such game by name]",
)
@cluster_option(
    "Also run the load with the matches on this Dask cluster (local:N or tcp://HOST:PORT), and "
    "compare the ladder's own CPU per match."
)
@ranged_option(
    "--workers",
    1,
    click.IntRange(1, MAX_WORKERS),
    "Also run the load with the matches in this many worker processes here (`ladder serve "
    "--workers`), after the run with every match in the ladder's process.",
)
@click.option(
    "--submitted",
    default=None,
    type=click.IntRange(1, 1000),
    help="Instead of the load: start a built Python bot this many times as the ladder starts a "
    "submitted one (isolated) and report its time from launch to hello.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(
    bots: int,
    seconds: float,
    ticks: int,
    warmup: float,
    game: str | None,
    cluster: ClusterSpec | None,
    workers: int,
    submitted: int | None,
    as_json: bool,
) -> None:
    """A ladder at 15 Hz under bots that queue again after every match: throughput, waits, CPU."""
    if submitted is not None:
        cost = start_cost(submitted, game or load_games()[0])
        if as_json:
            click.echo(json.dumps(cost))
        else:
            _report_start_cost(cost)
        return
    game = game or load_games()[0]
    if game not in load_games():
        raise click.BadParameter(
            f"{game} gives no load benchmark workload; these do: {', '.join(load_games())}",
            param_hint="--game",
        )
    quiet_logger("cellarena")  # the load's own disconnects are expected
    quiet_logger("distributed")
    if workers > 1 and cluster is not None:
        raise click.BadParameter(
            "compare one worker with either a cluster or workers here, not both", param_hint="--workers"
        )
    try:
        result = run(bots, seconds, ticks, warmup, game)
        in_workers = run(bots, seconds, ticks, warmup, game, workers=workers) if workers > 1 else None
        on_cluster = run(bots, seconds, ticks, warmup, game, cluster) if cluster is not None else None
    except (ClusterError, BenchError) as exc:
        raise click.ClickException(str(exc)) from None
    runs = [("1 worker" if workers > 1 else "here", result)]
    if in_workers is not None:
        runs.append((f"{workers} workers", in_workers))
        result = {**result, "in_workers": in_workers}
    if on_cluster is not None:
        runs.append((f"on {cluster}", on_cluster))
        here_ms, there_ms = result["ladder_cpu_ms_per_match"], on_cluster["ladder_cpu_ms_per_match"]
        result = {
            **result,
            "cluster": {
                **on_cluster,
                "ladder_cpu_per_match_ratio": here_ms / there_ms if here_ms and there_ms else None,
            },
        }
    if as_json:
        click.echo(json.dumps(result))
        return
    from cellarena.server.bench.harness import report

    def fmt(value: float | None, spec: str) -> str:
        return "-" if value is None else format(value, spec)

    notes = [f"load {where}: {r['load']}" for where, r in runs]
    if cluster is not None:
        ratio = result["cluster"]["ladder_cpu_per_match_ratio"]
        notes.append(
            f"the ladder's own CPU per match is {fmt(ratio, '.1f')}x smaller with the matches on the cluster"
        )
    report(
        f"One ladder, {bots} bots re-queuing after each {ticks}-tick {game} match at 15 Hz",
        (
            "where",
            "matches/min",
            "wait p50",
            "wait p95",
            "on time",
            "server CPU/agent-tick",
            "CPU: ladder+workers, load",
            "ladder CPU/match",
            "matchmaking",
        ),
        [
            (
                where,
                f"{r['matches_per_minute']:.0f}",
                fmt(r["queue_wait_p50_s"], ".2f") + " s",
                fmt(r["queue_wait_p95_s"], ".2f") + " s",
                f"{r['on_time']:.1%}",
                fmt(r["cpu_us_per_agent_tick"], ".0f") + " µs",
                f"{r['ladder_cpu_share']:.0%}+{r['workers_cpu_share']:.0%}, {r['load_cpu_share']:.0%}",
                fmt(r["ladder_cpu_ms_per_match"], ".1f") + " ms",
                f"{r['matchmaking_share']:.2%}",
            )
            for where, r in runs
        ],
        goals(runs[-1][1], GOAL_BOTS_WORKERS) if workers > 1 else goals(runs[0][1]),
        [
            *notes,
            "CPU: shares of one core over the measured time (ladder: its process; workers: theirs, "
            "summed; load: the load bots' process)",
        ],
    )
