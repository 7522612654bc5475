"""The 2dFDCAL engine, played as a duplicate match: every seat solves its own copy of one board.

The single-player puzzle (shepherd the ``@`` wave into the right hole) becomes a bot game by the
duplicate format: `new()` rolls one seeded board, every seat gets an identical copy, and each turn
every seat edits its own copy and all copies step together. The higher score after the last turn
wins; equal scores draw. The step and the edit rules come from `cellarena.sdk.games.drop2df`, the
one implementation that lookahead bots use too.

A decision point at tick t (turn t + 1) shows each seat its row before this turn's edit. `apply()`
carries out each seat's ops, scores every row with ``@`` beside the right hole, then steps all rows.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from cellarena.sdk.games.drop2df import (
    BLOCK,
    EMPTY,
    FACES,
    HOLE,
    MINUS,
    PLUS,
    RABBIT,
    decode_ops,
    play_ops,
    step_many,
)
from cellarena.server.games import causes
from cellarena.server.games.base import ConfigError, Events, Result, RulesHistory, event
from cellarena.server.games.config import GameConfig, option

MAX_PLAYERS = 8
MAX_LENGTH = 64
MAX_TURNS = 1000
TOKEN_DICE = 4
#: A Fudge die's faces, as the cell they mark: a blank face marks ``[#]``.
DIE_MARKS = (PLUS, MINUS, BLOCK)


@dataclass(frozen=True)
class Drop2dfConfig(GameConfig):
    """Options of a drop2df match; `docs/games/drop2df.md` explains each."""

    game: ClassVar[str] = "drop2df"

    players: int = option(2, "bots per match, each on its own copy of the board", min=1, max=MAX_PLAYERS)
    length: int = option(8, "the dice spaces between the two holes", min=1, max=MAX_LENGTH)
    dice: int = option(2, "Fudge dice dropped on the board", min=0)
    turns: int = option(30, "the number of turns", min=1, max=MAX_TURNS)
    tokens: bool = option(False, "whether each bot gets the optional 4dF tokens")

    def check(self) -> None:
        if self.dice > self.length:
            raise ConfigError(
                f"drop2df option dice must be 0..length ({self.length}): each die needs its own space, "
                f"got {self.dice}; lower dice or raise length"
            )

    def max_decisions(self) -> int:
        return self.turns


def setup(cfg: Drop2dfConfig, seed: int) -> tuple[bytes, tuple[int, ...]]:
    """The seeded starting row and token faces: ``[0][@]``, the dice spaces, ``[0]``.

    The dice land on distinct spaces chosen uniformly; each face is +, - or blank (marked ``#``).
    """
    rng = np.random.default_rng(seed)
    row = bytearray([HOLE, RABBIT] + [EMPTY] * cfg.length + [HOLE])
    spots = rng.choice(cfg.length, size=cfg.dice, replace=False)
    faces = rng.integers(0, 3, size=cfg.dice)
    for spot, face in zip(spots.tolist(), faces.tolist(), strict=True):
        row[2 + spot] = DIE_MARKS[face]
    tokens: tuple[int, ...] = ()
    if cfg.tokens:
        tokens = tuple(sorted(FACES[f] for f in rng.integers(0, 3, size=TOKEN_DICE).tolist()))
    return bytes(row), tokens


class Drop2dfEngine(RulesHistory):
    """One duplicate match of 2dFDCAL. See the module docstring for the turn order."""

    name: ClassVar[str] = "drop2df"
    #: Replays record the rules they were played under (`base.RulesHistory`).
    RULES_VERSION: ClassVar[int] = 2
    RULES_CHANGES: ClassVar[Mapping[int, str]] = {
        2: "a refused edit or token op no longer uses up the turn's edit or token",
    }
    default_tick_rate: ClassVar[float] = 2.0
    #: A turn-based puzzle: lookahead bots plan on their first turn, so give them time.
    default_budget_ms: ClassVar[float | None] = 2000.0

    def __init__(self, cfg: Drop2dfConfig, row: bytes, tokens: tuple[int, ...]) -> None:
        self.config = cfg
        self.players = cfg.players
        self.turns = cfg.turns
        self.tick = 0
        self.start = row
        n = len(row)
        self._rows = np.tile(np.frombuffer(row, np.uint8), (cfg.players, 1))
        # Ping-pong buffers for the step, so a turn allocates nothing board-sized.
        self._next = np.empty_like(self._rows)
        self._scratch = np.empty((cfg.players, n - 2), np.uint8)
        self._scores = [0] * cfg.players
        self._tokens = [tokens] * cfg.players
        self._refused: list[tuple[str, ...]] = [()] * cfg.players
        self._result: Result | None = None

    @classmethod
    def new(cls, config: Mapping[str, Any] | Drop2dfConfig, seed: int = 0) -> Drop2dfEngine:
        """Roll the board (and tokens) from ``seed`` and give every seat the same copy."""
        cfg = config if isinstance(config, Drop2dfConfig) else Drop2dfConfig.from_mapping(config)
        row, tokens = setup(cfg, seed)
        return cls(cfg, row, tokens)

    @classmethod
    def from_row(cls, row: bytes, config: Mapping[str, Any] | None = None) -> Drop2dfEngine:
        """A match on a given starting row (tests, the seed's example); tokens per config, none rolled."""
        if len(row) < 4 or row[0] != HOLE or row[-1] != HOLE or any(c > HOLE for c in row):
            raise ConfigError(f"a drop2df row is [0], cells, [0] (at least 4 cells), got {row!r}")
        cfg = Drop2dfConfig.from_mapping({"dice": 0, **(config or {}), "length": len(row) - 3})
        return cls(cfg, bytes(row), ())

    # ----------------------------------------------------------------- reading the state
    def row(self, seat: int) -> bytes:
        return self._rows[seat].tobytes()

    def scores(self) -> list[int]:
        return list(self._scores)

    def tokens(self, seat: int) -> tuple[int, ...]:
        return self._tokens[seat]

    def result(self) -> Result | None:
        return self._result

    def pending(self) -> dict[int, dict[str, Any]]:
        """Every seat, every turn: its row, the turn, its score, its tokens, last turn's refusals."""
        if self._result is not None:
            return {}
        return {
            seat: {
                "turn": self.tick + 1,
                "turns": self.turns,
                "row": self.row(seat),
                "score": self._scores[seat],
                "tokens": list(self._tokens[seat]),
                "refused": list(self._refused[seat]),
            }
            for seat in range(self.players)
        }

    # ----------------------------------------------------------------- moves
    def decode(self, seat: int, request: Mapping[str, Any], answer: Any) -> list[Any] | None:
        """The ops of an answer (see `decode_ops`); None if it is not a list of well-formed ops."""
        return decode_ops(answer)

    def set_tokens(self, seat: int, tokens: tuple[int, ...]) -> None:
        """Give a seat these token faces (tests and puzzles built with `from_row`)."""
        self._tokens[seat] = tuple(sorted(tokens))

    def apply(self, actions: Mapping[int, Any]) -> Events:
        """Each seat's ops on its own row, scoring, then one step of every row."""
        events = Events()
        if self._result is not None:
            return events
        refused: list[tuple[str, ...]] = [()] * self.players
        for seat, raw in actions.items():
            if not (isinstance(seat, int) and 0 <= seat < self.players):
                continue
            ops = decode_ops(raw)  # again: replays and tests hand actions in without `decode`
            if ops is None:
                events.count(events.malformed, seat)
                continue
            if not ops:
                continue
            out = play_ops(self.row(seat), ops, self._tokens[seat])
            self._rows[seat] = np.frombuffer(out.row, np.uint8)
            self._tokens[seat] = out.tokens
            refused[seat] = out.refused
            for _ in out.refused:
                events.count(events.illegal, seat)
        self._refused = refused
        for seat in range(self.players):
            if self._rows[seat, -2] == RABBIT:
                self._scores[seat] += 1
                events.log.append(
                    event("scored", self.tick, seat=seat, points=1, score=int(self._scores[seat]))
                )
        step_many(self._rows, self._next, self._scratch)
        self._rows, self._next = self._next, self._rows
        self.tick += 1
        if self.tick >= self.turns:
            self._finish()
        return events

    def _finish(self) -> None:
        s = self._scores
        ranks = {i: 1 + sum(1 for j in range(self.players) if s[j] > s[i]) for i in range(self.players)}
        firsts = [i for i, r in ranks.items() if r == 1]
        winner = firsts[0] if len(firsts) == 1 else None
        if self.players == 1:
            reason = f"scored {s[0]} in {self.turns} turns"
        elif winner is None and len(firsts) == self.players:
            reason = f"all scored {s[0]} in {self.turns} turns"
        else:
            reason = "scores " + " to ".join(str(v) for v in s) + f" after {self.turns} turns"
        points = [int(v) for v in s]
        text = f"the {self.turns} turns were played: points " + " to ".join(map(str, points))
        c = causes.cause(causes.SCORE, self.tick, scores=points, text=text)
        self._result = Result(
            ranks=ranks,
            winner=winner,
            reason=reason,
            ticks=self.tick,
            scores={i: float(v) for i, v in enumerate(s)},
            causes=causes.for_every_seat(self.players, c),
        )

    # ----------------------------------------------------------------- frames and hashes
    def frame(self) -> dict[str, Any]:
        """Every seat's row, score and tokens."""
        return {
            "tick": self.tick,
            "turn": self.tick + 1,
            "turns": self.turns,
            "rows": [self.row(s) for s in range(self.players)],
            "scores": list(self._scores),
            "tokens": [list(t) for t in self._tokens],
        }

    def public_config(self) -> dict[str, Any]:
        """The rule options and the starting row every seat shares."""
        return {**self.config.to_mapping(), "cells": len(self.start), "start": self.start}

    def state_hash(self) -> str:
        """BLAKE2b over the tick, every row, score, token and the last refusals."""
        h = hashlib.blake2b(digest_size=16)
        h.update(np.array([self.tick, self.players, self._rows.shape[1]], "<i8").tobytes())
        h.update(self._rows.tobytes())
        h.update(np.array(self._scores, "<i8").tobytes())
        for tokens, refused in zip(self._tokens, self._refused, strict=True):
            h.update(bytes(tokens) + b"|" + "\n".join(refused).encode() + b"\x00")
        return h.hexdigest()
