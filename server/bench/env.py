"""`cellarena bench env`: each game's training-environment benchmark, found through the game plug-ins.

A game offers one by naming a click command for the ``"bench env"`` group in its plug-in's ``commands``
(Rezzo's times its vector environment against separate engines). With one such game, this command is
that game's; core code names no game.
"""

from __future__ import annotations

from typing import Any

import click

from cellarena.server.games import game_names, plugin


def _game_commands() -> dict[str, Any]:
    return {g: plugin(g).command("bench env") for g in game_names() if "bench env" in plugin(g).commands}


def _make() -> click.Command:
    found = _game_commands()
    if len(found) == 1:
        # A plug-in's command is named after its game; here it is `bench env` itself.
        only: click.Command = next(iter(found.values()))
        return click.Command("env", callback=only.callback, params=only.params, help=only.help)
    group = click.Group("env", help="Training-environment benchmarks, one per game that has one.")
    for game, cmd in sorted(found.items()):
        group.add_command(cmd, game)
    return group


command = _make()
