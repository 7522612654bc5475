"""The ladder database's schema, as an ordered list of migrations; its version is how many have run.

A migration, once released, never changes: a database at version N got exactly migrations 1..N, and an
upgrade runs N+1.. in one transaction (both SQLite and PostgreSQL have transactional DDL), so a crash
mid-upgrade leaves the old version whole. Each applied migration leaves a row in ``schema_version``
with the cellarena release that ran it, so a database from a newer release can tell an older one which
release to run.

The SQL is the one dialect that SQLite and PostgreSQL both accept. The single difference is the
autoincrementing id column, written ``{id}`` here and filled in by the backend. Times are ISO 8601 text
in UTC (sortable, and the same in both); booleans are BOOLEAN, which SQLite stores as 0/1; reals are
DOUBLE PRECISION (PostgreSQL's REAL would be 4 bytes and round the ratings).

Tables (version 9):

- ``schema_version``: one row per migration applied: version, cellarena release, when.
- ``bots``: name (unique), game, the SHA-256 of its token (never the token), kind ``outside`` (runs on
  its owner's machine) or ``house`` (the ladder launches ``house_command``), created, revoked (a time or
  NULL), ``max_matches`` (how many matches it may play at once).
- ``matches``: game, map, seed, status ``running`` / ``finished`` / ``void``, ``seq`` (the order results
  were counted in: ratings are a function of the results in that order), winner (NULL for a draw),
  reason, ticks, replay path, started, ended.
- ``seats``: per seat of a match, in seat order: bot, rank, late/invalid/illegal counts, forfeit, the
  bot's rating before and after the match (NULL until it is finished): the rating history; and its
  cause (version 3: JSON text, `cellarena.server.games.causes`, sentence included; NULL for matches
  finished before, which read as cause "unknown"); and the ms of time bank it drew (version 7; NULL
  when the match had no bank, or was finished before).
- ``ratings``: each bot's current rating (`ratings.ladder`; openskill's until version 11) and its
  match/win/draw/loss counts, updated in the transaction that finishes a match. A bot without a row has
  the initial rating and no matches.
- ``changes`` (version 3): one row per change that a running ``ladder serve`` must act on (a bot added,
  revoked, its token rotated, its limits changed), written in the transaction that makes the change.
  It is the one channel from the ladder's commands and pages to the server, which polls it
  (`cellarena.arena.ladder.services.changes`). Kept short: each write drops rows far behind the newest.

Version 5 (the community ladder, docs/ladder.md "Running a community ladder"):

- ``seats.version``: the version string the bot's ``hello`` carried (NULL: none given, or a match from
  before versions were kept, which reads as "unknown"); ``matches.rated`` (FALSE for an unrated
  challenge: no rating changes, before = after).
- ``bots``: ``paused`` (why it is paused, or NULL) and ``paused_at``; ``banned`` (why the host banned
  it, or NULL); ``failures`` (failed matches in a row, the count that pauses it); ``refuses_challenges``.
- ``challenges``: a bot's request for a match against a named bot: challenger, opponent, rated,
  status ``pending`` / ``played`` / ``cancelled``, created, the match that played it.
- ``settings``: the host's policy as ``ladder serve`` last started with it (name, value as text), so
  that the pages and commands that take challenges apply the same quota as the server.
- ``audit``: one row per admin action (who, what, which bot, details, when).

Version 6 (owners, docs/ladder.md "Running a community ladder"):

- ``owners`` (version 6): people who signed up (`cellarena.arena.ladder.accounts.owners`): name, ``name_key``
  (the name folded for case and Unicode confusables: unique, so ``Alice`` and ``Аlice`` with a Cyrillic
  A are one name), the argon2 hash of the password, status ``active`` / ``pending`` (waiting for the
  host's approval), and a one-time password-reset code's SHA-256 and expiry. ``bots.owner_id`` names a
  bot's owner (NULL for the bots the host registers).
- ``sessions`` (version 6): logins: the SHA-256 of the random session id (the cookie carries the id;
  the database never does), its owner, expiry, and when logout revoked it.
- ``invites`` (version 6): the SHA-256 of each invite code the host made, and who used it.

Version 8 (issue 39: names and limits held by the database):

- ``bots.name_key``: the bot's look-alike key (`cellarena.arena.ladder.identity.lookalikes.name_key`) under a
  unique index, so that two look-alike bots are refused by the database itself, on every path that
  writes one (the pages, the host's ``ladder bot add``) and in any race. NULL for a bot made before
  whose key an older bot has: it keeps its name, and the older one holds the key.
- ``owners.name_key`` computed again: the key now leaves out invisible characters. An owner made
  before whose new key an older owner has keeps a key no name can have (`LEGACY_KEY` and its id).

Version 9, the dataset opt-out (issue 45, `cellarena ladder export`, docs/datasets.md):

- ``bots.keep_out_of_datasets``: its owner keeps the bot's matches out of the ladder's exported
  datasets (every match it played, whole). FALSE by default, and for the bots from before.

Version 10 (seasons, docs/ladder.md "Seasons"):

- ``seasons``: per game, each closed season: its number (1, 2, ...), name, when it started and closed,
  and how the next one started (``reset`` or ``carry``, `cellarena.arena.ratings.seasons`); the
  ``seq`` of the last result counted before it closed (NULL: none yet), which orders it among results.
- ``season_standings``: a closed season's table as it stood at the close, one row per bot (its name
  and kind kept as they were), in rank order.
- ``ratings.carried``: rated matches a bot played in closed seasons whose ratings carried over; they
  count towards leaving the provisional list. ``ratings``' counts are the current season's.

Version 11 (the ladder's ratings move to the default rating system, docs/ladder.md "Ratings"): no
table changes; every finished match is rated again (`rerate.rerate_history`): the seats' ratings
before and after and the ``ratings`` table. Archived season tables keep what they showed at their close.

Version 12 (issue 41: submitted bots, docs/ladder.md "Submitting a bot"):

- ``versions``: each archive uploaded for a bot: its number per bot (1, 2, ...), the archive's SHA-256,
  size and kind (``tar.gz`` / ``zip``; the file is the archive store's, `submissions.archives`), its
  state (``received`` / ``building`` / ``validating`` / ``validated`` / ``live`` / ``failed`` /
  ``retired``, moved only as `submissions.versions.MOVES` allows), its build and validation logs
  (their tails, capped), the owner who uploaded it (NULL: the host's bot), created, when its state
  last changed, and why (a failure's reason).
- ``bots.live_version``: the version the ladder plays for a submitted bot (NULL: none yet, or a bot
  that connects).

Version 13 (issue 42: mail, docs/ladder.md "Mail"):

- ``owners.email`` (NULL: none given), ``owners.email_verified`` (when the owner followed the link
  mailed to it; NULL: not yet) and ``owners.notify`` (TRUE: mail them their bots' notices).
- ``notices``: what an owner may be told by mail (`store.notices`): kind ``paused`` /
  ``version_failed`` / ``challenged``, the bot, a detail, created, and when and how `ladder web`'s
  sender dealt with it (``done``, ``outcome``; NULL: pending).

Version 14 (issues 41 and 42: build minutes, mail delivered at least once):

- ``builds``: each build of a version (`VersionTable.mark`, as it leaves ``building``): when it
  started and ended, and its seconds; the owner's builds of the last 24 hours count against
  ``ladder web --build-minutes-per-day``.
- ``notices.claimed_at``: when a sender claimed the notice (its lease): a notice is ``done`` only
  once the SMTP server took its mail (or it needs none), and one whose lease ran out unsent (the
  sender died) is claimed again by the next.

A migration may have a step in Python after its statements (`Migration.then`, in the same
transaction): keys are computed by Python, not SQL.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from cellarena.arena.ladder.identity.lookalikes import name_key
from cellarena.arena.ladder.store.rerate import rerate_history

if TYPE_CHECKING:
    from cellarena.arena.ladder.store.backends import Backend

log = logging.getLogger("cellarena.ladder")


@dataclass(frozen=True)
class Migration:
    version: int
    summary: str
    statements: tuple[str, ...]
    #: Run after ``statements``, in their transaction: what SQL cannot compute.
    then: Callable[[Backend], None] | None = None


#: What no key of a name can be: a control character starts it (names have none), and the row's id
#: makes it unique. PostgreSQL's text cannot hold NUL, so it is U+0001.
LEGACY_KEY = "\x01legacy "


def key_names(db: Backend) -> None:
    """Version 8: every bot's look-alike key, and every owner's computed again (oldest first: a later
    look-alike of an older name keeps its name, and the older one keeps the key)."""
    taken: set[str] = set()
    for bot_id, name in db.query("SELECT id, name FROM bots ORDER BY id"):
        key = name_key(name)
        if key in taken:
            log.warning("ladder database: bot %r looks like an older bot; it keeps its name", name)
            continue
        taken.add(key)
        db.execute("UPDATE bots SET name_key = ? WHERE id = ?", (key, bot_id))
    taken.clear()
    new: dict[int, str] = {}
    for owner_id, name, old in db.query("SELECT id, name, name_key FROM owners ORDER BY id"):
        key = name_key(name)
        if key in taken:
            log.warning("ladder database: owner %r looks like an older owner; they keep their name", name)
            key = f"{LEGACY_KEY}{owner_id}"
        taken.add(key)
        if key != old:
            new[owner_id] = key
    # Through keys no name has, so that no update meets another row's old key under the unique index.
    for owner_id in new:
        db.execute("UPDATE owners SET name_key = ? WHERE id = ?", (f"{LEGACY_KEY}{owner_id}", owner_id))
    for owner_id, key in new.items():
        db.execute("UPDATE owners SET name_key = ? WHERE id = ?", (key, owner_id))


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "bots with hashed tokens, matches, seats with rating history, current ratings",
        (
            "CREATE TABLE schema_version ("
            " version INTEGER PRIMARY KEY, cellarena TEXT NOT NULL, applied TEXT NOT NULL)",
            "CREATE TABLE bots ("
            " id {id},"
            " name TEXT NOT NULL UNIQUE,"
            " game TEXT NOT NULL,"
            " token_digest TEXT NOT NULL UNIQUE,"
            " kind TEXT NOT NULL CHECK (kind IN ('outside', 'house')),"
            " house_command TEXT,"
            " created TEXT NOT NULL,"
            " revoked TEXT,"
            " CHECK ((kind = 'house') = (house_command IS NOT NULL)))",
            "CREATE TABLE matches ("
            " id {id},"
            " game TEXT NOT NULL,"
            " map TEXT,"
            " seed BIGINT NOT NULL,"
            " status TEXT NOT NULL CHECK (status IN ('running', 'finished', 'void')),"
            " seq BIGINT UNIQUE,"
            " winner BIGINT REFERENCES bots (id),"
            " reason TEXT,"
            " ticks BIGINT,"
            " replay TEXT,"
            " started TEXT NOT NULL,"
            " ended TEXT)",
            "CREATE INDEX matches_by_game ON matches (game, id)",
            "CREATE INDEX matches_by_status ON matches (status)",
            "CREATE TABLE seats ("
            " match_id BIGINT NOT NULL REFERENCES matches (id),"
            " seat INTEGER NOT NULL,"
            " bot_id BIGINT NOT NULL REFERENCES bots (id),"
            " rank INTEGER,"
            " late BIGINT,"
            " invalid BIGINT,"
            " illegal BIGINT,"
            " forfeit BOOLEAN,"
            " mu_before DOUBLE PRECISION,"
            " sigma_before DOUBLE PRECISION,"
            " mu_after DOUBLE PRECISION,"
            " sigma_after DOUBLE PRECISION,"
            " PRIMARY KEY (match_id, seat),"
            " UNIQUE (match_id, bot_id))",
            "CREATE TABLE ratings ("
            " bot_id BIGINT PRIMARY KEY REFERENCES bots (id),"
            " mu DOUBLE PRECISION NOT NULL,"
            " sigma DOUBLE PRECISION NOT NULL,"
            " matches INTEGER NOT NULL,"
            " wins INTEGER NOT NULL,"
            " draws INTEGER NOT NULL,"
            " losses INTEGER NOT NULL)",
        ),
    ),
    Migration(
        2,
        "per-bot cap on concurrent matches; bot pages read seats by bot",
        (
            "ALTER TABLE bots ADD COLUMN max_matches INTEGER NOT NULL DEFAULT 1 CHECK (max_matches >= 1)",
            "CREATE INDEX seats_by_bot ON seats (bot_id, match_id)",
        ),
    ),
    Migration(
        3,
        "a log of changes that the running ladder server acts on (revoked bots, rotated tokens)",
        (
            "CREATE TABLE changes ("
            " id {id},"
            " kind TEXT NOT NULL,"
            " bot_id BIGINT REFERENCES bots (id),"
            " at TEXT NOT NULL)",
        ),
    ),
    Migration(
        4,
        "why each seat's match ended: its cause (matches from before: unknown)",
        ("ALTER TABLE seats ADD COLUMN cause TEXT",),
    ),
    Migration(
        5,
        "a community ladder: versions, pauses, bans, challenges, the host's policy, an audit log",
        (
            "ALTER TABLE seats ADD COLUMN version TEXT",
            "ALTER TABLE matches ADD COLUMN rated BOOLEAN NOT NULL DEFAULT TRUE",
            "ALTER TABLE bots ADD COLUMN paused TEXT",
            "ALTER TABLE bots ADD COLUMN paused_at TEXT",
            "ALTER TABLE bots ADD COLUMN banned TEXT",
            "ALTER TABLE bots ADD COLUMN failures INTEGER NOT NULL DEFAULT 0",
            "ALTER TABLE bots ADD COLUMN refuses_challenges BOOLEAN NOT NULL DEFAULT FALSE",
            "CREATE TABLE challenges ("
            " id {id},"
            " challenger BIGINT NOT NULL REFERENCES bots (id),"
            " opponent BIGINT NOT NULL REFERENCES bots (id),"
            " rated BOOLEAN NOT NULL,"
            " status TEXT NOT NULL CHECK (status IN ('pending', 'played', 'cancelled')),"
            " created TEXT NOT NULL,"
            " match_id BIGINT REFERENCES matches (id))",
            "CREATE INDEX challenges_by_challenger ON challenges (challenger, created)",
            "CREATE INDEX challenges_by_status ON challenges (status)",
            "CREATE TABLE settings (name TEXT PRIMARY KEY, value TEXT NOT NULL)",
            "CREATE TABLE audit ("
            " id {id},"
            " at TEXT NOT NULL,"
            " actor TEXT NOT NULL,"
            " action TEXT NOT NULL,"
            " bot TEXT,"
            " detail TEXT)",
        ),
    ),
    Migration(
        6,
        "owners who sign up and own bots, their login sessions, invite codes",
        (
            "CREATE TABLE owners ("
            " id {id},"
            " name TEXT NOT NULL UNIQUE,"
            " name_key TEXT NOT NULL UNIQUE,"
            " password_hash TEXT NOT NULL,"
            " status TEXT NOT NULL CHECK (status IN ('active', 'pending')),"
            " created TEXT NOT NULL,"
            " reset_digest TEXT,"
            " reset_expires TEXT)",
            "ALTER TABLE bots ADD COLUMN owner_id BIGINT REFERENCES owners (id)",
            "CREATE INDEX bots_by_owner ON bots (owner_id)",
            "CREATE TABLE sessions ("
            " digest TEXT PRIMARY KEY,"
            " owner_id BIGINT NOT NULL REFERENCES owners (id),"
            " created TEXT NOT NULL,"
            " expires TEXT NOT NULL,"
            " revoked TEXT)",
            "CREATE INDEX sessions_by_owner ON sessions (owner_id)",
            "CREATE TABLE invites ("
            " digest TEXT PRIMARY KEY,"
            " created TEXT NOT NULL,"
            " used_by BIGINT REFERENCES owners (id),"
            " used TEXT)",
        ),
    ),
    Migration(
        7,
        "the ms of time bank each seat drew (matches from before, or without a bank: NULL)",
        ("ALTER TABLE seats ADD COLUMN bank_drawn_ms BIGINT",),
    ),
    Migration(
        8,
        "look-alike bot names refused by a unique index on their key; owners' keys without invisibles",
        (
            "ALTER TABLE bots ADD COLUMN name_key TEXT",
            "CREATE UNIQUE INDEX bots_by_name_key ON bots (name_key)",
        ),
        then=key_names,
    ),
    Migration(
        9,
        "an owner may keep their bot's matches out of the ladder's exported datasets",
        ("ALTER TABLE bots ADD COLUMN keep_out_of_datasets BOOLEAN NOT NULL DEFAULT FALSE",),
    ),
    Migration(
        10,
        "seasons: a closed season's table archived; rated matches of earlier seasons carried over",
        (
            "CREATE TABLE seasons ("
            " id {id},"
            " game TEXT NOT NULL,"
            " number INTEGER NOT NULL CHECK (number >= 1),"
            " name TEXT NOT NULL,"
            " started TEXT NOT NULL,"
            " closed TEXT NOT NULL,"
            " start_next TEXT NOT NULL CHECK (start_next IN ('reset', 'carry')),"
            " last_seq BIGINT,"
            " UNIQUE (game, number))",
            "CREATE TABLE season_standings ("
            " season_id BIGINT NOT NULL REFERENCES seasons (id),"
            " rank INTEGER NOT NULL,"
            " bot TEXT NOT NULL,"
            " kind TEXT NOT NULL,"
            " mu DOUBLE PRECISION NOT NULL,"
            " sigma DOUBLE PRECISION NOT NULL,"
            " matches INTEGER NOT NULL,"
            " wins INTEGER NOT NULL,"
            " draws INTEGER NOT NULL,"
            " losses INTEGER NOT NULL,"
            " late INTEGER NOT NULL,"
            " invalid INTEGER NOT NULL,"
            " bank_drawn_ms BIGINT NOT NULL,"
            " provisional BOOLEAN NOT NULL,"
            " PRIMARY KEY (season_id, rank))",
            "ALTER TABLE ratings ADD COLUMN carried INTEGER NOT NULL DEFAULT 0",
        ),
    ),
    Migration(
        11,
        "the ladder's ratings move to the default system (TrueSkill, as tournaments): history re-rated",
        (),
        then=rerate_history,
    ),
    Migration(
        12,
        "submitted bots: versions with their archive, state and logs; each bot's live version",
        (
            "CREATE TABLE versions ("
            " id {id},"
            " bot_id BIGINT NOT NULL REFERENCES bots (id),"
            " number INTEGER NOT NULL,"
            " sha256 TEXT NOT NULL,"
            " size BIGINT NOT NULL,"
            " archive_kind TEXT NOT NULL CHECK (archive_kind IN ('tar.gz', 'zip')),"
            " state TEXT NOT NULL CHECK (state IN"
            " ('received', 'building', 'validating', 'validated', 'live', 'failed', 'retired')),"
            " build_log TEXT,"
            " validation_log TEXT,"
            " uploaded_by BIGINT REFERENCES owners (id),"
            " created TEXT NOT NULL,"
            " changed TEXT NOT NULL,"
            " reason TEXT,"
            " UNIQUE (bot_id, number))",
            "CREATE INDEX versions_by_state ON versions (state, id)",
            "CREATE INDEX versions_by_uploader ON versions (uploaded_by, created)",
            "ALTER TABLE bots ADD COLUMN live_version BIGINT REFERENCES versions (id)",
        ),
    ),
    Migration(
        13,
        "mail: owners' addresses, their verification and notification choice; notices to mail them",
        (
            "ALTER TABLE owners ADD COLUMN email TEXT",
            "ALTER TABLE owners ADD COLUMN email_verified TEXT",
            "ALTER TABLE owners ADD COLUMN notify BOOLEAN NOT NULL DEFAULT TRUE",
            "CREATE TABLE notices ("
            " id {id},"
            " kind TEXT NOT NULL CHECK (kind IN ('paused', 'version_failed', 'challenged')),"
            " bot_id BIGINT NOT NULL REFERENCES bots (id),"
            " detail TEXT NOT NULL,"
            " created TEXT NOT NULL,"
            " done TEXT,"
            " outcome TEXT)",
            "CREATE INDEX notices_pending ON notices (done, id)",
        ),
    ),
    Migration(
        14,
        "each build's duration (the build-minutes quota); notices claimed with a lease until sent",
        (
            "CREATE TABLE builds ("
            " id {id},"
            " version_id BIGINT NOT NULL REFERENCES versions (id),"
            " started TEXT NOT NULL,"
            " ended TEXT NOT NULL,"
            " seconds DOUBLE PRECISION NOT NULL)",
            "CREATE INDEX builds_by_end ON builds (ended)",
            "ALTER TABLE notices ADD COLUMN claimed_at TEXT",
        ),
    ),
)

#: The schema version this cellarena writes.
CURRENT_VERSION = len(MIGRATIONS)
assert [m.version for m in MIGRATIONS] == list(range(1, CURRENT_VERSION + 1))
