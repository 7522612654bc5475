"""The benchmarks: of the server as a whole (`bench server`: `server`, with its load process `loadgen`),
each game's own (`games`, which the game's plugin adds to `cellarena bench`), and the harness every
benchmark shares (`harness`).
"""
