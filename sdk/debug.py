"""`DebugLayer`: what a bot draws for its own eyes each tick (``self.debug.mark/line/log``).

The SDK sends what was drawn during ``on_tick`` as the optional ``debug`` map of that tick's answer
(docs/protocol.md#debug); the server keeps it in the replay and the web player draws it. Why it is
forgiving: drawing is for debugging, so a bad call (a colour that is no colour, a cell that is no
cell) or one past the caps is dropped and counted, never raised, and never costs the tick's move.
The caps are the server's (`cellarena.sdk.protocol.debug`), which also keeps every answer well under
the protocol's 64 KiB frame limit whatever the bot draws.
"""

from __future__ import annotations

import operator
from collections.abc import Sequence
from typing import Any

from cellarena.sdk.protocol.debug import COLOUR, MAX_LABEL, MAX_LINES, MAX_MARKS, MAX_TEXT_BYTES

#: Colour names `DebugLayer` takes besides ``#rrggbb``.
COLOURS = {
    "red": "#e6194b",
    "green": "#3cb44b",
    "blue": "#4363d8",
    "yellow": "#ffe119",
    "orange": "#f58231",
    "purple": "#911eb4",
    "cyan": "#42d4f4",
    "magenta": "#f032e6",
    "white": "#ffffff",
    "black": "#000000",
    "grey": "#a9a9a9",
}
#: Cell coordinates a mark may use: far beyond any board, small enough to pack in 5 bytes.
_LIMIT = 2**31


def _colour(value: object) -> str | None:
    if not isinstance(value, str):
        return None
    if COLOUR.fullmatch(value):
        return value.lower()
    return COLOURS.get(value.lower())


def _cell(value: object) -> list[int] | None:
    if not isinstance(value, Sequence) or isinstance(value, (str, bytes)) or len(value) != 2:
        return None
    out = []
    for v in value:
        if isinstance(v, bool):
            return None
        try:
            i = operator.index(v)  # ints and numpy ints, not floats
        except TypeError:
            return None
        if not -_LIMIT <= i < _LIMIT:
            return None
        out.append(i)
    return out


class DebugLayer:
    """One tick's drawing. Cells are board cells ``(x, y)``; in Rezzo they are ``(row, col)`` of an
    agent's viewport (the wire layout, `Viewport.cell`) and ``agent`` names the agent (default: the
    first of the tick's agents).

    ``dropped`` counts calls dropped over the match (malformed, or past a cap), and ``first_problem``
    says what was wrong with the first; the SDK reports both once.
    """

    __slots__ = ("_lines", "_marks", "_text", "_text_room", "dropped", "first_problem")

    def __init__(self) -> None:
        self._marks: list[dict[str, Any]] = []
        self._lines: list[dict[str, Any]] = []
        self._text: list[str] = []
        self._text_room = MAX_TEXT_BYTES
        self.dropped = 0
        self.first_problem: str | None = None

    def _drop(self, why: str) -> None:
        self.dropped += 1
        if self.first_problem is None:
            self.first_problem = why

    def mark(
        self, cell: Sequence[int], colour: str, label: str | None = None, *, agent: int | None = None
    ) -> None:
        """Mark ``cell`` in ``colour`` (``#rrggbb`` or a name of `COLOURS`), with an optional label
        of up to 16 characters (cut beyond)."""
        if len(self._marks) >= MAX_MARKS:
            return self._drop(f"more than {MAX_MARKS} marks in one tick")
        where, col = _cell(cell), _colour(colour)
        if where is None or col is None:
            return self._drop(
                f"mark({cell!r:.40}, {colour!r:.20}): a cell is two ints, a colour #rrggbb or a name"
            )
        mark: dict[str, Any] = {"cell": where, "colour": col}
        if label is not None:
            if not isinstance(label, str) or not label.isprintable():
                return self._drop(f"mark label {label!r:.40}: a label is printable text")
            if label:
                mark["label"] = label[:MAX_LABEL]
        if agent is not None:
            if isinstance(agent, bool) or not isinstance(agent, int):
                return self._drop(f"mark agent {agent!r:.20}: an agent is an int")
            mark["agent"] = agent
        self._marks.append(mark)
        return None

    def line(self, a: Sequence[int], b: Sequence[int], colour: str, *, agent: int | None = None) -> None:
        """A line from cell ``a`` to cell ``b`` in ``colour``."""
        if len(self._lines) >= MAX_LINES:
            return self._drop(f"more than {MAX_LINES} lines in one tick")
        pa, pb, col = _cell(a), _cell(b), _colour(colour)
        if pa is None or pb is None or col is None:
            return self._drop(
                f"line({a!r:.30}, {b!r:.30}, {colour!r:.20}): cells are two ints, a colour #rrggbb"
            )
        line: dict[str, Any] = {"from": pa, "to": pb, "colour": col}
        if agent is not None:
            if isinstance(agent, bool) or not isinstance(agent, int):
                return self._drop(f"line agent {agent!r:.20}: an agent is an int")
            line["agent"] = agent
        self._lines.append(line)
        return None

    def log(self, text: object) -> None:
        """One or more text lines (split at newlines) for this tick's panel; 1 KiB a tick in all."""
        for raw in str(text).splitlines() or [""]:
            piece = "".join(ch if ch.isprintable() else " " for ch in raw)
            size = len(piece.encode("utf-8", "replace"))
            if size > self._text_room:
                self._drop(f"more than {MAX_TEXT_BYTES} bytes of text in one tick")
                continue
            self._text_room -= size
            self._text.append(piece)

    def __bool__(self) -> bool:
        return bool(self._marks or self._lines or self._text)

    def take(self) -> dict[str, Any] | None:
        """This tick's ``debug`` map (None: nothing drawn), and a clean layer for the next tick."""
        if not self:
            return None
        out: dict[str, Any] = {}
        if self._marks:
            out["marks"], self._marks = self._marks, []
        if self._lines:
            out["lines"], self._lines = self._lines, []
        if self._text:
            out["text"], self._text = self._text, []
        self._text_room = MAX_TEXT_BYTES
        return out
