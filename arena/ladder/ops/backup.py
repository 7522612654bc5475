"""`ladder backup`: a ladder's database and the durable part of its folder in one archive, taken while
the ladder runs (docs/ladder.md, "Backups").

The archive is a gzipped tar: ``manifest.json`` first (what is inside: the database's kind and schema
version, the games, counts, when and by which cellarena), then ``database/`` (SQLite's file copied
through its online backup API, or PostgreSQL's ``pg_dump --format=custom``), then ``folder/`` (the
ladder's folder, less what `LEFT_OUT` names). It is written to ``FILE.tmp``, synced, then renamed, so
``FILE`` is always a whole backup; mode 0600, since it holds the owners' password hashes.

The database is read first, in one snapshot; the folder after. So everything the snapshot names is in
the folder already (an archive is kept before its version is written, a replay before its match ends),
and the replays of matches begun after the snapshot are left out: a restored database must know
every replay beside it (`store.replay_files.check_replays`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import hashlib
import io
import json
import os
import re
import sqlite3
import tarfile
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from cellarena.arena.ladder.errors import LadderStoreError
from cellarena.arena.ladder.ops import pg_tools
from cellarena.arena.ladder.store.backends import open_backend, redact_url
from cellarena.arena.ladder.store.database import cellarena_release

FORMAT = "cellarena-ladder-backup"
FORMAT_VERSION = 1
MANIFEST = "manifest.json"
DATABASE_FILES = {"sqlite": "database/ladder.sqlite", "postgresql": "database/ladder.pgdump"}
FOLDER = "folder/"
#: Top-level entries of the ladder's folder a backup leaves out, and why (docs/ladder.md, "Backups").
#: The SQLite file and its companions (-wal, -shm, locks) go through the database's own copy, and
#: names that start with a dot are files being written (uploads, results, a build's scratch).
LEFT_OUT = {
    "pending-results": "results kept on disk during a database outage; the running server writes them "
    "to the database once it is back",
    "logs": "house bots' logs of the running server",
    "session.key": "the pages' signing key, a secret: owners sign in again after a restore",
}
#: The tables a manifest counts, where the schema has them.
COUNTED = ("bots", "owners", "matches", "versions", "challenges", "seasons")
#: A ladder replay's name (as `store.replay_files` writes it): its match id.
_REPLAY = re.compile(r"ladder-(\d+)\.replay")

Query = Callable[..., list[tuple[Any, ...]]]


class BackupError(Exception):
    """A backup or restore that cannot be done; the message names the file or database at fault and
    says what to do. ``file`` is the archive when it is the one at fault."""

    def __init__(self, message: str, file: str | None = None) -> None:
        super().__init__(message)
        self.file = file


@dataclasses.dataclass(frozen=True)
class Manifest:
    """What a backup holds: ``manifest.json``."""

    kind: str
    schema_version: int
    games: list[str]
    counts: dict[str, int]
    highest_match: int
    database_sha256: str
    created: str = dataclasses.field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    cellarena: str = dataclasses.field(default_factory=cellarena_release)
    left_out: dict[str, str] = dataclasses.field(default_factory=dict)

    @property
    def database_file(self) -> str:
        return DATABASE_FILES[self.kind]

    def to_json(self) -> dict[str, Any]:
        return {"format": FORMAT, "format_version": FORMAT_VERSION, **dataclasses.asdict(self)}

    @classmethod
    def from_json(cls, data: Any, file: str) -> Manifest:
        """The manifest of ``file`` (the archive), or `BackupError` saying what is wrong with it."""
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise BackupError(f"{file}: not a cellarena ladder backup (its {MANIFEST} is not one)", file)
        if data.get("format_version") != FORMAT_VERSION:
            raise BackupError(
                f"{file}: a ladder backup of format {data.get('format_version')!r}, written by cellarena "
                f"{data.get('cellarena')}; this cellarena reads format {FORMAT_VERSION}: restore it with "
                "that cellarena or a newer one",
                file,
            )
        fields = {f.name for f in dataclasses.fields(cls)}
        try:
            manifest = cls(**{k: v for k, v in data.items() if k in fields})
        except TypeError as exc:
            raise BackupError(f"{file}: its {MANIFEST} is incomplete ({exc})", file) from None
        if manifest.kind not in DATABASE_FILES or not isinstance(manifest.schema_version, int):
            raise BackupError(f"{file}: its {MANIFEST} names no database this cellarena knows", file)
        return manifest


def database_facts(query: Query, tables: set[str], where: str) -> dict[str, Any]:
    """The schema version, games, counts and highest match id of a ladder database, through ``query``."""
    if "schema_version" not in tables:
        raise BackupError(
            f"{where}: not a ladder database (it has no schema_version table); check --dir/--db"
        )
    rows = query("SELECT MAX(version) FROM schema_version")
    games = query("SELECT DISTINCT game FROM bots") if "bots" in tables else []
    highest = query("SELECT COALESCE(MAX(id), 0) FROM matches") if "matches" in tables else [(0,)]
    return {
        "schema_version": int(rows[0][0] or 0),
        "games": sorted(str(g) for (g,) in games),
        "counts": {t: int(query(f"SELECT COUNT(*) FROM {t}")[0][0]) for t in COUNTED if t in tables},
        "highest_match": int(highest[0][0]),
    }


def snapshot_sqlite(path: Path, into: Path) -> dict[str, Any]:
    """Copy the SQLite database at ``path`` to ``into`` through SQLite's online backup (safe while the
    ladder writes: one step, under a read lock that writers in WAL mode do not wait for); its facts."""
    if not path.is_file():
        raise BackupError(f"{path}: no ladder database there; check --dir (or give --db for PostgreSQL)")
    try:
        source = sqlite3.connect(path, timeout=10.0)
        try:
            target = sqlite3.connect(into)
            try:
                source.backup(target)
                tables = {n for (n,) in target.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
                return database_facts(lambda sql: target.execute(sql).fetchall(), tables, str(path))
            finally:
                target.close()
        finally:
            source.close()
    except sqlite3.Error as exc:
        raise BackupError(
            f"{path}: cannot copy the database ({exc}); is it a ladder's SQLite file?"
        ) from None


def snapshot_postgres(url: str, into: Path, *, timeout: float) -> dict[str, Any]:
    """``pg_dump --format=custom`` of ``url`` into ``into``, in the one snapshot its facts are read in:
    a repeatable-read transaction held open while pg_dump runs with ``--snapshot``."""
    pg_tools.find_program("pg_dump")  # missing: say so before connecting
    try:
        backend = open_backend(url, create=False)
    except LadderStoreError as exc:
        raise BackupError(str(exc)) from None
    try:
        backend.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
        (snapshot,) = backend.query("SELECT pg_export_snapshot()")[0]
        facts = database_facts(backend.query, backend.table_names(), redact_url(url))
        pg_tools.run(
            "pg_dump", url, ["--format=custom", f"--snapshot={snapshot}", f"--file={into}"], timeout=timeout
        )
        return facts
    except pg_tools.PgToolError as exc:
        raise BackupError(str(exc)) from None
    except Exception as exc:
        if not backend.is_driver_error(exc):
            raise
        raise BackupError(f"{redact_url(url)}: cannot read the database: {backend.remedy(exc)}") from None
    finally:
        backend.close()


def folder_files(
    folder: Path, db_file: str, highest_match: int, skip: set[Path]
) -> tuple[list[str], dict[str, str]]:
    """The folder's files to back up (relative paths), and what of the folder was left out, and why."""
    files: list[str] = []
    left: dict[str, str] = {}
    if not folder.is_dir():
        return files, left
    for top in sorted(folder.iterdir()):
        name = top.name
        if name in LEFT_OUT:
            left[name] = LEFT_OUT[name]
        elif name == db_file or name.startswith((db_file + "-", db_file + ".", ".")) or top.resolve() in skip:
            continue
        elif top.is_dir() and not top.is_symlink():
            files += _walk(top, folder, skip)
        else:
            files.append(name)
    newer = [f for f in files if _replay_after(f, highest_match)]
    if newer:
        left["replays (newer)"] = f"{len(newer)} replays of matches begun after the database's snapshot"
    return [f for f in files if f not in newer], left


