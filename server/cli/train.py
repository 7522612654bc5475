"""`cellarena train GAME`: train a bot's network for a game, from an exported dataset (docs/training.md).

A game offers training by naming a click command for the ``"train"`` group in its plug-in's
``commands``; every other game's `train GAME` says so and what there is to start from, instead of
failing with an unknown command.
"""

from __future__ import annotations

import click

from cellarena.server.cli.game_cli import GameGroup


def _not_yet(game: str) -> click.Command:
    """`train GAME` for a game without one in its plug-in: its imitation's command where the game has
    one (`imitate.imitation_of`), else a command that says "not yet", and exits 1."""
    from cellarena.server.cli.imitate import imitation_command, imitation_of

    spec = imitation_of(game)
    if spec is not None:
        return imitation_command(spec)

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
    help="Train a bot's network from an exported dataset (imitation), or by reinforcement where the game "
    "has reward terms (Rezzo): one subcommand per game.",
)
