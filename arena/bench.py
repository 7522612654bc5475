"""`cellarena bench tournament`: a fixed tournament of the example bots, timed, with the arena's share.

The game and its matches come from the game's plugin (`BenchLoad`): the built-in default is Rezzo
on two maps.

The arena's own overhead is everything that is not a match being played: starting the worker pool,
scheduling, committing results, waiting for a free worker. Each worker times its match from the
moment it gets the job to the moment it hands back the record (bot processes started and stopped
included, as any tournament must pay that); with J workers busy in parallel, the matches account for
``sum(match seconds) / J`` of the wall time, and the rest is overhead.
"""

from __future__ import annotations

import json
import tempfile
import time
from pathlib import Path
from typing import Any

import click

from cellarena.arena.cluster import ClusterSpec, cluster_option
from cellarena.arena.discovery import discover, prepare
from cellarena.arena.runner import TournamentSpec, local_pool, run_tournament
from cellarena.server.cli.params import map_list
from cellarena.server.play.match import MISSED_IN_A_ROW, TickSettings

ROOT = Path(__file__).resolve().parent.parent
GOAL_SECONDS = 60.0
GOAL_OVERHEAD = 0.10


def run(
    bots_dir: Path,
    maps: list[str],
    rounds: int,
    max_ticks: int,
    jobs: int,
    out: Path | None = None,
    game: str | None = None,
    cluster: ClusterSpec | None = None,
) -> dict[str, Any]:
    """Play the tournament; the dict is the --json output. ``game`` defaults to the first load game.

    With ``cluster`` (``local:N`` or a scheduler's address) the same tournament is then played on it,
    in the same run, and its figures go under ``"cluster"``."""
    from cellarena.server.bench.server import bench_load, load_games

    game = game or load_games()[0]
    load = bench_load(game)
    found = discover(bots_dir, game)
    prepare(found)
    spec = TournamentSpec(
        game=game,
        bots=tuple(f.spec for f in found),
        maps=tuple((m, load.tournament_config(m, max_ticks), 2) for m in maps),
        rounds=rounds,
        seed=0,
        settings=TickSettings(fast=True, max_missed_in_a_row=MISSED_IN_A_ROW),
    )
    with tempfile.TemporaryDirectory(prefix="cellarena-bench-") as tmp:
        folder = out or Path(tmp)
        started = time.perf_counter()
        with local_pool(jobs) as pool:
            report = run_tournament(spec, folder, executor=pool, jobs=jobs)
        seconds = time.perf_counter() - started
    result = _figures(report, jobs, seconds)
    result.update(bots=[f.spec.name for f in found], maps=maps)
    if cluster is not None:
        result["cluster"] = _on_cluster(spec, cluster)
    return result


def _figures(report: Any, jobs: int, seconds: float) -> dict[str, Any]:
    busy = report.match_seconds / jobs
    return {
        "matches": report.played,
        "jobs": jobs,
        "seconds": round(seconds, 3),
        "matches_per_second": round(report.played / seconds, 3) if seconds else 0.0,
        "match_seconds": round(report.match_seconds, 3),
        "overhead_fraction": round(max(0.0, 1.0 - busy / seconds), 4),
        "failed": len(report.failed),
    }


def _on_cluster(spec: TournamentSpec, where: ClusterSpec) -> dict[str, Any]:
    """The same tournament on a Dask cluster; the cluster's start is timed apart from the matches."""
    from cellarena.arena.cluster import check_workers, open_cluster

    started = time.perf_counter()
    with (
        tempfile.TemporaryDirectory(prefix="cellarena-bench-") as tmp,
        open_cluster(where) as (executor, workers, _),
    ):
        check_workers(executor, spec)
        ready, cpu = time.perf_counter(), time.process_time()
        report = run_tournament(spec, Path(tmp), executor=executor, jobs=workers, ship_files=True)
        seconds, cpu = time.perf_counter() - ready, time.process_time() - cpu
    figures = _figures(report, workers, seconds)
    # The coordinator's own CPU per match (commits, ratings, landing files, the Dask client): what
    # bounds the matches per second one coordinator can take, however many workers play them.
    per_match = cpu / report.played if report.played else 0.0
    figures.update(
        where=str(where),
        start_seconds=round(ready - started, 3),
        coordinator_cpu_ms_per_match=round(per_match * 1e3, 2),
    )
    return figures


@click.command("tournament")
@click.option(
    "--game",
    default=None,
    help="The game to play; its plugin must give a load benchmark. [default: the first such game by name]",
)
@click.option(
    "--bots-dir",
    type=click.Path(file_okay=False, exists=True),
    default=str(ROOT / "example_bots"),
    show_default=True,
    help="Bots to play (a folder with a subfolder named after the game, or the bots themselves).",
)
@click.option(
    "--maps", default=None, help="Comma-separated maps. [default: the game's benchmark maps, e.g. duel,field]"
)
@click.option("--rounds", default=3, show_default=True, type=click.IntRange(1, 100))
@click.option("--max-ticks", default=500, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--jobs", "-j", default=2, show_default=True, type=click.IntRange(1, 512))
@cluster_option("Play the same tournament on a Dask cluster too, after the local pool, and compare.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def command(
    game: str | None,
    bots_dir: str,
    maps: str | None,
    rounds: int,
    max_ticks: int,
    jobs: int,
    cluster: ClusterSpec | None,
    as_json: bool,
) -> None:
    """A tournament of the example bots (120 matches of Rezzo's five with the defaults), timed end to end."""
    from cellarena.server.bench.server import bench_load, load_games

    game = game or load_games()[0]
    try:
        load = bench_load(game)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--game") from None
    names = map_list(maps) if maps else list(load.tournament_maps)
    result = run(Path(bots_dir), names, rounds, max_ticks, jobs, game=game, cluster=cluster)
    if as_json:
        click.echo(json.dumps(result))
        return
    from rich.console import Console

    console = Console(highlight=False)
    console.print(
        f"{result['matches']} matches ({len(result['bots'])} bots x {len(result['maps'])} maps x both seat "
        f"orders x {rounds} rounds, at most {max_ticks} ticks, fast) on {jobs} workers: "
        f"{result['seconds']:.1f} s"
    )
    console.print(
        f"matches themselves: {result['match_seconds']:.1f} s of worker time; arena overhead "
        f"{result['overhead_fraction']:.1%} of the wall time"
    )
    for text, ok in (
        (f"under {GOAL_SECONDS:.0f} s", result["seconds"] < GOAL_SECONDS),
        (f"overhead under {GOAL_OVERHEAD:.0%}", result["overhead_fraction"] < GOAL_OVERHEAD),
    ):
        console.print(f"goal: {text}: {'[green]met[/]' if ok else '[red]missed[/]'}")
    on = result.get("cluster")
    if on is not None:
        console.print(
            f"on the cluster {on['where']} ({on['jobs']} workers, started in {on['start_seconds']:.1f} s): "
            f"{on['seconds']:.1f} s, {on['matches_per_second']:.2f} matches/s against "
            f"{result['matches_per_second']:.2f} on the local pool; overhead {on['overhead_fraction']:.1%} "
            "of the wall time"
        )
        ok = on["overhead_fraction"] < GOAL_OVERHEAD
        console.print(
            f"goal: cluster overhead under {GOAL_OVERHEAD:.0%}: {'[green]met[/]' if ok else '[red]missed[/]'}"
        )
