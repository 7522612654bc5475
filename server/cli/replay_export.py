"""`cellarena replay export`: replays as a dataset (docs/datasets.md). The replay group adds it."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cellarena.server.cli.json_errors import file_failed


@click.command("export")
@click.argument("paths", metavar="PATH_OR_DIR...", nargs=-1, required=True, type=click.Path(path_type=Path))
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="The dataset's folder: new, or empty. It gets game=G/match=M/part-0.parquet and README.md.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: ok, out, matches, rows; or error."
)
def replay_export(paths: tuple[Path, ...], out: Path, as_json: bool) -> None:
    """Write the replays named (and those in the folders named) as a Parquet dataset in --out.

    One row per seat and tick: what the seat was sent, its move, the tick's events, rewards and the
    match's outcome, with a dataset card (README.md) stating every field. Each replay is played
    again to rebuild what the seats saw; one that does not re-simulate stops the export, and
    nothing is written. Debug drawings are never exported. Needs pyarrow: cellarena[data].
    """
    from cellarena.server.dataset.export import DatasetError, export_replays
    from cellarena.server.replay import ReplayError

    try:
        done = export_replays(paths, out)
    except (DatasetError, ReplayError) as exc:
        file_failed(str(exc), as_json)
    if as_json:
        click.echo(json.dumps({"ok": True, "out": str(out), "matches": done.matches, "rows": done.rows}))
    else:
        click.echo(f"{out}: {done.matches} matches, {done.rows} rows (one per seat and tick); see README.md")
