"""Bots and their tokens: the ``bots`` table, what a bot is, may do and is known by."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from cellarena.arena.ladder.errors import BotLimitError, LadderStoreError, NameTakenError, UnknownBotError
from cellarena.arena.ladder.identity import names, tokens
from cellarena.arena.ladder.identity.lookalikes import name_key
from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.records import BotKind, BotRecord, ChangeKind, FailureCount
from cellarena.arena.ladder.store.backends import Backend
from cellarena.arena.ladder.store.change_log import ChangeLog
from cellarena.arena.ladder.store.database import Database, now
from cellarena.arena.ladder.store.notices import Notices
from cellarena.arena.ladder.store.rows import BOT_COLUMNS, bot_record
from cellarena.arena.ladder.store.settings import Settings
from cellarena.sdk.protocol import is_int

log = logging.getLogger("cellarena.ladder")

#: Decides a house bot's failed launch from the bot and the host's policy (`scoring.settlement`).
CountLaunch = Callable[[BotRecord, CommunityPolicy], FailureCount]


class BotTable:
    """The ``bots`` table: bots added, rotated, revoked, paused, banned; found by name or token."""

    def __init__(self, database: Database, changes: ChangeLog) -> None:
        self.database = database
        self.changes = changes

    def add_bot(
        self,
        name: str,
        game: str,
        *,
        house_command: str | None = None,
        max_matches: int = 1,
        actor: str | None = None,
        owner_id: int | None = None,
        owner_limit: int | None = None,
    ) -> tuple[BotRecord, tokens.Token]:
        """Register a bot; its token, which is shown this once and then known only by its hash.

        With ``house_command`` the bot is a house bot, which the ladder launches itself with that
        command; without, an outside bot that its owner runs and connects. ``owner_id``: the owner who
        made it on the pages (`cellarena.arena.ladder.accounts.owners`); None for the host's bots.

        The name is kept in its NFKC form (`names.normalise`). Refused, in the transaction that writes,
        so that requests at the same moment cannot all pass: a name taken up to case and look-alikes
        (`NameTakenError`, backed by the unique index on ``bots.name_key``), and with ``owner_limit`` an
        owner who has that many active bots already (`BotLimitError`; the owner's row is locked, so
        their requests are counted one after another).
        """
        given = name
        name = names.normalise(name)
        names.check_name(game, "game")
        if house_command is not None and not house_command.strip():
            raise LadderStoreError(f"house bot {name!r}: give the command that starts it")
        self.check_max_matches(name, max_matches)
        token = tokens.new_token()
        kind: BotKind = "outside" if house_command is None else "house"
        key = name_key(name)
        with self.database.writing(f"add bot {name!r}") as db:
            for (taken,) in db.query("SELECT name FROM bots WHERE name_key = ?", (key,)):
                raise self._taken(given, str(taken))
            names.check_scripts(name)  # after "taken": a copy of a taken name hears that first
            if owner_id is not None:
                self._check_owner_limit(db, owner_id, owner_limit)
            try:
                db.execute(
                    "INSERT INTO bots (name, name_key, game, token_digest, kind, house_command, created,"
                    " max_matches, owner_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                    (name, key, game, token.digest, kind, house_command, now(), max_matches, owner_id),
                )
            except Exception as exc:
                # The index is the last word: a writer that skipped the look-up above is refused here.
                if db.is_unique_violation(exc):
                    raise self._taken(given, None) from None
                raise
            self.changes.note(db, "bot_added", name)
            self.changes.audit(db, actor, "add", name, f"{kind} bot for {game}")
        log.info("ladder: added %s bot %r for %s", kind, name, game)
        return self.bot_or_raise(name), token

    def _taken(self, name: str, taken: str | None) -> NameTakenError:
        where = self.database.where
        if taken is None:
            message = f"{where}: a bot that looks like {name!r} was added just now; choose another name"
        else:
            also = (
                ""
                if taken == name
                else ", and names that differ only in case count as one, as do look-alike characters"
            )
            message = f"{where}: there is already a bot named {taken!r}{also}; choose another name"
        return NameTakenError(message, name, taken)

    @staticmethod
    def _check_owner_limit(db: Backend, owner_id: int, limit: int | None) -> None:
        """Lock the owner's row (PostgreSQL; SQLite's writer lock covers it), then count their bots."""
        if not db.query(f"SELECT id FROM owners WHERE id = ?{db.row_lock}", (owner_id,)):
            raise LadderStoreError(f"there is no owner with id {owner_id}")
        if limit is None:
            return
        rows = db.query("SELECT COUNT(*) FROM bots WHERE owner_id = ? AND revoked IS NULL", (owner_id,))
        count = int(rows[0][0])
        if count >= limit:
            raise BotLimitError(f"owner {owner_id} has {count} active bots, the limit", count, limit)

    def rotate(self, name: str, *, actor: str | None = None) -> tokens.Token:
        """Give the bot a new token; the old one stops working at once. The new one is shown this once."""
        token = tokens.new_token()
        with self.database.writing(f"rotate the token of bot {name!r}") as db:
            if db.execute("UPDATE bots SET token_digest = ? WHERE name = ?", (token.digest, name)) != 1:
                raise self.unknown(name)
            self.changes.note(db, "token_rotated", name)
            self.changes.audit(db, actor, "rotate", name, None)
        log.info("ladder: rotated the token of bot %r", name)
        return token

    def revoke(self, name: str, *, actor: str | None = None) -> BotRecord:
        """Revoke the bot: its token stops working and it leaves the standings; its matches stay.
        Revoking a revoked bot changes nothing."""
        with self.database.writing(f"revoke bot {name!r}") as db:
            if not db.query("SELECT 1 FROM bots WHERE name = ?", (name,)):
                raise self.unknown(name)
            if db.execute("UPDATE bots SET revoked = ? WHERE name = ? AND revoked IS NULL", (now(), name)):
                self.changes.note(db, "bot_revoked", name)
                self.changes.audit(db, actor, "revoke", name, None)
        log.info("ladder: revoked bot %r", name)
        return self.bot_or_raise(name)

    def set_max_matches(self, name: str, max_matches: int) -> BotRecord:
        """How many matches the bot may play at once (the server enforces it when it seats bots)."""
        self.check_max_matches(name, max_matches)
        with self.database.writing(f"change bot {name!r}") as db:
            if db.execute("UPDATE bots SET max_matches = ? WHERE name = ?", (max_matches, name)) != 1:
                raise self.unknown(name)
            self.changes.note(db, "bot_changed", name)
        return self.bot_or_raise(name)

    def set_bot(
        self,
        name: str,
        action: str,
        sql: str,
        params: tuple[object, ...],
        change: ChangeKind | None,
        actor: str | None,
        detail: str | None = None,
    ) -> BotRecord:
        """One change to one bot: its row, the change log (when the server must act), the audit log."""
        with self.database.writing(f"{action} bot {name!r}") as db:
            if db.execute(f"UPDATE bots SET {sql} WHERE name = ?", (*params, name)) != 1:
                raise self.unknown(name)
            if change is not None:
                self.changes.note(db, change, name)
            if change == "bot_paused":
                Notices.note(db, "paused", name, detail or "", actor)
            self.changes.audit(db, actor, action, name, detail)
        log.info("ladder: %s bot %r%s", action, name, f" ({detail})" if detail else "")
        return self.bot_or_raise(name)

    def pause(self, name: str, reason: str, *, actor: str | None = None) -> BotRecord:
        """Pause the bot (the host's hand; the ladder pauses one itself in `finish_match`): refused at
        hello with `paused` until resumed; a match it is playing plays on."""
        why = " ".join(reason.split())[:200] or "paused by the ladder's host"
        return self.set_bot(
            name, "pause", "paused = ?, paused_at = ?", (why, now()), "bot_paused", actor, why
        )

    def resume(self, name: str, *, actor: str | None = None) -> BotRecord:
        """Resume a paused bot: it may queue again, with its failures in a row counted from 0."""
        return self.set_bot(
            name, "resume", "paused = NULL, paused_at = NULL, failures = 0", (), "bot_resumed", actor
        )

    def ban(self, name: str, reason: str, *, actor: str | None = None) -> BotRecord:
        """Ban the bot: refused at hello with `paused` (saying it is banned) until unbanned; its queued
        connection ends at the server's next poll, a match it is playing plays on."""
        why = " ".join(reason.split())[:200] or "no reason given"
        return self.set_bot(name, "ban", "banned = ?", (why,), "bot_banned", actor, why)

    def unban(self, name: str, *, actor: str | None = None) -> BotRecord:
        return self.set_bot(name, "unban", "banned = NULL", (), "bot_unbanned", actor)

    @staticmethod
    def write_count(db: Backend, bot_id: int, name: str, count: FailureCount) -> None:
        """A bot's failures in a row as decided (`scoring.settlement`), and its pause if one is due."""
        db.execute(
            "UPDATE bots SET failures = ? WHERE id = ? AND failures <> ?",
            (count.failures, bot_id, count.failures),
        )
        if count.pause is not None:
            db.execute("UPDATE bots SET paused = ?, paused_at = ? WHERE id = ?", (count.pause, now(), bot_id))
            ChangeLog.note(db, "bot_paused", name)
            Notices.note(db, "paused", name, count.pause)
            log.warning("ladder: paused bot %r: %s", name, count.pause)

    def count_failed_launch(self, name: str, cause: dict[str, Any], count: CountLaunch) -> BotRecord:
        """A launch of house bot ``name`` that never joined the queue (`house.HouseBots`), ended by
        ``cause`` (a seat's cause map: ``never_connected``, ``exited``, ``wrong_game``...): one more
        failure in a row, as a failed match is, pausing it at ``pause_after``. There is no match to
        keep the cause in, so the audit log keeps it (actor ``ladder``). The bot as it is now."""
        with self.database.writing(f"count a failed launch of house bot {name!r}") as db:
            rows = db.query(f"SELECT {BOT_COLUMNS} FROM bots WHERE name = ?", (name,))
            if not rows:
                raise self.unknown(name)
            bot = bot_record(rows[0])
            self.write_count(db, bot.id, name, count(bot, Settings.read_policy(db)))
            detail = json.dumps(cause, sort_keys=True)[:500]
            self.changes.audit(db, "ladder", "house launch failed", name, detail)
        return self.bot_or_raise(name)

    def token_digests(self, wanted_names: Sequence[str]) -> dict[str, tuple[BotRecord, str]]:
        """Each named bot as it is now, with the digest of its current token (no secret: the token is
        256 random bits); a server compares it with the digest a connection identified itself with."""
        wanted = sorted(set(wanted_names))
        if not wanted:
            return {}
        marks = ", ".join("?" * len(wanted))
        with self.database.reading("read the bots' tokens") as db:
            rows = db.query(f"SELECT token_digest, {BOT_COLUMNS} FROM bots WHERE name IN ({marks})", wanted)
        return {str(row[2]): (bot_record(row[1:]), str(row[0])) for row in rows}

    @staticmethod
    def check_max_matches(name: str, max_matches: int) -> None:
        if not is_int(max_matches) or max_matches < 1:
            raise LadderStoreError(f"bot {name!r}: the number of concurrent matches must be 1 or more")

    def list_bots(self, game: str | None = None) -> list[BotRecord]:
        """Every bot (revoked ones too), by name; only ``game``'s if given."""
        with self.database.reading("list the bots") as db:
            if game is None:
                rows = db.query(f"SELECT {BOT_COLUMNS} FROM bots ORDER BY name")
            else:
                rows = db.query(f"SELECT {BOT_COLUMNS} FROM bots WHERE game = ? ORDER BY name", (game,))
        return [bot_record(r) for r in rows]

    def bot(self, name: str) -> BotRecord | None:
        with self.database.reading(f"read bot {name!r}") as db:
            rows = db.query(f"SELECT {BOT_COLUMNS} FROM bots WHERE name = ?", (name,))
        return bot_record(rows[0]) if rows else None

    def authenticate(self, token: object) -> BotRecord | None:
        """The active bot whose token this is; None for an unknown, revoked or malformed token.

        The form is checked first (it is public); then the bot is found by the token's hash and the
        hashes compared in constant time (`cellarena.arena.ladder.identity.tokens` says why that is safe).
        """
        secret = token.secret if isinstance(token, tokens.Token) else token
        if not isinstance(secret, str) or not tokens.looks_like_token(secret):
            return None
        digest = tokens.token_digest(secret)
        with self.database.reading("check a bot's token") as db:
            rows = db.query(f"SELECT token_digest, {BOT_COLUMNS} FROM bots WHERE token_digest = ?", (digest,))
        if not rows or not tokens.digest_matches(secret, str(rows[0][0])):
            return None
        bot = bot_record(rows[0][1:])
        return bot if bot.active else None

    def bot_or_raise(self, name: str) -> BotRecord:
        bot = self.bot(name)
        if bot is None:
            raise self.unknown(name)
        return bot

    def unknown(self, name: str) -> UnknownBotError:
        return UnknownBotError(
            f"{self.database.where}: there is no bot named {name!r}; list them to see their names"
        )
