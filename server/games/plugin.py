"""What a game registers so that every command can play, show and benchmark it without naming it.

A game's package holds a `GamePlugin` and registers it under the ``cellarena.games`` entry-point
group (pyproject.toml: ``[project.entry-points."cellarena.games"]``), so a separately installed
package can add a game the same way the built-in ones do. Everything in a plugin that imports
anything heavy is a ``"module:attr"`` string, loaded on first use: listing the games (as
`cellarena --help` does) imports no engine, numpy or rich. It is also how a game names its tools,
which live in the layers above the games and import them, never the reverse (tests/test_layering.py):
the built-in games' options and commands under ``cellarena.server.cli.games``, their benchmarks under
``cellarena.server.bench.games``.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache
from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from rich.console import Console

    from cellarena.server.games.base import Batching, Engine
    from cellarena.server.games.config import GameConfig

#: How `replay show` draws a game's state: (console, engine, seat label) where ``seat label(seat)``
#: is the seat number with the bot's name, e.g. ``0 (alice)``.
Viewer = Callable[["Console", Any, Callable[[int], str]], None]


class RewardTerms(Protocol):
    """A game's reward terms for each seat, counted on one engine as it plays (exported datasets)."""

    def after(self, engine: Engine, events: list[dict[str, Any]]) -> list[dict[str, float]]:
        """Each seat's terms for the ``apply()`` just made, which reported ``events``."""
        ...


@cache
def load(target: str) -> Any:
    """The object that ``"package.module:attr"`` names, imported on first use and then cached."""
    module, _, attr = target.partition(":")
    if not module or not attr:
        raise ValueError(f"{target!r} is not 'package.module:attr'")
    return getattr(importlib.import_module(module), attr)


@dataclass(frozen=True)
class BenchLoad:
    """What the load benchmarks play when they play this game (`cellarena bench server|tournament`).

    ``server_config(ticks)`` is the engine config of one match of ``server_seats`` bots that answer
    every tick with the game's no-op, lasting ``ticks`` decision points, in which the game still
    does its real work each tick. ``tournament_maps`` and ``tournament_config(map, cap)`` make the
    tournament benchmark's matches, ``cap`` being the decision-point cap of each.
    """

    server_config: Callable[[int], dict[str, Any]]
    server_seats: int
    tournament_maps: tuple[str, ...]
    tournament_config: Callable[[str | None, int], dict[str, Any]]


@dataclass(frozen=True)
class GamePlugin:
    """Everything game-specific that the commands, the arena and replays need from one game.

    The ``"module:attr"`` targets:

    - ``engine``: the engine class (`cellarena.server.games.base.Engine`).
    - ``config``: its config class, a `GameConfig` (validation, ``to_mapping``, the horizon).
    - ``cli``: its `GameCli`: the options `serve`, `match` and `tournament` give it.
    - ``commands``: group name -> the click command that group shows for this game, for the groups
      whose subcommands only some games have (``{"bench": ..., "sim": ...}``).
    - ``root_commands``: command name -> a click command added at the root (Rezzo's ``maps``).
    - ``render``: engine -> a rich renderable of its state, for ``match --watch`` and ``replay show``.
    - ``viewer``: a `Viewer` for ``replay show`` when the game says more there than ``render`` draws.
    - ``legend``: the seats' names -> a rich renderable saying what each character and colour of
      ``render`` means, owners by seat and name (``replay show`` prints it under the picture).
    - ``bench_load``: a `BenchLoad`, if the load benchmarks can play this game.
    - ``batching``: a `Batching`, if the match server may step this game's worlds in batches.
    - ``reward_terms``: engine -> a `RewardTerms`, if exported datasets carry the game's reward terms.
    """

    name: str
    #: One line for `cellarena match --help` and friends.
    summary: str
    engine: str
    config: str
    cli: str
    commands: Mapping[str, str] = field(default_factory=dict)
    root_commands: Mapping[str, str] = field(default_factory=dict)
    render: str | None = None
    viewer: str | None = None
    legend: str | None = None
    bench_load: str | None = None
    batching: str | None = None
    reward_terms: str | None = None

    def engine_class(self) -> type[Engine]:
        return load(self.engine)

    def config_class(self) -> type[GameConfig]:
        return load(self.config)

    def game_cli(self) -> Any:
        """The game's `GameCli` (typed Any: the class lives with the command line, above this layer)."""
        return load(self.cli)

    def command(self, group: str) -> Any:
        """The click command this game contributes to ``group``, or None."""
        target = self.commands.get(group)
        return None if target is None else load(target)

    def renderer(self) -> Callable[[Any], Any] | None:
        return None if self.render is None else load(self.render)

    def replay_viewer(self) -> Viewer | None:
        return None if self.viewer is None else load(self.viewer)

    def render_legend(self) -> Callable[[Sequence[str]], Any] | None:
        return None if self.legend is None else load(self.legend)

    def load_profile(self) -> BenchLoad | None:
        return None if self.bench_load is None else load(self.bench_load)

    def batches(self) -> Batching | None:
        """The game's `Batching`, if it batches its worlds (the match server's phase slots)."""
        return None if self.batching is None else load(self.batching)

    def reward_terms_of(self, engine: Engine) -> RewardTerms | None:
        """The game's reward terms counted on ``engine`` from its start, if it has any (datasets)."""
        return None if self.reward_terms is None else load(self.reward_terms)(engine)

    def max_decisions(self, config: Mapping[str, Any]) -> int:
        """The most decision points a match with ``config`` can last (its horizon), from its caps."""
        return self.config_class().from_mapping(config).max_decisions()


def builtin_plugin(name: str, summary: str, stem: str, render: str = "render") -> GamePlugin:
    """The plugin of a built-in game laid out as they all are: ``cellarena.server.games.<name>`` holds
    ``engine`` (``<stem>Engine``, ``<stem>Config``) and ``render`` (``render``, ``legend``); its options
    are ``cellarena.server.cli.games.<name>:CLI`` and its benchmark ``cellarena.server.bench.games.<name>``.
    """
    here = f"cellarena.server.games.{name}"
    return GamePlugin(
        name=name,
        summary=summary,
        engine=f"{here}.engine:{stem}Engine",
        config=f"{here}.engine:{stem}Config",
        cli=f"cellarena.server.cli.games.{name}:CLI",
        commands={"bench": f"cellarena.server.bench.games.{name}:command"},
        render=f"{here}.render:{render}",
        legend=f"{here}.render:legend",
    )
