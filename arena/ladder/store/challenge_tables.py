"""Challenges: the ``challenges`` table, one bot's request to play another, within the host's quota."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta

from cellarena.arena.ladder.errors import ChallengeRefusedError
from cellarena.arena.ladder.records import BotRecord, Challenge
from cellarena.arena.ladder.store.bot_tables import BotTable
from cellarena.arena.ladder.store.database import now, parse_time
from cellarena.arena.ladder.store.notices import Notices
from cellarena.arena.ladder.store.rows import BOT_COLUMNS, bot_record
from cellarena.arena.ladder.store.settings import Settings

log = logging.getLogger("cellarena.ladder")


_A_DAY = timedelta(days=1)


def _a_day_ago() -> str:
    return (datetime.now(UTC) - _A_DAY).isoformat(timespec="microseconds")


class ChallengeTable:
    """The ``challenges`` table, over the bots it names."""

    def __init__(self, bots: BotTable) -> None:
        self.bots = bots
        self.database = bots.database

    def refuse_challenges(self, name: str, refuse: bool, *, actor: str | None = None) -> BotRecord:
        """Whether ``name`` refuses challenges from now on (pending ones against it are cancelled)."""
        what = "refuse challenges" if refuse else "accept challenges"
        bot = self.bots.set_bot(name, what, "refuses_challenges = ?", (refuse,), None, actor)
        if refuse:
            with self.database.writing(f"cancel the challenges against {name!r}") as db:
                if db.execute(
                    "UPDATE challenges SET status = 'cancelled' WHERE opponent = ? AND status = 'pending'",
                    (bot.id,),
                ):
                    self.bots.changes.note(db, "challenge", name)
        return bot

    def challenge(self, challenger: str, opponent: str, *, actor: str | None = None) -> Challenge:
        """A pending challenge of ``challenger`` against ``opponent``, within the policy's quota;
        `ChallengeRefusedError` saying why not (unknown, revoked, paused or banned bots, another game,
        an opponent that refuses challenges, the quota used up, the same challenge pending)."""
        with self.database.writing(f"record a challenge of {challenger!r} against {opponent!r}") as db:
            policy = Settings.read_policy(db)
            found = {
                str(row[1]): bot_record(row)
                for row in db.query(
                    f"SELECT {BOT_COLUMNS} FROM bots WHERE name IN (?, ?)", (challenger, opponent)
                )
            }
            me, them = self._players(found, challenger, opponent)
            made = db.query(
                "SELECT COUNT(*), MIN(created) FROM challenges WHERE challenger = ? AND created > ?",
                (me.id, _a_day_ago()),
            )[0]
            if int(made[0]) >= policy.challenges_per_day:
                again = (
                    ""
                    if made[1] is None
                    else f"; next possible after {parse_time(made[1]) + _A_DAY:%Y-%m-%d %H:%M:%S} UTC"
                )
                raise ChallengeRefusedError(
                    f"{challenger} has made {made[0]} challenge(s) in the last 24 hours, this ladder's quota "
                    f"(its host's --challenges-per-day {policy.challenges_per_day}){again}"
                )
            if db.query(
                "SELECT 1 FROM challenges WHERE challenger = ? AND opponent = ? AND status = 'pending'",
                (me.id, them.id),
            ):
                raise ChallengeRefusedError(
                    f"{challenger} already has a challenge against {opponent} waiting to be played"
                )
            challenge_id = int(
                db.query(
                    "INSERT INTO challenges (challenger, opponent, rated, status, created)"
                    " VALUES (?, ?, ?, 'pending', ?) RETURNING id",
                    (me.id, them.id, policy.challenges_rated, now()),
                )[0][0]
            )
            self.bots.changes.note(db, "challenge", challenger)
            self.bots.changes.audit(db, actor, "challenge", challenger, f"against {opponent}")
            Notices.note(db, "challenged", opponent, f"{challenger} challenged {opponent}")
        log.info("ladder: %s challenges %s (challenge %d)", challenger, opponent, challenge_id)
        return self._where("c.id = ?", (challenge_id,))[0]

    @staticmethod
    def _players(found: dict[str, BotRecord], challenger: str, opponent: str) -> tuple[BotRecord, BotRecord]:
        """The two bots of a challenge, or `ChallengeRefusedError` saying why they cannot meet."""
        if challenger == opponent:
            raise ChallengeRefusedError(f"{challenger} cannot challenge itself; name another bot")
        for name in (challenger, opponent):
            bot = found.get(name)
            if bot is None:
                raise ChallengeRefusedError(f"there is no bot named {name!r}; check the name")
            if not bot.active:
                raise ChallengeRefusedError(f"{name} is revoked and plays no more")
            if bot.stopped is not None:
                raise ChallengeRefusedError(f"{name} cannot play now: {bot.stopped}")
        me, them = found[challenger], found[opponent]
        if me.game != them.game:
            raise ChallengeRefusedError(f"{challenger} plays {me.game} and {opponent} plays {them.game}")
        if them.refuses_challenges:
            raise ChallengeRefusedError(f"{opponent} refuses challenges (its owner's setting)")
        return me, them

    def challenges_left(self, name: str) -> int:
        """How many more challenges ``name`` may make now: the host's quota less those it made in the
        last 24 hours (what `challenge` counts), for the owner's page to show."""
        bot = self.bots.bot_or_raise(name)
        since = _a_day_ago()
        with self.database.reading(f"count the challenges of {name!r}") as db:
            quota = Settings.read_policy(db).challenges_per_day
            made = db.query(
                "SELECT COUNT(*) FROM challenges WHERE challenger = ? AND created > ?", (bot.id, since)
            )[0][0]
        return max(0, quota - int(made))

    def pending_challenges(self, game: str) -> list[Challenge]:
        """``game``'s challenges waiting to be played, oldest first: what the queue plays first."""
        with self.database.reading(f"read the {game} challenges") as db:
            ids = [
                int(i)
                for (i,) in db.query(
                    "SELECT c.id FROM challenges c JOIN bots b ON b.id = c.challenger"
                    " WHERE c.status = 'pending' AND b.game = ? ORDER BY c.id",
                    (game,),
                )
            ]
        if not ids:
            return []
        return self._where(f"c.id IN ({', '.join('?' * len(ids))})", ids, oldest_first=True)

    def challenges_of(self, name: str, limit: int = 50) -> list[Challenge]:
        """The bot's challenges, made or received, newest first."""
        bot = self.bots.bot_or_raise(name)
        return self._where("(c.challenger = ? OR c.opponent = ?)", (bot.id, bot.id), limit)

    def _where(
        self, condition: str, params: Sequence[object], limit: int = 1000, *, oldest_first: bool = False
    ) -> list[Challenge]:
        order = "ASC" if oldest_first else "DESC"
        with self.database.reading("read the challenges") as db:
            rows = db.query(
                "SELECT c.id, a.name, b.name, c.rated, c.status, c.created, c.match_id FROM challenges c"
                " JOIN bots a ON a.id = c.challenger JOIN bots b ON b.id = c.opponent"
                f" WHERE {condition} ORDER BY c.id {order} LIMIT ?",
                (*params, limit),
            )
        return [
            Challenge(int(i), a, b, bool(rated), status, parse_time(created), None if m is None else int(m))
            for i, a, b, rated, status, created, m in rows
        ]
