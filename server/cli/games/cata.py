"""C.A.T.A.'s command-line options: board size, caps and edges (see `cellarena.server.cli.game_cli`)."""

from __future__ import annotations

from typing import Any

import click

from cellarena.server.cli.game_cli import GameCli
from cellarena.server.cli.params import ranged_option


def _config(
    size: int = 64, max_turns: int = 200, max_generations: int = 512, torus: bool = False
) -> dict[str, Any]:
    return {"size": size, "max_turns": max_turns, "max_generations": max_generations, "torus": torus}


CLI = GameCli(
    options=[
        ranged_option("--size", 64, click.IntRange(2, 1024), "Board side (even)."),
        ranged_option("--max-turns", 200, click.IntRange(1), "The turn cap."),
        ranged_option(
            "--max-generations",
            512,
            click.IntRange(1),
            "Generations a reaction phase may run before it is capped.",
        ),
        click.option("--torus", is_flag=True, help="Wrap the board's edges instead of reading black."),
    ],
    config=_config,
)
