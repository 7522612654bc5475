"""`cellarena bench server`: how many agents one server process serves at 15 Hz, and the tick rate
matches keep when their bots answer at the very end of the default budget (`run_rates`).

The server runs in this process; the bots run in a separate load process (`loadgen`) and answer at
once with the game's no-op. The game's plugin gives the workload (`BenchLoad`): Rezzo's is matches
of eight seats, one agent each, on a map that keeps the automaton busy. For a rising number of
agents (one agent per connection), it runs matches for a few seconds and counts the ticks in which
every seat's answer arrived within its budget and that started in its slot of the 15 Hz schedule (no
more than a quarter period behind). The largest load with at least 99% of such ticks is the result,
along with the server's CPU time per agent-tick at that load. By default each level is played twice,
side by side, the server stepping the matches of a phase slot as one batch and one match at a time
(`ticking`), after an unreported warm-up level. Each level starts from a collected and
frozen heap (`gc.freeze`, as a long-running server would after start-up), so that the garbage of the
previous level and the objects of the imports are not scanned by the level's own collections.

With ``--workers N`` (`run_workers`), each level is served twice side by side instead: by one process
and by a server that plays its matches in N worker processes (`workers`, as `serve --workers N`
does), batched both. The CPU of the server's process tree (this process and its workers) and of the
load process are read apart over the same window (`cpu`), and the report gives the ratios of agents
served at 15 Hz and of CPU per agent-tick against the goals (1.25x the agents, CPU within 15%).
"""

from __future__ import annotations

import gc
import json
import math
import subprocess
import sys
import time
from collections.abc import Iterable
from functools import partial
from typing import Any

import click
import trio

from cellarena.server.bench.cpu import cpu_seconds, host_loop_ms, tree_cpu
from cellarena.server.bench.harness import raise_file_limit
from cellarena.server.cli.params import FiniteFloatRange, ranged_option
from cellarena.server.cli.run import quiet_logger
from cellarena.server.games import plugin, plugins
from cellarena.server.games.plugin import BenchLoad
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import TickSettings
from cellarena.server.workers.front import WorkerLobby

ON_TIME_GOAL = 0.99
#: Agent counts tried, in rising order, when the command line does not say.
DEFAULT_LEVELS = (64, 256, 512, 768, 1024, 1280, 1536, 1792, 2048)
#: The agents the command's goal asks one process to serve at 15 Hz.
GOAL_AGENTS = 2000
#: The bots' budget at 15 Hz. A budget of a whole period leaves the server no time of its own, so
#: each tick would last the period plus the server's work and fall behind the schedule.
BUDGET_MS = 50.0
#: The unreported first level (or the largest level, if smaller): big enough that the levels after it
#: find the process grown (sockets, buffers, heap) as a long-running server is.
WARM_UP_AGENTS = 1024


def load_games() -> list[str]:
    """The games the load benchmarks can play (their plugins give a `BenchLoad`); the first is the default."""
    return [p.name for p in plugins() if p.bench_load is not None]


def bench_load(game: str) -> BenchLoad:
    """The workload of ``game``; ValueError if its plugin gives none."""
    load = plugin(game).load_profile()
    if load is None:
        raise ValueError(f"{game} gives no load benchmark workload; these do: {', '.join(load_games())}")
    return load


def loadgen_command(port: int, connections: int, game: str) -> list[str]:
    """The load process's command line: ``connections`` bots of ``game`` against this port."""
    return [
        sys.executable,
        "-m",
        "cellarena.server.bench.loadgen",
        "127.0.0.1",
        str(port),
        str(connections),
        game,
    ]


