"""A replay as a sequence of frames for the browser, made by re-simulating it.

Frame ``i`` is the match after ``i`` of the replay's tick records were applied (frame 0: the start).
Each holds the engine's public ``frame()``, the moves that led to it, what happened in that step
(illegal moves, late and invalid answers, seats that lost) and every seat's running totals. Frames
are made forward on demand and kept zlib-compressed, so a long match starts playing at once and
seeking back costs nothing. Every state hash is checked on the way: a replay that does not
re-simulate stops with a `ReplayError` at the first bad tick, never a wrong picture.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from cellarena.server.games import Engine, get_engine
from cellarena.server.games.causes import with_sentences
from cellarena.server.replay import Replay, ReplayError, board_at, read_replay
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

    def __init__(self, replay: Replay, *, debug: bool = True) -> None:
        """``debug``: whether frames carry the bots' debug drawings (a ladder's public pages: not)."""
        self.replay = replay
        self.debug = debug
        self.count = len(replay.ticks) + 1
        self._frames: list[bytes] = []  # zlib of each frame's JSON, in order
        self._cursor: _Cursor | None = None
        self._probe: _Cursor | None = None
        #: The first re-simulation failure: frames past it are never made, and asking for one repeats it.
        self._broken: ReplayError | None = None
        self.lock = trio.Lock()

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
                "path": r.path,
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
        if self._probe is None or self._probe.applied > index:
            self._probe = _Cursor(self._rebuild())
        try:
            while self._probe.applied < index:
                self._step(self._probe)
        except ReplayError:
            self._probe = None  # its engine is past the bad tick: start again next time
            raise
        return dumps(self._probe.engine.pending().get(seat))

    # ------------------------------------------------------------------------ re-simulation
    def _rebuild(self) -> Engine:
        r = self.replay
        try:
            engine = get_engine(r.game).new(r.config, r.seed)
        except Exception as exc:  # an untrusted file: the engine's complaint, never a crash
            raise ReplayError(f"{r.path}: the {r.game} engine rejects the replay's config: {exc}") from None
        if engine.state_hash() != r.header["start_hash"]:
            raise ReplayError(f"{r.path}: the start does not re-simulate (see `cellarena replay verify`)")
        return engine

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
            "events": list(getattr(events, "log", None) or ()),
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
            made = len(self._frames)
            # What each bot drew while it looked at this frame's world (tick record ``made``).
            ticks = self.replay.ticks
            drawn = ticks[made].debug if self.debug and made < len(ticks) else {}
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
        return self._frames[index]


def final_frame(path: Path) -> bytes:
    """JSON ``{"tick", "frame"}`` of a replay's last state, every hash checked (`board_at`)."""
    engine = board_at(read_replay(path))
    return dumps({"tick": engine.tick, "frame": engine.frame()})
