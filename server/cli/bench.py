"""`cellarena bench ...`: the benchmarks, each game's (from its plugin) and the server's.

The commands load only when asked for: `bench server` imports the whole server.
"""

from __future__ import annotations

from cellarena.server.cli.game_cli import GameGroup

bench = GameGroup(
    "bench",
    help="Benchmarks: speed and memory goals, as ratios measured side by side in one run.",
    lazy={
        "server": "cellarena.server.bench.server:command",
        "web": "cellarena.server.bench.web:command",
        "env": "cellarena.server.bench.env:command",
        "train": "cellarena.server.bench.train:command",
    },
)
