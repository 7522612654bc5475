"""drop2df's command-line options: seats, board length, dice, turns, tokens (see `GameCli`)."""

from __future__ import annotations

from typing import Any

import click

from cellarena.server.cli.game_cli import GameCli


def _config(
    seats: int = 2, length: int = 8, dice: int = 2, turns: int = 30, tokens: bool = False
) -> dict[str, Any]:
    return {"players": seats, "length": length, "dice": dice, "turns": turns, "tokens": tokens}


CLI = GameCli(
    options=[
        # Not --players: `serve` has its own --players check, and each bot plays its own board anyway.
        click.option(
            "--seats", default=2, show_default=True, type=click.IntRange(1, 8), help="Bots per match."
        ),
        click.option(
            "--length", default=8, show_default=True, type=click.IntRange(1, 64), help="Dice spaces."
        ),
        click.option(
            "--dice", default=2, show_default=True, type=click.IntRange(0), help="Fudge dice dropped."
        ),
        click.option("--turns", default=30, show_default=True, type=click.IntRange(1, 1000), help="Turns."),
        click.option(
            "--tokens/--no-tokens", default=False, show_default=True, help="The optional 4dF tokens."
        ),
    ],
    config=_config,
)
