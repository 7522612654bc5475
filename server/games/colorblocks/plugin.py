"""Colorblocks as a cellarena game: what it registers (pyproject.toml, ``cellarena.games``).

Only names of modules here: the engine, numpy and rich load when a command first needs them. Its options
and benchmark live in the layers above the game (server/cli, server/bench), which import it.
"""

from __future__ import annotations

from cellarena.server.games.plugin import GamePlugin

_HERE = "cellarena.server.games.colorblocks"

PLUGIN = GamePlugin(
    name="colorblocks",
    summary="Othello-like colour changes, units and guards; capture the objective",
    engine=f"{_HERE}.engine:ColorblocksEngine",
    config=f"{_HERE}.engine:ColorblocksConfig",
    cli="cellarena.server.cli.games.colorblocks:CLI",
    commands={"bench": "cellarena.server.bench.games.colorblocks:command"},
    render=f"{_HERE}.render:render_engine",
    legend=f"{_HERE}.render:legend",
)
