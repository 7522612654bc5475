"""`ladder export`: the ladder's finished matches as a dataset (docs/datasets.md), for its host.

Each match's replay is exported with what the database holds of its seats (bot, version, rating
before the match). A match with a bot whose owner keeps it out of datasets is left out whole: its
opponents' observations show that bot too.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, NoReturn

import click

from cellarena.arena.cli.ladder.where import Where, game_argument

if TYPE_CHECKING:
    from cellarena.arena.ladder.records import MatchRecord
    from cellarena.arena.ladder.store.ladder_store import LadderStore
    from cellarena.server.dataset.export import DatasetWriter

#: Matches read from the database at a time.
PAGE = 200


def finished_matches(store: LadderStore, games: list[str]) -> Iterator[MatchRecord]:
    """Every finished match of ``games``, oldest first within each game."""
    for game in games:
        found: list[MatchRecord] = []
        before: int | None = None
        while page := store.matches(game, limit=PAGE, before=before):
            found += page
            before = min(m.id for m in page)
        yield from sorted((m for m in found if m.status == "finished"), key=lambda m: m.id)


def replay_file(match: MatchRecord, folder: Path) -> Path | None:
    """The match's replay as the database names it, or by its name in the ladder's ``replays/``."""
    if match.replay is None:
        return None
    for path in (Path(match.replay), folder / "replays" / Path(match.replay).name):
        if path.is_file():
            return path
    return None


class LeftOut:
    """The matches an export leaves out, by why: counted for the card and the summary."""

    def __init__(self) -> None:
        self.opted_out = self.no_replay = 0
        self.unreadable: list[str] = []

    def notes(self) -> list[str]:
        notes = []
        if self.opted_out:
            notes.append(
                f"Left out: {self.opted_out} matches with a bot whose owner keeps its matches out of "
                "datasets (a match is left out whole: its opponents' observations show the bot)."
            )
        if self.no_replay:
            notes.append(f"Left out: {self.no_replay} finished matches whose replay file is not there.")
        if self.unreadable:
            notes.append(f"Left out: {len(self.unreadable)} matches whose replay cannot be read or replayed.")
        return ["", *notes] if notes else []


def add_match(writer: DatasetWriter, match: MatchRecord, folder: Path, left: LeftOut) -> None:
    from cellarena.server.dataset.rows import MatchInfo
    from cellarena.server.replay import ReplayError, read_replay

    path = replay_file(match, folder)
    if path is None:
        left.no_replay += 1
        return
    info = MatchInfo(
        f"ladder-{match.id:06d}",  # as its replay file is named
        bots=[s.bot for s in match.seats],
        versions=[s.version for s in match.seats],
        ratings=[None if s.before is None else (s.before.mu, s.before.sigma) for s in match.seats],
    )
    try:
        writer.add(read_replay(path), info)
    except ReplayError as exc:
        left.unreadable.append(f"match {match.id}: {exc}")


@click.command("export")
@click.option(
    "--out",
    required=True,
    type=click.Path(path_type=Path),
    help="The dataset's folder: new, or empty. It gets game=G/match=ID/part-0.parquet and README.md.",
)
@click.option("--game", "game", default=None, callback=lambda c, p, v: v and game_argument(v),
              help="Only this game's matches (default: every game's).")  # fmt: skip
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: ok, out, matches, rows, left_out."
)
@click.pass_obj
def export(where: Where, out: Path, game: str | None, as_json: bool) -> None:
    """Export the ladder's finished matches as a Parquet dataset in --out (docs/datasets.md).

    One row per seat and tick, with each seat's bot, its version and its rating before the match.
    The matches of bots whose owners keep them out of datasets are left out whole, as are matches
    without a replay file; a replay that cannot be replayed is left out with a warning. Needs
    pyarrow: cellarena[data].
    """
    from cellarena.server.dataset.export import DatasetError, DatasetWriter
    from cellarena.server.games import game_names

    def fail(text: str) -> NoReturn:
        if as_json:
            click.echo(json.dumps({"ok": False, "error": text, "code": "file"}))
        else:
            click.echo(f"error: {text}", err=True)
        sys.exit(1)

    left = LeftOut()
    try:
        with where.store(create=False) as store, DatasetWriter(out, "cellarena ladder export") as writer:
            kept_out = store.kept_out_of_datasets()
            for match in finished_matches(store, [game] if game else game_names()):
                if any(s.bot_id in kept_out for s in match.seats):
                    left.opted_out += 1
                else:
                    add_match(writer, match, where.folder, left)
            done = writer.finish(left.notes())
    except DatasetError as exc:
        fail(str(exc))
    for warning in left.unreadable:
        click.echo(f"warning: left out {warning}", err=True)
    counts = {"opted_out": left.opted_out, "no_replay": left.no_replay, "unreadable": len(left.unreadable)}
    if as_json:
        summary = {
            "ok": True,
            "out": str(out),
            "matches": done.matches,
            "rows": done.rows,
            "left_out": counts,
        }
        click.echo(json.dumps(summary))
    else:
        click.echo(
            f"{out}: {done.matches} matches, {done.rows} rows; left out {left.opted_out} opted out, "
            f"{left.no_replay} without a replay, {len(left.unreadable)} unreadable"
        )
