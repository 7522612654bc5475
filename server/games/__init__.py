"""Game engines, found by name through the plugin registry (`cellarena.server.games.registry`).

Engines are imported lazily so that running one game never pays for importing the others.
"""

from __future__ import annotations

from cellarena.server.games.base import ConfigError, Engine, Events, Result
from cellarena.server.games.registry import game_names, is_game, plugin, plugins

__all__ = [
    "ConfigError",
    "Engine",
    "Events",
    "Result",
    "game_names",
    "get_engine",
    "is_game",
    "plugin",
    "plugins",
]


def get_engine(name: str) -> type[Engine]:
    """The engine class of game ``name``; an unknown name is a ConfigError listing the known games."""
    return plugin(name).engine_class()
