"""Colorblocks' part of `cellarena train colorblocks` (docs/training.md)."""
