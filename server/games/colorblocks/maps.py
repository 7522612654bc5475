"""Colorblocks maps: a plain grid of block characters, parsed with file:line:col errors.

One row per line, one character per cell; spaces between cells are optional and ignored, and ``;``
starts a comment. The legend (`cellarena.sdk.games.colorblocks.LEGEND`)::

    .  neutral         R / B  red (seat 0) / blue (seat 1) colour block
    T  true neutral    X      dead block
    1 / 2  objective of red / blue       s / t  spawn block of red / blue

Each side needs exactly one spawn block and at least one objective. The built-in map is ``classic``.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from cellarena.sdk.games.colorblocks import CLASSIC, LEGEND, Block
from cellarena.server.games.base import MapError

MIN_SIZE = 3
MAX_SIZE = 64
MAX_FILE_BYTES = 64 * 1024
BUILTIN = {"classic": CLASSIC}


def read_map(name_or_path: str) -> tuple[str, str]:
    """The text of a built-in map or a map file, and the source name its errors carry."""
    if name_or_path in BUILTIN:
        return BUILTIN[name_or_path], f"<builtin>/{name_or_path}"
    path = Path(name_or_path)
    listing = ", ".join(BUILTIN)
    if not path.is_file():
        raise MapError(
            name_or_path, 1, 1, f"no built-in map of that name and no such file; built-in maps: {listing}"
        )
    try:
        if path.stat().st_size > MAX_FILE_BYTES:
            raise MapError(name_or_path, 1, 1, f"a map file is at most {MAX_FILE_BYTES} bytes")
        return path.read_text(encoding="utf-8"), name_or_path
    except (OSError, UnicodeDecodeError) as exc:
        raise MapError(name_or_path, 1, 1, f"cannot read the map file: {exc}") from exc


def _parse_row(line: str, n: int, source: str) -> tuple[list[int], list[tuple[int, int]]]:
    """One line's block codes and the (line, col) of each, up to a ``;`` comment."""
    row: list[int] = []
    pos: list[tuple[int, int]] = []
    for col, ch in enumerate(line, start=1):
        if ch == ";":
            break
        if ch.isspace():
            continue
        if ch not in LEGEND:
            raise MapError(source, n, col, f"unknown block {ch!r}; use one of {' '.join(LEGEND)}")
        row.append(LEGEND[ch])
        pos.append((n, col))
    return row, pos


def _check_seats(
    blocks: np.ndarray, where: list[list[tuple[int, int]]], first_line: int, source: str
) -> None:
    """Each seat has exactly one spawn block and at least one objective."""
    for seat, (spawn_ch, obj_ch) in enumerate((("s", "1"), ("t", "2"))):
        ys, xs = np.nonzero(blocks == Block.SPAWN_RED + seat)
        if len(ys) != 1:
            line_no, col = where[int(ys[1])][int(xs[1])] if len(ys) > 1 else (first_line, 1)
            raise MapError(
                source,
                line_no,
                col,
                f"seat {seat} needs exactly one spawn block {spawn_ch!r}, found {len(ys)}",
            )
        if not np.any(blocks == Block.OBJECTIVE_RED + seat):
            raise MapError(source, first_line, 1, f"seat {seat} needs at least one objective {obj_ch!r}")


def parse_map(text: str, source: str = "<map>") -> np.ndarray:
    """The (height, width) block codes of a map's text; MapError points at the offending character."""
    rows: list[list[int]] = []
    where: list[list[tuple[int, int]]] = []  # (line, col) of each cell, for errors
    first_line = 0
    for n, line in enumerate(text.splitlines(), start=1):
        row, pos = _parse_row(line, n, source)
        if not row:
            continue
        if rows and len(row) != len(rows[0]):
            line_no, col = pos[min(len(row), len(rows[0])) - 1]
            raise MapError(
                source,
                line_no,
                col,
                f"this row has {len(row)} blocks but the first (line {first_line}) has {len(rows[0])}; "
                "every row must be as wide",
            )
        if not rows:
            first_line = n
        rows.append(row)
        where.append(pos)
    if not rows:
        raise MapError(source, 1, 1, "the map has no rows; write one line of blocks per row")
    h, w = len(rows), len(rows[0])
    if not (MIN_SIZE <= h <= MAX_SIZE and MIN_SIZE <= w <= MAX_SIZE):
        raise MapError(source, first_line, 1, f"the map is {w}x{h}; each side must be {MIN_SIZE}..{MAX_SIZE}")
    blocks = np.array(rows, np.uint8)
    _check_seats(blocks, where, first_line, source)
    return blocks
