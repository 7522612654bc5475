"""A tournament's results in SQLite: one transaction per finished match, so nothing is half-recorded.

Tables (``docs/tournaments.md`` has the details):

- ``tournament``: one row, the spec the tournament was started with and its fingerprint. Opening the
  same folder with a different spec is refused, so a resume can never mix two tournaments; the one
  difference allowed is more bots (the old ones unchanged): the spec grows, the finished matches are
  renumbered to their places in the grown schedule, and only the new bots' matches are left to play.
- ``matches``: one row per finished match, keyed by its schedule key; result, replay and timings.
- ``seats``: one row per seat of a finished match: bot, rank, late/invalid/illegal counts, crash, log,
  and its cause (JSON, `cellarena.server.games.causes`; NULL for matches recorded before causes were
  kept, which read as "unknown"), and the ms of time bank it drew (NULL: the match had no bank, or
  was recorded before banks were kept).
- ``ratings``: the rating history, each finished match's new ratings in schedule order (see
  `cellarena.arena.ratings`), rebuilt from the first affected match in the same transaction.

SQLite in WAL mode, with ``synchronous=FULL``: a ``kill -9`` (or a power cut) at any moment leaves
either the whole match or none of it.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import json
import re
import sqlite3
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cellarena.arena import ratings
from cellarena.arena.schedule import Scheduled

SCHEMA = """
CREATE TABLE IF NOT EXISTS tournament (
    id INTEGER PRIMARY KEY CHECK (id = 1),
    fingerprint TEXT NOT NULL,
    spec TEXT NOT NULL,
    created TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS matches (
    idx INTEGER PRIMARY KEY,
    key TEXT NOT NULL UNIQUE,
    round INTEGER NOT NULL,
    map TEXT,
    seed INTEGER NOT NULL,
    winner TEXT,
    reason TEXT NOT NULL,
    ticks INTEGER NOT NULL,
    seconds REAL NOT NULL,
    replay TEXT,
    finished TEXT NOT NULL
);
CREATE TABLE IF NOT EXISTS seats (
    match INTEGER NOT NULL REFERENCES matches(idx),
    seat INTEGER NOT NULL,
    bot TEXT NOT NULL,
    rank INTEGER NOT NULL,
    late INTEGER NOT NULL,
    invalid INTEGER NOT NULL,
    illegal INTEGER NOT NULL,
    forfeit INTEGER NOT NULL,
    crashed INTEGER NOT NULL,
    exit_code INTEGER,
    log TEXT,
    note TEXT,
    cause TEXT,
    bank_drawn_ms INTEGER,
    PRIMARY KEY (match, seat)
);
CREATE TABLE IF NOT EXISTS ratings (
    match INTEGER NOT NULL REFERENCES matches(idx),
    bot TEXT NOT NULL,
    mu REAL NOT NULL,
    sigma REAL NOT NULL,
    PRIMARY KEY (match, bot)
);
"""


class StoreError(Exception):
    """The results folder cannot be used for this tournament; the message says why and what to do."""


@dataclass(frozen=True)
class SeatTally:
    """One seat's place and failures in a finished match, as stored and as read back."""

    bot: str
    rank: int
    late: int
    invalid: int
    illegal: int
    forfeit: bool
    crashed: bool


@dataclass(frozen=True)
class SeatRecord(SeatTally):
    exit_code: int | None
    log: str | None
    #: Why the seat forfeited or crashed, when the launcher knows (a limit, a bot that could not start).
    note: str | None = None
    #: Why the match ended as it did for this seat: its cause map (`causes`), sentence included.
    cause: dict[str, Any] | None = None
    #: Ms of time bank the seat drew (docs/protocol.md#the-time-bank); None when the match had none.
    bank_drawn_ms: int | None = None


@dataclass(frozen=True)
class MatchRecord:
    """What a worker reports for one finished match."""

    winner: str | None
    reason: str
    ticks: int
    seconds: float
    replay: str | None
    seats: tuple[SeatRecord, ...]
    #: Files shipped back by a cluster worker (path relative to the match folder -> bytes), which the
    #: coordinator writes under the results folder before it commits; empty when written in place.
    files: dict[str, bytes] = field(default_factory=dict)


@dataclass(frozen=True)
class Standing:
    bot: str
    rating: float
    mu: float
    sigma: float
    matches: int
    wins: int
    draws: int
    losses: int
    late_rate: float
    crashes: int
    #: Invalid answers per tick (on_tick raised, or an answer the game cannot read), beside late_rate.
    invalid_rate: float = 0.0
    #: Ms of time bank drawn over all its matches (0 also when the tournament gave none).
    bank_drawn_ms: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "bot": self.bot,
            "rating": round(self.rating, 4),
            "mu": round(self.mu, 4),
            "sigma": round(self.sigma, 4),
            # About 95% of the belief (mu +- 2 sigma): where the bot's strength may lie.
            "interval": [round(x, 4) for x in ratings.interval(ratings.Rating(self.mu, self.sigma))],
            "matches": self.matches,
            "wins": self.wins,
            "draws": self.draws,
            "losses": self.losses,
            "late_rate": round(self.late_rate, 6),
            "invalid_rate": round(self.invalid_rate, 6),
            "crashes": self.crashes,
            "bank_drawn_ms": self.bank_drawn_ms,
        }


