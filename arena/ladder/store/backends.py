"""The two databases the ladder runs on, behind one small interface, so every query is written once.

The store writes its SQL once, with ``?`` placeholders, in the dialect SQLite and PostgreSQL share
(``INSERT ... RETURNING``, ``INSERT ... ON CONFLICT ... DO UPDATE``). A backend supplies only what
differs: the placeholder style, the id column, how a write transaction takes the database's one
writer lock, how the one server claims the database, and what a driver error means to the person who
has to fix it.

- SQLite (the default, one file): WAL with ``synchronous=FULL``, as `cellarena.arena.tournament_store`: a
  ``kill -9`` or a power cut at any moment leaves each transaction whole or absent. ``BEGIN IMMEDIATE``
  takes the write lock up front, so a write never fails half-way for want of it.
- PostgreSQL (``postgresql://...``, through psycopg 3): each write transaction first takes a
  transaction-scoped advisory lock, which gives it the same one-writer-at-a-time semantics as SQLite's,
  so read-modify-write of the ratings is safe without SERIALIZABLE retries. A lost connection (the
  server restarted, the network dropped) makes every call fail fast with `DatabaseUnavailableError`
  until `reconnect` succeeds; the ladder server calls it with back-off (`services.changes`)
  and, with the new session, takes the one-server lock again.
"""

from __future__ import annotations

import contextlib
import fcntl
import logging
import os
import socket
import time
import zlib
from abc import ABC, abstractmethod
from collections.abc import Sequence
from pathlib import Path
from typing import IO, TYPE_CHECKING, Any
from urllib.parse import quote, urlsplit, urlunsplit

from cellarena.arena.ladder.errors import DatabaseUnavailableError, LadderStoreError, ServerClaimLostError

if TYPE_CHECKING:
    import psycopg

log = logging.getLogger("cellarena.ladder")

Row = tuple[Any, ...]
Params = Sequence[object]

POSTGRES_SCHEMES = ("postgresql://", "postgres://")
#: PostgreSQL advisory locks are keyed by two int4s: this class ("cla") and one of the two below.
_LOCK_CLASS = 0x636C61
_WRITER_LOCK = 1
_SERVER_LOCK = 2
#: The class of the per-game server locks ("clg"), keyed by `game_lock_key`.
_GAME_LOCK_CLASS = 0x636C67

#: How long a new server waits for the lock of one that was just killed: PostgreSQL notices the closed
#: connection of a killed process quickly, but not at once.
SERVER_CLAIM_WAIT = 10.0
#: Seconds a connection attempt may take: an unreachable host must not hang the ladder for minutes.
CONNECT_TIMEOUT = 5


def game_lock_key(game: str) -> int:
    """The int4 that keys ``game``'s server lock in PostgreSQL (a CRC-32 of its name, signed)."""
    key = zlib.crc32(game.encode())
    return key - 2**32 if key >= 2**31 else key


def claim_refused(where: str, game: str | None, whole: bool) -> str:
    """Why a server cannot claim the database: another holds ``game``'s lock, or (``whole``) the
    database's own, which a server of every game holds (one started without a game)."""
    if whole and game is not None:
        return (
            f"{where}: a ladder server holding the database for every game (a cellarena from before "
            f"several games) is running on it; stop it first, then start one server per game"
        )
    if whole:
        return (
            f"{where}: another ladder server is running on this database; stop it first "
            "(two would void each other's matches)"
        )
    return (
        f"{where}: another ladder server for {game} is running on this database; stop it first "
        "(two would void each other's matches; a server per game may share the database)"
    )


