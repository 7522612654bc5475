"""The ladder database's connection: one lock, short transactions, the schema brought up to date.

Every table group (`bot_tables`, `match_tables`, ...) reads and writes through one `Database`: a call
is one transaction under its lock, so any thread may call; a database fault becomes a
`LadderStoreError` saying what could not be done and what to do, and a write that fails leaves
nothing half-written.
"""

from __future__ import annotations

import contextlib
import logging
import math
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path

from cellarena.arena.ladder.errors import LadderStoreError
from cellarena.arena.ladder.store.backends import Backend, open_backend
from cellarena.arena.ladder.store.schema import CURRENT_VERSION, MIGRATIONS

log = logging.getLogger("cellarena.ladder")


def cellarena_release() -> str:
    try:
        return metadata.version("cellarena")
    except metadata.PackageNotFoundError:
        return "unknown"


def now() -> str:
    """The time as the database keeps it (ISO 8601, UTC, microseconds)."""
    return datetime.now(UTC).isoformat(timespec="microseconds")


def parse_time(text: str) -> datetime:
    return datetime.fromisoformat(text)


def maybe_time(text: str | None) -> datetime | None:
    return None if text is None else datetime.fromisoformat(text)


class Database:
    """A ladder database's connection (see `LadderStore` for ``target`` and ``reconnect_every``)."""

    def __init__(
        self, target: str | Path, *, create: bool = True, reconnect_every: float | None = None
    ) -> None:
        self.lock = threading.RLock()
        self.reconnect_every = reconnect_every
        self._tried_at = -math.inf
        self.backend: Backend = open_backend(target, create=create)
        self.where = self.backend.where
        try:
            self.schema_version = self._upgrade(create=create)
        except BaseException:
            self.backend.close()
            raise

    def close(self) -> None:
        with self.lock:
            self.backend.close()

    @contextlib.contextmanager
    def writing(self, action: str, after: str = "") -> Iterator[Backend]:
        """One write transaction, holding the database's write lock: all of it is written, or none.

        A database fault becomes a LadderStoreError that says what ``action`` could not do and why.
        """
        with self.lock:
            self._revive()
            db = self.backend
            committing = False
            try:
                db.begin_write()
                yield db
                committing = True
                db.commit()
            except BaseException as exc:
                with contextlib.suppress(Exception):  # a lost connection: the server rolls back itself
                    db.rollback()
                if not db.is_driver_error(exc):
                    raise
                fate = (
                    "the database failed while committing, so it may or may not have been written"
                    if committing
                    else "nothing of it was written"
                )
                raise LadderStoreError(
                    f"{self.where}: cannot {action}: {db.remedy(exc)}; {fate}{after}"
                ) from exc

    @contextlib.contextmanager
    def reading(self, action: str) -> Iterator[Backend]:
        with self.lock:
            self._revive()
            try:
                yield self.backend
            except Exception as exc:
                if not self.backend.is_driver_error(exc):
                    raise
                raise LadderStoreError(f"{self.where}: cannot {action}: {self.backend.remedy(exc)}") from exc

    def _revive(self) -> None:
        """With ``reconnect_every``: connect again if the connection is lost (see `LadderStore`)."""
        if self.reconnect_every is None or self.backend.connected:
            return
        moment = time.monotonic()
        if moment - self._tried_at < self.reconnect_every:
            return
        self._tried_at = moment
        with contextlib.suppress(LadderStoreError):  # still down: the call itself says so
            self.backend.reconnect()

    def claim_server(self, game: str | None = None) -> None:
        """Hold, until `close`, the lock that says this process is the database's one ladder server for
        ``game`` (every game if None); a `LadderStoreError` if another holds it."""
        with self.lock:
            try:
                self.backend.claim_server(game)
            except LadderStoreError:
                raise
            except Exception as exc:
                if not self.backend.is_driver_error(exc):
                    raise
                raise LadderStoreError(
                    f"{self.where}: cannot claim the database: {self.backend.remedy(exc)}"
                ) from exc

    def _upgrade(self, *, create: bool) -> int:
        """Bring the schema to `CURRENT_VERSION`; the version the database is at now."""
        with self.reading("read the schema version") as db:
            version, release = self._version(db, create=create)
        if version == CURRENT_VERSION:
            return version
        if version > CURRENT_VERSION:
            raise LadderStoreError(
                f"{self.where}: this ladder database is at schema version {version}, written by "
                f"cellarena {release}; this is cellarena {cellarena_release()}, which knows versions up to "
                f"{CURRENT_VERSION}. Run cellarena {release} or newer (pip install -U 'cellarena>={release}')"
            )
        with self.writing(f"upgrade the ladder database to schema version {CURRENT_VERSION}") as db:
            version, _ = self._version(db, create=create)  # another process may have upgraded it meanwhile
            for migration in MIGRATIONS[version:]:
                for statement in migration.statements:
                    db.execute(statement.replace("{id}", db.id_column))
                if migration.then is not None:
                    migration.then(db)
                db.execute(
                    "INSERT INTO schema_version (version, cellarena, applied) VALUES (?, ?, ?)",
                    (migration.version, cellarena_release(), now()),
                )
                log.info(
                    "ladder database %s: schema version %d (%s)",
                    self.where,
                    migration.version,
                    migration.summary,
                )
        return CURRENT_VERSION

    def _version(self, db: Backend, *, create: bool) -> tuple[int, str | None]:
        tables = db.table_names()
        if "schema_version" not in tables:
            if tables:
                raise LadderStoreError(
                    f"{self.where}: not a ladder database (it has tables {', '.join(sorted(tables))} but no "
                    "schema_version); use another database"
                )
            if not create:
                raise LadderStoreError(
                    f"{self.where}: no ladder database there; check the name, or create one"
                )
            return 0, None
        rows = db.query("SELECT version, cellarena FROM schema_version ORDER BY version DESC LIMIT 1")
        return (int(rows[0][0]), str(rows[0][1])) if rows else (0, None)
