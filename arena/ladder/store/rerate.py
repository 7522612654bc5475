"""Re-rating a ladder's stored history with the ladder's rating system (`ratings.ladder.SYSTEM`).

A rating made by one system must never be updated by another, so a ladder moves to a new system by
rating its whole history again: every finished match in the order its result was counted
(``matches.seq``), each seat from the rating the live ladder would have given it
(`ratings.ladder.rating_before`: idle days, the host's new-version rule), through the seasons closed
between them (`ratings.seasons.next_season`). The seats' ratings before and after and the ``ratings``
table are rewritten; counts, results and everything else stay. Run by a schema migration, in its
transaction: all of it, or none.
"""

from __future__ import annotations

import logging
from datetime import datetime

from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.store.backends import Backend
from cellarena.arena.ratings import Rating
from cellarena.arena.ratings import ladder as ratings
from cellarena.arena.ratings.seasons import StartNext, next_season

log = logging.getLogger("cellarena.ladder")


def rerate_history(db: Backend) -> None:
    """Rate every finished match again, oldest result first, and write the seats' and bots' ratings."""
    # The host's policy as `Settings.read_policy` reads it (that module imports the schema: not here).
    policy = CommunityPolicy.from_settings(
        {str(k): str(v) for k, v in db.query("SELECT name, value FROM settings")}
    )
    rule = policy.new_version_rating
    current: dict[int, Rating] = {}  # bots with a rated match so far
    last_rated: dict[int, str] = {}
    last_version: dict[int, str | None] = {}
    closes = _season_closes(db)
    _close_seasons(db, closes, 0, current)  # closed before any result
    matches = db.query("SELECT id, rated, ended, seq FROM matches WHERE status = 'finished' ORDER BY seq")
    for match_id, rated, ended, seq in matches:
        seats = db.query(
            "SELECT seat, bot_id, rank, version FROM seats WHERE match_id = ? ORDER BY seat", (match_id,)
        )
        before = []
        for _, bot_id, _, version in seats:
            last = last_version.get(bot_id)
            since = last_rated.get(bot_id)
            before.append(
                ratings.rating_before(
                    current.get(bot_id),
                    rated=bool(rated),
                    new_version_rule=rule,
                    is_new_version=version is not None and last not in (None, version),
                    days_idle=ratings.idle_days(
                        None if since is None else datetime.fromisoformat(since),
                        datetime.fromisoformat(ended),
                    ),
                )
            )
        names = [str(bot_id) for _, bot_id, _, _ in seats]
        ranks = [int(rank) for _, _, rank, _ in seats]
        if rated:
            new = ratings.update(dict(zip(names, before, strict=True)), names, ranks)
            after = [new[n] for n in names]
        else:
            after = before
        for (seat, bot_id, _, version), b, a in zip(seats, before, after, strict=True):
            db.execute(
                "UPDATE seats SET mu_before = ?, sigma_before = ?, mu_after = ?, sigma_after = ?"
                " WHERE match_id = ? AND seat = ?",
                (b.mu, b.sigma, a.mu, a.sigma, match_id, seat),
            )
            last_version[bot_id] = version
            if rated:
                current[bot_id] = a
                last_rated[bot_id] = ended
        _close_seasons(db, closes, int(seq), current)
    for bot_id, r in current.items():
        db.execute("UPDATE ratings SET mu = ?, sigma = ? WHERE bot_id = ?", (r.mu, r.sigma, bot_id))
    log.info("ladder database: %d finished matches re-rated with %s", len(matches), ratings.SYSTEM.name)


def _season_closes(db: Backend) -> list[tuple[int, str, StartNext]]:
    """Each closed season: the ``seq`` of the last result counted before it (0: none), its game, and
    how the next began; in the order they closed."""
    rows = db.query("SELECT COALESCE(last_seq, 0), game, start_next FROM seasons ORDER BY closed, id")
    return [(int(seq), str(game), "carry" if how == "carry" else "reset") for seq, game, how in rows]


def _close_seasons(
    db: Backend, closes: list[tuple[int, str, StartNext]], seq: int, current: dict[int, Rating]
) -> None:
    """Start the seasons that closed right after result ``seq`` (popped from ``closes``)."""
    while closes and closes[0][0] <= seq:
        _, game, how = closes.pop(0)
        _start_season(db, game, how, current)


def _start_season(db: Backend, game: str, how: StartNext, current: dict[int, Rating]) -> None:
    """The ratings of ``game``'s bots as a season closed ``how`` left them (`SeasonTable.close_season`)."""
    start = ratings.initial()
    for (bot_id,) in db.query("SELECT id FROM bots WHERE game = ?", (game,)):
        if bot_id in current:
            if how == "reset":
                del current[bot_id]
            else:
                current[bot_id] = next_season(current[bot_id], start, how)
