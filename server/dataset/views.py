"""Each game's observation as fixed-shape numbers: the ``view``, ``view_shape`` and ``agents`` columns.

The ``observation`` column is the msgpack request the server sent; a learner that wants arrays would
decode it with the game's SDK module anyway. These columns hold that decoding, made here with the
SDK's own code (its `View` and, where it has one, its ``observation``), so that the dataset's arrays
are the very ones a bot and the training environments compute from the same request.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import numpy as np

from cellarena.sdk.games import GAMES, adapter


class FixedView(NamedTuple):
    """One seat's request as numbers: ``cells`` (uint8) and, in a game whose seats have several agents
    (Rezzo), the indices of the agents whose views it holds (None in the other games)."""

    cells: np.ndarray
    agents: list[int] | None = None


def fixed_view(game: str, message: Mapping[str, Any]) -> FixedView | None:
    """The request ``message`` of ``game`` as numbers, from the game's SDK module: with one viewport per
    agent (Rezzo), each agent's ``observation``, stacked; else the SDK's ``observation`` where it is
    bytes (uint8), else the view's ``board``; None for a game with none of these (or that the SDK does
    not know), which exports its msgpack only."""
    if game not in GAMES:
        return None
    sdk = adapter(game)
    view = sdk.make_view(dict(message))
    observation: Callable[[Any], Any] | None = getattr(sdk, "observation", None)
    ports = getattr(view, "viewports", None)
    if ports is not None and observation is not None:
        planes = [np.frombuffer(observation(port), np.uint8) for port in ports]
        side = round((len(planes[0]) // 2) ** 0.5) if planes else 0  # two square planes an agent
        cells = np.array(planes, np.uint8).reshape(len(planes), 2, side, side)
        return FixedView(cells, [int(a) for a in view.agents])
    seen = observation(view) if observation is not None else None
    if isinstance(seen, bytes | bytearray):
        return FixedView(np.frombuffer(bytes(seen), np.uint8))
    if isinstance(seen, np.ndarray) and seen.dtype == np.uint8:
        return FixedView(seen)
    board = getattr(view, "board", None)
    return FixedView(np.asarray(board, np.uint8)) if isinstance(board, np.ndarray) else None
