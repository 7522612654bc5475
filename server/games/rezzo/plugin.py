"""Rezzo as a cellarena game: what it registers (pyproject.toml, ``cellarena.games``).

Only names of modules here: the engine, numpy and rich load when a command first needs them.
"""

from __future__ import annotations

from cellarena.server.games.plugin import GamePlugin

_HERE = "cellarena.server.games.rezzo"

PLUGIN = GamePlugin(
    name="rezzo",
    summary="capture the flag on a Wireworld-like CA",
    engine=f"{_HERE}.engine:RezzoEngine",
    config=f"{_HERE}.engine:RezzoConfig",
    cli=f"{_HERE}.options:CLI",
    # "bench env", "bench train": `cellarena bench env|train` runs that benchmark of every game that has one.
    commands={
        "bench": f"{_HERE}.tools.bench:command",
        "sim": f"{_HERE}.tools.cli:sim",
        "bench env": f"{_HERE}.tools.env_bench:command",
        "bench train": f"{_HERE}.tools.train_bench:command",
    },
    root_commands={"maps": f"{_HERE}.tools.cli:maps"},
    render=f"{_HERE}.render:render_engine",
    viewer=f"{_HERE}.render:show",
    legend=f"{_HERE}.render:legend",
    bench_load=f"{_HERE}.tools.load:LOAD",
    batching=f"{_HERE}.batch.slot_batch:BATCHING",
)
