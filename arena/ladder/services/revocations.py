"""What a bot is told when the ladder's host revoked it or rotated its token, and when a session of it
must end: one wording for the admission service (queued bots, sessions checked after a change) and the
match starter (a pairing the store refused)."""

from __future__ import annotations

from cellarena.arena.ladder.identity import tokens
from cellarena.arena.ladder.records import BotRecord


def revoked_message(name: str) -> str:
    return f"the ladder's host revoked {name}: its token no longer works"


def rotated_message(name: str) -> str:
    return (
        f"{name} has a new token (rotated by the ladder's host): the one this connection used no longer "
        "works; connect with the new one"
    )


def stale(current: tuple[BotRecord, str] | None, digest: str | None) -> str | None:
    """Why a session of a bot that the store now has as ``current`` must end; None if it may stay."""
    if current is None or not current[0].active:
        return revoked_message("this bot" if current is None else current[0].name)
    if digest is not None and not tokens.digests_equal(digest, current[1]):
        return rotated_message(current[0].name)
    return None
