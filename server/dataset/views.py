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

from cellarena.sdk.games import cata, cloth, colorblocks, drop2df, rezzo


class FixedView(NamedTuple):
    """One seat's request as numbers: ``cells`` (uint8, of shape ``shape``) and, in Rezzo, the
    indices of the agents whose viewports it holds (None in the other games)."""

    cells: np.ndarray
    agents: list[int] | None = None


def _rezzo(message: Mapping[str, Any]) -> FixedView:
    view = rezzo.View.from_message(message)
    planes = [np.frombuffer(rezzo.observation(port), np.uint8) for port in view.viewports]
    cells = np.array(planes, np.uint8).reshape(len(planes), 2, rezzo.VIEW_SIZE, rezzo.VIEW_SIZE)
    return FixedView(cells, list(view.agents))


def _cata(message: Mapping[str, Any]) -> FixedView:
    return FixedView(np.asarray(cata.make_view(dict(message)).board, np.uint8))


def _cloth(message: Mapping[str, Any]) -> FixedView:
    return FixedView(cloth.observation(cloth.make_view(dict(message))))


def _colorblocks(message: Mapping[str, Any]) -> FixedView:
    return FixedView(colorblocks.observation(colorblocks.make_view(dict(message))))


def _drop2df(message: Mapping[str, Any]) -> FixedView:
    return FixedView(np.frombuffer(drop2df.observation(drop2df.make_view(dict(message))), np.uint8))


_VIEWS: dict[str, Callable[[Mapping[str, Any]], FixedView]] = {
    "rezzo": _rezzo,
    "cata": _cata,
    "cloth": _cloth,
    "colorblocks": _colorblocks,
    "drop2df": _drop2df,
}


def fixed_view(game: str, message: Mapping[str, Any]) -> FixedView | None:
    """The request ``message`` of ``game`` as numbers; None for a game without such a view (a game
    added later exports its msgpack only until it has one here)."""
    make = _VIEWS.get(game)
    return None if make is None else make(message)
