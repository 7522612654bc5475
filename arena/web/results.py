"""What the tournament pages show, read from a tournament's results database (read-only, no lock).

`ResultsSource` is the interface the pages need; `TournamentResults` implements it over
``results.sqlite`` (arena/store.py), and `find_tournaments` finds every such database under a folder.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from cellarena.arena import ratings
from cellarena.arena.store import Standing, standings_of

RESULTS = "results.sqlite"


class ResultsError(Exception):
    """A folder that holds no results, or a database that cannot be read; the message says which."""


@dataclass(frozen=True)
class SeatRow:
    bot: str
    rank: int
    late: int
    invalid: int
    illegal: int
    forfeit: bool
    crashed: bool


@dataclass(frozen=True)
class MatchRow:
    index: int
    key: str
    round: int
    map: str | None
    winner: str | None
    reason: str
    ticks: int
    replay: Path | None
    finished: str
    seats: tuple[SeatRow, ...]


@dataclass(frozen=True)
class RatingPoint:
    """A bot's rating after one of its matches: ``match`` is the match's index."""

    match: int
    bot: str
    rating: float


class ResultsSource(Protocol):
    """What the results pages read; a tournament and the ladder each provide one."""

    title: str
    game: str

    def standings(self) -> list[Standing]: ...

    def matches(self) -> list[MatchRow]: ...

    def match(self, index: int) -> MatchRow | None: ...

    def rating_history(self) -> list[RatingPoint]: ...


class TournamentResults:
    """One tournament's ``results.sqlite``, opened read-only for each question (it may still be running)."""

    def __init__(self, folder: Path, title: str) -> None:
        self.folder = folder
        self.path = folder / RESULTS
        self.title = title
        with closing(self._db()) as db:
            row = db.execute("SELECT spec FROM tournament").fetchone()
        if row is None:
            raise ResultsError(f"{self.path}: the tournament table is empty; is a tournament starting there?")
        spec = json.loads(row[0])
        self.game: str = spec["game"]
        self.bots: list[str] = [b[0] for b in spec["bots"]]

    def _db(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            db.execute("SELECT 1 FROM matches LIMIT 1")
        except sqlite3.Error as exc:
            raise ResultsError(f"{self.path}: not a readable tournament results database ({exc})") from None
        return db

    def standings(self) -> list[Standing]:
        with closing(self._db()) as db:
            return standings_of(db, self.bots)

    def _replay(self, stored: str | None) -> Path | None:
        """The replay file: as stored, else the same ``matches/...`` path under this folder (moved runs)."""
        if not stored:
            return None
        path = Path(stored)
        if path.is_file():
            return path
        parts = path.parts
        if "matches" in parts:
            moved = self.folder.joinpath(*parts[parts.index("matches") :])
            if moved.is_file():
                return moved
        return None

    def _rows(self, where: str = "", args: tuple[Any, ...] = ()) -> list[MatchRow]:
        with closing(self._db()) as db:
            matches = db.execute(
                "SELECT idx, key, round, map, winner, reason, ticks, replay, finished FROM matches "
                f"{where} ORDER BY idx",
                args,
            ).fetchall()
            seats: dict[int, list[SeatRow]] = {}
            for m, bot, rank, late, invalid, illegal, forfeit, crashed in db.execute(
                "SELECT match, bot, rank, late, invalid, illegal, forfeit, crashed FROM seats"
                " ORDER BY match, seat"
            ):
                seats.setdefault(m, []).append(
                    SeatRow(bot, rank, late, invalid, illegal, bool(forfeit), bool(crashed))
                )
        return [
            MatchRow(i, k, r, mp, w, why, t, self._replay(rp), f, tuple(seats.get(i, ())))
            for i, k, r, mp, w, why, t, rp, f in matches
        ]

    def matches(self) -> list[MatchRow]:
        return self._rows()

    def match(self, index: int) -> MatchRow | None:
        rows = self._rows("WHERE idx = ?", (index,))
        return rows[0] if rows else None

    def rating_history(self) -> list[RatingPoint]:
        with closing(self._db()) as db:
            return [
                RatingPoint(m, bot, ratings.Rating(mu, sigma).conservative)
                for m, bot, mu, sigma in db.execute(
                    "SELECT match, bot, mu, sigma FROM ratings ORDER BY match, bot"
                )
            ]


def find_tournaments(root: Path) -> dict[str, TournamentResults]:
    """Every tournament under ``root`` (itself, or its subfolders two levels down), by an id for URLs."""
    if not root.is_dir():
        raise ResultsError(
            f"{root}: no such folder; give the folder a tournament wrote (its --out), or its parent"
        )
    found: dict[str, TournamentResults] = {}
    for db in sorted([root / RESULTS, *root.glob(f"*/{RESULTS}"), *root.glob(f"*/*/{RESULTS}")]):
        if db.is_file():
            folder = db.parent
            rel = folder.relative_to(root).as_posix()
            tid = "-".join(folder.relative_to(root).parts) or folder.resolve().name
            found[tid] = TournamentResults(folder, rel if rel != "." else folder.resolve().name)
    if not found:
        raise ResultsError(
            f"{root}: holds no tournament results ({RESULTS}); give the folder a tournament wrote "
            "(its --out, e.g. runs/tournament-rezzo) or its parent"
        )
    return found
