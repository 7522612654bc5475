"""`cellarena train rezzo` (`cellarena.server.cli.imitate`): Rezzo's evaluation options and defaults."""

from __future__ import annotations

from pathlib import Path

import click

from cellarena.server.cli.imitate import imitation_command

command = imitation_command(
    "rezzo",
    "cellarena.server.training.rezzo.imitation:REZZO",
    against="random_walker,raider",
    match_options=[
        click.Option(["--map", "map_name"], default="duel", show_default=True, help="The evaluation's map."),
        click.Option(
            ["--max-ticks"],
            default=3000,
            show_default=True,
            type=click.IntRange(1),
            help="The evaluation's tick cap.",
        ),
    ],
    config=lambda kw: {"map": kw["map_name"], "max_ticks": kw["max_ticks"]},
    bot_dir=Path("example_bots/rezzo/trained"),
)
