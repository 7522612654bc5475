"""Rezzo as a cellarena game: what it registers (pyproject.toml, ``cellarena.games``).

Only names of modules here: the engine, numpy and rich load when a command first needs them. Its options,
commands and benchmarks live in the layers above the game (server/cli, server/bench), which import it.
"""

from __future__ import annotations

from cellarena.server.games.plugin import GamePlugin

_HERE = "cellarena.server.games.rezzo"
_CLI = "cellarena.server.cli.games.rezzo"
_BENCH = "cellarena.server.bench.games.rezzo"

PLUGIN = GamePlugin(
    name="rezzo",
    summary="capture the flag on a Wireworld-like CA",
    engine=f"{_HERE}.engine:RezzoEngine",
    config=f"{_HERE}.engine:RezzoConfig",
    cli=f"{_CLI}.options:CLI",
    # "bench env", "bench train": `cellarena bench env|train` runs that benchmark of every game that has one.
    commands={
        "bench": f"{_BENCH}.engine:command",
        "sim": f"{_CLI}.commands:sim",
        "bench env": f"{_BENCH}.env:command",
        "bench train": f"{_BENCH}.train:command",
        "train": f"{_CLI}.train:command",
    },
    root_commands={"maps": f"{_CLI}.commands:maps"},
    render=f"{_HERE}.render:render_engine",
    viewer=f"{_HERE}.render:show",
    legend=f"{_HERE}.render:legend",
    bench_load=f"{_BENCH}.load:LOAD",
    batching=f"{_HERE}.batch.slot_batch:BATCHING",
    reward_terms="cellarena.server.training.rezzo.replay_terms:RezzoTerms",
)
