"""Colorblocks as a cellarena game: what it registers (pyproject.toml, ``cellarena.games``).

Only names of modules here: the engine, numpy and rich load when a command first needs them.
"""

from __future__ import annotations

from cellarena.server.games.plugin import GamePlugin

_HERE = "cellarena.server.games.colorblocks"

PLUGIN = GamePlugin(
    name="colorblocks",
    summary="Othello-like colour changes, units and guards; capture the objective",
    engine=f"{_HERE}.engine:ColorblocksEngine",
    config=f"{_HERE}.engine:ColorblocksConfig",
    cli=f"{_HERE}.options:CLI",
    commands={"bench": f"{_HERE}.bench:command"},
    render=f"{_HERE}.render:render_engine",
    legend=f"{_HERE}.render:legend",
)
