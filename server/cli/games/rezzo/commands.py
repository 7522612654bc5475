"""Rezzo's own commands: `cellarena sim rezzo` and `cellarena maps list|check|show`.

The plugin (`cellarena.server.games.rezzo.plugin`) hands them to the command line: `sim rezzo` to the
`sim` group, `maps` to the root. Engines, numpy and rich are imported inside the commands, so that
`cellarena --help`, which lists `maps`, imports only click here.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from cellarena.server.cli.games.rezzo.options import map_option
from cellarena.server.cli.params import ranged_option
from cellarena.server.games.base import ConfigError

if TYPE_CHECKING:
    from cellarena.server.games.rezzo.maps import RezzoMap


@click.command("rezzo")
@map_option
@ranged_option(
    "--ticks", 300, click.IntRange(1, 1_000_000), "Decision points to run (fewer if the match ends)."
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
@ranged_option("--max-ticks", 3000, click.IntRange(1), "The match's tick cap.")
@click.option("--torus", is_flag=True, help="Wrap the world's edges (rule variant).")
@click.option(
    "--enemy-bases-only",
    is_flag=True,
    help="Only an enemy base next to your flag makes you lose (rule variant own_base_counts=false).",
)
@click.option("--board/--no-board", default=True, show_default=True, help="Print the final world.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def sim(
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

    from cellarena.server.cli.games.rezzo.sim import simulate
    from cellarena.server.games.rezzo.engine import RezzoConfig
    from cellarena.server.games.rezzo.render import render_engine

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
        console.print(render_engine(eng))


@click.group()
def maps() -> None:
    """List, check and show Rezzo maps."""


def _about(m: RezzoMap) -> dict[str, Any]:
    return {
        "title": m.name,
        "width": m.width,
        "height": m.height,
        "players": m.players,
        "agents_per_player": m.agents_per_player,
    }


_JSON = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


@maps.command("list")
@_JSON
def maps_list(as_json: bool) -> None:
    """The built-in maps."""
    from cellarena.server.games.rezzo.maps import builtin_maps, load_map

    found = [(name, load_map(name)) for name in builtin_maps()]
    if as_json:
        click.echo(json.dumps({"maps": [{"name": name, **_about(m)} for name, m in found]}))
        return
    for name, m in found:
        click.echo(
            f"{name:10} {m.width}x{m.height}  {m.players} players  {m.agents_per_player} agent(s) each"
            f"  {m.name}"
        )


@maps.command("check")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@_JSON
def maps_check(paths: tuple[str, ...], as_json: bool) -> None:
    """Validate map files; each error names file:line:col. Exit status 1 if any is invalid.

    With --json: {"ok": ..., "maps": [...]}, one entry per file: its path and ok, and either the map's
    size and players or the error with its file, line and column.
    """
    from cellarena.server.games.base import MapError
    from cellarena.server.games.rezzo.maps import load_map

    bad = 0
    found: list[dict[str, Any]] = []
    for path in paths:
        try:
            m = load_map(path)
        except ConfigError as exc:
            bad += 1
            entry: dict[str, Any] = {"path": path, "ok": False, "error": str(exc), "code": "file"}
            if isinstance(exc, MapError):
                entry.update(file=exc.source, line=exc.line, column=exc.col)
            found.append(entry)
            if not as_json:
                click.echo(f"error: {exc}", err=True)
            continue
        found.append({"path": path, "ok": True, **_about(m)})
        if not as_json:
            click.echo(
                f"{path}: ok ({m.width}x{m.height}, {m.players} players, {m.agents_per_player} agent(s) each)"
            )
    if as_json:
        click.echo(json.dumps({"ok": not bad, "maps": found}))
    if bad:
        sys.exit(1)


@maps.command("show")
@click.argument("name")
@_JSON
def maps_show(name: str, as_json: bool) -> None:
    """Print a map (built-in name or path) as the world it starts as.

    With --json: the map's size and players, ``rows`` (the picture, one string a row), ``cells`` (the
    cell codes, row by row; docs/games/rezzo.md has them) and the agents' starts.
    """
    from rich.console import Console

    from cellarena.server.games.rezzo.maps import load_map
    from cellarena.server.games.rezzo.render import render

    try:
        m = load_map(name)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    picture = render(m.cells, [(a.x, a.y, a.facing) for a in m.agents])
    if as_json:
        agents = [{"player": a.player, "x": a.x, "y": a.y, "facing": a.facing.name} for a in m.agents]
        shown = {"name": name, **_about(m), "rows": picture.plain.splitlines(), "cells": m.cells.tolist()}
        click.echo(json.dumps({**shown, "agents": agents}))
        return
    Console(highlight=False).print(picture)
