"""The games this installation knows: the `GamePlugin`s registered under the ``cellarena.games``
entry-point group, by name.

Entry points are what let a separately installed package add a game: its pyproject.toml names its
plugin under the same group. They are read once per process (a scan of the installed packages'
metadata, about a millisecond), and a plugin object is loaded only when its game is asked for.
"""

from __future__ import annotations

from functools import cache
from importlib.metadata import EntryPoint, entry_points

from cellarena.server.games.base import Batching, ConfigError, Engine
from cellarena.server.games.plugin import GamePlugin

GROUP = "cellarena.games"


class PluginError(RuntimeError):
    """A registered game plugin is broken; the message names its entry point and what to do."""


@cache
def _entry_points() -> dict[str, EntryPoint]:
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=GROUP):
        other = found.get(ep.name)
        if other is not None and other.value != ep.value:
            raise PluginError(
                f"two packages register the game {ep.name!r} ({other.value} and {ep.value}); "
                "uninstall one of them"
            )
        found[ep.name] = ep
    return dict(sorted(found.items()))


def game_names() -> list[str]:
    """The registered games, sorted; no plugin is loaded."""
    return list(_entry_points())


def is_game(name: str) -> bool:
    return name in _entry_points()


def unknown_game(name: str) -> ConfigError:
    """The error for a game name nobody registered, naming the ones that are."""
    known = ", ".join(game_names()) or "none"
    return ConfigError(f"unknown game {name!r}; known games: {known}")


@cache
def plugin(name: str) -> GamePlugin:
    """The plugin of game ``name``; an unknown name is a `ConfigError` naming the known games."""
    ep = _entry_points().get(name)
    if ep is None:
        raise unknown_game(name)
    try:
        found = ep.load()
    except Exception as exc:
        raise PluginError(f"the game plugin {name!r} ({ep.value}) cannot be loaded: {exc}") from exc
    if not isinstance(found, GamePlugin) or found.name != name:
        raise PluginError(
            f"the entry point {name!r} = {ep.value!r} in group {GROUP!r} must name a GamePlugin "
            f"called {name!r}, got {found!r}"
        )
    return found


def plugins() -> list[GamePlugin]:
    """Every registered game's plugin, by name."""
    return [plugin(name) for name in game_names()]


@cache
def _batching(engine_class: type[Engine]) -> Batching | None:
    name = engine_class.name
    if not is_game(name) or plugin(name).engine_class() is not engine_class:
        return None  # an engine no plugin registers (a test's, or a game's older class)
    return plugin(name).batches()


def batching_of(engine: Engine) -> Batching | None:
    """The `Batching` of ``engine``'s game, or None if the game does not batch its worlds."""
    return _batching(type(engine))
