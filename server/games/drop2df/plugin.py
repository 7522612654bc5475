"""drop2df as a cellarena game: what it registers (pyproject.toml, ``cellarena.games``).

Only names of modules here: the engine, numpy and rich load when a command first needs them. Its options
and benchmark live in the layers above the game (server/cli, server/bench), which import it.
"""

from __future__ import annotations

from cellarena.server.games.plugin import GamePlugin

_HERE = "cellarena.server.games.drop2df"

PLUGIN = GamePlugin(
    name="drop2df",
    summary="the one-dimensional lemmings puzzle, as a duplicate match",
    engine=f"{_HERE}.engine:Drop2dfEngine",
    config=f"{_HERE}.engine:Drop2dfConfig",
    cli="cellarena.server.cli.games.drop2df:CLI",
    commands={"bench": "cellarena.server.bench.games.drop2df:command"},
    render=f"{_HERE}.render:render",
    legend=f"{_HERE}.render:legend",
)