def fingerprint(spec: dict[str, Any]) -> str:
    return hashlib.blake2b(json.dumps(spec, sort_keys=True).encode(), digest_size=16).hexdigest()


class Store:
    """The results database of one tournament. Use as a context manager, or call `close()`."""

    def __init__(self, path: Path, spec: dict[str, Any], schedule: Sequence[Scheduled] | None = None) -> None:
        #: The full schedule, to renumber finished matches when bots were added; None: never renumber.
        self._schedule = schedule
        self.path = path
        # One coordinator per database: a second one would play the same matches and record them twice.
        self._lock = open(path.with_name(path.name + ".lock"), "a")  # noqa: SIM115 -- held until close()
        try:
            fcntl.flock(self._lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            self._lock.close()
            raise StoreError(
                f"{path.parent}: another tournament is running there right now; wait for it to end "
                "(then this command resumes it), or use another --out"
            ) from None
        try:
            self._open(path, spec)
        except BaseException:
            self.close()
            raise

    def _open(self, path: Path, spec: dict[str, Any]) -> None:
        try:
            self._db = sqlite3.connect(path, isolation_level=None)  # transactions are explicit
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
            self._db.executescript(SCHEMA)
            columns = {row[1] for row in self._db.execute("PRAGMA table_info(seats)")}
            # Results folders from before: seats gained notes, then causes (NULL: cause unknown),
            # then the time bank drawn (NULL: none known).
            for column, kind in (("note", "TEXT"), ("cause", "TEXT"), ("bank_drawn_ms", "INTEGER")):
                if column not in columns:
                    self._db.execute(f"ALTER TABLE seats ADD COLUMN {column} {kind}")
        except sqlite3.DatabaseError as exc:
            raise StoreError(f"{path}: not a usable results database ({exc}); use another --out") from None
        mine = fingerprint(spec)
        row = self._db.execute("SELECT fingerprint, spec FROM tournament").fetchone()
        if row is None:
            self._db.execute(
                "INSERT INTO tournament VALUES (1, ?, ?, ?)",
                (mine, json.dumps(spec, sort_keys=True), datetime.now(UTC).isoformat(timespec="seconds")),
            )
        elif row[0] != mine:
            theirs = json.loads(row[1])
            differ = sorted(k for k in set(spec) | set(theirs) if spec.get(k) != theirs.get(k))
            if differ == ["bots"] and self._schedule is not None and _grown(theirs["bots"], spec["bots"]):
                self._add_bots(spec, mine, self._schedule)
                return
            raise StoreError(
                f"{path} holds a different tournament (it differs in: {', '.join(differ)}); "
                "to resume it, repeat its command exactly; to start a new one, use another --out"
            )

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        db = getattr(self, "_db", None)  # absent when opening it failed
        if db is not None:
            db.close()
        self._lock.close()  # releases the lock

    def _add_bots(self, spec: dict[str, Any], mine: str, schedule: Sequence[Scheduled]) -> None:
        """Take the grown spec; move each finished match to its index in the grown schedule, re-rate."""
        where = {m.key: m.index for m in schedule}
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            moves = [(where[key], idx) for idx, key in db.execute("SELECT idx, key FROM matches")]
            # Through negative numbers, so no two rows ever share an index on the way.
            for table, column in (("matches", "idx"), ("seats", "match")):
                db.execute(f"UPDATE {table} SET {column} = -{column} - 1")
                db.executemany(f"UPDATE {table} SET {column} = ? WHERE {column} = -? - 1", moves)
            db.execute(
                "UPDATE tournament SET fingerprint = ?, spec = ?", (mine, json.dumps(spec, sort_keys=True))
            )
            self._rerate_from(0)
            db.execute("COMMIT")
        except BaseException:
            db.execute("ROLLBACK")
            raise

    # ------------------------------------------------------------------ writing
    def commit(self, match: Scheduled, record: MatchRecord) -> None:
        """Record one finished match, its seats and the rating history it changes, all or nothing.

        A database that cannot take it (a full disk, say) is a StoreError that says how to go on.
        """
        try:
            self._commit(match, record)
        except sqlite3.Error as exc:
            why = str(exc)
            if getattr(exc, "sqlite_errorname", "") == "SQLITE_FULL" or "disk is full" in why:
                why = f"no space left on device ({exc}); free some space"
            raise StoreError(
                f"{self.path}: cannot record match {match.key} ({why}); the matches before it are kept: "
                "fix that, then run the same command again to resume"
            ) from None

    def _commit(self, match: Scheduled, record: MatchRecord) -> None:
        db = self._db
        db.execute("BEGIN IMMEDIATE")
        try:
            db.execute(
                "INSERT INTO matches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    match.index,
                    match.key,
                    match.round,
                    match.map,
                    match.seed,
                    record.winner,
                    record.reason,
                    record.ticks,
                    record.seconds,
                    record.replay,
                    datetime.now(UTC).isoformat(timespec="seconds"),
                ),
            )
            db.executemany(
                "INSERT INTO seats (match, seat, bot, rank, late, invalid, illegal, forfeit, crashed,"
                " exit_code, log, note, cause, bank_drawn_ms)"
                " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        match.index,
                        seat,
                        s.bot,
                        s.rank,
                        s.late,
                        s.invalid,
                        s.illegal,
                        int(s.forfeit),
                        int(s.crashed),
                        s.exit_code,
                        s.log,
                        s.note,
                        None if s.cause is None else json.dumps(s.cause, sort_keys=True),
                        s.bank_drawn_ms,
                    )
                    for seat, s in enumerate(record.seats)
                ],
            )
            self._rerate_from(match.index)
            db.execute("COMMIT")
        except BaseException:
            # SQLite may have rolled back by itself (a full disk does): then ROLLBACK fails with "cannot
            # rollback", which would hide the error that matters.
            if db.in_transaction:
                with contextlib.suppress(sqlite3.Error):
                    db.execute("ROLLBACK")
            raise

    def _rerate_from(self, index: int) -> None:
        """Rebuild the rating history of every finished match from ``index`` on, in schedule order."""
        db = self._db
        db.execute("DELETE FROM ratings WHERE match >= ?", (index,))
        start = {
            bot: ratings.Rating(mu, sigma)
            for bot, mu, sigma in db.execute(
                "SELECT r.bot, r.mu, r.sigma FROM ratings r JOIN ("
                "  SELECT bot, MAX(match) AS last FROM ratings WHERE match < ? GROUP BY bot"
                ") l ON r.bot = l.bot AND r.match = l.last",
                (index,),
            )
        }
        rows = db.execute(
            "SELECT match, bot, rank FROM seats WHERE match >= ? ORDER BY match, seat", (index,)
        ).fetchall()
        results: list[tuple[int, list[str], list[int]]] = []
        for m, bot, rank in rows:
            if not results or results[-1][0] != m:
                results.append((m, [], []))
            results[-1][1].append(bot)
            results[-1][2].append(rank)
        history = ratings.replay(start, results)
        db.executemany(
            "INSERT INTO ratings VALUES (?, ?, ?, ?)",
            [(m, bot, r.mu, r.sigma) for m, new in history for bot, r in new.items()],
        )

    # ------------------------------------------------------------------ reading
    def replay_folders(self) -> set[Path]:
        """The folders of every recorded match's replay (resolved): its attempt folder."""
        rows = self._db.execute("SELECT replay FROM matches WHERE replay IS NOT NULL")
        return {Path(replay).parent.resolve() for (replay,) in rows}

    def notes(self) -> dict[str, list[tuple[str, int]]]:
        """Per bot, why its seats forfeited or crashed (as the launcher said), with how many times."""
        out: dict[str, list[tuple[str, int]]] = {}
        for bot, note, n in self._db.execute(
            "SELECT bot, note, COUNT(*) FROM seats WHERE note IS NOT NULL"
            " GROUP BY bot, note ORDER BY bot, note"
        ):
            out.setdefault(bot, []).append((note, n))
        return out

    def forfeit_causes(self) -> dict[str, list[tuple[str, int]]]:
        """Per bot, the causes of its forfeits (the same words `cellarena match` prints), with counts."""
        return forfeit_causes_of(self._db)

    def finished_keys(self) -> set[str]:
        return {k for (k,) in self._db.execute("SELECT key FROM matches")}

    def standings(self, bots: Sequence[str]) -> list[Standing]:
        """Every bot in ``bots``, best first: by rating, then fewer late moves, fewer crashes, name."""
        return standings_of(self._db, bots)


