"""A replay as a sequence of frames for the browser, made by re-simulating it.

Frame ``i`` is the match after ``i`` of the replay's tick records were applied (frame 0: the start).
Each holds the engine's public ``frame()``, the moves that led to it, what happened in that step
(illegal moves, late and invalid answers, seats that lost) and every seat's running totals. An
engine that passes through states between its decision points (Cloth's generations) may show them:
its optional ``substeps()`` (how many the last ``apply`` passed through) and ``substep_frames()``
(their frames) put them before the frame of the decision point they lead to, as frames with
``"sub": k`` (their state is the engine's own step from a verified one, and the decision point after
them is checked against the replay's hash). Frames
are made forward on demand and kept zlib-compressed, so a long match starts playing at once and
seeking back costs nothing. Every state hash is checked on the way: a replay that does not
re-simulate stops with a `ReplayError` at the first bad tick, never a wrong picture.
"""

from __future__ import annotations

import json
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from cellarena.server.games import Engine, get_engine
from cellarena.server.games.base import shows_substeps, substep_frames, substeps
from cellarena.server.games.causes import with_sentences
from cellarena.server.replay import Replay, ReplayError, board_at, read_replay, rebuild_at, without_errors
from cellarena.server.web.jsonable import dumps, jsonable

#: A chunk stops growing past this many (uncompressed JSON) bytes, so a 1024x1024 board streams.
CHUNK_BYTES = 4 * 1024 * 1024
#: And past this many frames.
CHUNK_FRAMES = 256


def _outcome(result: Any, names: list[str]) -> dict[str, Any] | None:
    if result is None:
        return None
    said = result.get("causes") if isinstance(result, dict) else result.causes
    return {
        "ranks": dict(result["ranks"]) if isinstance(result, dict) else dict(result.ranks),
        "winner": result["winner"] if isinstance(result, dict) else result.winner,
        "reason": result["reason"] if isinstance(result, dict) else result.reason,
        "ticks": result["ticks"] if isinstance(result, dict) else result.ticks,
        "scores": dict(result.get("scores") or {}) if isinstance(result, dict) else dict(result.scores),
        # Each seat's cause with its sentence (none in files from before causes were kept).
        "causes": with_sentences({int(k): v for k, v in (said or {}).items()}, names),
    }


@dataclass
class _Cursor:
    """An engine re-simulating the replay, and how many tick records it has applied."""

    engine: Engine
    applied: int = 0
    totals: dict[str, list[int]] = field(default_factory=dict)