async def run_level(
    game: str,
    agents: int,
    seconds: float,
    tick_rate: float = 15.0,
    budget_ms: float = BUDGET_MS,
    batch: bool = True,
    workers: int = 1,
    debug: str = "none",
) -> dict[str, Any]:
    """One load level: ``agents`` connections in matches of ``game``, for ``seconds`` of play;
    ``batch``: whether the server steps the matches of a phase slot as one (`ticking`); ``workers``:
    the server's worker processes (1: this process plays the matches, as `serve` does by default);
    ``debug``: what the load's bots draw with every answer (`loadgen.DRAWINGS`).

    The server's CPU is its process tree's (this process, and its workers), the load generator's
    apart, both over the same window: from the first match's start to the last one's end."""
    workload = bench_load(game)
    seats = workload.server_seats
    matches = math.ceil(agents / seats)
    ticks = max(2, round(seconds * tick_rate))
    ended = 0

    def snapshot(key: str) -> None:
        cpu[key] = time.process_time()
        cpu[f"{key}_workers"] = tree_cpu(lobby.worker_pids())
        cpu[f"{key}_load"] = cpu_seconds(load.pid)
        cpu[f"{key}_wall"] = time.perf_counter()

    def finished(_number: int, _outcome: Any) -> None:
        nonlocal ended
        ended += 1
        if ended == matches:  # before the workers stop (their CPU is read while they live)
            snapshot("end")

    config = LobbyConfig(
        game,
        workload.server_config(ticks),
        TickSettings(tick_rate=tick_rate, budget_ms=budget_ms),
        host="127.0.0.1",
        port=0,
        matches=matches,
        hello_timeout=120.0,
        batch=batch,
        on_finished=finished,
    )
    lobby = Lobby(config) if workers == 1 else WorkerLobby(config, workers)
    cpu: dict[str, float | None] = {}
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lobby.serve)
        load = await trio.lowlevel.open_process(
            [
                sys.executable,
                "-m",
                "cellarena.server.bench.loadgen",
                "127.0.0.1",
                str(port),
                str(matches * seats),
                game,
                "-",
                debug,
            ],
            stdin=subprocess.DEVNULL,
        )

        async def measure() -> None:
            # CPU from the first match's start to the last one's end, against every agent-tick played.
            while not lobby.matches_started:
                await trio.sleep(0.005)
            snapshot("start")

        nursery.start_soon(measure)
    if "end" not in cpu:
        snapshot("end")
    with trio.move_on_after(30):
        await load.wait()
    if load.returncode is None:
        load.kill()
    return _level_result(lobby, cpu, matches, seats, batch=batch, workers=workers, debug=debug)


def _level_result(
    lobby: Lobby,
    cpu: dict[str, float | None],
    matches: int,
    seats: int,
    *,
    batch: bool,
    workers: int,
    debug: str,
) -> dict[str, Any]:
    """What one level measured: the ticks played on time, and the CPU spent per agent-tick."""
    played = sum(o.ticks for o in lobby.outcomes)
    late = sum(o.bad_ticks for o in lobby.outcomes)
    behind = sum(o.behind_ticks for o in lobby.outcomes)
    agent_ticks = sum(o.ticks * len(o.names) for o in lobby.outcomes)
    driver = lobby.driver
    wall = _spent(cpu, "wall") or 1e-9
    server = (_spent(cpu, "") or 0.0) + (_spent(cpu, "workers") or 0.0)
    load_cpu = _spent(cpu, "load")
    return {
        "batch": batch,
        "workers": workers,
        # A worker's batches are its own: counted here for the server of one process only.
        "batched_share": driver.batched_ticks / played if driver is not None and played else None,
        "agents": matches * seats,
        "matches": matches,
        "ticks": played,
        "on_time": 1 - late / played if played else 0.0,
        "behind_schedule": behind / played if played else 0.0,
        "cpu_us_per_agent_tick": server / agent_ticks * 1e6 if agent_ticks else 0.0,
        "server_cpu_share": server / wall,
        # Of which this process's (the front, with workers) and the worker processes' (None: none).
        "front_cpu_share": (_spent(cpu, "") or 0.0) / wall,
        "workers_cpu_share": (w / wall if (w := _spent(cpu, "workers")) is not None else None)
        if workers > 1
        else None,
        "load_cpu_share": load_cpu / wall if load_cpu is not None else None,
        "debug": debug,
        "debug_dropped": sum(sum(o.debug_dropped) for o in lobby.outcomes),
    }


def _spent(cpu: dict[str, float | None], key: str) -> float | None:
    """``end`` less ``start`` of one of `run_level`'s readings (None where one is missing)."""
    suffix = f"_{key}" if key else ""
    start, end = cpu.get(f"start{suffix}"), cpu.get(f"end{suffix}")
    return end - start if start is not None and end is not None else None


