"""Cloth of Gold's part of `cellarena train cloth` (docs/training.md)."""
