"""`ladder restore FILE`: a backup of `ops.backup` into an empty folder and, for PostgreSQL, an empty
database (docs/ladder.md, "Backups").

Nothing is written before the archive's manifest is read and checked (a backup's schema newer than
this cellarena's is refused, an older one is brought forward by the store's migrations once restored)
and the targets are found empty. The folder is put together beside the target, under a dot-name, and
renamed into place last: a restore that fails leaves no half-restored folder. Restore goes to the
kind of database the backup was taken of (a SQLite backup into a folder, a PostgreSQL one into a
database).
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
import tarfile
import zlib
from pathlib import Path
from typing import IO

from cellarena.arena.ladder.errors import LadderStoreError
from cellarena.arena.ladder.ops import pg_tools
from cellarena.arena.ladder.ops.backup import (
    FOLDER,
    MANIFEST,
    BackupError,
    Manifest,
    database_facts,
    sha256_of,
)
from cellarena.arena.ladder.store.backends import open_backend, redact_url
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.arena.ladder.store.schema import CURRENT_VERSION

#: What a damaged archive raises while it is read.
_DAMAGED = (tarfile.TarError, EOFError, zlib.error, OSError)


def read_manifest(archive: Path) -> Manifest:
    """The archive's manifest (its first entry), or `BackupError` saying what the file is not."""
    name = str(archive)
    if not archive.is_file():
        raise BackupError(f"{name}: no such file; give the backup's path", name)
    if not _looks_like_tar(archive):
        raise BackupError(
            f"{name}: not a cellarena ladder backup (not a tar archive, as `ladder backup --out` writes)",
            name,
        )
    try:
        with tarfile.open(archive, "r:*") as tar:
            first = tar.next()
            if first is None or first.name != MANIFEST:
                raise BackupError(
                    f"{name}: not a cellarena ladder backup (it does not begin with {MANIFEST})", name
                )
            body = tar.extractfile(first)
            assert body is not None
            data = json.loads(body.read())
    except (ValueError, *_DAMAGED) as exc:
        raise BackupError(
            f"{name}: not a cellarena ladder backup, or a damaged one ({exc}); use a whole copy of the "
            "file `ladder backup --out` wrote",
            name,
        ) from None
    return Manifest.from_json(data, name)


def _looks_like_tar(path: Path) -> bool:
    """Gzip's magic number (what `ladder backup` writes), or a plain tar's ``ustar`` at byte 257."""
    with open(path, "rb") as f:
        head = f.read(265)
    return head.startswith(b"\x1f\x8b") or head[257:262] == b"ustar"


def check_manifest(manifest: Manifest, archive: Path, db_url: str | None) -> None:
    """Refuse a backup of a newer schema, or of the other kind of database than the target."""
    name = str(archive)
    if manifest.schema_version > CURRENT_VERSION:
        raise BackupError(
            f"{name}: its database is at schema version {manifest.schema_version} (cellarena "
            f"{manifest.cellarena}); this cellarena knows versions up to {CURRENT_VERSION}: restore it with "
            f"cellarena {manifest.cellarena} or newer (pip install -U 'cellarena>={manifest.cellarena}')",
            name,
        )
    if manifest.kind == "postgresql" and db_url is None:
        raise BackupError(
            f"{name}: a backup of a PostgreSQL ladder; restore it into an empty PostgreSQL database: "
            "--db postgresql://USER@HOST/NAME (createdb NAME makes one)",
            name,
        )
    if manifest.kind == "sqlite" and db_url is not None:
        raise BackupError(
            f"{name}: a backup of a SQLite ladder; restore it without --db, into a new folder (--dir). "
            "A restore goes to the kind of database the backup was taken of",
            name,
        )


def check_empty_folder(folder: Path) -> None:
    if folder.exists() and not folder.is_dir():
        raise BackupError(f"{folder}: not a folder; restore into a new folder (--dir)")
    there = sorted(p.name + ("/" if p.is_dir() else "") for p in folder.iterdir()) if folder.is_dir() else []
    if there:
        shown = ", ".join(there[:6]) + (f" and {len(there) - 6} more" if len(there) > 6 else "")
        raise BackupError(
            f"{folder}: the folder is not empty (it holds {shown}); restore into a new or empty folder "
            "(--dir), or move this one away first; nothing was changed"
        )


def check_empty_database(db_url: str) -> None:
    try:
        backend = open_backend(db_url, create=False)
    except LadderStoreError as exc:
        raise BackupError(str(exc)) from None
    try:
        tables = sorted(backend.table_names())
    finally:
        backend.close()
    if tables:
        shown = ", ".join(tables[:6]) + (f" and {len(tables) - 6} more" if len(tables) > 6 else "")
        raise BackupError(
            f"{redact_url(db_url)}: the database is not empty (it has the tables {shown}); restore into a "
            "new, empty database (createdb NAME), or drop this one first; nothing was changed"
        )


