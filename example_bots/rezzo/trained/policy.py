"""The trained Rezzo bot's policy: a small neural network (numpy only) over what an agent remembers.

An agent sees 13x13 cells ahead of it and is never told where it is, so a policy of the current view
alone cannot tell a corridor it has walked from one it has not. The inputs are therefore what the
SDK's `Tracker` (dead reckoning and a memory of every cell seen) knows, in the agent's own frame:

- the remembered cells of a window around the agent, CROP_BEHIND cells behind it to CROP_AHEAD ahead
  and CROP_SIDE to each side, turned to its heading, each as one of CATEGORIES (never seen, blank,
  wire, electron, tail, photon, outside, and agent, flag, geyser and base, each mine or theirs);
- its heading and position relative to where it started, the move it sent last, whether it can
  advance or hit now, the damage of the cell ahead and the tick.

Network: one-hot cells and those numbers -> HIDDEN ReLU units -> a preference per move; the bot plays
the legal move (advance and build onto blank cells, hit only wire and flags) it prefers most. Every
decision comes from the weights; the Tracker only remembers.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from cellarena.sdk import Cell, Facing, Move, Tracker, Viewport
from cellarena.sdk.games.rezzo import FORWARD, RIGHTWARD

CROP_BEHIND, CROP_AHEAD, CROP_SIDE = 4, 12, 8
FS = np.arange(-CROP_BEHIND, CROP_AHEAD + 1)
RS = np.arange(-CROP_SIDE, CROP_SIDE + 1)
CROP = len(FS) * len(RS)
CATEGORIES = 15
UNKNOWN = 255
#: heading (4), position (2), last move (6), can advance, can hit, damage ahead, tick, bias.
EXTRA = 4 + 2 + 6 + 5
INPUTS = CROP * CATEGORIES + EXTRA
HIDDEN = 64
MOVES = len(Move)


def _category_table() -> np.ndarray:
    """Code (owners relative: 0 is mine) -> category; 255 (never seen) -> 0."""
    table = np.zeros(256, np.uint8)
    for code, cat in ((Cell.BLANK, 1), (Cell.CONDUCTOR, 2), (Cell.ELECTRON, 3), (Cell.TAIL, 4)):
        table[code] = cat
    table[Cell.PHOTON], table[Cell.OOB] = 5, 6
    for i, kind in enumerate((Cell.AGENT, Cell.FLAG, Cell.GEYSER, Cell.BASE)):
        table[kind : kind + 8] = 8 + 2 * i  # theirs
        table[kind] = 7 + 2 * i  # mine
    table[UNKNOWN] = 0
    return table


CATEGORY = _category_table()
#: Per heading, the tracker-frame (dx, dy) of every window cell, in (forward, right) row-major order.
_OFFSETS = {}
for _h in Facing:
    (_fx, _fy), (_rx, _ry) = FORWARD[_h], RIGHTWARD[_h]
    _f, _r = np.meshgrid(FS, RS, indexing="ij")
    _OFFSETS[_h] = list(
        zip((_f * _fx + _r * _rx).ravel().tolist(), (_f * _fy + _r * _ry).ravel().tolist(), strict=True)
    )


def legal(viewport: Viewport) -> np.ndarray:
    """Which moves are legal now, as a bool per move code."""
    mask = np.ones(MOVES, bool)
    if not viewport.can_advance():
        mask[Move.ADVANCE] = mask[Move.BUILD] = False
    if not viewport.can_hit():
        mask[Move.HIT] = False
    return mask


def observe(tracker: Tracker, viewport: Viewport, last: int, tick: int) -> tuple[np.ndarray, np.ndarray]:
    """The inputs for one agent after ``tracker.observe(viewport)``: the window's categories (CROP,
    uint8) and the other numbers (EXTRA, float32). Stored this way, a sample is 300-odd bytes."""
    get, x, y = tracker.memory.get, tracker.x, tracker.y
    codes = np.array([get((x + dx, y + dy), UNKNOWN) for dx, dy in _OFFSETS[tracker.heading]], np.uint8)
    extra = np.zeros(EXTRA, np.float32)
    extra[int(tracker.heading)] = 1.0
    extra[4], extra[5] = np.clip(x / 16, -2, 2), np.clip(y / 16, -2, 2)
    extra[6 + int(last) % MOVES] = 1.0
    extra[12] = viewport.can_advance()
    extra[13] = viewport.can_hit()
    extra[14] = viewport.damage_at(1) / 3
    extra[15] = min(tick, 600) / 300
    extra[16] = 1.0
    return CATEGORY[codes], extra


def one_hot(cells: np.ndarray, extra: np.ndarray) -> np.ndarray:
    """(n, INPUTS) float32 network inputs from (n, CROP) categories and (n, EXTRA) numbers."""
    n = len(cells)
    x = np.zeros((n, INPUTS), np.float32)
    cols = np.arange(CROP) * CATEGORIES + cells
    x[np.arange(n)[:, None], cols] = 1.0
    x[:, CROP * CATEGORIES :] = extra
    return x


class Policy:
    """The network's weights: w1 (INPUTS, HIDDEN), b1, w2 (HIDDEN, MOVES), b2."""

    def __init__(self, params: dict[str, np.ndarray] | None = None, seed: int = 0) -> None:
        if params is None:
            rng = np.random.default_rng(seed)
            params = {
                "w1": (rng.standard_normal((INPUTS, HIDDEN)) * np.sqrt(2 / 300)).astype(np.float32),
                "b1": np.zeros(HIDDEN, np.float32),
                "w2": (rng.standard_normal((HIDDEN, MOVES)) * np.sqrt(1 / HIDDEN)).astype(np.float32),
                "b2": np.zeros(MOVES, np.float32),
            }
        shapes = {"w1": (INPUTS, HIDDEN), "b1": (HIDDEN,), "w2": (HIDDEN, MOVES), "b2": (MOVES,)}
        for name, shape in shapes.items():
            if name not in params or params[name].shape != shape:
                got = params[name].shape if name in params else "missing"
                raise ValueError(f"weights {name!r} must be {shape}, got {got}")
        self.params = {k: np.asarray(params[k], np.float32) for k in shapes}

    def logits(self, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(preferences (n, MOVES), hidden activations (n, HIDDEN)) for inputs ``x`` (n, INPUTS)."""
        p = self.params
        h = np.maximum(x @ p["w1"] + p["b1"], 0.0)
        return h @ p["w2"] + p["b2"], h

    def act(self, cells: np.ndarray, extra: np.ndarray, masks: np.ndarray) -> np.ndarray:
        """The legal move each agent prefers most (no dice: a tournament wants the same move in the
        same position). ``masks``: (n, MOVES) bool, the legal moves."""
        z, _ = self.logits(one_hot(cells, extra))
        best: np.ndarray = np.argmax(np.where(masks, z, -np.inf), axis=1)
        return best

    def save(self, path: Path) -> None:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("wb") as f:  # a file object: np.savez would add ".npz" to a name without it
            halves: dict[str, Any] = {k: v.astype(np.float16) for k, v in self.params.items()}
            np.savez_compressed(f, **halves)

    @classmethod
    def load(cls, path: Path) -> Policy:
        """The policy in ``path``; ValueError says what is wrong with the file."""
        try:
            with np.load(path) as data:
                params = {k: data[k].astype(np.float32) for k in data.files}
        except FileNotFoundError:
            raise ValueError(f"no weights at {path}") from None
        except (OSError, ValueError) as exc:
            raise ValueError(f"{path} is not a weights file ({exc})") from None
        try:
            return cls(params)
        except ValueError as exc:
            raise ValueError(f"{path}: {exc}") from None
