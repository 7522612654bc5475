"""drop2df's command-line options: seats, board length, dice, turns, tokens (see `GameCli`)."""

from __future__ import annotations

from typing import Any

import click

from cellarena.server.game_cli import GameCli


def _config(
    seats: int = 2, length: int = 8, dice: int = 2, turns: int = 30, tokens: bool = False
) -> dict[str, Any]:
    return {"players": seats, "length": length, "dice": dice, "turns": turns, "tokens": tokens}


def _render(engine: Any) -> Any:
    from rich.text import Text

    from cellarena.sdk.games.drop2df import text

    out = Text(f"turn {min(engine.tick + 1, engine.turns)}/{engine.turns}\n", style="bold")
    for seat, score in enumerate(engine.scores()):
        out.append(f"seat {seat}  {text(engine.row(seat))}  score {score}\n")
    return out


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
    render=_render,
    bench="cellarena.server.games.drop2df.bench:command",
    summary="the one-dimensional lemmings puzzle, as a duplicate match",
)
