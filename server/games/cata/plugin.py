"""C.A.T.A. as a cellarena game: what it registers (pyproject.toml, ``cellarena.games``).

Only names of modules here: the engine, numpy and rich load when a command first needs them. Its options
and benchmark live in the layers above the game (server/cli, server/bench), which import it.
"""

from __future__ import annotations

from cellarena.server.games.plugin import GamePlugin

_HERE = "cellarena.server.games.cata"

PLUGIN = GamePlugin(
    name="cata",
    summary="two players rewrite the rule of a binary automaton",
    engine=f"{_HERE}.engine:CataEngine",
    config=f"{_HERE}.engine:CataConfig",
    cli="cellarena.server.cli.games.cata:CLI",
    commands={"bench": "cellarena.server.bench.games.cata:command"},
    render=f"{_HERE}.render:render",
    legend=f"{_HERE}.render:legend",
)
