"""`cellarena bench train`: each game's training benchmark (train from scratch, then play the result),
found through the game plug-ins as `bench env` is: a game offers one as its ``"bench train"`` command.
"""

from __future__ import annotations

from cellarena.server.bench.env import per_game

command = per_game(
    "train", "Training benchmarks, one per game that has one: train, then play what was trained."
)
