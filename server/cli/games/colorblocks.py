"""Colorblocks' command-line options: map, turn cap and guards (see `cellarena.server.cli.game_cli`)."""

from __future__ import annotations

from typing import Any

import click

from cellarena.sdk.games.colorblocks import GUARDS, MAX_TURNS
from cellarena.server.cli.game_cli import GameCli


def _config(map_: str = "classic", max_turns: int = MAX_TURNS, guards: int = GUARDS) -> dict[str, Any]:
    return {"map": map_, "max_turns": max_turns, "guards": guards}


CLI = GameCli(
    options=[
        click.option(
            "--map", "map_", default="classic", show_default=True, help="Built-in map name or map file path."
        ),
        click.option(
            "--max-turns",
            default=MAX_TURNS,
            show_default=True,
            type=click.IntRange(1, 10000),
            help="Turns per player before the game is a draw.",
        ),
        click.option(
            "--guards",
            default=GUARDS,
            show_default=True,
            type=click.IntRange(0, 100),
            help="Guards per player.",
        ),
    ],
    config=_config,
    map_key="map",
    default_maps=("classic",),
)