#: Agents of the debug layer's measurement unless the command line says.
DEBUG_AGENTS = 512


def run_debug_cost(
    game: str, agents: int = DEBUG_AGENTS, seconds: float = 4.0, tick_rate: float = 15.0
) -> dict[str, Any]:
    """The debug layer's cost, side by side: one load level played with bots that draw nothing, that
    draw a typical drawing, and that flood past every cap, each answer (`loadgen.DRAWINGS`); the
    server's CPU per agent-tick of each, and the two ratios to the level without drawings."""
    out: dict[str, Any] = {"agents": agents}
    for drawing in ("none", "typical", "flood"):
        gc.collect()
        gc.freeze()
        out[drawing] = trio.run(
            partial(run_level, game, agents, seconds, tick_rate, BUDGET_MS, True, debug=drawing)
        )
    base = out["none"]["cpu_us_per_agent_tick"]
    for drawing in ("typical", "flood"):
        cost = out[drawing]["cpu_us_per_agent_tick"]
        out[f"{drawing}_over_none"] = cost / base if base else None
    return out


#: Bots of the rate measurement answer this long before their budget runs out: at the very end, less
#: the load process's own wake-up delay (epoll sleeps in whole ms), so that their answers are in time.
LEAD_MS = 2.0
#: The achieved tick rate must be within this share of the nominal rate.
RATE_GOAL = 0.01


async def run_rate(
    game: str, matches: int, seconds: float, tick_rate: float, budget_ms: float | None
) -> dict[str, Any]:
    """The tick rate ``matches`` fixed-rate matches achieve when every bot answers `LEAD_MS` before its
    budget runs out. ``budget_ms`` None: the server's default budget (`TickSettings`)."""
    workload = bench_load(game)
    seats = workload.server_seats
    ticks = max(3, round(seconds * tick_rate))
    settings = TickSettings(tick_rate=tick_rate, budget_ms=budget_ms)
    collected: dict[int, list[float]] = {}

    def on_tick(engine: Any) -> None:
        # By match: a match's engine object changes when its world joins a slot's batch.
        number = next(m.number for m in lobby.running if m.engine is engine)
        collected.setdefault(number, []).append(trio.current_time())

    lobby = Lobby(
        LobbyConfig(
            game,
            workload.server_config(ticks),
            settings,
            host="127.0.0.1",
            port=0,
            matches=matches,
            hello_timeout=120.0,
            on_tick=on_tick,
        )
    )
    async with trio.open_nursery() as nursery:
        port = await nursery.start(lobby.serve)
        load = await trio.lowlevel.open_process(
            [*loadgen_command(port, matches * seats, game), str(LEAD_MS)],
            stdin=subprocess.DEVNULL,
        )
    with trio.move_on_after(30):
        await load.wait()
    if load.returncode is None:
        load.kill()
    # Each match's rate from its second tick on (the first waits for the match's phase slot): the
    # ticks collected, over the time between the first and the last collection.
    rates = [(len(t) - 2) / (t[-1] - t[1]) for t in collected.values() if len(t) > 2 and t[-1] > t[1]]
    late = sum(o.late_ticks for o in lobby.outcomes)
    played = sum(o.ticks for o in lobby.outcomes)
    achieved = sum(rates) / len(rates) if rates else 0.0
    return {
        "budget_ms": settings.tick_budget_ms,
        "matches": matches,
        "agents": matches * seats,
        "nominal_hz": tick_rate,
        "achieved_hz": achieved,
        "ratio": achieved / tick_rate,
        # What a tick costs beyond its budget: the server's own work plus its wake-up delay.
        "overrun_ms": (1 / achieved - settings.tick_budget_ms / 1000) * 1000 if achieved else None,
        "late_share": late / played if played else 0.0,
    }


