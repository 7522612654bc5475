"""Rows as the queries read them, made into records (`records`): the columns each query selects."""

from __future__ import annotations

import json
from typing import cast

from cellarena.arena.ladder.records import BotRecord, MatchRecord, MatchStatus, SeatRecord
from cellarena.arena.ladder.store.backends import Row
from cellarena.arena.ladder.store.database import maybe_time, parse_time
from cellarena.arena.ratings import Rating

BOT_COLUMNS = (
    "id, name, game, kind, house_command, max_matches, created, revoked,"
    " paused, paused_at, banned, failures, refuses_challenges"
)
MATCH_QUERY = (
    "SELECT m.id, m.game, m.map, m.seed, m.status, m.seq, w.name, m.reason, m.ticks, m.replay,"
    " m.started, m.ended, s.seat, b.name, s.bot_id, s.rank, s.late, s.invalid, s.illegal, s.forfeit,"
    " s.mu_before, s.sigma_before, s.mu_after, s.sigma_after, s.cause, s.version, s.bank_drawn_ms, m.rated"
    " FROM matches m JOIN seats s ON s.match_id = m.id JOIN bots b ON b.id = s.bot_id"
    " LEFT JOIN bots w ON w.id = m.winner"
)


def rating(mu: float | None, sigma: float | None) -> Rating | None:
    return None if mu is None or sigma is None else Rating(mu, sigma)


def bot_record(row: Row) -> BotRecord:
    """A row of `BOT_COLUMNS`."""
    id_, name, game, kind, house_command, max_matches, created, revoked = row[:8]
    paused, paused_at, banned, failures, refuses = row[8:]
    return BotRecord(
        id=int(id_),
        name=name,
        game=game,
        kind=kind,
        house_command=house_command,
        max_matches=int(max_matches),
        created=parse_time(created),
        revoked=maybe_time(revoked),
        paused=paused,
        paused_at=maybe_time(paused_at),
        banned=banned,
        failures=int(failures or 0),
        refuses_challenges=bool(refuses),
    )


def match_records(rows: list[Row]) -> list[MatchRecord]:
    """The matches of `MATCH_QUERY`'s rows, ordered by match, then seat."""
    out: list[MatchRecord] = []
    seats: list[SeatRecord] = []
    for i, row in enumerate(rows):
        seats.append(_seat_record(row[12:-1]))
        if i + 1 == len(rows) or rows[i + 1][0] != row[0]:
            out.append(_match_record(row[:12], tuple(seats), rated=bool(row[-1])))
            seats = []
    return out


def _match_record(row: Row, seats: tuple[SeatRecord, ...], *, rated: bool = True) -> MatchRecord:
    id_, game, map_, seed, status, seq, winner, reason, ticks, replay, started, ended = row
    return MatchRecord(
        id=int(id_),
        game=game,
        map=map_,
        seed=int(seed),
        status=cast(MatchStatus, status),
        seq=None if seq is None else int(seq),
        winner=winner,
        reason=reason,
        ticks=None if ticks is None else int(ticks),
        replay=replay,
        started=parse_time(started),
        ended=maybe_time(ended),
        seats=seats,
        rated=rated,
    )


def _seat_record(row: Row) -> SeatRecord:
    seat, name, bot_id, rank, late, invalid, illegal, forfeit, mu0, s0, mu1, s1, cause, version, bank = row
    return SeatRecord(
        seat=int(seat),
        bot=name,
        bot_id=int(bot_id),
        rank=rank,
        late=late,
        invalid=invalid,
        illegal=illegal,
        forfeit=None if forfeit is None else bool(forfeit),
        before=rating(mu0, s0),
        after=rating(mu1, s1),
        cause=None if cause is None else json.loads(cause),
        version=version,
        bank_drawn_ms=None if bank is None else int(bank),
    )
