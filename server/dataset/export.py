"""Writing a dataset: each match's rows as ``OUT/game=G/match=M/part-0.parquet``, then the card.

Everything is written into a folder beside OUT and moved to OUT at the end, so an export that fails
(a replay that does not re-simulate, a full disk) leaves no half dataset under the name asked for.
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType, TracebackType
from typing import Self

from cellarena.server.dataset.card import card_text
from cellarena.server.dataset.fields import FIELDS, arrow_schema
from cellarena.server.dataset.rows import MatchInfo, match_rows
from cellarena.server.replay import Replay

REPLAY_SUFFIXES = (".replay", ".replay.gz")
PART = "part-0.parquet"


class DatasetError(Exception):
    """An export's input or output is not usable: the message names the file or folder and what to do."""


def pyarrow_parquet() -> ModuleType:
    """pyarrow's Parquet module, or a DatasetError saying which extra to install."""
    try:
        import pyarrow.parquet as pq
    except ImportError:
        raise DatasetError(
            "exporting a dataset needs pyarrow: install cellarena[data] (pip install 'cellarena[data]')"
        ) from None
    return pq


def replay_files(paths: Sequence[Path]) -> list[Path]:
    """The replay files named, each folder's ``*.replay`` and ``*.replay.gz`` (searched through)."""
    found: list[Path] = []
    for path in paths:
        if path.is_dir():
            inside = sorted(p for p in path.rglob("*") if p.is_file() and p.name.endswith(REPLAY_SUFFIXES))
            if not inside:
                raise DatasetError(f"{path}: no replay files (*.replay, *.replay.gz) in this folder")
            found += inside
        elif path.is_file():
            found.append(path)
        else:
            raise DatasetError(f"{path}: no such file or folder")
    return found


def match_name(path: Path) -> str:
    """A replay file's name as its match's partition value: without the suffix, only safe characters;
    a tournament's ``NNNN-a-vs-b-map/match.replay`` is named after its folder."""
    name = path.name
    for suffix in sorted(REPLAY_SUFFIXES, key=len, reverse=True):
        if name.endswith(suffix):
            name = name[: -len(suffix)]
            break
    if name == "match":  # a tournament's layout: one folder per match, each file match.replay
        name = path.parent.name
    return re.sub(r"[^A-Za-z0-9._-]", "_", name) or "match"


@dataclass
class Exported:
    """What an export wrote."""

    out: Path
    matches: int = 0
    rows: int = 0
    games: set[str] = field(default_factory=set)


def _check_out(out: Path) -> None:
    if out.exists() and not out.is_dir():
        raise DatasetError(f"{out}: exists and is not a folder; give --out a new folder")
    if out.is_dir() and any(out.iterdir()):
        raise DatasetError(
            f"{out}: exists and is not empty; give --out a new folder, or empty this one "
            "(an export never writes over files)"
        )


class DatasetWriter:
    """A dataset being written to ``out`` (a new or empty folder): `add` each match, then `finish`.
    A context manager: leaving it without `finish` removes what was written."""

    def __init__(self, out: Path, command: str) -> None:
        self.pq = pyarrow_parquet()
        _check_out(out)
        self.out, self.command = out, command
        self.schema = arrow_schema()
        self.tmp = out.parent / f".{out.name}.part-{os.getpid()}"
        try:
            out.parent.mkdir(parents=True, exist_ok=True)
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp.mkdir()
        except OSError as exc:
            raise DatasetError(f"{out}: cannot write the dataset here ({exc.strerror or exc})") from None
        self.done = Exported(out)
        self._sources: dict[tuple[str, str], str] = {}

    def add(self, replay: Replay, info: MatchInfo) -> int:
        """Write ``replay``'s rows as match ``info.match``; how many rows. ReplayError if it does not
        re-simulate, DatasetError if the match's name is taken."""
        key = (replay.game, info.match)
        if key in self._sources:
            raise DatasetError(
                f"{replay.path}: match {info.match!r} of {replay.game} is already exported from "
                f"{self._sources[key]}; give the replays different file names"
            )
        self._sources[key] = replay.path
        import pyarrow as pa

        cols = match_rows(replay, info)
        cols["reward_terms"] = [None if t is None else list(t.items()) for t in cols["reward_terms"]]
        table = pa.table({f.name: cols[f.name] for f in FIELDS}, schema=self.schema)
        folder = self.tmp / f"game={replay.game}" / f"match={info.match}"
        try:
            folder.mkdir(parents=True)
            self.pq.write_table(table, folder / PART)
        except OSError as exc:
            raise DatasetError(f"{folder}: cannot write ({exc.strerror or exc})") from None
        self.done.matches += 1
        self.done.rows += table.num_rows
        self.done.games.add(replay.game)
        return table.num_rows

    def finish(self, notes: Sequence[str] = ()) -> Exported:
        """Write the card and move the dataset to ``out``."""
        d = self.done
        try:
            (self.tmp / "README.md").write_text(
                card_text(d.matches, d.rows, sorted(d.games), self.command, notes), encoding="utf-8"
            )
            if self.out.is_dir():
                self.out.rmdir()  # empty, as checked: the finished folder takes its place
            os.replace(self.tmp, self.out)
        except OSError as exc:
            raise DatasetError(f"{self.out}: cannot write the dataset here ({exc.strerror or exc})") from None
        return self.done

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


def export_replays(paths: Sequence[Path], out: Path) -> Exported:
    """`cellarena replay export`: every replay named (or in the folders named) into one dataset."""
    from cellarena.server.replay import read_replay

    files = replay_files(paths)
    with DatasetWriter(out, "cellarena replay export") as writer:
        for path in files:
            writer.add(read_replay(path), MatchInfo(match_name(path)))
        return writer.finish()
