"""The ladder's database: bots and their tokens, matches, seats, ratings with their history.

SQLite by default (one file), PostgreSQL from a ``postgresql://`` URL, through the same queries (see
`backends`). The schema is versioned (`schema`): opening an older database upgrades it in one
transaction; one from a newer cellarena is refused.

`LadderStore` composes one small class per group of tables, each in its module: `BotTable` (bots and
their tokens), `MatchTable` (matches and seats), `RatingTable` (standings, rating histories),
`SeasonTable` (closed seasons and their tables), `ChallengeTable`, `VersionTable` (submitted bots'
versions), `ChangeLog` (the change and audit logs) and `Settings`, over one `Database` (the
connection, its lock and transactions). Owners and sessions are `accounts.owners.Accounts`'.

How a match is recorded, and why it survives ``kill -9``:

1. `LadderStore.begin_match` commits a ``running`` row and its seats at once, so a match cut short by a
   crash leaves a trace.
2. `LadderStore.finish_match` counts the result in ONE transaction: the match row, every seat's result
   and rating before/after, the new current ratings, failures in a row and pauses, as the caller's
   ``settle`` decides them from the seats' bots (`scoring.settlement.settle`: the store keeps no rule
   of the ladder). It is refused for a match that is not running, so a result is never counted twice.
3. The process that serves the ladder calls `LadderStore.void_running` when it starts: it claims the
   database as its game's one server (a server per game may share a database), and marks every match
   of its game still ``running`` (cut short by the previous server's death) ``void``, with no rating
   change.

Ratings are the ladder's rating system's (`cellarena.arena.ratings.ladder`), per game (a bot plays one game),
updated in the order results are counted (``matches.seq``), so they are a function of the results.

Every method may be called from any thread (one lock serialises them); each call is one short
transaction, so a trio server calls them through ``trio.to_thread.run_sync``. Database faults (a
read-only file, a full disk, a lost connection) are a `LadderStoreError` naming the database and
saying what to do; a write that fails leaves nothing half-written.
"""

from __future__ import annotations

from pathlib import Path

from cellarena.arena.ladder.errors import (
    BadNameError,
    LadderStoreError,
    MatchNotRunningError,
    SeatRefusedError,
    UnknownBotError,
)
from cellarena.arena.ladder.records import (
    BotMatch,
    BotRecord,
    MatchRecord,
    RatingPoint,
    SeatRecord,
    SeatResult,
    Standing,
)
from cellarena.arena.ladder.store.bot_tables import BotTable
from cellarena.arena.ladder.store.challenge_tables import ChallengeTable
from cellarena.arena.ladder.store.change_log import ChangeLog
from cellarena.arena.ladder.store.database import Database, cellarena_release
from cellarena.arena.ladder.store.dataset_choices import DatasetChoices
from cellarena.arena.ladder.store.match_tables import MAX_ID, VOID_ON_START, MatchTable
from cellarena.arena.ladder.store.notices import Notices
from cellarena.arena.ladder.store.rating_tables import RatingTable
from cellarena.arena.ladder.store.season_tables import SeasonTable
from cellarena.arena.ladder.store.settings import Settings
from cellarena.arena.ladder.store.version_tables import VersionTable

__all__ = [
    "MAX_ID",
    "VOID_ON_START",
    "BadNameError",
    "BotMatch",
    "BotRecord",
    "LadderStore",
    "LadderStoreError",
    "MatchNotRunningError",
    "MatchRecord",
    "RatingPoint",
    "SeatRecord",
    "SeatRefusedError",
    "SeatResult",
    "Standing",
    "UnknownBotError",
    "cellarena_release",
]


