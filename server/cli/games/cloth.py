"""Cloth of Gold's command-line options: board size, generations, caps and neutral density."""

from __future__ import annotations

from typing import Any

import click

from cellarena.server.cli.game_cli import GameCli
from cellarena.server.cli.params import FiniteFloatRange, ranged_option


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
        ranged_option("--width", 64, click.IntRange(8, 1024), "Board width."),
        ranged_option("--height", 64, click.IntRange(8, 1024), "Board height."),
        ranged_option(
            "--generations", 168, click.IntRange(0, 10_000), "Generations run after each round's placements."
        ),
        ranged_option("--max-rounds", 20, click.IntRange(1, 1000), "The round cap."),
        ranged_option("--max-units", 10, click.IntRange(1, 100), "Most units a player places per turn."),
        ranged_option(
            "--neutral-density",
            0.08,
            FiniteFloatRange(0.0, 0.5),
            "Share of cells seeded with the neutral population (point-symmetric).",
        ),
        click.option(
            "--strict-mutual-loss",
            is_flag=True,
            help="Literal rule: any round ending with equal populations is a draw.",
        ),
    ],
    config=_config,
)