class Backend(ABC):
    """One open connection to a ladder database. Not thread-safe: the store serialises calls."""

    #: The database as a person should see it in a message: the file, or the URL without its password.
    where: str
    #: The DDL of an autoincrementing integer primary key.
    id_column: str
    #: Appended to a SELECT in a write transaction to lock the rows it reads until the transaction
    #: ends. SQLite has no row locks and needs none: BEGIN IMMEDIATE holds the database's one writer lock.
    row_lock = ""

    @abstractmethod
    def query(self, sql: str, params: Params = ()) -> list[Row]:
        """Run one statement; its rows (none for a statement that returns none)."""

    @abstractmethod
    def execute(self, sql: str, params: Params = ()) -> int:
        """Run one statement; how many rows it changed."""

    @abstractmethod
    def begin_write(self) -> None:
        """Begin a transaction that holds the database's write lock until it ends."""

    def commit(self) -> None:
        self.execute("COMMIT")

    @abstractmethod
    def rollback(self) -> None:
        """End the transaction, if one is open, undoing it; never raises for want of one."""

    @abstractmethod
    def table_names(self) -> set[str]:
        """The tables there are (in PostgreSQL, in the current schema)."""

    @abstractmethod
    def claim_server(self, game: str | None = None) -> None:
        """Hold, until `close`, the lock that says this process is the database's one ladder server
        for ``game`` (servers of other games may share the database), or for every game (None)."""

    @abstractmethod
    def is_driver_error(self, exc: BaseException) -> bool:
        """Whether ``exc`` came from the database (as opposed to a bug in the caller)."""

    @abstractmethod
    def is_unique_violation(self, exc: BaseException) -> bool:
        """Whether ``exc`` is a write refused by a unique index or constraint."""

    @abstractmethod
    def remedy(self, exc: BaseException) -> str:
        """What went wrong with the database and what to do about it, for a driver error."""

    @property
    def connected(self) -> bool:
        """Whether the connection is usable (False after a PostgreSQL connection was lost)."""
        return True

    def reconnect(self) -> None:  # noqa: B027 -- SQLite's connection is a file: nothing to do
        """Open a new connection if the old one was lost, and take the one-server lock again if this
        process held it (`ServerClaimLostError` if another server holds it now). SQLite never loses it."""

    @abstractmethod
    def close(self) -> None: ...


def open_backend(target: str | Path, *, create: bool) -> Backend:
    """A SQLite file (a path) or a PostgreSQL database (a ``postgresql://`` URL)."""
    if isinstance(target, str) and target.startswith(POSTGRES_SCHEMES):
        return PostgresBackend(target)
    return SQLiteBackend(Path(target), create=create)


