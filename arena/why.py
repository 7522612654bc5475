"""Why a tournament's matches ended, per bot: the summary a tournament ends with and `results` prints.

Made from the rows `results.TournamentResults` reads, in the words of `causes` (each seat's cause
word) and `words` (counts, plurals, the failures' rule), so that the tournament's end, `results`,
`cellarena match` and the player say one thing one way. A bot's first exception comes from its log,
else from what its answers carried (the ``error`` of their ``debug``: docs/protocol.md#debug-drawing).
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, Protocol

from cellarena.server.games import causes, words


class SeatEnd(Protocol):
    """A seat of a finished match, as `results.SeatRow` reads it back."""

    @property
    def bot(self) -> str: ...
    @property
    def rank(self) -> int: ...
    @property
    def invalid(self) -> int: ...
    def cause_json(self) -> dict[str, Any]: ...


class MatchEnd(Protocol):
    """A finished match, as `results.MatchRow` reads it back."""

    @property
    def ticks(self) -> int: ...
    @property
    def seats(self) -> Sequence[SeatEnd]: ...


#: Bytes of a bot's log read for its first exception: the SDK reports the first in full, early.
_LOG_HEAD = 256 * 1024
#: A log line that names an exception: the Python SDK's "tick N: on_tick raised X: ...", a
#: traceback's last line, a Rust panic, a Java or C++ exception.
_RAISED = re.compile(r"\b(?:raised|panicked|Error|Exception|terminate called)\b")
#: The Python SDK's own line: its tick and what was raised.
_SDK_LINE = re.compile(r"\btick (\d+): (.+?)(?:; this tick counts as invalid)?$")


def first_exception(
    replay: Path | None, seat: int, log: str | None, invalid: int = 1
) -> dict[str, Any] | None:
    """The first exception a seat's bot raised in a match, ``{"tick": n or None, "text": line}``: the
    first line of its log that names one (the head of the log only: cheap, for every failure of a long
    tournament), else, when it sent invalid answers, the first ``error`` they carried in ``replay``;
    None when neither holds any."""
    found = _from_log(Path(log)) if log else None
    if found is not None or replay is None or invalid <= 0:
        return found
    from cellarena.server.replay import ReplayError, read_replay

    try:
        for record in read_replay(replay).ticks:
            error = record.debug.get(seat, {}).get("error")
            if isinstance(error, str):
                return {"tick": record.tick, "text": error}
    except ReplayError:
        pass  # a damaged replay says nothing
    return None


def _from_log(log: Path) -> dict[str, Any] | None:
    try:
        with log.open("rb") as f:
            head = f.read(_LOG_HEAD).decode("utf-8", "replace")
    except OSError:
        return None
    for line in head.splitlines():
        if _RAISED.search(line):
            sdk = _SDK_LINE.search(line)
            if sdk:
                return {"tick": int(sdk.group(1)), "text": sdk.group(2)[:200]}
            return {"tick": None, "text": line.strip()[:200]}
    return None


def failure_word(item: dict[str, Any], ticks: int) -> str:
    """What a failing seat did, in the words every printout uses: "forfeited (unresponsive)",
    "crashed", "answered mostly invalid (26 invalid answers in 27 ticks)"."""
    if item["forfeit"]:
        return f"forfeited ({item.get('cause', {}).get('cause', causes.UNKNOWN)})"
    if item["crashed"]:
        return "crashed"
    invalid = words.counted("invalid", item["invalid"])
    return f"answered mostly invalid ({invalid} in {words.counted('tick', ticks)})"


def _tally(seen: Iterable[str]) -> dict[str, int]:
    return dict(sorted(Counter(seen).items()))


def why_by_bot(
    bots: Sequence[str], matches: Sequence[MatchEnd], failures: Sequence[dict[str, Any]]
) -> list[dict[str, Any]]:
    """Per bot: its matches won, drawn and lost, each by its own seat's cause word; its forfeits; its
    invalid answers and the ticks they were in; its failures, with the first one's log and the first
    exception among them."""
    ends: dict[str, dict[str, list[str]]] = {b: {"won": [], "drew": [], "lost": []} for b in bots}
    invalid = dict.fromkeys(bots, 0)
    ticks = dict.fromkeys(bots, 0)
    for m in matches:
        firsts = sum(1 for s in m.seats if s.rank == 1)
        for s in m.seats:
            if s.bot not in ends:
                continue
            how = "lost" if s.rank > 1 else "won" if firsts == 1 else "drew"
            ends[s.bot][how].append(str(s.cause_json().get("cause", causes.UNKNOWN)))
            invalid[s.bot] += s.invalid
            ticks[s.bot] += m.ticks
    out = []
    for bot in bots:
        mine = [f for f in failures if f["bot"] == bot]
        first = next((f["exception"] for f in mine if f.get("exception")), None)
        out.append(
            {
                "bot": bot,
                **{how: _tally(seen) for how, seen in ends[bot].items()},
                "forfeits": _tally(f["cause"].get("cause", causes.UNKNOWN) for f in mine if f["forfeit"]),
                "invalid": invalid[bot],
                "ticks": ticks[bot],
                "failures": len(mine),
                "log": mine[0].get("log") if mine else None,
                "exception": first,
            }
        )
    return out


def _ends(counts: dict[str, int]) -> str:
    return ", ".join(f"{word} {n}" for word, n in counts.items())


def why_lines(why: Sequence[dict[str, Any]]) -> list[str]:
    """The summary as lines, one a bot (and one more for a failing bot's log and exception)."""
    lines = []
    for b in why:
        said = [
            f"{how} {sum(b[how].values())} ({_ends(b[how])})" for how in ("won", "drew", "lost") if b[how]
        ]
        line = f"{b['bot']}: " + ("; ".join(said) if said else "no match played")
        if b["invalid"]:
            line += f"; {words.counted('invalid', b['invalid'])} in {words.counted('tick', b['ticks'])}"
        if b["forfeits"]:
            line += f"; {words.counted('forfeit', sum(b['forfeits'].values()))} ({_ends(b['forfeits'])})"
        lines.append(line)
        if b["failures"]:
            exc = b["exception"]
            at = "" if exc is None or exc.get("tick") is None else f" at tick {exc['tick']}"
            raised = f"; first exception{at}: {exc['text']}" if exc else ""
            lines.append(f"  {words.counted('failure', b['failures'])}{raised}; log: {b['log']}")
    return lines