def _walk(top: Path, folder: Path, skip: set[Path]) -> list[str]:
    found: list[str] = []
    for root, dirs, names in os.walk(top):
        here = Path(root)
        dirs[:] = sorted(d for d in dirs if not d.startswith("."))
        for name in sorted([*names, *(d for d in dirs if (here / d).is_symlink())]):
            path = here / name
            if not name.startswith(".") and path.resolve() not in skip:
                found.append(path.relative_to(folder).as_posix())
    return found


def _replay_after(rel: str, highest_match: int) -> bool:
    parts = rel.split("/")
    found = _REPLAY.fullmatch(parts[-1]) if len(parts) == 2 and parts[0] == "replays" else None
    return found is not None and int(found.group(1)) > highest_match


def sha256_of(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as f:
        while chunk := f.read(1 << 20):
            digest.update(chunk)
    return digest.hexdigest()


def back_up(
    folder: Path, db_url: str | None, db_file: str, out: Path, *, timeout: float = pg_tools.DEFAULT_TIMEOUT
) -> Manifest:
    """Write a backup of the ladder in ``folder`` (its database: ``db_url``, else the SQLite file
    ``db_file`` in it) to ``out``; its manifest."""
    out = out.absolute()
    if not out.parent.is_dir():
        raise BackupError(f"{out.parent}: no such folder for the backup; create it first (--out)")
    kind = "postgresql" if db_url else "sqlite"
    # A dot-name: never backed up itself, should OUT be in the ladder's folder.
    with tempfile.TemporaryDirectory(prefix=".cellarena-backup-", dir=out.parent) as work:
        dump = Path(work) / "database"
        if db_url:
            facts = snapshot_postgres(db_url, dump, timeout=timeout)
        else:
            facts = snapshot_sqlite(folder / db_file, dump)
        skip = {out.resolve(), out.with_name(out.name + ".tmp").resolve(), Path(work).resolve()}
        files, left = folder_files(folder, db_file, facts["highest_match"], skip)
        counts = dict(facts["counts"])
        counts["replays"] = sum(1 for f in files if f.startswith("replays/"))
        counts["archives"] = sum(1 for f in files if f.startswith("archives/"))
        counts["files"] = len(files)
        manifest = Manifest(
            kind=kind,
            schema_version=facts["schema_version"],
            games=facts["games"],
            counts=counts,
            highest_match=facts["highest_match"],
            database_sha256=sha256_of(dump),
            left_out=left,
        )
        _write(out, manifest, dump, folder, files)
    return manifest


def _write(out: Path, manifest: Manifest, dump: Path, folder: Path, files: list[str]) -> None:
    """The archive, to ``out.tmp``, synced, then renamed to ``out``."""
    temporary = out.with_name(out.name + ".tmp")
    try:
        fd = os.open(temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "wb") as raw:
            with tarfile.open(fileobj=raw, mode="w:gz", compresslevel=6) as tar:
                body = json.dumps(manifest.to_json(), indent=1).encode()
                info = tarfile.TarInfo(MANIFEST)
                info.size, info.mtime, info.mode = len(body), int(time.time()), 0o600
                tar.addfile(info, io.BytesIO(body))
                tar.add(dump, arcname=manifest.database_file, recursive=False)
                for rel in files:
                    with contextlib.suppress(FileNotFoundError):  # a build's file replaced meanwhile
                        tar.add(folder / rel, arcname=FOLDER + rel, recursive=False)
            raw.flush()
            os.fsync(raw.fileno())
        os.replace(temporary, out)
    except BaseException as exc:  # Ctrl-C too: no FILE.tmp left behind
        temporary.unlink(missing_ok=True)
        if not isinstance(exc, OSError):
            raise
        raise BackupError(f"{exc.filename or out}: cannot write the backup ({exc.strerror or exc})") from None
