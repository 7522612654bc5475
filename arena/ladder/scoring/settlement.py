"""What a match's end changes, decided apart from the database: ratings, failures in a row, pauses.

`settle` is a pure function of the match's seats as the store keeps them (`MatchState`: ratings,
versions, failures, the host's policy) and the seats' results; the store reads that state and writes
the `Settlement` back in one transaction (`LadderStore.finish_match`), so the decision is tested without
a database and the store holds no rule of the ladder. `launch_failure` is the same count for a house
bot's launch that never joined the queue.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.records import (
    BotRecord,
    FailureCount,
    MatchState,
    SeatBot,
    SeatChange,
    SeatResult,
    Settlement,
    outcome,
)
from cellarena.arena.ladder.scoring.failures import failure_of, pause_reason
from cellarena.arena.ratings import Rating
from cellarena.arena.ratings import ladder as ratings


def count_failure(
    failures: int, paused: str | None, failure: str | None, policy: CommunityPolicy, *, launch: bool = False
) -> FailureCount:
    """One more failure in a row (a pause at the policy's count, unless paused already), or none: 0.
    ``launch``: the failure is a house bot's launch that never joined the queue, not a match."""
    if failure is None:
        return FailureCount(0, None)
    count = failures + 1
    if paused is None and policy.pause_after and count >= policy.pause_after:
        return FailureCount(count, pause_reason(failure, count, launch=launch))
    return FailureCount(count, None)


def launch_failure(cause: dict[str, Any], bot: BotRecord, policy: CommunityPolicy) -> FailureCount:
    """A launch of house bot ``bot`` that never joined the queue, ended by ``cause`` (a seat's cause
    map: ``never_connected``, ``exited``, ``wrong_game``...): a failure in a row, as a failed match is."""
    failure = failure_of(cause, 0, 0, 0) or str(cause.get("cause"))
    return count_failure(bot.failures, bot.paused, failure, policy, launch=True)


def _rating_before(bot: SeatBot, rated: bool, policy: CommunityPolicy) -> Rating:
    """The rating a seat plays from (`ratings.ladder.rating_before`). A bot's first versioned match
    after unversioned ones is no new version: nothing to compare."""
    new_version = bot.version is not None and bot.last_version not in (None, bot.version)
    return ratings.rating_before(
        bot.rating,
        rated=rated,
        new_version_rule=policy.new_version_rating,
        is_new_version=new_version,
        days_idle=bot.idle_days,
    )


def settle(state: MatchState, results: Sequence[SeatResult], ticks: int) -> Settlement:
    """What the end of a match changes: each seat's rating before and after (none for an unrated match,
    a challenge), its win, draw or loss, and its failures in a row (`failures.failure_of`) with the pause
    they bring at the policy's ``pause_after``. ``results`` are in seat order, as ``state.seats``."""
    if len(state.seats) != len(results):
        raise ValueError(f"the match has {len(state.seats)} seats, not {len(results)}")
    names = [bot.name for bot in state.seats]
    before = {bot.name: _rating_before(bot, state.rated, state.policy) for bot in state.seats}
    ranks = [r.rank for r in results]
    after = ratings.update(before, names, ranks) if state.rated else dict(before)
    changes = []
    winner = None
    for bot, r in zip(state.seats, results, strict=True):
        result = outcome(r.rank, ranks)
        if result == "win":
            winner = bot.bot_id
        failure = failure_of(r.cause, r.late, r.invalid, ticks)
        count = count_failure(bot.failures, bot.paused, failure, state.policy)
        changes.append(
            SeatChange(bot.seat, bot.bot_id, bot.name, before[bot.name], after[bot.name], result, count)
        )
    return Settlement(state.rated, winner, tuple(changes))
