"""What a bot is told when the ladder's host revoked it or rotated its token (or its owner renewed it),
and when a session of it must end: one wording for the admission service (queued bots, sessions checked
after a change) and the match starter (a pairing the store refused). Who renewed a token is read from
the audit log, where an owner's renewal is ``NAME (owner)``'s."""

from __future__ import annotations

from cellarena.arena.ladder.identity import tokens
from cellarena.arena.ladder.records import AuditEntry, BotRecord


def revoked_message(name: str) -> str:
    return f"the ladder's host revoked {name}: its token no longer works"


def rotated_message(name: str, *, by_owner: bool = False) -> str:
    by = "renewed by its owner on the ladder's pages" if by_owner else "rotated by the ladder's host"
    return (
        f"{name} has a new token ({by}): the one this connection used no longer works; connect with the "
        "new one"
    )


#: The actor an owner's renewal is audited as ends so (`Accounts.rotate_bot`); the host's is ``(cli)``.
OWNER_ACTOR = " (owner)"


def renewed_by_owner(audit: list[AuditEntry], names: set[str]) -> set[str]:
    """Those of ``names`` whose latest token change in ``audit`` (newest first) their owner made."""
    seen: dict[str, bool] = {}
    for entry in audit:
        if entry.action == "rotate" and entry.bot in names and entry.bot not in seen:
            seen[entry.bot] = entry.actor.endswith(OWNER_ACTOR)
    return {name for name, by_owner in seen.items() if by_owner}


def stale(current: tuple[BotRecord, str] | None, digest: str | None, *, by_owner: bool = False) -> str | None:
    """Why a session of a bot that the store now has as ``current`` must end; None if it may stay.
    ``by_owner``: its token was last renewed by its owner (said so)."""
    if current is None or not current[0].active:
        return revoked_message("this bot" if current is None else current[0].name)
    if digest is not None and not tokens.digests_equal(digest, current[1]):
        return rotated_message(current[0].name, by_owner=by_owner)
    return None