class SQLiteBackend(Backend):
    id_column = "INTEGER PRIMARY KEY AUTOINCREMENT"  # AUTOINCREMENT: an id is never handed out twice
    BUSY_TIMEOUT = 10.0

    def __init__(self, path: Path, *, create: bool) -> None:
        import sqlite3

        self._sqlite = sqlite3
        self.path = path
        self.where = str(path)
        self._server_locks: list[IO[str]] = []
        if not create and not path.exists():
            raise LadderStoreError(f"{path}: no ladder database there; check the path, or create one")
        if not path.parent.is_dir():
            raise LadderStoreError(f"{path}: the folder {path.parent} does not exist; create it first")
        try:
            self._db = sqlite3.connect(
                path, isolation_level=None, check_same_thread=False, timeout=self.BUSY_TIMEOUT
            )
        except sqlite3.Error as exc:
            raise LadderStoreError(f"{path}: cannot open it: {self.remedy(exc)}") from None
        try:
            self._db.execute("PRAGMA foreign_keys=ON")
            self._db.execute("PRAGMA journal_mode=WAL")
            self._db.execute("PRAGMA synchronous=FULL")
        except sqlite3.Error as exc:
            self._db.close()
            raise LadderStoreError(f"{path}: cannot open it: {self.remedy(exc)}") from None

    def query(self, sql: str, params: Params = ()) -> list[Row]:
        return self._db.execute(sql, params).fetchall()

    def execute(self, sql: str, params: Params = ()) -> int:
        return self._db.execute(sql, params).rowcount

    def begin_write(self) -> None:
        self._db.execute("BEGIN IMMEDIATE")

    def rollback(self) -> None:
        # SQLite rolls some failures (a full disk, say) back by itself; then there is nothing to undo.
        if self._db.in_transaction:
            self._db.execute("ROLLBACK")

    def table_names(self) -> set[str]:
        return {name for (name,) in self.query("SELECT name FROM sqlite_master WHERE type = 'table'")}

    def claim_server(self, game: str | None = None) -> None:
        if self._server_locks:
            return
        # The database's lock file, shared by the servers of one game each and taken whole by a server
        # of every game (and by a cellarena from before games had servers of their own); then the game's.
        locks = [(self.path.name + ".lock", game is not None)]
        if game is not None:
            locks.append((f"{self.path.name}.{quote(game, safe='')}.lock", False))
        held: list[IO[str]] = []
        try:
            for name, shared in locks:
                lock_path = self.path.with_name(name)
                try:
                    lock = open(lock_path, "a")  # noqa: SIM115 -- held until close()
                except OSError as exc:
                    raise LadderStoreError(
                        f"{lock_path}: cannot create the ladder server's lock file ({exc.strerror}); "
                        f"let the ladder's user write to {self.path.parent}"
                    ) from None
                held.append(lock)
                try:
                    fcntl.flock(lock, (fcntl.LOCK_SH if shared else fcntl.LOCK_EX) | fcntl.LOCK_NB)
                except BlockingIOError:
                    refused = claim_refused(str(self.path), game, whole=len(held) == 1)
                    raise LadderStoreError(refused) from None
        except BaseException:
            for opened in held:
                opened.close()
            raise
        self._server_locks = held

    def is_driver_error(self, exc: BaseException) -> bool:
        return isinstance(exc, self._sqlite.Error)

    def is_unique_violation(self, exc: BaseException) -> bool:
        return isinstance(exc, self._sqlite.IntegrityError) and "UNIQUE" in str(exc)

    def remedy(self, exc: BaseException) -> str:
        name = str(getattr(exc, "sqlite_errorname", ""))
        folder = self.path.parent
        if name.startswith("SQLITE_READONLY"):
            return (
                f"the database is read-only ({exc}): let the user that runs the ladder write to {self.path} "
                f"and to its folder {folder} (SQLite writes {self.path.name}-wal and -shm beside it)"
            )
        if name == "SQLITE_FULL":
            return f"the disk is full ({exc}): free space on the disk that holds {folder}"
        if name.startswith("SQLITE_BUSY"):
            return (
                f"another process held the database locked for over {self.BUSY_TIMEOUT:g} s ({exc}); "
                "retry, and look for a stuck process that has it open"
            )
        if name.startswith("SQLITE_CANTOPEN"):
            return f"it cannot be opened ({exc}): check that {folder} exists and the ladder's user may use it"
        if name in ("SQLITE_NOTADB", "SQLITE_CORRUPT"):
            return f"it is not a usable SQLite database ({exc}); restore it from a backup or use another file"
        return f"{exc}"

    def close(self) -> None:
        self._db.close()
        for lock in self._server_locks:
            lock.close()  # releases the lock
        self._server_locks = []


def redact_url(url: str) -> str:
    """The URL without its password, fit for a message or a log line."""
    parts = urlsplit(url)
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = parts.username or ""
    return urlunsplit(parts._replace(netloc=f"{user}:***@{netloc}"))


