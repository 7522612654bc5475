"""A vector environment of B Rezzo worlds on `BatchedRezzo`, with auto-reset; numpy only.

Every agent of every world is one row of the observation: its viewport's cell codes (owners relative to
the viewer) and damage, the two 169-byte planes a bot receives over the wire for that agent. A world that
ends is reset to the map's start within the same `step`, and its rows of ``dones`` say so.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from cellarena.server.games.rezzo.batched import BatchedRezzo
from cellarena.server.games.rezzo.engine import RezzoEngine


class RezzoVectorEnv:
    """B worlds of one Rezzo map stepped together. Agent ``p * K + k`` is player p's agent k."""

    def __init__(self, batch: int, config: dict[str, Any] | None = None) -> None:
        start = RezzoEngine.new(dict(config or {}))
        self.template = BatchedRezzo([start])
        self.worlds = BatchedRezzo([start] * batch)
        self.batch, self.n_agents = batch, self.worlds.n_agents
        self.players, self.agents_per_player = self.worlds.players, self.worlds.agents_per_player
        self._player_of = np.arange(self.n_agents) // self.agents_per_player
        self.rewards = np.zeros((batch, self.n_agents), np.float32)
        self._all = np.arange(batch)

    def reset(self) -> tuple[np.ndarray, np.ndarray]:
        """Every world back to the start; the observations (cells, damage), each (B, N, 169) uint8."""
        self.worlds.restore(self._all, self.template)
        return self.worlds.views()

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """Move codes (B, N) in; (cells, damage, rewards (B, N), dones (B,)) out.

        A world's rewards are 0 until it ends, then +1 for a sole winner, -1 for every other player who
        lost, and 0 in a draw. Ended worlds are reset before the observations are taken. The returned
        arrays are reused by the next call.
        """
        ended = self.worlds.step(actions)
        self.rewards.fill(0.0)
        if ended.any():
            for b in np.flatnonzero(ended):
                winner = self.worlds.winner(int(b))
                if winner is not None:
                    per_player = np.where(np.arange(self.players) == winner, 1.0, -1.0)
                    self.rewards[b] = per_player[self._player_of]
            self.worlds.restore(np.flatnonzero(ended), self.template)
        cells, damage = self.worlds.views()
        return cells, damage, self.rewards, ended
