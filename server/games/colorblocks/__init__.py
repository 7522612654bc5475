"""Colorblocks: the Othello-like block and unit game (see docs/games/colorblocks.md)."""