class Timeline:
    """The frames of one replay. Thread-confined: every method runs under this object's trio lock."""

    def __init__(self, replay: Replay, *, debug: bool = True, errors: bool = True) -> None:
        """``debug``: whether frames carry the bots' debug drawings (a ladder's public pages: not);
        ``errors``: whether those carry the exceptions the bots raised (a ladder's: never)."""
        self.replay = replay
        self.debug = debug
        self.errors = errors
        #: Frames: one per decision point, until `count_frames` adds the engine's substeps.
        self.count = len(replay.ticks) + 1
        self._frames: list[bytes] = []  # zlib of each frame's JSON, in order
        self._applied: list[int] = []  # how many tick records each frame comes after
        self._cursor: _Cursor | None = None
        self._probe: _Cursor | None = None
        #: The first re-simulation failure: frames past it are never made, and asking for one repeats it.
        self._broken: ReplayError | None = None
        self.lock = trio.Lock()

    def count_frames(self) -> None:
        """Count the frames of a game whose engine shows substeps, which takes a re-simulation (the
        cost of `replay verify`); a replay that stops re-simulating counts up to there."""
        if not shows_substeps(get_engine(self.replay.game)):
            return
        extra = 0
        try:
            cursor = _Cursor(self._rebuild())
            while cursor.applied < len(self.replay.ticks):
                self._step(cursor)
                extra += substeps(cursor.engine)
        except ReplayError:
            pass  # the frames before the bad tick still show; asking past it gives the error
        self.count = len(self.replay.ticks) + 1 + extra

    # ------------------------------------------------------------------------ what the page asks
    def meta(self) -> dict[str, Any]:
        """The header facts the player shows before any frame arrives."""
        r = self.replay
        return jsonable(
            {
                "game": r.game,
                "names": r.names,
                "players": r.players,
                "seed": r.seed,
                "config": {k: v for k, v in r.config.items() if not isinstance(v, str) or len(v) < 200},
                "created": r.header.get("created"),
                "frames": self.count,
                "start_tick": r.start_tick,
                "ticks": [t.tick for t in r.ticks],
                "complete": r.complete,
                "incomplete": r.incomplete_reason(),
                "result": _outcome(r.result, r.names),
                # The recorded game events, each with the frame it leads to (frame i follows tick
                # record i - 1): the player's timeline marks. Empty for files without events.
                "events": [{"frame": i + 1, **e} for i, t in enumerate(r.ticks) for e in (t.events or ())],
                # No path: the pages name a replay by their library's label (`ReplayLibrary`).
            }
        )

    def chunk(self, start: int, count: int) -> bytes:
        """A JSON array of frames ``start`` onwards: at most ``count``, fewer past `CHUNK_BYTES`."""
        if not 0 <= start < self.count:
            raise ReplayError(f"{self.replay.path}: no frame {start}; the replay has {self.count}")
        count = max(1, min(count, CHUNK_FRAMES))
        parts: list[bytes] = []
        size = 0
        for i in range(start, min(self.count, start + count)):
            try:
                packed = self._frame(i)
            except ReplayError:
                if parts:  # the frames before a bad tick still show; asking past it gives the error
                    break
                raise
            body = zlib.decompress(packed)
            parts.append(body)
            size += len(body)
            if size >= CHUNK_BYTES:
                break
        return b"[" + b",".join(parts) + b"]"

    def observation(self, index: int, seat: int) -> bytes:
        """What ``seat`` was sent at frame ``index`` (its ``pending()`` request), as JSON; null if nothing."""
        if not 0 <= index < self.count:
            raise ReplayError(f"{self.replay.path}: no frame {index}; the replay has {self.count}")
        self._frame(index)
        if json.loads(zlib.decompress(self._frames[index])).get("sub") is not None:
            return dumps(None)  # between decision points: nobody was asked anything
        records = self._applied[index]
        if self._probe is None or self._probe.applied > records:
            self._probe = _Cursor(self._rebuild())
        try:
            while self._probe.applied < records:
                self._step(self._probe)
        except ReplayError:
            self._probe = None  # its engine is past the bad tick: start again next time
            raise
        return dumps(self._probe.engine.pending().get(seat))

    # ------------------------------------------------------------------------ re-simulation
    def _rebuild(self) -> Engine:
        """The replay's start, rebuilt as every tool rebuilds a state (`rebuild_at`: a fork's
        origin's moves first, the start's hash checked)."""
        r = self.replay
        try:
            return rebuild_at(r, r.start_tick).engine
        except ReplayError:
            raise
        except Exception as exc:  # an untrusted file: the engine's complaint, never a crash
            raise ReplayError(f"{r.path}: the {r.game} engine rejects the replay's config: {exc}") from None

    def _step(self, cursor: _Cursor) -> dict[str, Any]:
        """Apply the next tick record; what happened in it."""
        rec = self.replay.ticks[cursor.applied]
        engine = cursor.engine
        where = f"{self.replay.path}: tick {rec.tick}"
        if engine.tick != rec.tick:
            raise ReplayError(f"{where}: the engine is at tick {engine.tick}; it does not re-simulate")
        try:
            events = engine.apply(rec.moves)
        except Exception as exc:
            raise ReplayError(f"{where}: its moves do not apply ({type(exc).__name__}: {exc})") from None
        if engine.state_hash() != rec.hash:
            raise ReplayError(f"{where}: the state hash differs from the replay's; it does not re-simulate")
        cursor.applied += 1
        return {
            "moves": rec.moves,
            "late": rec.late,
            "invalid": rec.invalid,
            "illegal": events.illegal,
            "malformed": events.malformed,
            "losers": list(events.losers),
            "events": list(events.log),
        }

    def _frame(self, index: int) -> bytes:
        """The compressed JSON of frame ``index``, simulating forward to it if need be."""
        players = self.replay.players
        while len(self._frames) <= index:
            if self._broken is not None:
                raise self._broken
            if self._cursor is None:
                self._cursor = _Cursor(self._rebuild())
                self._cursor.totals = {k: [0] * players for k in ("late", "invalid", "illegal")}
                step: dict[str, Any] = {
                    "moves": {}, "late": {}, "invalid": {}, "illegal": {}, "losers": [], "events": []
                }  # fmt: skip
            else:
                try:
                    step = self._step(self._cursor)
                except ReplayError as exc:
                    self._broken = exc
                    raise
            cur = self._cursor
            for key in ("late", "invalid", "illegal"):
                for seat, n in step[key].items():
                    if 0 <= seat < players:
                        cur.totals[key][seat] += n
            last = cur.applied == len(self.replay.ticks)
            for sub, shown in enumerate(substep_frames(cur.engine) if cur.applied else ()):
                between = {
                    "i": len(self._frames),
                    "tick": cur.engine.tick,
                    "sub": sub,
                    "frame": shown,
                    # The record's late, invalid and illegal counts show once, where its moves land.
                    "step": {k: v for k, v in step.items() if k != "losers"} if sub == 0 else {},
                    "totals": {k: list(v) for k, v in cur.totals.items()},
                    "result": None,
                    "debug": {},  # drawings belong to the decision point, the frame after these
                }
                self._frames.append(zlib.compress(dumps(between), 1))
                self._applied.append(cur.applied)
                if sub == 0:
                    step = {"losers": step.get("losers", [])}
            # What each bot drew while it looked at this frame's world (tick record ``cur.applied``).
            ticks = self.replay.ticks
            drawn = ticks[cur.applied].debug if self.debug and cur.applied < len(ticks) else {}
            if not self.errors:
                drawn = without_errors(drawn)
            frame = {
                "i": len(self._frames),
                "tick": cur.engine.tick,
                "frame": cur.engine.frame(),
                "step": step,
                "totals": {k: list(v) for k, v in cur.totals.items()},
                "result": _outcome(cur.engine.result(), self.replay.names) if last else None,
                "debug": drawn,
            }
            self._frames.append(zlib.compress(dumps(frame), 1))
            self._applied.append(cur.applied)
        return self._frames[index]


def final_frame(path: Path) -> bytes:
    """JSON ``{"tick", "frame"}`` of a replay's last state, every hash checked (`board_at`)."""
    engine = board_at(read_replay(path))
    return dumps({"tick": engine.tick, "frame": engine.frame()})
