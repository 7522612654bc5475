"""`cellarena train GAME`: train a bot's network for a game, from an exported dataset (docs/training.md).

A game offers training by naming a click command for the ``"train"`` group in its plug-in's
``commands``; every other game's `train GAME` says so and what there is to start from, instead of
failing with an unknown command.
"""

from __future__ import annotations

import click

from cellarena.server.cli.game_cli import GameGroup

#: Games whose `train GAME` is here rather than in their plug-in's ``commands``.
TRAINERS = {"cata": "cellarena.server.cli.games.cata_train:command"}


def _not_yet(game: str) -> click.Command:
    """`train GAME`: the game's trainer (`TRAINERS`), or for a game without one, a command that says
    so, and exits 1."""
    if game in TRAINERS:
        import importlib

        module, name = TRAINERS[game].split(":")
        trainer: click.Command = getattr(importlib.import_module(module), name)
        return trainer

    @click.command(game, context_settings={"ignore_unknown_options": True, "allow_extra_args": True})
    @click.option("--json", "as_json", is_flag=True, help="Say it as one JSON object (error, code).")
    def command(as_json: bool) -> None:
        """Not yet: this game has no trainer (docs/training.md)."""
        raise click.ClickException(
            f"`cellarena train {game}`: not yet. {game} has no trainer in cellarena; its matches export "
            f"as a dataset (`cellarena replay export`, docs/datasets.md) and its PettingZoo environment "
            "trains a policy of your own (docs/training.md)"
        )

    return command


train = GameGroup(
    "train",
    factory=_not_yet,
    help="Train a bot's network from an exported dataset (imitation): one subcommand per game.",
)
