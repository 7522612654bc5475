"""A bot's statistics, from its finished matches: what ``/bots/NAME/stats`` and its JSON show.

`bot_stats` is a pure function of the matches the store hands out (`LadderStore.bot_seats`), so the
page, the JSON and the tests read the same numbers:

- ``rating``: its rating (mu, sigma, and the value tables show, `ratings.ladder.shown`) after each
  rated match, with the version it played under: the uncertainty over time;
- ``head_to_head``: per opponent, wins, draws and losses against it (in a match of more seats, a
  bot placed better than the opponent won against it);
- ``maps`` and ``seats``: per map and per seat, the matches, wins, draws, losses and win rate;
- ``versions``: the same per version its hellos carried (``unknown``: none given);
- ``failures``: its failed matches by cause (`failures.failure_of`), and ``causes``: how all its
  matches ended for it, by cause.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from cellarena.arena.ladder.records import BotMatch
from cellarena.arena.ladder.scoring.failures import failure_of
from cellarena.arena.ratings import ladder as ratings


@dataclass
class Tally:
    matches: int = 0
    wins: int = 0
    draws: int = 0
    losses: int = 0

    def add(self, result: str) -> None:
        self.matches += 1
        if result == "win":
            self.wins += 1
        elif result == "draw":
            self.draws += 1
        else:
            self.losses += 1

    def to_json(self) -> dict[str, Any]:
        return {
            "matches": self.matches,
            "wins": self.wins,
            "draws": self.draws,
            "losses": self.losses,
            "win_rate": round(self.wins / self.matches, 4) if self.matches else None,
        }


def _versus(mine: int, theirs: int) -> str:
    if mine == theirs:
        return "draw"
    return "win" if mine < theirs else "loss"


def bot_stats(name: str, played: Sequence[BotMatch]) -> dict[str, Any]:
    """``name``'s statistics from its finished matches ``played``, oldest first (module docstring)."""
    rating: list[dict[str, Any]] = []
    h2h: dict[str, Tally] = {}
    maps: dict[str, Tally] = {}
    seats: dict[int, Tally] = {}
    versions: dict[str, Tally] = {}
    failures: Counter[str] = Counter()
    causes: Counter[str] = Counter()
    for bm in played:
        me, match = bm.me, bm.match
        result = bm.outcome
        if result is None or me.rank is None:
            continue
        version = me.version or "unknown"
        for tally in (
            maps.setdefault(match.map or "default", Tally()),
            seats.setdefault(bm.seat, Tally()),
            versions.setdefault(version, Tally()),
        ):
            tally.add(result)
        for other in match.seats:
            if other.seat != bm.seat and other.rank is not None:
                h2h.setdefault(other.bot, Tally()).add(_versus(me.rank, other.rank))
        cause = me.cause_json() or {"cause": "unknown"}
        causes[str(cause.get("cause", "unknown"))] += 1
        failure = failure_of(me.cause, me.late or 0, me.invalid or 0, match.ticks or 0)
        if failure is not None:
            failures[failure] += 1
        if match.rated and me.after is not None:
            rating.append(
                {
                    "match": match.id,
                    "ended": None if match.ended is None else match.ended.isoformat(),
                    "mu": me.after.mu,
                    "sigma": me.after.sigma,
                    "rating": ratings.shown(me.after),
                    "version": me.version,
                }
            )
    return {
        "bot": name,
        "matches": sum(t.matches for t in maps.values()),
        "rating": rating,
        "head_to_head": {k: v.to_json() for k, v in sorted(h2h.items())},
        "maps": {k: v.to_json() for k, v in sorted(maps.items())},
        "seats": {str(k): v.to_json() for k, v in sorted(seats.items())},
        "versions": {k: v.to_json() for k, v in versions.items()},
        "failures": dict(failures.most_common()),
        "causes": dict(causes.most_common()),
    }
