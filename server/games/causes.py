"""Why a seat's match ended as it did: one structured cause per seat, and the sentence a user reads.

A cause is a msgpack-ready map with at least ``cause`` (a snake_case word, the same everywhere it is
shown: `match`, tournaments, `results`, the ladder) and usually ``tick``. Games add their own
(Rezzo's ``flag_at_base`` with the flag's and the base's cells); the match server adds the forfeits.
A game's cause may carry ``text``, a sentence with ``{0}``, ``{1}``... where seat names go, because
only the game knows how to say it and only the server knows the names. The kinds every game shares
are said here, so that a plugin needs no text for them.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from typing import Any

#: Results from before causes were kept (old replays, old database rows).
UNKNOWN = "unknown"
#: The match reached its tick (or turn) cap.
TICK_CAP = "tick_cap"
#: Every other seat lost or left.
LAST_STANDING = "last_player_standing"
#: The game ended and ranked the seats by their scores.
SCORE = "score"
#: Forfeits, set by the match server, the launcher and the seating (docs/protocol.md#causes).
UNRESPONSIVE = "unresponsive"
DISCONNECTED = "disconnected"
EXITED = "exited"
LIMIT = "limit"
WRONG_GAME = "wrong_game"
REFUSED = "refused"
NEVER_CONNECTED = "never_connected"
FORFEITS = frozenset({UNRESPONSIVE, DISCONNECTED, EXITED, LIMIT, WRONG_GAME, REFUSED, NEVER_CONNECTED})


def cause(kind: str, tick: int | None = None, *, text: str | None = None, **fields: Any) -> dict[str, Any]:
    """A cause map: ``{"cause": kind, "tick": tick, ...fields, "text": text}`` without the Nones."""
    out: dict[str, Any] = {"cause": kind}
    if tick is not None:
        out["tick"] = tick
    out.update({k: v for k, v in fields.items() if v is not None})
    if text is not None:
        out["text"] = text
    return out


#: A seat's place in a cause's sentence: ``{0}`` is seat 0's name.
_PLACEHOLDER = re.compile(r"\{(\d{1,3})\}")


def _seat_name(names: Sequence[str], seat: Any) -> str:
    if isinstance(seat, int) and 0 <= seat < len(names):
        return names[seat]
    return f"seat {seat}"


def _at(c: Mapping[str, Any]) -> str:
    return f" at tick {c['tick']}" if isinstance(c.get("tick"), int) else ""


def _log_line(c: Mapping[str, Any]) -> str:
    last = c.get("last_log_line")
    return f"; the last line of its log: {last!r}" if last else ""


def _disconnected(name: str, c: Mapping[str, Any], at: str) -> str:
    grace = c.get("grace")
    within = f" within the {grace:g} s grace" if isinstance(grace, (int, float)) and grace > 0 else ""
    return f"{name} forfeits{at}: its connection closed and it did not come back{within}"


def _exited(name: str, c: Mapping[str, Any], at: str) -> str:
    how = (
        f"was killed by signal {c['signal']}"
        if c.get("signal")
        else f"exited with status {c.get('status', '?')}"
    )
    return f"{name} forfeits{at}: its process {how}{_log_line(c)}"


def _never_connected(name: str, c: Mapping[str, Any], at: str) -> str:
    detail = c.get("detail")
    # "took its seat": a launched bot is handed its connection, so connecting is not the point.
    return f"{name} forfeits: it never took its seat" + (f" ({detail})" if detail else "")


#: Each cause's sentence, from the seat's name, the cause and " at tick N" (or "").
_SENTENCES: dict[str, Callable[[str, Mapping[str, Any], str], str]] = {
    TICK_CAP: lambda name, c, at: f"{name} was still in when the match reached its tick cap{at}",
    LAST_STANDING: lambda name, c, at: f"{name} is the last player standing{at}",
    SCORE: lambda name, c, at: f"{name} ended with {c.get('score', '?')} points{at}",
    UNRESPONSIVE: lambda name, c, at: (
        f"{name} forfeits{at}: no answer within the budget for {c.get('ticks', '?')} ticks in a row"
    ),
    DISCONNECTED: _disconnected,
    EXITED: _exited,
    LIMIT: lambda name, c, at: (
        f"{name} forfeits{at}: the launcher stopped it, {c.get('detail') or 'over a limit'}{_log_line(c)}"
    ),
    WRONG_GAME: lambda name, c, at: (
        f"{name} forfeits: it asked to play {c.get('asked', '?')}, this match plays {c.get('game', '?')}"
    ),
    REFUSED: lambda name, c, at: f"{name} forfeits: the server refused its hello ({c.get('message', '')})",
    NEVER_CONNECTED: _never_connected,
    UNKNOWN: lambda name, c, at: f"{name}: why it ended is unknown (recorded before causes were kept)",
}


def sentence(seat: int, c: Mapping[str, Any] | None, names: Sequence[str]) -> str:
    """The cause of ``seat`` as one sentence, with seat names from ``names``."""
    name = _seat_name(names, seat)
    if not c:
        return _SENTENCES[UNKNOWN](name, {}, "")
    template = c.get("text")
    if isinstance(template, str):
        # Only plain {N} is filled in, never str.format: a cause may come from an untrusted replay
        # file, where a format spec ({0:>999999999}, {0.__class__}) would cost memory or leak.
        return _PLACEHOLDER.sub(lambda m: _seat_name(names, int(m.group(1))), template[:1000])
    kind = str(c.get("cause", UNKNOWN))
    make = _SENTENCES.get(kind)
    return make(name, c, _at(c)) if make else f"{name}: {kind}{_at(c)}"


def with_sentences(
    causes: Mapping[int, Mapping[str, Any]], names: Sequence[str]
) -> dict[int, dict[str, Any]]:
    """Each seat's cause with ``text`` replaced by its sentence (names filled in), for output."""
    return {seat: {**c, "text": sentence(seat, c, names)} for seat, c in sorted(causes.items())}


def is_forfeit(c: Mapping[str, Any] | None) -> bool:
    """Whether ``c`` is one of the forfeits (`FORFEITS`)."""
    return c is not None and c.get("cause") in FORFEITS


def for_every_seat(players: int, c: Mapping[str, Any]) -> dict[int, dict[str, Any]]:
    """The same cause for every seat, when one thing ended the match for all (a cap, a score)."""
    return {seat: dict(c) for seat in range(players)}