class LadderStore:
    """A ladder database. ``LadderStore(path_or_url)``; a context manager, or call `close()`.

    ``target`` is a SQLite file (created if missing, unless ``create=False``) or a ``postgresql://``
    URL (the database must exist; the tables are created in its current schema). With
    ``reconnect_every``, a call made while the connection is lost first tries to connect again, at
    most that often (seconds): for a process with no watch of its own, such as `ladder web`; the
    ladder server reconnects through `reconnect`, with back-off.

    Each method is its table group's (`BotTable.add_bot`, `MatchTable.finish_match`, ...), which says
    what it does.
    """

    def __init__(
        self, target: str | Path, *, create: bool = True, reconnect_every: float | None = None
    ) -> None:
        self.database = Database(target, create=create, reconnect_every=reconnect_every)
        self.where = self.database.where
        self.schema_version = self.database.schema_version
        self.change_log = ChangeLog(self.database)
        self.settings = Settings(self.database)
        self.bot_table = BotTable(self.database, self.change_log)
        self.match_table = MatchTable(self.bot_table)
        self.rating_table = RatingTable(self.bot_table)
        self.challenge_table = ChallengeTable(self.bot_table)
        self.season_table = SeasonTable(self.database, self.change_log)
        self.dataset_choices = DatasetChoices(self.bot_table)
        #: Submitted bots' versions (`VersionTable`): the builder's ``next_to_build`` and ``mark``.
        self.versions = VersionTable(self.bot_table)
        #: What owners may be told by mail (`Notices`), which `ladder web`'s sender mails.
        self.notices = Notices(self.database)
        self._bind_play()
        self._bind_community()

    def _bind_play(self) -> None:
        """The facade's methods for bots, their tokens, matches and ratings."""
        # The connection: claimed by the one ladder server, lost and found again (PostgreSQL).
        self.claim_server = self.database.claim_server
        # Bots and their tokens.
        self.add_bot = self.bot_table.add_bot
        self.rotate = self.bot_table.rotate
        self.revoke = self.bot_table.revoke
        self.set_max_matches = self.bot_table.set_max_matches
        self.pause = self.bot_table.pause
        self.resume = self.bot_table.resume
        self.ban = self.bot_table.ban
        self.unban = self.bot_table.unban
        self.count_failed_launch = self.bot_table.count_failed_launch
        self.token_digests = self.bot_table.token_digests
        self.list_bots = self.bot_table.list_bots
        self.bot = self.bot_table.bot
        self.authenticate = self.bot_table.authenticate
        # Matches and seats, and the ratings they change.
        self.begin_match = self.match_table.begin_match
        self.finish_match = self.match_table.finish_match
        self.void_match = self.match_table.void_match
        self.void_running = self.match_table.void_running
        self.highest_match_id = self.match_table.highest_match_id
        self.match = self.match_table.match
        self.matches = self.match_table.matches
        self.bot_history = self.match_table.bot_history
        self.bot_seats = self.match_table.bot_seats
        self.rating_history = self.rating_table.rating_history
        self.standings = self.rating_table.standings

    def _bind_community(self) -> None:
        """The facade's methods for seasons, challenges, datasets, the logs and the host's settings."""
        # Seasons.
        self.close_season = self.season_table.close_season
        self.seasons = self.season_table.seasons
        self.season_standings = self.season_table.season_standings
        # Challenges.
        self.refuse_challenges = self.challenge_table.refuse_challenges
        self.challenge = self.challenge_table.challenge
        self.challenges_left = self.challenge_table.challenges_left
        self.pending_challenges = self.challenge_table.pending_challenges
        self.challenges_of = self.challenge_table.challenges_of
        # Owners' choice to keep their bots out of the exported datasets.
        self.keep_out_of_datasets = self.dataset_choices.keep_out_of_datasets
        self.kept_out_of_datasets = self.dataset_choices.kept_out_of_datasets
        # Submitted bots' versions.
        self.add_version = self.versions.add_version
        self.versions_of = self.versions.versions_of
        self.live_version = self.versions.live_version
        self.make_live = self.versions.make_live
        # The logs and the host's settings.
        self.last_change = self.change_log.last_change
        self.changes_since = self.change_log.changes_since
        self.audit_log = self.change_log.audit_log
        self.policy = self.settings.policy
        self.set_policy = self.settings.set_policy
        self.endpoints = self.settings.endpoints
        self.set_endpoint = self.settings.set_endpoint

    def __repr__(self) -> str:
        return f"LadderStore({self.where!r})"

    def __enter__(self) -> LadderStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self.database.close()

    @property
    def connected(self) -> bool:
        """False while the connection to the database is lost (PostgreSQL); see `reconnect`."""
        return self.database.backend.connected

    def reconnect(self) -> None:
        """Connect again if the connection was lost, and take the one-server lock again if this process
        held it. `LadderStoreError` while the database is still unreachable; `ServerClaimLostError` if
        another server took the database meanwhile (this one must stop)."""
        with self.database.reading("connect to the database again") as db:
            db.reconnect()
