"""Cloth of Gold's command-line options: board size, generations, caps and neutral density."""

from __future__ import annotations

from typing import Any

import click

from cellarena.server.cli.game_cli import GameCli
from cellarena.server.cli.params import FiniteFloatRange


def _config(
    width: int = 64,
    height: int = 64,
    generations: int = 168,
    max_rounds: int = 20,
    max_units: int = 10,
    neutral_density: float = 0.08,
    strict_mutual_loss: bool = False,
) -> dict[str, Any]:
    return {
        "width": width,
        "height": height,
        "generations": generations,
        "max_rounds": max_rounds,
        "max_units": max_units,
        "neutral_density": neutral_density,
        "strict_mutual_loss": strict_mutual_loss,
    }


CLI = GameCli(
    options=[
        click.option(
            "--width", default=64, show_default=True, type=click.IntRange(8, 1024), help="Board width."
        ),
        click.option(
            "--height", default=64, show_default=True, type=click.IntRange(8, 1024), help="Board height."
        ),
        click.option(
            "--generations",
            default=168,
            show_default=True,
            type=click.IntRange(0, 10_000),
            help="Generations run after each round's placements.",
        ),
        click.option(
            "--max-rounds", default=20, show_default=True, type=click.IntRange(1, 1000), help="The round cap."
        ),
        click.option(
            "--max-units",
            default=10,
            show_default=True,
            type=click.IntRange(1, 100),
            help="Most units a player places per turn.",
        ),
        click.option(
            "--neutral-density",
            default=0.08,
            show_default=True,
            type=FiniteFloatRange(0.0, 0.5),
            help="Share of cells seeded with the neutral population (point-symmetric).",
        ),
        click.option(
            "--strict-mutual-loss",
            is_flag=True,
            help="Literal rule: any round ending with equal populations is a draw.",
        ),
    ],
    config=_config,
)
