"""Colorblocks' command-line options: map, turn cap and guards (see `cellarena.server.cli.game_cli`)."""

from __future__ import annotations

from typing import Any

import click

from cellarena.sdk.games.colorblocks import GUARDS, MAX_TURNS
from cellarena.server.cli.game_cli import GameCli
from cellarena.server.cli.params import ranged_option


def _config(map_: str = "classic", max_turns: int = MAX_TURNS, guards: int = GUARDS) -> dict[str, Any]:
    return {"map": map_, "max_turns": max_turns, "guards": guards}


CLI = GameCli(
    options=[
        click.option(
            "--map", "map_", default="classic", show_default=True, help="Built-in map name or map file path."
        ),
        ranged_option(
            "--max-turns", MAX_TURNS, click.IntRange(1, 10000), "Turns per player before the game is a draw."
        ),
        ranged_option("--guards", GUARDS, click.IntRange(0, 100), "Guards per player."),
    ],
    config=_config,
    map_key="map",
    default_maps=("classic",),
)