def forfeit_causes_of(db: sqlite3.Connection) -> dict[str, list[tuple[str, int]]]:
    """`Store.forfeit_causes` on an open results database (of any age: no cause column, none)."""
    from cellarena.server.games import causes

    if "cause" not in {row[1] for row in db.execute("PRAGMA table_info(seats)")}:
        return {}
    counts: dict[str, dict[str, int]] = {}
    for bot, raw in db.execute("SELECT bot, cause FROM seats WHERE forfeit AND cause IS NOT NULL"):
        word = str(json.loads(raw).get("cause", causes.UNKNOWN))
        counts.setdefault(bot, {}).setdefault(word, 0)
        counts[bot][word] += 1
    return {bot: sorted(words.items()) for bot, words in sorted(counts.items())}


def standings_of(db: sqlite3.Connection, bots: Sequence[str]) -> list[Standing]:
    """`Store.standings` on an open results database (the web pages read it without the lock)."""
    latest = {
        bot: ratings.Rating(mu, sigma)
        for bot, mu, sigma in db.execute(
            "SELECT r.bot, r.mu, r.sigma FROM ratings r JOIN ("
            "  SELECT bot, MAX(match) AS last FROM ratings GROUP BY bot"
            ") l ON r.bot = l.bot AND r.match = l.last"
        )
    }
    # The web pages read folders of any age without migrating them: no bank column, no bank drawn.
    has_bank = "bank_drawn_ms" in {row[1] for row in db.execute("PRAGMA table_info(seats)")}
    tallies = {
        bot: (n, wins, draws, late, ticks, crashes, invalid, bank)
        for bot, n, wins, draws, late, ticks, crashes, invalid, bank in db.execute(
            "WITH firsts AS (SELECT match, COUNT(*) AS n FROM seats WHERE rank = 1 GROUP BY match)"
            " SELECT s.bot, COUNT(*), SUM(s.rank = 1 AND f.n = 1), SUM(s.rank = 1 AND f.n > 1),"
            " SUM(s.late), SUM(m.ticks), SUM(s.crashed), SUM(s.invalid),"
            f" {'SUM(s.bank_drawn_ms)' if has_bank else 'NULL'}"
            " FROM seats s JOIN matches m ON m.idx = s.match LEFT JOIN firsts f ON f.match = s.match"
            " GROUP BY s.bot"
        )
    }
    out = []
    for bot in bots:
        r = latest.get(bot, ratings.initial())
        n, wins, draws, late, ticks, crashes, invalid, bank = tallies.get(bot, (0, 0, 0, 0, 0, 0, 0, 0))
        out.append(
            Standing(
                bot=bot,
                rating=r.conservative,
                mu=r.mu,
                sigma=r.sigma,
                matches=n,
                wins=wins,
                draws=draws,
                losses=n - wins - draws,
                late_rate=late / ticks if ticks else 0.0,
                crashes=crashes,
                invalid_rate=invalid / ticks if ticks else 0.0,
                bank_drawn_ms=int(bank or 0),
            )
        )
    out.sort(key=lambda s: (-s.rating, s.late_rate, s.crashes, s.bot))
    return out


