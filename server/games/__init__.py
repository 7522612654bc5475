"""Game engines, found by name.

Engines are imported lazily so that running one game never pays for importing the others.
"""

from __future__ import annotations

import importlib

from cellarena.server.games.base import ConfigError, Engine, Events, Result

__all__ = ["GAMES", "ConfigError", "Engine", "Events", "Result", "get_engine"]

#: Game name -> "module:class" of its engine.
GAMES: dict[str, str] = {
    "rezzo": "cellarena.server.games.rezzo.engine:RezzoEngine",
    "cata": "cellarena.server.games.cata.engine:CataEngine",
    "drop2df": "cellarena.server.games.drop2df.engine:Drop2dfEngine",
    "colorblocks": "cellarena.server.games.colorblocks.engine:ColorblocksEngine",
    "cloth": "cellarena.server.games.cloth.engine:ClothEngine",
}


def get_engine(name: str) -> type[Engine]:
    """The engine class registered under ``name``; a clear error lists the known games."""
    try:
        target = GAMES[name]
    except KeyError:
        known = ", ".join(sorted(GAMES))
        raise ConfigError(f"unknown game {name!r}; known games: {known}") from None
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)
