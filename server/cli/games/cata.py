"""C.A.T.A.'s command-line options: board size, caps and edges (see `cellarena.server.cli.game_cli`)."""

from __future__ import annotations

from typing import Any

import click

from cellarena.server.cli.game_cli import GameCli


def _config(
    size: int = 64, max_turns: int = 200, max_generations: int = 512, torus: bool = False
) -> dict[str, Any]:
    return {"size": size, "max_turns": max_turns, "max_generations": max_generations, "torus": torus}


CLI = GameCli(
    options=[
        click.option(
            "--size", default=64, show_default=True, type=click.IntRange(2, 1024), help="Board side (even)."
        ),
        click.option(
            "--max-turns", default=200, show_default=True, type=click.IntRange(1), help="The turn cap."
        ),
        click.option(
            "--max-generations",
            default=512,
            show_default=True,
            type=click.IntRange(1),
            help="Generations a reaction phase may run before it is capped.",
        ),
        click.option("--torus", is_flag=True, help="Wrap the board's edges instead of reading black."),
    ],
    config=_config,
)
