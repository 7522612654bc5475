"""`cellarena bench env`: each game's training-environment benchmark, found through the game plug-ins.

A game offers one by naming a click command for the ``"bench env"`` group in its plug-in's ``commands``
(Rezzo's times its vector environment against separate engines). With one such game, this command is
that game's; core code names no game.
"""

from __future__ import annotations

from typing import Any

import click

from cellarena.server.games import game_names, plugin


def _game_commands(key: str) -> dict[str, Any]:
    return {g: plugin(g).command(key) for g in game_names() if key in plugin(g).commands}


def per_game(name: str, help: str) -> click.Command:
    """``bench NAME``: the games' commands registered as ``"bench NAME"``, as one group (or, with one
    such game, that game's command itself). `bench train` is made the same way."""
    found = _game_commands(f"bench {name}")
    if len(found) == 1:
        # A plug-in's command is named after its game; here it is `bench NAME` itself.
        only: click.Command = next(iter(found.values()))
        return click.Command(name, callback=only.callback, params=only.params, help=only.help)
    group = click.Group(name, help=help)
    for game, cmd in sorted(found.items()):
        group.add_command(cmd, game)
    return group


command = per_game("env", "Training-environment benchmarks, one per game that has one.")