def run_rates(game: str, matches: int = 4, seconds: float = 4.0, tick_rate: float = 15.0) -> dict[str, Any]:
    """Side by side: a budget of a whole period, and the default (a period less the server's margin)."""
    whole = trio.run(run_rate, game, matches, seconds, tick_rate, 1000.0 / tick_rate)
    default = trio.run(run_rate, game, matches, seconds, tick_rate, None)
    return {"whole_period": whole, "default": default, "goal_met": abs(default["ratio"] - 1) <= RATE_GOAL}


#: `run`'s ``batch``: the server as it runs by default (batched), one match at a time, or both in turn.
BATCH_MODES = ("both", "on", "off")


def run(
    levels: Iterable[int] = DEFAULT_LEVELS,
    seconds: float = 4.0,
    tick_rate: float = 15.0,
    game: str | None = None,
    batch: str = "both",
) -> dict[str, Any]:
    """Step through the levels until one misses the on-time goal; the dict is the --json output.

    ``game`` defaults to the first of `load_games`. ``batch`` "both" plays each level twice, the
    server stepping the matches of a phase slot as one batch and one at a time (in alternating
    order, so that neither always runs first); the batched run is the level's result, and the
    other is beside it, with the ratio of their CPU per agent-tick.
    """
    if batch not in BATCH_MODES:
        raise ValueError(f"batch must be one of {', '.join(BATCH_MODES)}, got {batch!r}")
    game = game or load_games()[0]
    raise_file_limit()
    # A level first that is not reported (1 s, up to WARM_UP_AGENTS): what a process does once
    # (imports, compiled kernels loaded from their cache, its heap and sockets growing) would
    # otherwise fall on the first level measured, which then missed the goal that the same load
    # met as a later level.
    gc.collect()
    levels = list(levels)
    warm_up = min(WARM_UP_AGENTS, max(levels, default=WARM_UP_AGENTS))
    trio.run(run_level, game, warm_up, 1.0, tick_rate, BUDGET_MS, batch != "off")
    results = []
    best: dict[str, Any] | None = None
    for i, agents in enumerate(levels):
        modes = {"both": [True, False] if i % 2 == 0 else [False, True], "on": [True], "off": [False]}[batch]
        runs = {}
        for mode in modes:
            gc.collect()
            gc.freeze()
            runs[mode] = trio.run(run_level, game, agents, seconds, tick_rate, BUDGET_MS, mode)
        level = runs[batch != "off"]
        if batch == "both":
            alone = level["one_by_one"] = runs[False]
            level["cpu_one_by_one_over_batched"] = (
                alone["cpu_us_per_agent_tick"] / level["cpu_us_per_agent_tick"]
                if level["cpu_us_per_agent_tick"]
                else None
            )
        results.append(level)
        if level["on_time"] < ON_TIME_GOAL:
            break
        best = level
    return {
        "budget_ms": BUDGET_MS,
        "batch": batch,
        "max_agents_at_15hz": best["agents"] if best else 0,
        "cpu_us_per_agent_tick": best["cpu_us_per_agent_tick"] if best else None,
        "levels": results,
    }


#: Server CPU per agent-tick of N workers may exceed one worker's by this share at most (so that a
#: host of many cores scales), and N workers should serve this many times the agents of one.
WORKERS_CPU_GOAL = 1.15
WORKERS_AGENTS_GOAL = 1.25


def _best(tries: list[dict[str, Any]]) -> dict[str, Any]:
    """The try of a level that kept the most ticks on time (ties: the least CPU per agent-tick): a
    host's noise (a core taken by a neighbour, a slower clock) only ever costs a run ticks, so the
    best of several tries is the nearest to what the server itself can do."""
    return max(tries, key=lambda run_: (run_["on_time"], -run_["cpu_us_per_agent_tick"]))


