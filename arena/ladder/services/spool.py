"""Results the database could not take, kept on the ladder's local disk until it can.

A match that ends while the database is unreachable (or refuses writes) has a result that must not be
lost: its bots played it. `ResultSpool.put` writes it to a file of its own in the spool folder, made
durable before `put` returns (written to a temporary name, fsynced, renamed, the folder fsynced), so
that a crash right after still keeps it. `ResultSpool.flush` hands the files to the store in the order
the matches ended, which is the order their ratings must be counted in; a result comes in after those
already waiting, never before them.

`ladder serve` flushes at start, after it claims the database and before it voids the matches the last
run left running (a match whose result waits here is finished, not voided), and whenever the database
answers again.

A result counts once: `LadderStore.finish_match` refuses a match that is no longer running, so a file
whose result did reach the database (the connection dropped while the commit's answer was on its way)
is recognised and removed.
"""

from __future__ import annotations

import json
import logging
import os
import threading
from dataclasses import asdict
from pathlib import Path
from typing import Any

from cellarena.arena.ladder.errors import LadderStoreError, MatchNotRunningError
from cellarena.arena.ladder.records import SeatResult
from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store.ladder_store import LadderStore

log = logging.getLogger("cellarena.ladder")

#: The spool folder's name in the ladder's folder.
FOLDER = "pending-results"
_SUFFIX = ".json"


class ResultSpool:
    """The spool folder ``folder`` (made if missing). Thread-safe: the server calls it from threads."""

    def __init__(self, folder: Path) -> None:
        self.folder = folder
        folder.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._next = 1 + max((self._number(p) for p in self.pending()), default=0)

    def __len__(self) -> int:
        return len(self.pending())

    def pending(self) -> list[Path]:
        """The results waiting, oldest first."""
        return sorted(p for p in self.folder.iterdir() if p.name.endswith(_SUFFIX) and p.name[0] != ".")

    @staticmethod
    def _number(path: Path) -> int:
        head = path.name.split("-", 1)[0]
        return int(head) if head.isdigit() else 0

    def put(
        self, match_id: int, seats: list[SeatResult], *, reason: str, ticks: int, replay: str | None
    ) -> Path:
        """Keep one match's result durably; its file. OSError if the disk cannot take it either."""
        record = {
            "match": match_id,
            "seats": [asdict(s) for s in seats],
            "reason": reason,
            "ticks": ticks,
            "replay": replay,
        }
        data = json.dumps(record, sort_keys=True).encode()
        with self._lock:
            path = self.folder / f"{self._next:09d}-match-{match_id}{_SUFFIX}"
            self._next += 1
            temporary = self.folder / f".{path.name}.part"
            with open(temporary, "wb") as f:
                f.write(data)
                f.flush()
                os.fsync(f.fileno())
            os.replace(temporary, path)
            self._sync_folder()
        return path

    def flush(self, store: LadderStore, *, game: str | None = None) -> int:
        """Write every waiting result to ``store``, oldest first; how many were written. Stops at the
        first that the database cannot take (a `LadderStoreError`: it is still down), leaving it and
        those after it for the next flush. With ``game``, only that game's matches' results: the
        folder of a ladder from before servers per game (`FOLDER` itself) may hold any game's."""
        written = 0
        for path in self.pending():
            if game is not None and not path.exists():
                continue  # another game's server wrote it meanwhile
            try:
                record = _load(path)
            except ValueError as exc:
                if game is not None and not path.exists():
                    continue
                aside = path.with_name(path.name + ".unreadable")
                os.replace(path, aside)
                log.error("%s: not a result this ladder wrote (%s); moved aside to %s", path, exc, aside.name)
                continue
            if game is not None:
                found = store.match(record["match"])
                if found is not None and found.game != game:
                    continue  # the server of its own game writes it
            try:
                store.finish_match(
                    record["match"],
                    record["seats"],
                    reason=record["reason"],
                    ticks=record["ticks"],
                    replay=record["replay"],
                    settle=settle,
                )
            except MatchNotRunningError as exc:
                log.warning("%s: already in the database or voided there (%s); removed", path.name, exc)
            except LadderStoreError:
                raise
            except ValueError as exc:  # the database has other seats for it: not this ladder's match
                aside = path.with_name(path.name + ".unusable")
                os.replace(path, aside)
                log.error("%s: the database refuses it (%s); moved aside to %s", path, exc, aside.name)
                continue
            else:
                written += 1
                log.warning(
                    "ladder match %d: its result, kept on disk, is in the database now", record["match"]
                )
            path.unlink()
            self._sync_folder()
        return written

    def _sync_folder(self) -> None:
        fd = os.open(self.folder, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _load(path: Path) -> dict[str, Any]:
    """A spooled result, its seats as `SeatResult`s; ValueError naming what is wrong with it."""
    try:
        record = json.loads(path.read_bytes())
        seats = [SeatResult(**seat) for seat in record["seats"]]
        match_id, ticks = record["match"], record["ticks"]
        if (
            not isinstance(match_id, int)
            or not isinstance(ticks, int)
            or not isinstance(record["reason"], str)
        ):
            raise ValueError("match, ticks or reason of the wrong type")
        replay = record.get("replay")
        if replay is not None and not isinstance(replay, str):
            raise ValueError("replay is not a path")
    except (OSError, KeyError, TypeError, json.JSONDecodeError) as exc:
        raise ValueError(f"{type(exc).__name__}: {exc}") from None
    return {"match": match_id, "seats": seats, "reason": record["reason"], "ticks": ticks, "replay": replay}
