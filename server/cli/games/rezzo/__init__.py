"""Rezzo's command line: its options (`options`), and the `sim` and `maps` commands (`commands`, `sim`)."""
