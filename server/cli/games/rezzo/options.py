"""Rezzo's command-line options: the map and the tick cap (see `cellarena.server.cli.game_cli`)."""

from __future__ import annotations

from typing import Any

import click

from cellarena.server.cli.game_cli import GameCli
from cellarena.server.cli.params import ranged_option

map_option = click.option(
    "--map", "map_", default="duel", show_default=True, help="Built-in map name or path to a map file."
)


def _config(map_: str = "duel", max_ticks: int = 3000) -> dict[str, Any]:
    return {"map": map_, "max_ticks": max_ticks}


CLI = GameCli(
    options=[
        map_option,
        ranged_option("--max-ticks", 3000, click.IntRange(1), "The tick cap."),
    ],
    config=_config,
    map_key="map",
    default_maps=("duel",),
)
