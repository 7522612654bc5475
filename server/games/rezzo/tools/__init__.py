"""Rezzo's tools: the benchmarks (`cellarena rezzo bench`, `bench env`, `bench train`, the slot
benchmark and the server load), `sim` and `maps`. Nothing in the game or the server imports them."""
