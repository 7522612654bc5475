"""The server side's commands: `sim`, `bench` and `maps`. `cellarena.arena.cli` gathers them."""

from __future__ import annotations

import json
import sys

import click

from cellarena.server.games.base import ConfigError


@click.group()
def sim() -> None:
    """Run a game headless, with built-in agents, and report what happened."""


@sim.command("rezzo")
@click.option(
    "--map", "map_", default="duel", show_default=True, help="Built-in map name or path to a map file."
)
@click.option(
    "--ticks",
    default=300,
    show_default=True,
    type=click.IntRange(1, 1_000_000),
    help="Decision points to run (fewer if the match ends).",
)
@click.option(
    "--agents",
    "policy",
    type=click.Choice(["idle", "random"]),
    default="random",
    show_default=True,
    help="What every agent does: nothing, or seeded random moves.",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for the random agents.")
@click.option(
    "--max-ticks", default=3000, show_default=True, type=click.IntRange(1), help="The match's tick cap."
)
@click.option("--torus", is_flag=True, help="Wrap the world's edges (rule variant).")
@click.option(
    "--enemy-bases-only",
    is_flag=True,
    help="Only an enemy base next to your flag makes you lose (rule variant own_base_counts=false).",
)
@click.option("--board/--no-board", default=True, show_default=True, help="Print the final world.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def sim_rezzo(
    map_: str,
    ticks: int,
    policy: str,
    seed: int,
    max_ticks: int,
    torus: bool,
    enemy_bases_only: bool,
    board: bool,
    as_json: bool,
) -> None:
    """A Rezzo match between built-in agents on MAP: flags formed, result and state hash."""
    from rich.console import Console

    from cellarena.server.games.rezzo.engine import RezzoConfig
    from cellarena.server.games.rezzo.render import render
    from cellarena.server.games.rezzo.sim import simulate

    config = RezzoConfig(map=map_, max_ticks=max_ticks, torus=torus, own_base_counts=not enemy_bases_only)
    try:
        report = simulate(config, ticks, policy, seed)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--map") from None
    if as_json:
        click.echo(json.dumps(report.to_json()))
        return
    eng = report.engine
    console = Console(highlight=False)
    console.print(
        f"Rezzo on [bold]{eng.map_name}[/] ({eng.width}x{eng.height}, {eng.players} players, "
        f"{eng.agents_per_player} agent(s) each), {policy} agents, seed {seed}"
    )
    for p in range(eng.players):
        first = report.first_flag.get(p)
        console.print(
            f"  player {p}: first flag at tick {first if first is not None else '-'}, "
            f"{report.illegal.get(p, 0)} illegal moves"
        )
    r = report.result
    if r is None:
        console.print(f"after {report.ticks} ticks: still running")
    elif r.winner is None:
        tied = sorted(s for s, rank in r.ranks.items() if rank == 1)
        console.print(f"tick {r.ticks}: draw between players {tied} ({r.reason})")
    else:
        console.print(f"tick {r.ticks}: player {r.winner} wins ({r.reason})")
    console.print(f"state hash {eng.state_hash()}")
    if board:
        console.print(render(eng.cells(), [(a.x, a.y, a.facing) for a in eng.agents() if a.alive]))


@click.group()
def bench() -> None:
    """Benchmarks: speed and memory goals, as ratios measured side by side in one run."""


def _sizes(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    try:
        sizes = [int(s) for s in value.split(",") if s.strip()]
    except ValueError:
        raise click.BadParameter(f"{value!r} is not a comma-separated list of sizes, e.g. 64,256") from None
    if not sizes or any(not 3 <= s <= 8192 for s in sizes):
        raise click.BadParameter(f"sizes must be 3..8192, got {value!r}")
    return sizes


#: The Rezzo step's goals (issue "Foundation"), checked against the 256x256 figures.
GOAL_CELLS_PER_S = 0.5e9
GOAL_RATIO = 8.0


@bench.command("rezzo")
@click.option(
    "--sizes",
    default="64,256,1024",
    show_default=True,
    callback=_sizes,
    help="Comma-separated world sizes (square).",
)
@click.option(
    "--seconds",
    default=1.0,
    show_default=True,
    type=click.FloatRange(0.05, 60),
    help="Timing budget per size and contender.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_rezzo(sizes: list[int], seconds: float, as_json: bool) -> None:
    """The Rezzo CA step against the plain numpy Wireworld step, in cell-updates per second."""
    from cellarena.server.games.rezzo.bench import run

    result = run(sizes, budget_s=seconds)
    if as_json:
        click.echo(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="Rezzo step vs pad-and-slice Wireworld (dense random worlds, 2 players)")
    for col in ("size", "rezzo /s", "baseline /s", "ratio", "B/cell", "peak/step", "kept/step"):
        table.add_column(col, justify="right")
    for size, r in result["sizes"].items():
        table.add_row(
            f"{size}x{size}",
            f"{r['cells_per_s'] / 1e6:,.0f} M",
            f"{r['baseline_cells_per_s'] / 1e6:,.0f} M",
            f"{r['ratio']:.1f}x",
            f"{r['bytes_per_cell']:.1f}",
            f"{r['step_peak_alloc_bytes']} B",
            f"{r['retained_bytes_per_step']} B",
        )
    console = Console()
    console.print(table)
    if "256" in result["sizes"]:
        r = result["sizes"]["256"]
        for text, ok in (
            (
                f"256x256 at least {GOAL_CELLS_PER_S / 1e9:.1f} G cell-updates/s",
                r["cells_per_s"] >= GOAL_CELLS_PER_S,
            ),
            (f"256x256 at least {GOAL_RATIO:.0f}x the baseline", r["ratio"] >= GOAL_RATIO),
        ):
            console.print(f"goal: {text}: {'[green]met[/]' if ok else '[red]missed[/]'}")
    console.print(
        "Figures are the best of repeated batches; on a shared machine the ratio is the steady one."
    )


@click.group()
def maps() -> None:
    """List, check and show Rezzo maps."""


@maps.command("list")
def maps_list() -> None:
    """The built-in maps."""
    from cellarena.server.games.rezzo.maps import builtin_maps, load_map

    for name in builtin_maps():
        m = load_map(name)
        click.echo(
            f"{name:10} {m.width}x{m.height}  {m.players} players  {m.agents_per_player} agent(s) each"
            f"  {m.name}"
        )


@maps.command("check")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
def maps_check(paths: tuple[str, ...]) -> None:
    """Validate map files; each error names file:line:col. Exit status 1 if any is invalid."""
    from cellarena.server.games.rezzo.maps import load_map

    bad = 0
    for path in paths:
        try:
            m = load_map(path)
        except ConfigError as exc:
            click.echo(f"error: {exc}", err=True)
            bad += 1
        else:
            click.echo(
                f"{path}: ok ({m.width}x{m.height}, {m.players} players, {m.agents_per_player} agent(s) each)"
            )
    if bad:
        sys.exit(1)


@maps.command("show")
@click.argument("name")
def maps_show(name: str) -> None:
    """Print a map (built-in name or path) as the world it starts as."""
    from rich.console import Console

    from cellarena.server.games.rezzo.maps import load_map
    from cellarena.server.games.rezzo.render import render

    try:
        m = load_map(name)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    Console(highlight=False).print(render(m.cells, [(a.x, a.y, a.facing) for a in m.agents]))