class PostgresBackend(Backend):
    id_column = "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"
    row_lock = " FOR UPDATE"

    def __init__(self, url: str) -> None:
        try:
            import psycopg
        except ImportError:
            raise LadderStoreError(
                f"{redact_url(url)}: PostgreSQL needs psycopg; install it with "
                "`pip install 'cellarena[postgres]'`"
            ) from None
        self._psycopg = psycopg
        self._url = url
        self.where = redact_url(url)
        self._placeholders: dict[str, str] = {}
        #: The server locks this process holds (`_server_keys`), taken again after a reconnect.
        self._claimed: list[tuple[int, int, bool]] = []
        #: Names this process's sessions, so that after a reconnect the lock held by its own dead
        #: session (which the server has not noticed yet) is told from another server's.
        self._session_name = f"cellarena-ladder {socket.gethostname()}:{os.getpid()}"[:63]
        self._lost_at: float | None = None
        self._conn: psycopg.Connection[Row] | None = self._connect()

    def _connect(self) -> psycopg.Connection[Row]:
        try:
            # Autocommit, so that transactions are the explicit BEGIN/COMMIT the store writes, as in SQLite.
            # TCP keepalives: a connection to a vanished host is found dead in about 25 s, not hours.
            return self._psycopg.connect(
                self._url,
                autocommit=True,
                application_name=self._session_name,
                connect_timeout=CONNECT_TIMEOUT,
                keepalives=1,
                keepalives_idle=10,
                keepalives_interval=5,
                keepalives_count=3,
            )
        except self._psycopg.Error as exc:
            raise LadderStoreError(f"{self.where}: cannot connect: {self.remedy(exc)}") from None

    def _live(self) -> psycopg.Connection[Row]:
        """The connection, or `DatabaseUnavailableError` at once while it is lost."""
        conn = self._conn
        if conn is None or conn.broken or conn.closed:
            self._lost()
            lost = time.strftime("%H:%M:%S", time.localtime(self._lost_at))
            raise DatabaseUnavailableError(
                f"{self.where}: the connection to the database was lost at {lost}; the ladder server "
                "reconnects by itself (check that PostgreSQL runs and is reachable)"
            )
        return conn

    def _lost(self) -> None:
        if self._lost_at is None:
            self._lost_at = time.time()
            log.warning("ladder database %s: the connection is lost", self.where)
        if self._conn is not None:
            with contextlib.suppress(Exception):
                self._conn.close()
            self._conn = None

    @property
    def connected(self) -> bool:
        conn = self._conn
        return conn is not None and not conn.broken and not conn.closed

    def reconnect(self) -> None:
        if self.connected:
            return
        conn = self._connect()  # LadderStoreError while it is still down
        self._conn = conn
        try:
            if self._claimed and not self._try_claim():
                raise ServerClaimLostError(
                    f"{self.where}: another ladder server took the database while the connection was "
                    "lost; this one stops (two would void each other's matches)"
                )
        except BaseException:
            self._conn = None
            with contextlib.suppress(Exception):
                conn.close()
            raise
        self._lost_at = None
        log.warning("ladder database %s: connected again", self.where)

    @staticmethod
    def _server_keys(game: str | None) -> list[tuple[int, int, bool]]:
        """The advisory locks (class, key, shared) of a server for ``game``: the database's lock shared
        with the other games' servers, then the game's own; for every game (None), the database's alone."""
        if game is None:
            return [(_LOCK_CLASS, _SERVER_LOCK, False)]
        return [(_LOCK_CLASS, _SERVER_LOCK, True), (_GAME_LOCK_CLASS, game_lock_key(game), False)]

    def _try_lock(self, key: tuple[int, int, bool]) -> bool:
        classid, objid, shared = key
        verb = "pg_try_advisory_lock_shared" if shared else "pg_try_advisory_lock"
        return bool(self.query(f"SELECT {verb}(?, ?)", (classid, objid))[0][0])

    def _unlock(self, key: tuple[int, int, bool]) -> None:
        classid, objid, shared = key
        verb = "pg_advisory_unlock_shared" if shared else "pg_advisory_unlock"
        self.query(f"SELECT {verb}(?, ?)", (classid, objid))

    def _try_claim(self) -> bool:
        """Take the server locks again after a reconnect (`_take_back` each)."""
        return all(self._take_back(key) for key in self._claimed)

    def _take_back(self, key: tuple[int, int, bool]) -> bool:
        """Take a server lock if it is free, or held by a dead session of this very process (the
        server may not have noticed yet that the old connection is gone): that one is ended first."""
        if self._try_lock(key):
            return True
        holders = self.query(
            "SELECT a.pid, a.application_name FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
            " WHERE l.locktype = 'advisory' AND l.classid = ? AND l.objid = ? AND l.granted",
            key[:2],
        )
        mine = [int(pid) for pid, name in holders if name == self._session_name]
        if not mine or len(mine) != len(holders):
            return False
        for pid in mine:
            self.query("SELECT pg_terminate_backend(?)", (pid,))
        deadline = time.monotonic() + SERVER_CLAIM_WAIT
        while time.monotonic() < deadline:
            if self._try_lock(key):
                return True
            time.sleep(0.05)
        return False

    def _sql(self, sql: str) -> str:
        # The store's SQL holds no literal ? or %, so the translation is a plain replace.
        translated = self._placeholders.get(sql)
        if translated is None:
            translated = self._placeholders[sql] = sql.replace("?", "%s")
        return translated

    def query(self, sql: str, params: Params = ()) -> list[Row]:
        conn = self._live()
        try:
            with conn.cursor() as cur:
                cur.execute(self._sql(sql), params or None)
                return cur.fetchall() if cur.description is not None else []
        except self._psycopg.OperationalError:
            if conn.broken or conn.closed:
                self._lost()
            raise

    def execute(self, sql: str, params: Params = ()) -> int:
        conn = self._live()
        try:
            with conn.cursor() as cur:
                cur.execute(self._sql(sql), params or None)
                return cur.rowcount
        except self._psycopg.OperationalError:
            if conn.broken or conn.closed:
                self._lost()
            raise

    def begin_write(self) -> None:
        self.execute("BEGIN")
        self.execute("SELECT pg_advisory_xact_lock(?, ?)", (_LOCK_CLASS, _WRITER_LOCK))

    def rollback(self) -> None:
        if not self.connected:
            return  # the server rolls back the transaction of a lost session itself
        assert self._conn is not None
        if self._conn.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE:
            self.execute("ROLLBACK")

    def table_names(self) -> set[str]:
        rows = self.query(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()"
        )
        return {name for (name,) in rows}

    def claim_server(self, game: str | None = None) -> None:
        if self._claimed:
            return
        deadline = time.monotonic() + SERVER_CLAIM_WAIT
        taken: list[tuple[int, int, bool]] = []
        for key in self._server_keys(game):
            while not self._try_lock(key):
                if time.monotonic() > deadline:
                    for held in taken:
                        self._unlock(held)
                    raise LadderStoreError(claim_refused(self.where, game, whole=not taken))
                time.sleep(0.1)
            taken.append(key)
        self._claimed = taken

    def is_driver_error(self, exc: BaseException) -> bool:
        return isinstance(exc, self._psycopg.Error)

    def is_unique_violation(self, exc: BaseException) -> bool:
        return isinstance(exc, self._psycopg.errors.UniqueViolation)

    def remedy(self, exc: BaseException) -> str:
        errors = self._psycopg.errors
        text = str(exc).strip()
        if isinstance(exc, errors.ReadOnlySqlTransaction):
            return (
                f"the database is read-only ({text}): point the ladder at a writable primary, "
                "or turn off default_transaction_read_only for its database or role"
            )
        if isinstance(exc, errors.DiskFull):
            return f"the database server's disk is full ({text}): free space there"
        if isinstance(exc, errors.InsufficientPrivilege):
            return f"the database role may not do this ({text}): grant it rights on the ladder's tables"
        if isinstance(exc, self._psycopg.OperationalError):
            return f"the database cannot be reached ({text}): check that PostgreSQL runs and the URL is right"
        return text

    def close(self) -> None:
        self._lost_at = self._lost_at or time.time()  # closed on purpose: nothing to warn about
        if self._conn is not None:
            self._conn.close()  # ends the session, and with it the server's advisory lock
            self._conn = None
