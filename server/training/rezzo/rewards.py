"""Shaped rewards for `RezzoVectorEnv`: terms read from the board and from the game's events.

Random play almost never ends a Rezzo match, so the terminal +1/-1 alone gives a learner no signal.
Each term here pays its weight (``reward_weights[term]``, 0 by default) per unit of what it counts,
to every learner agent of the player it concerns, in the step it happens; a positive weight
encourages it. The terms and what they measure (docs/training.md has the same table):

- ``own_flags`` / ``enemy_flags``: the change of the number of the agent's own player's flags (of
  every other player's) on the board.
- ``flag_formed``: flags of the agent's own player formed this step (``flag_formed`` events).
- ``own_flag_destroyed`` / ``enemy_flag_destroyed``: flags of the own player (of any other player)
  destroyed this step, by a hit or by an electron (``flag_destroyed`` events).
- ``own_flag_distance``: cells by which the own player's flag nearest to a base that counts against
  it got farther from that base (negative: nearer). A flag beside such a base makes its owner lose.
- ``enemy_flag_distance``: cells by which another player's flag nearest to a base that counts
  against it got nearer to it, summed over the other players: steering the opponents' flags into a
  base is how Rezzo is won.
- ``wire_built``: conductors the agent's own player laid this step (builds that moved).

Distances are Chebyshev (a flag beside a base is at 1); a player without flags counts as
``max(height, width)``, beyond any flag, so a flag forming far from the bases changes the distance
little and one forming beside a base a lot. They are potential differences: a flag that comes and
goes again nets nothing. In the step a world ends, and for a player out (whose flags the loss turns
to wire), the distance terms pay nothing; the outcome term is the end's reward.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from cellarena.sdk.games.rezzo import Cell, Move
from cellarena.server.games.rezzo.batch.batched import BatchedRezzo
from cellarena.server.games.rezzo.batch.cells import BORDER

#: Terms read from the game's events: the batch makes its events when one of them is weighed.
EVENT_TERMS = ("flag_formed", "own_flag_destroyed", "enemy_flag_destroyed")
DISTANCE_TERMS = ("own_flag_distance", "enemy_flag_distance")
BOARD_TERMS = ("own_flags", "enemy_flags", "wire_built")
SHAPING_TERMS = (*BOARD_TERMS, *EVENT_TERMS, *DISTANCE_TERMS)


class RewardShaper:
    """The weighed terms of one vector environment's batch ``worlds``; ``player_of`` (B, per world):
    each learner agent's player. Call `begin` for worlds that start an episode, `before` before each
    step of the batch and `add` after it."""

    def __init__(self, worlds: BatchedRezzo, weights: Mapping[str, float], player_of: np.ndarray) -> None:
        self.worlds = worlds
        self.weights = {t: float(weights[t]) for t in SHAPING_TERMS if weights.get(t)}
        self.player_of = player_of
        b, p = worlds.batch, worlds.players
        #: Whether the batch must make its events for these terms.
        self.needs_events = any(t in self.weights for t in EVENT_TERMS)
        self._flags = np.zeros((b, p), np.int64)
        self._cap = max(worlds.height, worlds.width)
        self._distance = np.zeros((b, p), np.int64)
        # Per world and player: each cell's distance to the nearest base that counts against the
        # player's flags (the cap where none does, and on the border).
        self._to_base = np.zeros((b, p, worlds.plane), np.int64) if self._distances else None
        self._alive = np.ones((b, p), bool)
        self._x = np.zeros_like(worlds.x)
        self._y = np.zeros_like(worlds.y)

    @property
    def _distances(self) -> bool:
        return any(t in self.weights for t in DISTANCE_TERMS)

    def begin(self, worlds: np.ndarray) -> None:
        """Worlds ``worlds`` start an episode: what the terms compare against is read afresh."""
        if not self.weights:
            return
        self._flags[worlds] = self._count_flags(worlds)
        if self._to_base is not None:
            for b in worlds.tolist():
                self._base_distances(b)
            self._distance[worlds] = self._nearest(worlds)

    def before(self) -> None:
        """Before the batch steps: where the agents stand and who is in, for `add`."""
        if "wire_built" in self.weights:
            np.copyto(self._x, self.worlds.x)
            np.copyto(self._y, self.worlds.y)
        np.copyto(self._alive, self.worlds.player_alive)

    def add(
        self,
        rewards: np.ndarray,
        moves: np.ndarray,
        events: Mapping[int, list[dict[str, Any]]],
        ended: np.ndarray,
    ) -> None:
        """Add every weighed term to ``rewards`` (B, per world) for the step just taken with ``moves``
        (B, N), which gave ``events`` (by world) and ended the worlds of ``ended``."""
        if not self.weights:
            return
        w, p = self.weights, self.worlds.players
        every = np.arange(self.worlds.batch)
        per_player: dict[str, np.ndarray] = {}  # term -> (B, P): what it counts for each player
        if "own_flags" in w or "enemy_flags" in w:
            now = self._count_flags(every)
            per_player["flags"] = now - self._flags
            self._flags = now
        if "wire_built" in w:
            moved = (self.worlds.x != self._x) | (self.worlds.y != self._y)
            built = (moves == int(Move.BUILD)) & moved
            per_player["wire_built"] = built.reshape(len(every), p, -1).sum(axis=2)
        if self.needs_events:
            per_player["flag_formed"], per_player["destroyed"] = self._flag_events(events, len(every))
        if self._to_base is not None:
            per_player["closer"] = self._closer(every, ended)
        own = {k: np.take_along_axis(v, self.player_of, axis=1) for k, v in per_player.items()}
        others = {k: v.sum(axis=1, keepdims=True) - own[k] for k, v in per_player.items()}
        pays = {
            "own_flags": ("flags", own),
            "enemy_flags": ("flags", others),
            "wire_built": ("wire_built", own),
            "flag_formed": ("flag_formed", own),
            "own_flag_destroyed": ("destroyed", own),
            "enemy_flag_destroyed": ("destroyed", others),
        }
        for term, (key, whose) in pays.items():
            if term in w:
                rewards += w[term] * whose[key]
        if "own_flag_distance" in w:
            rewards -= w["own_flag_distance"] * own["closer"]
        if "enemy_flag_distance" in w:
            rewards += w["enemy_flag_distance"] * others["closer"]

    def _flag_events(
        self, events: Mapping[int, list[dict[str, Any]]], batch: int
    ) -> tuple[np.ndarray, np.ndarray]:
        """(B, P) flags formed and flags destroyed in this step, from the worlds' events."""
        p = self.worlds.players
        formed, destroyed = np.zeros((batch, p), np.int64), np.zeros((batch, p), np.int64)
        for b, log in events.items():
            for e in log:
                if e["kind"] == "flag_formed":
                    formed[b, e["seat"]] += 1
                elif e["kind"] == "flag_destroyed":
                    destroyed[b, e["seat"]] += 1
        return formed, destroyed

    def _closer(self, every: np.ndarray, ended: np.ndarray) -> np.ndarray:
        """(B, P): how much nearer each player's nearest flag came to a base (0 where a world ended)."""
        lost = self._alive & ~self.worlds.player_alive
        for b in np.flatnonzero(lost.any(axis=1) & ~ended).tolist():
            self._base_distances(b)  # a player out: its bases are gone
        now = self._nearest(every)
        closer = self._distance - now  # > 0: that player's nearest flag came nearer to a base
        closer[ended] = 0
        closer[lost] = 0
        self._distance = now
        return closer

    def _count_flags(self, worlds: np.ndarray) -> np.ndarray:
        codes = self.worlds.codes[worlds]
        return np.stack([(codes == Cell.FLAG + o).sum(axis=1) for o in range(self.worlds.players)], axis=1)

    def _base_distances(self, b: int) -> None:
        """World ``b``'s distance maps, from its bases now."""
        assert self._to_base is not None
        w = self.worlds
        grid = w.codes[b].reshape(w.ph, w.pw)
        ys, xs = np.nonzero((grid >= Cell.BASE) & (grid < Cell.BASE + w.players))
        yy, xx = np.indices((w.ph, w.pw))
        for o in range(w.players):
            best = np.full((w.ph, w.pw), self._cap, np.int64)
            for y, x in zip(ys.tolist(), xs.tolist(), strict=True):
                if int(grid[y, x]) & 7 == o and not w.own_base_counts:
                    continue
                np.minimum(best, np.maximum(abs(yy - y), abs(xx - x)), out=best)
            best[:BORDER], best[-BORDER:], best[:, :BORDER], best[:, -BORDER:] = (self._cap,) * 4
            self._to_base[b, o] = best.reshape(-1)

    def _nearest(self, worlds: np.ndarray) -> np.ndarray:
        """(len(worlds), P): each player's flag nearest to a base that counts against it, its distance."""
        assert self._to_base is not None
        codes = self.worlds.codes[worlds]
        return np.stack(
            [
                np.where(codes == Cell.FLAG + o, self._to_base[worlds, o], self._cap).min(axis=1)
                for o in range(self.worlds.players)
            ],
            axis=1,
        )
