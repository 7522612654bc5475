"""drop2df's part of `cellarena train drop2df` (docs/training.md)."""
