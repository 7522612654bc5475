"""Replays of a vector environment's episodes: each an engine that plays the world's moves beside the
batch (they agree bit for bit), written with the match server's `ReplayWriter`."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.replay import ReplayWriter


@dataclass
class _Recording:
    """A world's episode being written as a replay: an engine that plays the same moves beside it."""

    writer: ReplayWriter
    engine: RezzoEngine


class Recordings:
    """The replays asked for (`ask`, from the world's next episode) and those being written."""

    def __init__(self, agents_per_player: int) -> None:
        self._k = agents_per_player
        self._pending: dict[int, tuple[str, list[str] | None]] = {}
        self._active: dict[int, _Recording] = {}

    def ask(self, world: int, path: str, names: list[str] | None) -> None:
        self._pending[world] = (path, names)

    def begin(
        self, world: int, start: Callable[[str, list[str] | None], tuple[RezzoEngine, ReplayWriter]]
    ) -> None:
        """World ``world`` starts an episode: an episode cut short keeps its file (incomplete), and a
        replay asked for starts, ``start(path, names)`` giving its engine and writer."""
        self._active.pop(world, None)
        if world in self._pending:
            engine, writer = start(*self._pending.pop(world))
            self._active[world] = _Recording(writer, engine)

    def tick(self, moves: np.ndarray) -> None:
        """Every world being written plays its row of ``moves`` (B, N) in its engine too."""
        k = self._k
        for b, rec in self._active.items():
            engine = rec.engine
            alive = {a.player for a in engine.agents() if a.alive}
            actions = {p: [int(m) for m in moves[b, p * k : (p + 1) * k]] for p in sorted(alive)}
            tick = engine.tick
            happened = engine.apply(actions)
            rec.writer.record(tick, actions, engine, events=happened.log)

    def finish(self, world: int) -> None:
        """World ``world``'s episode ended: its replay, if one is written, is complete."""
        rec = self._active.pop(world, None)
        if rec is None:
            return
        result = rec.engine.result()
        if result is None:  # the batch and the engine agree bit for bit (tests): this is a bug
            rec.writer.close()
            raise RuntimeError(
                f"world {world} ended but its recording engine did not; {rec.writer.path} is incomplete"
            )
        rec.writer.finish(result)

    def cut(self, world: int) -> None:
        """World ``world`` is reset mid-episode: its file is closed, incomplete."""
        rec = self._active.get(world)
        if rec is not None:
            rec.writer.close()

    def close(self, **_: Any) -> None:
        """Close the replays still being written; they read as incomplete."""
        for rec in self._active.values():
            rec.writer.close()
        self._active.clear()
