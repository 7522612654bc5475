"""How the command line meets each game: its options and config, and the per-game subcommands.

The generic commands (`serve`, `match`, `tournament`) make one subcommand per registered game from its
`GameCli`, which the game's plugin names (`cellarena.server.games.plugin.GamePlugin.cli`). A game so
brings its own options (Rezzo's ``--map``, another game's ``--size``) without the commands knowing
about it. Groups whose subcommands only some games have (`sim`, `bench`) show the commands the
plugins contribute to them.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import click

#: A click decorator that adds one option (or several) to a command.
OptionDecorator = Callable[[Callable[..., Any]], Callable[..., Any]]


@dataclass(frozen=True)
class GameCli:
    """One game's command-line face.

    ``options`` are click options whose values (by their Python names) go to ``config``, which
    returns the engine config. ``map_key`` names the config key that `tournament --maps` varies (None
    if the game has no maps); ``default_maps`` are the tournament's maps when ``--maps`` is not given.
    """

    options: Sequence[OptionDecorator]
    config: Callable[..., dict[str, Any]]
    map_key: str | None = None
    default_maps: tuple[str, ...] = ()

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
    """A group with one subcommand per registered game, each made on demand.

    A game's subcommand is the one its plugin contributes to this group (by the group's name), else
    ``factory(game)`` if the group has a factory; a group without one lists only the games that
    contribute. Games are looked up lazily, so `cellarena match --help` imports no engine it does
    not show. Other commands sit beside the games: added with `add_command`, or named in ``lazy``
    (command name -> ``"module:attr"``, or `add_lazy`) to be imported only when asked for.
    """

    def __init__(
        self,
        *args: Any,
        factory: Callable[[str], click.Command] | None = None,
        lazy: Mapping[str, str] | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(*args, **kwargs)
        self._factory = factory
        self._lazy = dict(lazy or {})

    def add_lazy(self, name: str, target: str) -> None:
        """Add the command at ``target`` ("module:attr") as ``name``, imported when first asked for."""
        self._lazy[name] = target

    def _games(self) -> list[str]:
        from cellarena.server.games import game_names, plugin

        if self._factory is not None:
            return game_names()
        return [g for g in game_names() if self.name in plugin(g).commands]

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._lazy) | set(self._games()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        from cellarena.server.games import is_game, plugin
        from cellarena.server.games.plugin import load

        known = super().get_command(ctx, cmd_name)
        if known is None and cmd_name in self._lazy:
            known = load(self._lazy[cmd_name])
        if known is not None or not is_game(cmd_name):
            return known
        contributed = plugin(cmd_name).command(self.name or "")
        if contributed is not None:
            return contributed
        return self._factory(cmd_name) if self._factory is not None else None


def game_cli(game: str) -> GameCli:
    """The `GameCli` of a registered game."""
    from cellarena.server.games import plugin

    return plugin(game).game_cli()


def engine_config(game: str, values: dict[str, Any]) -> dict[str, Any]:
    """The engine config from the game's option values (the rest of ``values`` is ignored)."""
    cli = game_cli(game)
    mine, _ = cli.split(values)
    return cli.config(**mine)


def config_error(game: str, exc: Exception) -> click.BadParameter:
    """A ConfigError as a usage error, pointed at ``--map`` when the game has maps."""
    hint = "--map" if game_cli(game).map_key else None
    return click.BadParameter(str(exc), param_hint=hint)
