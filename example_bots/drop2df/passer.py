"""A drop2df bot that never edits: it scores what the board scores by itself (the baseline)."""

from __future__ import annotations

from cellarena.sdk import run
from cellarena.sdk.games.drop2df import Drop2dfBot, View


class Passer(Drop2dfBot):
    def on_tick(self, view: View) -> None:
        return None  # pass


if __name__ == "__main__":
    raise SystemExit(run(Passer))
