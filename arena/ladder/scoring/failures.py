"""Which ends of a ladder match count as the bot's failure, for automatic pausing (docs/ladder.md).

A ladder cannot see inside a remote bot; it sees how its seat ended (the seat's cause,
`cellarena.server.games.causes`) and its late and invalid counts. A failure is an end that says the
bot is broken, not that it lost:

- ``exited``, ``limit``: its process died or broke a limit (a house bot, or a launched one);
- ``disconnected``: its connection dropped and did not come back within the grace (a protocol error
  ends the connection, so it lands here too);
- ``never_connected``: it never took its seat (a redirected match it did not reach);
- ``unresponsive``: it forfeited for a long run of late or missing answers;
- ``refused``, ``wrong_game``: it was refused at its seat;
- ``silent``: it stayed seated but answered almost nothing in time or validly (late plus invalid at
  least `SILENT_SHARE` of at least `SILENT_MIN_TICKS` ticks) - a long late or invalid run that the
  ladder's settings did not forfeit.

A plain loss, a draw, a cap reached and an unknown cause (a match from before causes were kept) are
not failures: they reset the count of failures in a row.
"""

from __future__ import annotations

from typing import Any

from cellarena.server.games import causes

#: Seat causes that are failures.
FAILURE_CAUSES = frozenset(
    {
        causes.EXITED,
        causes.LIMIT,
        causes.DISCONNECTED,
        causes.NEVER_CONNECTED,
        causes.UNRESPONSIVE,
        causes.REFUSED,
        causes.WRONG_GAME,
    }
)
#: A seated bot whose late plus invalid answers reach this share of the ticks failed (``silent``)...
SILENT_SHARE = 0.9
#: ...in a match of at least this many ticks (a short match says too little).
SILENT_MIN_TICKS = 10
SILENT = "silent"


def failure_of(cause: dict[str, Any] | None, late: int, invalid: int, ticks: int) -> str | None:
    """The failure a seat's end is (a cause name, or ``silent``), or None if it is no failure."""
    kind = cause.get("cause") if isinstance(cause, dict) else None
    if kind in FAILURE_CAUSES:
        return str(kind)
    if ticks >= SILENT_MIN_TICKS and late + invalid >= SILENT_SHARE * ticks:
        return SILENT
    return None


def pause_reason(failure: str, in_a_row: int, *, launch: bool = False) -> str:
    """What a bot paused for ``in_a_row`` failed matches is told (at hello, on its page); with
    ``launch``, the last failure was a house bot's launch that never joined the queue."""
    if launch:
        return f"{in_a_row} failures in a row, the last one a launch that never joined the queue: {failure}"
    return f"{in_a_row} failed matches in a row, the last one {failure}"
