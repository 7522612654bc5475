"""The words for a seat's counts and forfeits, one set for every place that shows them.

`cellarena match`, a tournament's summary, `cellarena results`, the ladder's pages and the web player
say the same things the same way: each count by one name (`COUNTS`), said with its plural right
(`counted`), a match won because the others forfeited by one reason (`ONE_LEFT`), and the rule
that puts a bot among the failures without a forfeit (`mostly_invalid`). The cause words themselves
and their sentences are `causes`'; the player's JS keeps `causes.FORFEITS` in its own list, which
tests/test_vocabulary.py holds to this one.
"""

from __future__ import annotations

#: The counts kept per seat, in the order every table shows them, and what each one counts.
COUNTS: dict[str, str] = {
    "late": "late or missing answers (each plays no move)",
    "invalid": "invalid answers (on_tick raised, or an answer the game cannot read: each plays no move)",
    "illegal": "moves the game refused",
}

#: Each count's noun, singular and plural, for a sentence ("1 invalid answer", "3 late answers").
_NOUNS: dict[str, tuple[str, str]] = {
    "late": ("late answer", "late answers"),
    "invalid": ("invalid answer", "invalid answers"),
    "illegal": ("illegal move", "illegal moves"),
    "tick": ("tick", "ticks"),
    "match": ("match", "matches"),
    "forfeit": ("forfeit", "forfeits"),
    "failure": ("failure", "failures"),
}

#: The reason of a match that ended because every seat but one forfeited in more ways than one
#: (disconnected, hung, crashed: each seat's own cause says which), and because all did.
ONE_LEFT = "every other seat forfeited"
NONE_LEFT = "every seat forfeited"


def all_forfeited(kinds: set[str], *, one_left: bool) -> str:
    """The reason of a match the server ended because the seats forfeited, by their cause words:
    "every other seat disconnected" only when each of them did (a hung bot the server closed did not
    disconnect), else `ONE_LEFT` (`NONE_LEFT` when no seat is left)."""
    if kinds == {"disconnected"}:
        return "every other seat disconnected" if one_left else "every seat disconnected"
    return ONE_LEFT if one_left else NONE_LEFT


def counted(kind: str, n: int) -> str:
    """``n`` with its noun: ``counted("invalid", 1)`` is "1 invalid answer"; an unknown kind as is."""
    one, many = _NOUNS.get(kind, (kind, kind))
    return f"{n} {one if n == 1 else many}"


def mostly_invalid(invalid: int, ticks: int) -> bool:
    """Whether a seat's answers were mostly invalid (more than half its match's ticks): such a bot is
    failing, not playing, and is listed among the failures even though it never forfeited."""
    return ticks > 0 and 2 * invalid > ticks


def still_in(players: int, forfeited: int) -> str:
    """How many seats are still in at a match's end, the forfeits taken out."""
    left = players - forfeited
    return f"{left} of {players} players still in" + (f" ({forfeited} forfeited)" if forfeited else "")
