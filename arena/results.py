"""Reading a tournament's results folder back: standings, head-to-head and failures, for `cellarena results`.

Opened read-only and without the tournament's lock, so it works while a tournament is still running.
"""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path
from typing import Any

from cellarena.arena.store import StoreError, standings_of


def read_results(folder: Path) -> dict[str, Any]:
    """Everything `cellarena results` prints, as JSON-ready data; StoreError naming the file at fault."""
    path = folder / "results.sqlite"
    if not folder.is_dir():
        raise StoreError(f"{folder}: not a folder; give a tournament's --out folder")
    if not path.is_file():
        raise StoreError(
            f"{path}: no results here; give a tournament's --out folder (e.g. runs/tournament-rezzo)"
        )
    try:
        db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
        db.row_factory = sqlite3.Row
        try:
            spec = json.loads(db.execute("SELECT spec FROM tournament").fetchone()["spec"])
            bots = [b[0] for b in spec["bots"]]
            table = [s.to_json() for s in standings_of(db, bots)]
            return {
                "results": str(path),
                "game": spec.get("game"),
                "standings": table,
                "head_to_head": _head_to_head(db, bots),
                "failures": _failures(db),
            }
        finally:
            db.close()
    except (sqlite3.DatabaseError, TypeError, KeyError, json.JSONDecodeError) as exc:
        raise StoreError(f"{path}: not a readable results database ({exc})") from None


def _head_to_head(db: sqlite3.Connection, bots: list[str]) -> dict[str, dict[str, dict[str, int]]]:
    """For each pair seated in one match: wins, draws, losses of the row bot against the column bot."""
    out = {a: {b: {"wins": 0, "draws": 0, "losses": 0} for b in bots if b != a} for a in bots}
    seats: dict[int, list[tuple[str, int]]] = {}
    for row in db.execute("SELECT match, bot, rank FROM seats ORDER BY match, seat"):
        seats.setdefault(row["match"], []).append((row["bot"], row["rank"]))
    for group in seats.values():
        for a, rank_a in group:
            for b, rank_b in group:
                if a == b or a not in out or b not in out[a]:
                    continue
                word = "wins" if rank_a < rank_b else "draws" if rank_a == rank_b else "losses"
                out[a][b][word] += 1
    return out


def _failures(db: sqlite3.Connection) -> list[dict[str, Any]]:
    """Every seat that forfeited or crashed, with what the database knows of why (every seat column)."""
    rows = db.execute(
        "SELECT m.key, m.replay, s.* FROM seats s JOIN matches m ON m.idx = s.match"
        " WHERE s.forfeit OR s.crashed ORDER BY s.match, s.seat"
    )
    out = []
    for row in rows:
        item = {k: row[k] for k in row.keys() if k not in ("match", "key")}  # noqa: SIM118 -- sqlite3.Row
        item["match"] = row["key"]
        item["forfeit"], item["crashed"] = bool(row["forfeit"]), bool(row["crashed"])
        out.append(item)
    return out
