"""`cellarena train cata` (`cellarena.server.cli.imitate`): C.A.T.A.'s evaluation options and defaults.
A bot folder to train is `cellarena new-bot cata NAME --template trained`'s."""

from __future__ import annotations

import click

from cellarena.server.cli.imitate import imitation_command

command = imitation_command(
    "cata",
    "cellarena.server.training.cata.imitation:CATA",
    against="random_legal,lookahead",
    match_options=[
        click.Option(
            ["--size"],
            default=32,
            show_default=True,
            type=click.IntRange(4),
            help="The evaluation's board size.",
        ),
        click.Option(
            ["--max-turns"],
            default=60,
            show_default=True,
            type=click.IntRange(1),
            help="The evaluation's turn cap.",
        ),
    ],
    config=lambda kw: {"size": kw["size"], "max_turns": kw["max_turns"]},
)
