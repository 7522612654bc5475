"""The optional ``debug`` map of a ``moves`` answer: what a bot drew for its own eyes, and its caps.

A bot may add to its answer::

    "debug": {
        "marks": [{"cell": [a, b], "colour": "#rrggbb", "label": "str", "agent": k}, ...],
        "lines": [{"from": [a, b], "to": [a, b], "colour": "#rrggbb", "agent": k}, ...],
        "text": ["a line", ...],
        "error": "on_tick raised ValueError: ...",
    }

Every key is optional. ``error`` is the first line of an exception the bot's code raised this tick
(the SDK fills it in): its owner's, as the drawings are. ``cell``, ``from`` and ``to`` are board
cells ``[x, y]``, except in a game whose engine places cells relative to an agent (Rezzo:
``[row, col]`` of agent ``agent``'s viewport, as on the wire; the seat's first agent of the request
when ``agent`` is left out).

Why here, in the sans-IO protocol package: the server keeps what it may of a ``debug`` map with
`clean`, and the SDK holds its own drawing to the same caps (`DebugLayer` in ``cellarena.sdk.debug``),
so the two cannot disagree on them. What is past a cap or malformed is dropped and counted, never
refused: a bad ``debug`` never costs the move it came with (docs/protocol.md#debug).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from cellarena.sdk.protocol.fields import is_int

#: Marks kept of one answer; the rest are dropped and counted.
MAX_MARKS = 256
#: Lines kept of one answer.
MAX_LINES = 64
#: Bytes of text (UTF-8, all lines together) kept of one answer.
MAX_TEXT_BYTES = 1024
#: Characters of a mark's label; a longer label is cut to this.
MAX_LABEL = 16
#: Bytes of debug (as msgpack) a seat may have kept over one match; later ones are dropped whole.
MAX_MATCH_BYTES = 1024 * 1024
#: Characters kept of an answer's ``error`` (the first line of what its bot raised this tick).
MAX_ERROR = 200
#: A colour on the wire: ``#rrggbb``.
COLOUR = re.compile(r"#[0-9a-fA-F]{6}")

#: Turns a drawn cell into a board cell ``[x, y]``, or None if it is none (off the viewport, no such
#: agent): an engine's ``debug_cell(seat, request, agent, cell)`` bound to a seat and its request.
Place = Callable[[int | None, list[int]], list[int] | None]


def _as_cell(value: Any) -> list[int] | None:
    if isinstance(value, (list, tuple)) and len(value) == 2 and all(is_int(v) for v in value):
        return [int(value[0]), int(value[1])]
    return None


def _as_colour(value: Any) -> str | None:
    return value.lower() if isinstance(value, str) and COLOUR.fullmatch(value) else None


def _as_agent(value: Any) -> tuple[bool, int | None]:
    """(ok, agent): absent is ok (None); anything but an int is not."""
    if value is None:
        return True, None
    return (True, int(value)) if is_int(value) else (False, None)


@dataclass
class Cleaned:
    """What `clean` kept of one ``debug`` map (None: nothing), and how many entries it dropped."""

    kept: dict[str, Any] | None
    dropped: int


def clean(debug: Any, place: Place | None = None) -> Cleaned:
    """The well-formed part of one answer's ``debug`` within the per-answer caps, its cells placed on
    the board by ``place`` (None: kept as sent). Each mark, line or text line that is malformed or
    past a cap counts one dropped; a ``debug`` that is not a map drops as one."""
    if not isinstance(debug, dict):
        return Cleaned(None, 1)
    dropped = 0
    kept: dict[str, Any] = {}

    def where(agent: int | None, cell: list[int]) -> list[int] | None:
        return cell if place is None else place(agent, cell)

    for key, keep in (("marks", _marks), ("lines", _lines), ("text", _text)):
        raw = debug.get(key)
        if raw is None:
            continue
        if not isinstance(raw, list):
            dropped += 1
            continue
        entries, lost = keep(raw, where)
        dropped += lost
        if entries:
            kept[key] = entries
    error = debug.get("error")
    if isinstance(error, str) and error.isprintable():
        kept["error"] = error[:MAX_ERROR]
    elif error is not None:
        dropped += 1
    return Cleaned(kept or None, dropped)


def _capped(raw: list[Any], cap: int, keep: Callable[[Any], dict[str, Any] | None]) -> tuple[list[Any], int]:
    """What ``keep`` makes of the entries of ``raw`` (None: malformed), the first ``cap`` of them, and
    how many were dropped (malformed or past the cap)."""
    kept: list[dict[str, Any]] = []
    for entry in raw:
        one = keep(entry) if len(kept) < cap else None
        if one is not None:
            kept.append(one)
    return kept, len(raw) - len(kept)


def _marks(raw: list[Any], where: Place) -> tuple[list[Any], int]:
    """The marks kept (placed, within `MAX_MARKS`), and how many were dropped."""

    def mark(m: Any) -> dict[str, Any] | None:
        if not isinstance(m, dict):
            return None
        cell, colour = _as_cell(m.get("cell")), _as_colour(m.get("colour"))
        agent_ok, agent = _as_agent(m.get("agent"))
        label = m.get("label")
        if label is not None and not (isinstance(label, str) and label.isprintable()):
            return None
        board = where(agent, cell) if cell is not None and agent_ok else None
        if board is None or colour is None:
            return None
        return {"cell": board, "colour": colour, **({"label": label[:MAX_LABEL]} if label else {})}

    return _capped(raw, MAX_MARKS, mark)


def _lines(raw: list[Any], where: Place) -> tuple[list[Any], int]:
    """The lines kept (both ends placed, within `MAX_LINES`), and how many were dropped."""

    def line(ln: Any) -> dict[str, Any] | None:
        if not isinstance(ln, dict):
            return None
        a, b, colour = _as_cell(ln.get("from")), _as_cell(ln.get("to")), _as_colour(ln.get("colour"))
        agent_ok, agent = _as_agent(ln.get("agent"))
        if a is None or b is None or colour is None or not agent_ok:
            return None
        pa, pb = where(agent, a), where(agent, b)
        return None if pa is None or pb is None else {"from": pa, "to": pb, "colour": colour}

    return _capped(raw, MAX_LINES, line)


def _text(raw: list[Any], _where: Place) -> tuple[list[Any], int]:
    """The text lines kept (printable, within `MAX_TEXT_BYTES` in all), and how many were dropped."""
    text: list[str] = []
    dropped = 0
    room = MAX_TEXT_BYTES
    for t in raw:
        size = len(t.encode("utf-8", "replace")) if isinstance(t, str) else 0
        if not isinstance(t, str) or size > room or not t.isprintable():
            dropped += 1
            continue
        room -= size
        text.append(t)
    return text, dropped
