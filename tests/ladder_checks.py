"""Checks of a ladder database against its own rows, for the ladder store's tests.

`assert_consistent` recounts the ratings from the finished matches' seats in the order they were
counted (each bot's sigma widened by its whole days idle between them, `ratings.ladder.idle`),
independently of the store's bookkeeping, and compares that with what the store says: after
any crash, the current ratings and standings must equal such a recount, and every match must be either
whole (finished) or untouched (running or void).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime

from cellarena.arena.ladder.store.backends import Backend, open_backend
from cellarena.arena.ladder.store.database import parse_time
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ratings import Rating
from cellarena.arena.ratings import ladder as ratings


@contextmanager
def raw(target: str) -> Iterator[Backend]:
    """A plain connection to the database, beside the store's, for what the API does not offer."""
    db = open_backend(target, create=True)
    try:
        yield db
    finally:
        db.close()


def finished_in_order(db: Backend) -> list[tuple[int, str, list[tuple[str, int]]]]:
    """(match id, ended, [(bot, rank) per seat]) for each finished match, in the order results were
    counted."""
    rows = db.query(
        "SELECT m.id, m.ended, b.name, s.rank FROM matches m JOIN seats s ON s.match_id = m.id"
        " JOIN bots b ON b.id = s.bot_id WHERE m.status = 'finished' ORDER BY m.seq, s.seat"
    )
    out: list[tuple[int, str, list[tuple[str, int]]]] = []
    for match_id, ended, bot, rank in rows:
        if not out or out[-1][0] != match_id:
            out.append((match_id, ended, []))
        out[-1][2].append((bot, rank))
    return out


def assert_consistent(target: str, game: str) -> dict[str, Rating]:
    """Every match whole or untouched, and the store's ratings and standings equal a recount; the
    recounted ratings."""
    with raw(target) as db:
        for match_id, status, seq, ended, ticks in db.query(
            "SELECT id, status, seq, ended, ticks FROM matches"
        ):
            seats = db.query(
                "SELECT rank, late, invalid, illegal, forfeit, mu_before, sigma_before, mu_after, sigma_after"
                " FROM seats WHERE match_id = ?",
                (match_id,),
            )
            assert len(seats) >= 2, f"match {match_id} has {len(seats)} seats"
            if status == "finished":
                assert None not in (seq, ended, ticks), f"finished match {match_id} lacks its result"
                assert all(None not in seat for seat in seats), (
                    f"finished match {match_id}: a seat lacks its result"
                )
            else:
                assert status in ("running", "void") and seq is None
                assert all(set(seat) == {None} for seat in seats), (
                    f"{status} match {match_id} has seat results"
                )
        seqs = [s for (s,) in db.query("SELECT seq FROM matches WHERE seq IS NOT NULL ORDER BY seq")]
        assert seqs == list(range(1, len(seqs) + 1)), "results were counted with gaps or twice"

        current: dict[str, Rating] = {}
        counts: dict[str, list[int]] = {}
        # When each bot last played: its sigma widens by the whole days idle since (`ratings.idle`).
        last: dict[str, datetime] = {}
        for match_id, ended, seats in finished_in_order(db):
            bots = [b for b, _ in seats]
            ranks = [r for _, r in seats]
            for b in bots:
                current[b] = ratings.idle(
                    current.get(b, ratings.initial()), ratings.idle_days(last.get(b), parse_time(ended))
                )
                last[b] = parse_time(ended)
            stored = db.query(
                "SELECT b.name, s.mu_before, s.sigma_before, s.mu_after, s.sigma_after FROM seats s"
                " JOIN bots b ON b.id = s.bot_id WHERE s.match_id = ? ORDER BY s.seat",
                (match_id,),
            )
            new = ratings.update(current, bots, ranks)
            for name, mu0, s0, mu1, s1 in stored:
                assert Rating(mu0, s0) == current[name], f"match {match_id}: {name}'s rating before is wrong"
                assert Rating(mu1, s1) == new[name], f"match {match_id}: {name}'s rating after is wrong"
            current.update(new)
            for b, r in seats:
                tally = counts.setdefault(b, [0, 0, 0, 0])
                tally[0] += 1
                if r != 1:
                    tally[3] += 1
                elif ranks.count(1) == 1:
                    tally[1] += 1
                else:
                    tally[2] += 1

    at = datetime.now(UTC)
    with LadderStore(target) as store:
        table = store.standings(game, include_revoked=True, now=at)
    for row in table:
        shown = ratings.idle(
            current.get(row.bot, ratings.initial()), ratings.idle_days(last.get(row.bot), at)
        )
        assert Rating(row.mu, row.sigma) == shown, row
        assert [row.matches, row.wins, row.draws, row.losses] == counts.get(row.bot, [0, 0, 0, 0]), row
    return current