def run_workers(
    levels: Iterable[int] = DEFAULT_LEVELS,
    seconds: float = 4.0,
    tick_rate: float = 15.0,
    game: str | None = None,
    workers: int = 2,
    batch: bool = True,
    repeat: int = 1,
) -> dict[str, Any]:
    """Each level served by one process and by ``workers`` worker processes, side by side (in
    alternating order, so that neither always runs first), until both miss the on-time goal; the
    dict is the --json output. A worker server is made afresh per level: its start is not measured.

    ``repeat``: tries of each level by each server, interleaved; each server's best try is its
    result (`_best`), and every try's on-time share is kept beside it. Before each try, the host's
    speed is probed (`host_loop_ms`); the report gives the slowest and fastest probe of the run.
    """
    game = game or load_games()[0]
    raise_file_limit()
    gc.collect()
    levels = list(levels)
    warm_up = min(WARM_UP_AGENTS, max(levels, default=WARM_UP_AGENTS))
    trio.run(run_level, game, warm_up, 1.0, tick_rate, BUDGET_MS, batch)
    results = []
    probes: list[float] = []
    #: The most agents each served on time so far, by worker count.
    most = {1: 0, workers: 0}
    for i, agents in enumerate(levels):
        tries: dict[int, list[dict[str, Any]]] = {1: [], workers: []}
        for r in range(repeat):
            for count in [1, workers] if (i + r) % 2 == 0 else [workers, 1]:
                gc.collect()
                gc.freeze()
                probes.append(host_loop_ms())
                run_ = trio.run(run_level, game, agents, seconds, tick_rate, BUDGET_MS, batch, count)
                run_["host_loop_ms"] = probes[-1]
                tries[count].append(run_)
        one, many = _best(tries[1]), _best(tries[workers])
        level = {
            "agents": one["agents"],
            "one": one,
            "workers": many,
            "tries_on_time": {
                "one": [t["on_time"] for t in tries[1]],
                "workers": [t["on_time"] for t in tries[workers]],
            },
            "cpu_workers_over_one": (
                many["cpu_us_per_agent_tick"] / one["cpu_us_per_agent_tick"]
                if one["cpu_us_per_agent_tick"]
                else None
            ),
        }
        results.append(level)
        for count, run_ in ((1, one), (workers, many)):
            if run_["on_time"] >= ON_TIME_GOAL:
                most[count] = run_["agents"]
        if one["on_time"] < ON_TIME_GOAL and many["on_time"] < ON_TIME_GOAL:
            break
    most_one, most_many = most[1], most[workers]
    # CPU per agent-tick compared at the largest level both served on time.
    both = [lv for lv in results if min(lv["one"]["on_time"], lv["workers"]["on_time"]) >= ON_TIME_GOAL]
    cpu_ratio = both[-1]["cpu_workers_over_one"] if both else None
    return {
        "budget_ms": BUDGET_MS,
        "batch": "on" if batch else "off",
        "workers": workers,
        "repeat": repeat,
        "host_loop_ms": {"fastest": min(probes), "slowest": max(probes)} if probes else None,
        "max_agents_at_15hz": {"one": most_one, "workers": most_many},
        "agents_workers_over_one": most_many / most_one if most_one else None,
        "cpu_workers_over_one": cpu_ratio,
        "goals_met": {
            "agents": bool(most_one) and most_many >= WORKERS_AGENTS_GOAL * most_one,
            "cpu": cpu_ratio is not None and cpu_ratio <= WORKERS_CPU_GOAL,
        },
        "levels": results,
    }


def _levels(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    try:
        levels = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a comma-separated list of agent counts, e.g. 64,512"
        ) from None
    if not levels or any(n < 8 for n in levels):
        raise click.BadParameter(f"agent counts must be at least 8 (one match), got {value!r}")
    return sorted(levels)


