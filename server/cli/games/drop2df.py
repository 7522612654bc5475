"""drop2df's command-line options: seats, board length, dice, turns, tokens (see `GameCli`)."""

from __future__ import annotations

from typing import Any

import click

from cellarena.server.cli.game_cli import GameCli
from cellarena.server.cli.params import ranged_option


def _config(
    seats: int = 2, length: int = 8, dice: int = 2, turns: int = 30, tokens: bool = False
) -> dict[str, Any]:
    return {"players": seats, "length": length, "dice": dice, "turns": turns, "tokens": tokens}


CLI = GameCli(
    options=[
        # Not --players: `serve` has its own --players check, and each bot plays its own board anyway.
        ranged_option("--seats", 2, click.IntRange(1, 8), "Bots per match."),
        ranged_option("--length", 8, click.IntRange(1, 64), "Dice spaces."),
        ranged_option("--dice", 2, click.IntRange(0), "Fudge dice dropped."),
        ranged_option("--turns", 30, click.IntRange(1, 1000), "Turns."),
        click.option(
            "--tokens/--no-tokens", default=False, show_default=True, help="The optional 4dF tokens."
        ),
    ],
    config=_config,
)
