"""What the bench measures of a rating system: rank agreement and the log-loss of its predictions."""

from __future__ import annotations

import math

import numpy as np
from numpy.typing import ArrayLike


def kendall_tau(shown: ArrayLike, true: ArrayLike) -> float:
    """Kendall's tau-b between two orders of the same bots (1: the same order)."""
    x, y = np.asarray(shown, dtype=float), np.asarray(true, dtype=float)
    dx = np.sign(x[:, None] - x[None, :])
    dy = np.sign(y[:, None] - y[None, :])
    upper = np.triu_indices(len(x), 1)
    dx, dy = dx[upper], dy[upper]
    denom = math.sqrt(float(np.count_nonzero(dx)) * float(np.count_nonzero(dy)))
    return float((dx * dy).sum() / denom) if denom else 0.0


def score_log_loss(expected: float, score: float) -> float:
    """The log-loss of an expected score against the result's score (1 win, 0.5 draw, 0 loss): a
    draw costs the mean of the win's and the loss's loss, so it is best predicted by 0.5."""
    e = min(max(expected, 1e-12), 1.0 - 1e-12)
    return -(score * math.log(e) + (1.0 - score) * math.log(1.0 - e))


def ranks_of(values: ArrayLike) -> np.ndarray:
    """Each bot's place, 0 the highest value (ties by index)."""
    order = np.argsort(-np.asarray(values, dtype=float), kind="stable")
    places = np.empty(len(order), dtype=int)
    places[order] = np.arange(len(order))
    return places
