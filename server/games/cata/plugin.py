"""C.A.T.A. as a cellarena game: what it registers (pyproject.toml, ``cellarena.games``).

Only names of modules here: the engine, numpy and rich load when a command first needs them. Its options
and benchmark live in the layers above the game (server/cli, server/bench), which import it.
"""

from __future__ import annotations

from cellarena.server.games.plugin import builtin_plugin

PLUGIN = builtin_plugin("cata", "two players rewrite the rule of a binary automaton", "Cata")