def restore(
    archive: Path,
    folder: Path,
    db_url: str | None,
    db_file: str,
    *,
    timeout: float = pg_tools.DEFAULT_TIMEOUT,
) -> Manifest:
    """Restore ``archive`` into ``folder`` (which gets the SQLite file ``db_file``) or, with
    ``db_url``, into that PostgreSQL database and ``folder``; the backup's manifest."""
    manifest = read_manifest(archive)
    check_manifest(manifest, archive, db_url)
    folder = folder.absolute()
    check_empty_folder(folder)
    if db_url is not None:
        pg_tools.find_program("pg_restore")  # missing: say so before anything is written
        check_empty_database(db_url)
    if not folder.parent.is_dir():
        raise BackupError(f"{folder.parent}: no such folder; create it first (--dir)")
    staging = folder.with_name(f".{folder.name}.restoring-{os.getpid()}")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(mode=0o700)
    try:
        dump = _unpack(archive, manifest, staging, db_file)
        if db_url is None:
            _open_restored(staging / db_file, manifest, archive)
        else:
            try:
                pg_tools.run(
                    "pg_restore",
                    db_url,
                    ["--exit-on-error", "--single-transaction", "--no-owner", "--no-privileges", str(dump)],
                    timeout=timeout,
                )
            except pg_tools.PgToolError as exc:
                raise BackupError(f"{exc}; the database was left as it was (one transaction)") from None
            dump.unlink()
            _open_restored(db_url, manifest, archive)
        with contextlib.suppress(FileNotFoundError):
            folder.rmdir()  # empty, as checked
        staging.chmod(0o755)
        staging.rename(folder)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    return manifest


def _unpack(archive: Path, manifest: Manifest, staging: Path, db_file: str) -> Path:
    """Every entry of the archive into ``staging``: the folder's files where they were, the database
    (checked against its SHA-256) as ``db_file`` (SQLite) or a dump beside it; the dump's path."""
    name = str(archive)
    dump = staging / (db_file if manifest.kind == "sqlite" else ".ladder.pgdump")
    try:
        with tarfile.open(archive, "r:*") as tar:
            for member in tar:
                if member.name == MANIFEST:
                    continue
                if member.name == manifest.database_file and member.isfile():
                    source = tar.extractfile(member)
                    assert source is not None
                    _copy(source, dump)
                elif member.name.startswith(FOLDER) and len(member.name) > len(FOLDER):
                    member.name = member.name[len(FOLDER) :]
                    tar.extract(member, staging, filter="data")
                else:
                    raise BackupError(
                        f"{name}: an entry no ladder backup has ({member.name!r}); nothing was restored", name
                    )
    except tarfile.FilterError as exc:
        raise BackupError(
            f"{name}: an entry that may not be restored ({exc}); nothing was restored", name
        ) from None
    except _DAMAGED as exc:
        raise BackupError(
            f"{name}: the archive is truncated or damaged ({exc}); nothing was restored: use a whole copy "
            "of the backup",
            name,
        ) from None
    if not dump.is_file() or sha256_of(dump) != manifest.database_sha256:
        raise BackupError(
            f"{name}: its database ({manifest.database_file}) is missing or does not match the manifest's "
            "SHA-256; nothing was restored: use a whole copy of the backup",
            name,
        )
    return dump


def _copy(source: IO[bytes], path: Path) -> None:
    with open(path, "xb") as out:
        shutil.copyfileobj(source, out, 1 << 20)


def _open_restored(target: str | Path, manifest: Manifest, archive: Path) -> None:
    """Open the restored database as a server would (which brings an older schema forward), then
    check that it holds what the manifest counted."""
    try:
        with LadderStore(target, create=False) as store:
            backend = store.database.backend
            with store.database.reading("count the restored database's rows") as db:
                facts = database_facts(db.query, backend.table_names(), str(store.where))
    except LadderStoreError as exc:
        raise BackupError(f"{archive}: the restored database cannot be opened: {exc}") from None
    wrong = {
        t: (n, facts["counts"].get(t))
        for t, n in manifest.counts.items()
        if t in facts["counts"] and facts["counts"][t] != n
    }
    if wrong:
        said = ", ".join(f"{t}: {n} in the backup, {got} restored" for t, (n, got) in wrong.items())
        raise BackupError(f"{archive}: the restored database does not hold what the backup counted ({said})")