@click.command("server")
@click.option(
    "--levels",
    default=",".join(map(str, DEFAULT_LEVELS)),
    show_default=True,
    callback=_levels,
    help="Agent counts to try, in rising order; the run stops at the first that misses the goal.",
)
@ranged_option("--seconds", 4.0, FiniteFloatRange(0.5, 120), "Play time per level.")
@click.option(
    "--game",
    default=None,
    help="The game to serve; its plugin must give a load benchmark. [default: the first such game by name]",
)
@click.option(
    "--batch",
    type=click.Choice(BATCH_MODES),
    default="both",
    show_default=True,
    help="Step the matches of a phase slot as one batch (on), one at a time (off), or each level both "
    "ways side by side (both; the batched run is the result).",
)
@ranged_option(
    "--workers",
    1,
    click.IntRange(1, 256),
    "Compare one server process with one that plays its matches in N worker processes "
    "(`serve --workers N`), each level side by side; --batch both then means on.",
)
@ranged_option(
    "--repeat",
    1,
    click.IntRange(1, 20),
    "With --workers: tries of each level by each server, interleaved; each server's best try "
    "counts (a noisy host only ever costs a run ticks), and every try is reported.",
)
@ranged_option(
    "--debug-agents",
    DEBUG_AGENTS,
    click.IntRange(0),
    "Agents of the debug layer's measurement: one level played without drawings, with a typical "
    "drawing and with a flood past the caps in every answer (0: skip it).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(
    levels: list[int],
    seconds: float,
    game: str | None,
    batch: str,
    workers: int,
    repeat: int,
    debug_agents: int,
    as_json: bool,
) -> None:
    """Agents one server process serves at 15 Hz (99% of ticks in their slot and every answer in time)."""
    game = game or load_games()[0]
    try:
        bench_load(game)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--game") from None
    if repeat > 1 and workers == 1:
        raise click.BadParameter(
            "tries are compared between one process and its workers: add --workers 2 (or more)",
            param_hint="--repeat",
        )
    quiet_logger("cellarena.server")  # the load's own disconnects are expected
    if workers > 1:
        runs = run_workers(levels, seconds, game=game, workers=workers, batch=batch != "off", repeat=repeat)
        _report_workers(runs, as_json)
        return
    result = run(levels, seconds=seconds, game=game, batch=batch)
    result["rate"] = run_rates(game, seconds=seconds)
    if debug_agents:
        result["debug"] = run_debug_cost(game, max(debug_agents, bench_load(game).server_seats), seconds)
    if as_json:
        click.echo(json.dumps(result))
        return
    _report(result, batch)


def _report(result: dict[str, Any], batch: str) -> None:
    """`command`'s report of `run`: the levels, the achieved rate, the debug layer's cost."""
    from rich.console import Console

    console = Console()
    _print_levels(console, result, batch)
    _print_rate(console, result["rate"])
    if "debug" in result:
        _print_debug_cost(console, result["debug"])


def _print_levels(console: Any, result: dict[str, Any], batch: str) -> None:
    from rich.table import Table

    table = Table(title="One server process at 15 Hz; load bots in another process answer at once")
    columns = ["agents", "matches", "batched", "on time", "behind", "server CPU/agent-tick", "CPU share"]
    if batch == "both":
        columns += ["one by one: on time", "CPU/agent-tick", "CPU ratio"]
    for col in columns:
        table.add_column(col, justify="right")
    for level in result["levels"]:
        row = [
            str(level["agents"]),
            str(level["matches"]),
            f"{level['batched_share']:.0%}",
            f"{level['on_time']:.1%}",
            f"{level['behind_schedule']:.1%}",
            f"{level['cpu_us_per_agent_tick']:.0f} µs",
            f"{level['server_cpu_share']:.0%}",
        ]
        if batch == "both":
            alone, ratio = level["one_by_one"], level["cpu_one_by_one_over_batched"]
            row += [
                f"{alone['on_time']:.1%}",
                f"{alone['cpu_us_per_agent_tick']:.0f} µs",
                f"{ratio:.2f}x" if ratio is not None else "-",
            ]
        table.add_row(*row)
    console.print(table)
    ok = result["max_agents_at_15hz"] >= GOAL_AGENTS
    console.print(
        f"served at 15 Hz: {result['max_agents_at_15hz']} agents; goal {GOAL_AGENTS}: "
        f"{'[green]met[/]' if ok else '[red]missed[/]'}"
    )


def _print_rate(console: Any, rate: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"Achieved tick rate at 15 Hz; bots answer {LEAD_MS:g} ms before their budget ends")
    for col in ("budget", "agents", "achieved", "of nominal", "tick beyond budget", "late ticks"):
        table.add_column(col, justify="right")
    for label, row in (("whole period", rate["whole_period"]), ("default", rate["default"])):
        table.add_row(
            f"{row['budget_ms']} ms ({label})",
            str(row["agents"]),
            f"{row['achieved_hz']:.3f} Hz",
            f"{row['ratio']:.2%}",
            f"{row['overrun_ms']:.2f} ms" if row["overrun_ms"] is not None else "-",
            f"{row['late_share']:.1%}",
        )
    console.print(table)
    console.print(
        f"default budget keeps the rate within {RATE_GOAL:.0%}: "
        f"{'[green]met[/]' if rate['goal_met'] else '[red]missed[/]'}"
    )