def _grown(old: list[Any], new: list[Any]) -> bool:
    """Whether ``new`` is ``old`` (each bot's name, command and folder unchanged) plus more bots."""
    return len(new) > len(old) and all(bot in new for bot in old)


def match_folder(parent: Path, index: int, bots: Sequence[str], map_: str | None) -> Path:
    """A new folder for one attempt at a match, named for people: ``0007-builder-vs-raider-duel``.

    A retried match gets ``-2``, ``-3``... (mkdir is atomic, so two attempts never share files).
    Folders of older runs (``m00007-...``) stay valid: the database records each replay's and log's path.
    """
    words = "-vs-".join(_SAFE.sub("_", b) for b in bots) + (f"-{_SAFE.sub('_', map_)}" if map_ else "")
    base = f"{index:04d}-{words}"
    parent.mkdir(parents=True, exist_ok=True)
    for attempt in range(1, 10_000):
        folder = parent / (base if attempt == 1 else f"{base}-{attempt}")
        try:
            folder.mkdir()
        except FileExistsError:
            continue
        return folder
    raise StoreError(f"{parent}: no free folder name for match {base}; clear old attempts out of it")


#: Characters kept in a folder name; anything else in a bot or map name becomes ``_``.
_SAFE = re.compile(r"[^A-Za-z0-9_.+=-]")
