"""How the command line meets each game: its options, its config, its picture and its benchmark.

The generic commands (`serve`, `match`, `tournament`, `bench`) make one subcommand per registered
game from its `GameCli`, found at ``cellarena.server.games.<game>.options:CLI``. A game so brings its
own options (Rezzo's ``--map``, another game's ``--size``) without the commands knowing about it,
and a new game needs no edit outside its own folder beyond one line in the registry.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import click

from cellarena.server.games import GAMES

#: A click decorator that adds one option (or several) to a command.
OptionDecorator = Callable[[Callable[..., Any]], Callable[..., Any]]


@dataclass(frozen=True)
class GameCli:
    """One game's command-line face.

    ``options`` are click options whose values (by their Python names) go to ``config``, which
    returns the engine config. ``map_key`` names the config key that `tournament --maps` varies (None
    if the game has no maps); ``default_maps`` are the tournament's maps when ``--maps`` is not given.
    ``render`` draws an engine's state for ``--watch`` (None: the game cannot be watched yet).
    ``bench`` is the "module:attr" of its `cellarena bench GAME` command, if it has one.
    """

    options: Sequence[OptionDecorator]
    config: Callable[..., dict[str, Any]]
    map_key: str | None = None
    default_maps: tuple[str, ...] = ()
    render: Callable[[Any], Any] | None = None
    bench: str | None = None
    #: Short line shown in `cellarena match --help` and friends.
    summary: str = ""

    def apply_options(self, command: Callable[..., Any]) -> Callable[..., Any]:
        for option in reversed(self.options):
            command = option(command)
        return command

    def split(self, values: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
        """``values`` split into (this game's option values, the rest)."""
        names = set(self.option_names())
        mine = {k: v for k, v in values.items() if k in names}
        return mine, {k: v for k, v in values.items() if k not in names}

    def option_names(self) -> list[str]:
        probe = self.apply_options(lambda: None)
        return [p.name for p in getattr(probe, "__click_params__", []) if p.name]


class GameGroup(click.Group):
    """A group with one subcommand per registered game, each made on demand by ``factory(game)``.

    Games are looked up lazily, so `cellarena match --help` does not import every engine. Commands
    added with `add_command` (such as `bench server`) sit beside the games.
    """

    def __init__(self, *args: Any, factory: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._factory = factory

    def list_commands(self, ctx: click.Context) -> list[str]:
        from cellarena.server.game_cli import games

        return sorted(set(super().list_commands(ctx)) | set(games()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from cellarena.server.game_cli import games

        known = super().get_command(ctx, cmd_name)
        if known is not None:
            return known
        if cmd_name in games():
            return self._factory(cmd_name)
        return None


def game_cli(game: str) -> GameCli:
    """The `GameCli` of a registered game."""
    module = importlib.import_module(f"cellarena.server.games.{game}.options")
    return module.CLI


def games() -> list[str]:
    return sorted(GAMES)


def load_command(target: str) -> click.Command:
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