def _print_debug_cost(console: Any, cost: dict[str, Any]) -> None:
    from rich.table import Table

    table = Table(title=f"The debug layer's cost at {cost['agents']} agents (docs/protocol.md#debug)")
    for col in ("each answer draws", "on time", "server CPU/agent-tick", "of none", "dropped"):
        table.add_column(col, justify="right")
    for drawing, label in (
        ("none", "nothing"),
        ("typical", "8 marks, a line, 2 texts"),
        ("flood", "past every cap"),
    ):
        row = cost[drawing]
        ratio = cost.get(f"{drawing}_over_none")
        table.add_row(
            label,
            f"{row['on_time']:.1%}",
            f"{row['cpu_us_per_agent_tick']:.0f} µs",
            "1.00x" if drawing == "none" else (f"{ratio:.2f}x" if ratio is not None else "-"),
            str(row["debug_dropped"]),
        )
    console.print(table)


def _report_workers(result: dict[str, Any], as_json: bool) -> None:
    """`command`'s report of `run_workers`."""
    if as_json:
        click.echo(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    n = result["workers"]
    table = Table(
        title=f"One server process beside {n} worker processes at 15 Hz; load bots in another process "
        "(CPU shares: of one core, over the same window)"
    )
    for col in ("agents", "1: on time", "CPU/agent-tick", "server CPU", "load CPU"):
        table.add_column(col, justify="right")
    for col in (f"{n}: on time", "CPU/agent-tick", "server CPU", "load CPU", "CPU ratio"):
        table.add_column(col, justify="right")

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.0%}"

    for level in result["levels"]:
        one, many, ratio = level["one"], level["workers"], level["cpu_workers_over_one"]
        table.add_row(
            str(level["agents"]),
            f"{one['on_time']:.1%}",
            f"{one['cpu_us_per_agent_tick']:.0f} µs",
            share(one["server_cpu_share"]),
            share(one["load_cpu_share"]),
            f"{many['on_time']:.1%}",
            f"{many['cpu_us_per_agent_tick']:.0f} µs",
            share(many["server_cpu_share"]),
            share(many["load_cpu_share"]),
            f"{ratio:.2f}x" if ratio is not None else "-",
        )
    console = Console()
    console.print(table)
    if result["repeat"] > 1:
        console.print(f"each server's best of {result['repeat']} tries per level; every try, on time:")
        for level in result["levels"]:
            every = level["tries_on_time"]
            console.print(
                f"  {level['agents']} agents: one process {', '.join(f'{s:.1%}' for s in every['one'])}; "
                f"{n} workers {', '.join(f'{s:.1%}' for s in every['workers'])}"
            )
    if (probe := result["host_loop_ms"]) is not None:
        console.print(
            f"host speed: a fixed loop took {probe['fastest']:.1f} to {probe['slowest']:.1f} ms before "
            f"the runs ({probe['slowest'] / probe['fastest']:.2f}x; a steady host reads near 1.00x)"
        )
    most, goals = result["max_agents_at_15hz"], result["goals_met"]
    ratio = result["agents_workers_over_one"]
    console.print(
        f"served at 15 Hz: {most['one']} agents by one process, {most['workers']} by {n} workers "
        f"({f'{ratio:.2f}x' if ratio is not None else '-'}; goal {WORKERS_AGENTS_GOAL}x: "
        f"{'[green]met[/]' if goals['agents'] else '[red]missed[/]'})"
    )
    cpu = result["cpu_workers_over_one"]
    console.print(
        f"server CPU per agent-tick, {n} workers over one: {f'{cpu:.2f}x' if cpu is not None else '-'} "
        f"(goal at most {WORKERS_CPU_GOAL}x: {'[green]met[/]' if goals['cpu'] else '[red]missed[/]'})"
    )
