"""`ladder backup` and `ladder restore`: a ladder's database and folder in one archive, and back
(docs/ladder.md, "Backups"; the work is `cellarena.arena.ladder.ops.backup` and `ops.restore`)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from cellarena.arena.cli.ladder.where import DB_FILE, Where
from cellarena.server.cli.json_errors import FileFault

if TYPE_CHECKING:
    from cellarena.arena.ladder.ops.backup import Manifest

_TIMEOUT = click.option(
    "--timeout",
    type=click.FloatRange(min=1),
    default=3600.0,
    show_default=True,
    help="Seconds pg_dump or pg_restore may take (PostgreSQL) before it is stopped.",
)
_JSON = click.option(
    "--json", "as_json", is_flag=True, help="Print the backup's manifest as one JSON object."
)


def _fail(exc: Exception) -> NoReturn:
    """A `BackupError` or a `PgToolError` as the command's error: the archive at fault named in JSON."""
    file = getattr(exc, "file", None)
    if file is not None:
        raise FileFault(str(exc), file) from None
    raise click.ClickException(str(exc)) from None


def _summary(manifest: Manifest) -> str:
    counts = manifest.counts
    shown = ", ".join(
        f"{counts[k]} {k}" for k in ("bots", "owners", "matches", "replays", "archives") if k in counts
    )
    return (
        f"{manifest.kind} database at schema version {manifest.schema_version}, "
        f"games {', '.join(manifest.games) or 'none yet'}: {shown}"
    )


@click.command("backup")
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The archive to write (a .tar.gz; written to OUT.tmp, then renamed).",
)
@_TIMEOUT
@_JSON
@click.pass_obj
def backup(where: Where, out: Path, timeout: float, as_json: bool) -> None:
    """Back up the ladder while it runs: a consistent snapshot of its database (SQLite's online
    backup, or pg_dump) and its folder's replays, archives and builds, in one archive."""
    from cellarena.arena.ladder.ops.backup import BackupError, back_up
    from cellarena.arena.ladder.ops.pg_tools import PgToolError

    try:
        manifest = back_up(where.folder, where.db, DB_FILE, out, timeout=timeout)
    except (BackupError, PgToolError) as exc:
        _fail(exc)
    if as_json:
        click.echo(json.dumps({"ok": True, "out": str(out), "manifest": manifest.to_json()}))
        return
    click.echo(f"backed up to {out}: {_summary(manifest)}")
    for name, why in manifest.left_out.items():
        click.echo(f"  left out {name}: {why}")


@click.command("restore")
@click.argument("archive", metavar="FILE", type=click.Path(dir_okay=False, path_type=Path))
@_TIMEOUT
@_JSON
@click.pass_obj
def restore(where: Where, archive: Path, timeout: float, as_json: bool) -> None:
    """Restore a `ladder backup` FILE into an empty folder (--dir) and, for a PostgreSQL backup, an
    empty database (--db). An older schema is brought up to date; a newer one is refused."""
    from cellarena.arena.ladder.ops.backup import BackupError
    from cellarena.arena.ladder.ops.pg_tools import PgToolError
    from cellarena.arena.ladder.ops.restore import restore as restore_into

    try:
        manifest = restore_into(archive, where.folder, where.db, DB_FILE, timeout=timeout)
    except (BackupError, PgToolError) as exc:
        _fail(exc)
    if as_json:
        click.echo(json.dumps({"ok": True, "folder": str(where.folder), "manifest": manifest.to_json()}))
        return
    click.echo(f"restored {archive} (taken {manifest.created}) into {where.folder}: {_summary(manifest)}")
