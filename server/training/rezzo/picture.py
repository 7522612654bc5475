"""A Rezzo world as an RGB image (``render_mode="rgb_array"``), in the browser viewer's colours.

The colours are those of `server/web/static/palette.js` (seats 0-3 in the Okabe-Ito palette, 4-7
chosen to stay apart from them; tests/test_web_newcomer.py holds the two equal), so a frame from
training looks like the same world in `cellarena replay view`. Each cell is a ``scale`` x ``scale``
square; agents are their seat's colour.
"""

from __future__ import annotations

import numpy as np

from cellarena.sdk.games.rezzo import Cell

_SEATS = ("#E69F00", "#56B4E9", "#009E73", "#F0E442", "#7788EE", "#EE5511", "#BBEE99", "#64DADE")
_PLAIN = {
    Cell.BLANK: "#1c1f25",
    Cell.CONDUCTOR: "#8a7f8f",
    Cell.ELECTRON: "#ffffff",
    Cell.TAIL: "#b05cc8",
    Cell.PHOTON: "#ff9ff3",
    Cell.OOB: "#4a1020",
}
#: Per owned kind, how far the seat's colour is mixed towards black (-) or white (+), as palette.js.
_MIX = {Cell.AGENT: 0.0, Cell.FLAG: 0.45, Cell.GEYSER: -0.28, Cell.BASE: -0.5}


def _rgb(hex_colour: str) -> np.ndarray:
    return np.array([int(hex_colour[i : i + 2], 16) for i in (1, 3, 5)], float)


def _palette() -> np.ndarray:
    """(256, 3) uint8: every code's colour (codes no world holds are black)."""
    table = np.zeros((256, 3), float)
    for code, colour in _PLAIN.items():
        table[code] = _rgb(colour)
    for kind, t in _MIX.items():
        for owner, seat in enumerate(_SEATS):
            c = _rgb(seat)
            toward = 255.0 if t > 0 else 0.0
            table[kind + owner] = np.floor(c + (toward - c) * abs(t) + 0.5)  # JS's Math.round
    return table.astype(np.uint8)


PALETTE = _palette()


def rgb_frame(cells: np.ndarray, scale: int = 8) -> np.ndarray:
    """(H * scale, W * scale, 3) uint8 picture of ``cells`` (public codes with absolute owners)."""
    if scale < 1:
        raise ValueError(f"scale must be 1 or more, got {scale}")
    image = PALETTE[np.asarray(cells, np.uint8)]
    return np.ascontiguousarray(image.repeat(scale, axis=0).repeat(scale, axis=1))
