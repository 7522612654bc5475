"""The trained C.A.T.A. bot's policy: a linear softmax over a few features of the observation.

`train.py` trains it and `bot.py` plays it; both read the game through the SDK's `observation` and
`action_mask` (`cellarena.sdk.games.cata`), the functions the PettingZoo environment builds its
observations and masks with, so what was trained is what plays. The features do not depend on the
board's size, so weights trained on a small board play on any.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cellarena.sdk.games.cata import ACTIONS, OBSERVATION_EXTRA, RULE_SIZE, START_HP

#: bias, seat one-hot (2), the rule (32), my and the opponent's health and their difference, my share
#: of the board, moves left, blocked, meditated, opponent meditated, first turn.
FEATURES = 3 + RULE_SIZE + 3 + 1 + 4 + 1


def features(obs: np.ndarray) -> np.ndarray:
    """The policy's inputs, from one observation (board cells, rule, then the extra numbers)."""
    tail = obs[-OBSERVATION_EXTRA:]
    rule = obs[-OBSERVATION_EXTRA - RULE_SIZE : -OBSERVATION_EXTRA]
    board = obs[: -OBSERVATION_EXTRA - RULE_SIZE]
    seat = int(tail[8])
    mine, theirs = float(tail[seat]), float(tail[1 - seat])
    white = float(board.mean()) if board.size else 0.5
    share = white if seat == 1 else 1.0 - white  # a seat's colour is its seat number
    head = [1.0, float(seat), float(1 - seat)]
    health = [mine / START_HP, theirs / START_HP, (mine - theirs) / 16]
    flags = [float(tail[4]) / 2, float(tail[5]), float(tail[6]), float(tail[7]), float(tail[2] == 1)]
    return np.concatenate([head, rule, health, [share], flags]).astype(np.float64)


class Policy:
    """``weights`` (ACTIONS, FEATURES): an action's preference is its row times the features."""

    def __init__(self, weights: np.ndarray | None = None) -> None:
        self.weights = np.zeros((ACTIONS, FEATURES)) if weights is None else weights
        if self.weights.shape != (ACTIONS, FEATURES):
            raise ValueError(f"weights must be {(ACTIONS, FEATURES)}, got {self.weights.shape}")

    def probabilities(self, x: np.ndarray, mask: np.ndarray) -> np.ndarray:
        """The softmax over the legal actions (mask 1) of the features ``x``."""
        z = np.where(mask > 0, self.weights @ x, -np.inf)
        z -= z.max()
        p = np.exp(z)
        out: np.ndarray = p / p.sum()
        return out

    def act(self, obs: np.ndarray, mask: np.ndarray) -> int:
        """The legal action with the highest preference: what the bot plays (no dice in a tournament)."""
        return int(np.argmax(np.where(mask > 0, self.weights @ features(obs), -np.inf)))

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:  # a file object: np.savez would add ".npz" to a name without it
            np.savez(f, weights=self.weights)

    @classmethod
    def load(cls, path: Path) -> Policy:
        """The policy saved at ``path``; ValueError saying what is wrong with the file."""
        try:
            with np.load(path) as data:
                return cls(np.asarray(data["weights"], np.float64))
        except (OSError, KeyError, ValueError) as exc:
            raise ValueError(f"{path}: not weights saved by train.py ({exc})") from None
