"""Reading a tournament's results folder back, for `cellarena results` and the web pages alike.

`TournamentResults` is the one reader of a tournament's ``results.sqlite`` (which
arena/tournament_store.py writes): standings, matches with their seats, rating history, head-to-head
and failures. It opens the database read-only and without the tournament's lock for each question,
so it works while a tournament is still running. `find_tournaments` finds every such database under a folder.
"""

from __future__ import annotations

import json
import sqlite3
from contextlib import closing
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cellarena.arena import ratings
from cellarena.arena.tournament_store import SeatTally, Standing, standings_of
from cellarena.arena.why import failure_word, first_exception, why_by_bot

RESULTS = "results.sqlite"


class ResultsError(Exception):
    """A folder that holds no results, or a database that cannot be read; the message says which."""


@dataclass(frozen=True)
class SeatRow(SeatTally):
    #: Why the match ended so for this seat (`causes`, with its sentence in ``text``); None for matches
    #: recorded before causes were kept.
    cause: dict[str, Any] | None = None
    #: Ms of time bank drawn; None when the match had no bank (or was recorded before banks were kept).
    bank_drawn_ms: int | None = None

    def cause_json(self) -> dict[str, Any]:
        """The cause for output: ``{"cause": "unknown", ...}`` for a match from before causes."""
        if self.cause is not None:
            return self.cause
        return {
            "cause": "unknown",
            "text": f"{self.bot}: why it ended is unknown (recorded before causes were kept)",
        }


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


class TournamentResults:
    """One tournament's ``results.sqlite``, opened read-only for each question (it may still be running)."""

    def __init__(self, folder: Path, title: str | None = None) -> None:
        self.folder = folder
        self.path = folder / RESULTS
        self.title = title if title is not None else folder.resolve().name
        if not folder.is_dir():
            raise ResultsError(f"{folder}: not a folder; give a tournament's --out folder")
        if not self.path.is_file():
            raise ResultsError(
                f"{self.path}: no results here; give a tournament's --out folder (e.g. runs/tournament-rezzo)"
            )
        with closing(self._db()) as db:
            try:
                row = db.execute("SELECT spec FROM tournament").fetchone()
                if row is None:
                    raise ResultsError(
                        f"{self.path}: the tournament table is empty; is a tournament starting there?"
                    )
                spec = json.loads(row[0])
                self.game: str = spec["game"]
                self.bots: list[str] = [b[0] for b in spec["bots"]]
            except (sqlite3.DatabaseError, TypeError, KeyError, IndexError, json.JSONDecodeError) as exc:
                raise ResultsError(f"{self.path}: not a readable results database ({exc})") from None

    def _db(self) -> sqlite3.Connection:
        try:
            db = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True)
            db.execute("SELECT 1 FROM matches LIMIT 1")
        except sqlite3.Error as exc:
            raise ResultsError(f"{self.path}: not a readable results database ({exc})") from None
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
            # A database from before causes has no such column (read-only here: no migration).
            columns = {row[1] for row in db.execute("PRAGMA table_info(seats)")}
            has_cause, has_bank = "cause" in columns, "bank_drawn_ms" in columns
            for m, bot, rank, late, invalid, illegal, forfeit, crashed, cause, bank in db.execute(
                "SELECT match, bot, rank, late, invalid, illegal, forfeit, crashed, "
                f"{'cause' if has_cause else 'NULL'}, {'bank_drawn_ms' if has_bank else 'NULL'}"
                " FROM seats ORDER BY match, seat"
            ):
                seats.setdefault(m, []).append(
                    SeatRow(
                        bot,
                        rank,
                        late,
                        invalid,
                        illegal,
                        bool(forfeit),
                        bool(crashed),
                        None if cause is None else json.loads(cause),
                        bank,
                    )
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

    def head_to_head(self, matches: list[MatchRow] | None = None) -> dict[str, dict[str, dict[str, int]]]:
        """For each pair seated in one match: wins, draws, losses of the row bot against the column bot."""
        out = {a: {b: {"wins": 0, "draws": 0, "losses": 0} for b in self.bots if b != a} for a in self.bots}
        for match in self.matches() if matches is None else matches:
            for a in match.seats:
                for b in match.seats:
                    if a.bot == b.bot or a.bot not in out or b.bot not in out[a.bot]:
                        continue
                    word = "wins" if a.rank < b.rank else "draws" if a.rank == b.rank else "losses"
                    out[a.bot][b.bot][word] += 1
        return out

    def failures(self) -> list[dict[str, Any]]:
        """Every seat that forfeited, crashed or answered mostly invalid (`words.mostly_invalid`), with
        every column the database keeps for it, what it was (``what``) and the first exception its bot
        raised there (``exception``: ``{"tick", "text"}``, or None; `why.first_exception`)."""
        with closing(self._db()) as db:
            db.row_factory = sqlite3.Row
            rows = db.execute(
                "SELECT m.key, m.replay, m.ticks, s.* FROM seats s JOIN matches m ON m.idx = s.match"
                " WHERE s.forfeit OR s.crashed OR 2 * s.invalid > m.ticks ORDER BY s.match, s.seat"
            ).fetchall()
        out = []
        for row in rows:
            item = {k: row[k] for k in row.keys() if k not in ("match", "key", "ticks")}  # noqa: SIM118 -- sqlite3.Row
            item["match"] = row["key"]
            item["forfeit"], item["crashed"] = bool(row["forfeit"]), bool(row["crashed"])
            raw = item.get("cause")
            item["cause"] = json.loads(raw) if raw else {"cause": "unknown"}
            item["what"] = failure_word(item, row["ticks"])
            item["exception"] = first_exception(
                self._replay(row["replay"]), row["seat"], row["log"], row["invalid"]
            )
            out.append(item)
        return out

    def why(self, failures: list[dict[str, Any]] | None = None) -> list[dict[str, Any]]:
        """Per bot, why its matches ended (`why.why_by_bot`): what `results` and a tournament's end say."""
        return why_by_bot(self.bots, self.matches(), self.failures() if failures is None else failures)

    def match_causes(self) -> list[dict[str, Any]]:
        """Every match with each seat's result, counts and cause: what `results` shows per match."""
        return [
            {
                "match": m.key,
                "winner": m.winner,
                "reason": m.reason,
                "ticks": m.ticks,
                "seats": [
                    {
                        "bot": s.bot,
                        "rank": s.rank,
                        "late": s.late,
                        "invalid": s.invalid,
                        "illegal": s.illegal,
                        "forfeit": s.forfeit,
                        "cause": s.cause_json(),
                        "bank_drawn_ms": s.bank_drawn_ms,
                    }
                    for s in m.seats
                ],
            }
            for m in self.matches()
        ]

    def report(self) -> dict[str, Any]:
        """Everything `cellarena results` prints, as JSON-ready data."""
        failures = self.failures()
        return {
            "results": str(self.path),
            "game": self.game,
            "standings": [s.to_json() for s in self.standings()],
            "head_to_head": self.head_to_head(),
            "failures": failures,
            "why": self.why(failures),
            "matches": self.match_causes(),
        }


def read_results(folder: Path) -> dict[str, Any]:
    """`TournamentResults(folder).report()`; ResultsError naming the file at fault."""
    return TournamentResults(folder).report()


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
