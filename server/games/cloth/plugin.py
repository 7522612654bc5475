"""Cloth of Gold as a cellarena game: what it registers (pyproject.toml, ``cellarena.games``).

Only names of modules here: the engine, numpy and rich load when a command first needs them. Its options
and benchmark live in the layers above the game (server/cli, server/bench), which import it.
"""

from __future__ import annotations

from cellarena.server.games.plugin import GamePlugin

_HERE = "cellarena.server.games.cloth"

PLUGIN = GamePlugin(
    name="cloth",
    summary="three-population Game of Life with placement and territory",
    engine=f"{_HERE}.engine:ClothEngine",
    config=f"{_HERE}.engine:ClothConfig",
    cli="cellarena.server.cli.games.cloth:CLI",
    commands={"bench": "cellarena.server.bench.games.cloth:command"},
    render=f"{_HERE}.render:render",
    legend=f"{_HERE}.render:legend",
)
