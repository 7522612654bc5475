"""The Cloth of Gold engine: rounds of placement, 168 generations and scoring around the SDK's step.

A decision point is one player's placement turn. Round r: the player who places first (A in odd
rounds, B in even ones) places a batch of 1..max_units units, then the other player, then the board
runs ``generations`` steps and both populations are counted; the end conditions are checked after
that. A player with no legal cell is not asked (it passes), so every decision point asks exactly one
seat. The step, the territory and the placement checks are `cellarena.sdk.games.cloth`'s, so a bot
that plans with the SDK sees exactly what the engine will do.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from cellarena.sdk.games.cloth import (
    EMPTY,
    INNER,
    RADIUS,
    SEAT_CODE,
    THRESHOLD,
    A,
    B,
    C,
    ClothWorld,
    Rejection,
    legal_cells,
    place,
    territory,
    territory_plane,
)
from cellarena.sdk.protocol import is_int
from cellarena.server.games import causes
from cellarena.server.games.base import Events, Result, Substeps, event
from cellarena.server.games.config import GameConfig, option


@dataclass(frozen=True)
class ClothConfig(GameConfig):
    """Options of a Cloth of Gold match; `docs/games/cloth.md` explains each."""

    game: ClassVar[str] = "cloth"

    width: int = option(64, "the board's width", min=8, max=1024)
    height: int = option(64, "the board's height", min=8, max=1024)
    generations: int = option(168, "generations run after each round's placements", min=0, max=10_000)
    max_rounds: int = option(20, "the round cap", min=1, max=1000)
    max_units: int = option(10, "the most units a player places per turn", min=1, max=100)
    #: Share of the board seeded with neutral c cells (point-symmetric); 0 for none.
    neutral_density: float = option(0.08, "the share of cells seeded neutral, such as 0.08", min=0.0, max=0.5)
    #: The literal mutual-loss rule: any round ending with equal populations is a draw.
    strict_mutual_loss: bool = option(False, "whether any round ending with equal populations is a draw")

    def max_decisions(self) -> int:
        return 2 * self.max_rounds  # each player places once a round (a player who cannot is skipped)


def neutral_board(cfg: ClothConfig, seed: int) -> np.ndarray:
    """The starting board: neutral cells at ``neutral_density``, symmetric under a half turn."""
    board = np.zeros((cfg.height, cfg.width), np.uint8)
    if cfg.neutral_density > 0:
        rng = np.random.default_rng(seed)
        draw = rng.random(cfg.height * cfg.width)
        i = np.arange(draw.size)
        # The first half's draws decide both a cell and its mirror image through the centre.
        draw = np.where(i <= draw.size - 1 - i, draw, draw[::-1])
        board[(draw < cfg.neutral_density).reshape(board.shape)] = C
    return board


@dataclass(frozen=True)
class RoundScore:
    """The count after one round's generations."""

    units: tuple[int, int]
    territory: tuple[int, int]

    @property
    def scores(self) -> tuple[int, int]:
        """S_A = A - B and S_B = B - A."""
        a, b = self.units
        return a - b, b - a


class ClothEngine(Substeps):
    """One Cloth of Gold match between seat 0 (code a) and seat 1 (code b)."""

    name: ClassVar[str] = "cloth"
    default_tick_rate: ClassVar[float] = 1.0
    default_budget_ms: ClassVar[float | None] = 1500.0
    #: Boards up to this many cells show each generation in the player (`substep_frames`); past it a
    #: round's 168 frames would be hundreds of MB (a 1024x1024 frame is 2.7 MB of JSON).
    SUBSTEP_CELLS: ClassVar[int] = 256 * 256

    def __init__(self, cfg: ClothConfig, board: np.ndarray) -> None:
        self.config = cfg
        self.players = 2
        self.tick = 0
        self.board = np.array(board, np.uint8)
        self.height, self.width = self.board.shape
        self.round = 1
        self._log: list[dict[str, Any]] = []  # the events of the `apply` under way
        self._turn = 0  # index into the round's order of placers
        self.placed_any = [False, False]
        self._rejected: dict[int, list[Rejection]] = {0: [], 1: []}
        self.history: list[RoundScore] = []
        self._result: Result | None = None
        self._world = ClothWorld(self.height, self.width)
        #: The runs of generations the last `apply` made: (round, the board before, the history then).
        self._runs: list[tuple[int, np.ndarray, list[RoundScore]]] = []

    # ----------------------------------------------------------------- construction
    @classmethod
    def new(cls, config: Mapping[str, Any] | ClothConfig, seed: int = 0) -> ClothEngine:
        """Seed the neutral cells from ``seed`` and wait for round 1's first placement."""
        cfg = config if isinstance(config, ClothConfig) else ClothConfig.from_mapping(config)
        engine = cls(cfg, neutral_board(cfg, seed))
        engine._advance()
        return engine

    @classmethod
    def from_board(cls, board: np.ndarray, **options: Any) -> ClothEngine:
        """A match at round 1's first placement on ``board`` (codes), for tests and tools."""
        board = np.asarray(board, np.uint8)
        cfg = ClothConfig.from_mapping({"height": board.shape[0], "width": board.shape[1], **options})
        engine = cls(cfg, board)
        engine._advance()
        return engine

    # ----------------------------------------------------------------- reading the state
    def order(self, round_: int | None = None) -> tuple[int, int]:
        """The seats in placing order for a round: A first in odd rounds, B first in even ones."""
        r = self.round if round_ is None else round_
        return (0, 1) if r % 2 == 1 else (1, 0)

    def to_place(self) -> int | None:
        """The seat asked now, or None once the match is over."""
        if self._result is not None or self._turn >= 2:
            return None
        return self.order()[self._turn]

    def legal(self, seat: int) -> np.ndarray:
        """Where ``seat`` may place its next unit now."""
        return legal_cells(self.board, SEAT_CODE[seat], not self.placed_any[seat])

    def result(self) -> Result | None:
        return self._result

    def units(self) -> tuple[int, int]:
        return int(np.count_nonzero(self.board == A)), int(np.count_nonzero(self.board == B))

    def scores(self) -> tuple[int, int]:
        """The scores of the last round counted (0, 0 before the first)."""
        return self.history[-1].scores if self.history else (0, 0)

    # ----------------------------------------------------------------- the match loop's interface
    def pending(self) -> dict[int, dict[str, Any]]:
        """The one seat that places now, with the board and what it needs to judge it."""
        seat = self.to_place()
        if seat is None:
            return {}
        return {
            seat: {
                "round": self.round,
                "you": SEAT_CODE[seat],
                "width": self.width,
                "height": self.height,
                "cells": self.board.tobytes(),
                "territory": territory_plane(self.board).tobytes(),
                "first": not self.placed_any[seat],
                "places_first": self._turn == 0,
                "max_units": self.config.max_units,
                "generations": self.config.generations,
                "units": list(self.units()),
                "scores": list(self.scores()),
                "rejected": [r.to_wire() for r in self._rejected[seat]],
            }
        }

    def decode(self, seat: int, request: Mapping[str, Any], answer: Any) -> list[list[int] | None] | None:
        """A list of at most max_units units; each unit [x, y], or None when it is not a pair of ints.

        Anything but such a list is malformed as a whole. A bad unit is left for `apply` to count
        and report, so the batch's other units are still placed.
        """
        if not isinstance(answer, list) or len(answer) > self.config.max_units:
            return None
        out: list[list[int] | None] = []
        for unit in answer:
            ok = isinstance(unit, list) and len(unit) == 2 and all(is_int(v) for v in unit)
            out.append([int(unit[0]), int(unit[1])] if ok else None)
        return out

    def apply(self, actions: Mapping[int, Any]) -> Events:
        """Place the asked seat's batch, then run on to the next decision point (or the end)."""
        events = Events()
        self._runs = []
        seat = self.to_place()
        if seat is None:
            return events
        self._log = events.log
        for other in actions:
            if other != seat:
                events.count(events.malformed, other)  # nobody asked it
        action = actions.get(seat)
        rejected: list[Rejection] = []
        if action is not None:
            units = action if isinstance(action, list) else []
            if not isinstance(action, list):
                events.count(events.malformed, seat)
            elif not units:
                rejected.append(Rejection(-1, -1, -1, "empty"))  # there was a legal cell: we asked
            code = SEAT_CODE[seat]
            placed, refused = place(self.board, units, code, not self.placed_any[seat])
            if placed:
                self.placed_any[seat] = True
            rejected += refused
            for r in rejected:
                events.count(events.malformed if r.reason == "malformed" else events.illegal, seat)
        self._rejected[seat] = rejected
        self.tick += 1
        self._turn += 1
        self._advance()
        return events

    # ----------------------------------------------------------------- rounds
    def _advance(self) -> None:
        """Skip seats with no legal cell; run generations and scoring when both have placed."""
        while self._result is None:
            seat = self.to_place()
            if seat is not None:
                if self.legal(seat).any():
                    return
                self._rejected[seat] = []
                self._turn += 1
                continue
            self._runs.append((self.round, self.board.copy(), list(self.history)))
            self._world.load(self.board)
            self._world.run(self.config.generations)
            self.board = self._world.codes()
            units = self.units()
            terr = (int(territory(self.board, A).sum()), int(territory(self.board, B).sum()))
            self.history.append(RoundScore(units, terr))
            score = self.history[-1].scores
            self._log.append(
                event(
                    "round",
                    self.tick,
                    round=self.round,
                    units=[int(u) for u in units],
                    territory=list(terr),
                    scores=[int(v) for v in score],
                )
            )
            self._check_end()
            if self._result is None:
                self.round += 1
                self._turn = 0

    def _check_end(self) -> None:
        """The end conditions after a round's count, in the rulebook's order."""
        now = self.history[-1]
        a, b = now.units
        if a == b == 0:
            self._finish(None, f"both populations died out in round {self.round}", "died_out")
            return
        if self.config.strict_mutual_loss and a == b:
            self._finish(
                None, f"equal populations ({a}) after round {self.round}: mutual loss", "mutual_loss"
            )
            return
        if len(self.history) >= 2:
            before = self.history[-2].scores
            for seat in (0, 1):
                # Seat wins when the opponent was not ahead, is now behind, and did not recover.
                opp_now, opp_before = now.scores[1 - seat], before[1 - seat]
                if opp_now <= opp_before <= 0 and opp_now < 0:
                    why = f"round {self.round}: the opponent fell behind and did not recover"
                    self._finish(seat, why, "fell_behind")
                    return
        if self.round >= self.config.max_rounds:
            s_a = now.scores[0]
            t_a, t_b = now.territory
            cap = self.config.max_rounds
            if s_a != 0:
                self._finish(0 if s_a > 0 else 1, f"round cap {cap}: higher score", causes.SCORE)
            elif t_a != t_b:
                self._finish(0 if t_a > t_b else 1, f"round cap {cap}: larger territory", "territory")
            else:
                self._finish(None, f"round cap {cap}: level on score and territory", causes.TICK_CAP)

    def _finish(self, winner: int | None, reason: str, kind: str) -> None:
        ranks = {0: 1, 1: 1} if winner is None else {winner: 1, 1 - winner: 2}
        now = self.history[-1]
        s_a, s_b = now.scores
        a, b = (int(u) for u in now.units)
        loser = None if winner is None else 1 - winner
        said = {
            "fell_behind": f"{{{loser}}} fell behind in round {self.round} and did not recover",
            causes.SCORE: f"{{{winner}}} has the higher score at the round cap",
            "territory": f"{{{winner}}} has the larger territory at the round cap (scores level)",
        }.get(kind, reason)
        text = f"{said} (tick {self.tick}: populations {a} to {b}, scores {s_a} to {s_b})"
        c = causes.cause(kind, self.tick, units=[a, b], scores=[int(s_a), int(s_b)], loser=loser, text=text)
        self._result = Result(
            ranks=ranks,
            winner=winner,
            reason=reason,
            ticks=self.tick,
            scores={0: float(s_a), 1: float(s_b)},
            causes=causes.for_every_seat(2, c),
        )

    # ----------------------------------------------------------------- frames and hashes
    def frame(self) -> dict[str, Any]:
        """The full public state: the board, the territories, the counts and whose turn it is."""
        return {
            "tick": self.tick,
            "round": self.round,
            "width": self.width,
            "height": self.height,
            "cells": self.board.tobytes(),
            "territory": territory_plane(self.board).tobytes(),
            "units": list(self.units()),
            "scores": list(self.scores()),
            "to_place": self.to_place(),
            "history": [[*h.units, *h.territory] for h in self.history],
        }

    def substeps(self) -> int:
        """How many frames `substep_frames` gives (none for a board past `SUBSTEP_CELLS`)."""
        if self.width * self.height > self.SUBSTEP_CELLS:
            return 0
        return len(self._runs) * self.config.generations

    def substep_frames(self) -> Iterator[dict[str, Any]]:
        """The boards the last `apply` passed through on its way to the next decision point: each
        generation of the round it ran, from generation 0 (the units just placed) to the one before
        the count, drawn as `frame` draws a decision point (plus ``generation``, ``generations``).

        A replay holds decision points only (4 frames for a round's 168 generations); the player
        computes these again from the board before the run, with the same step, and the decision
        point after them is checked against the replay's state hash. Lazy: one board at a time.
        """
        if not self.substeps():
            return
        for round_, before, history in self._runs:
            world = ClothWorld(self.height, self.width)
            world.load(before)
            board = before
            for generation in range(self.config.generations):
                if generation:
                    world.run(1)
                    board = world.codes()
                yield {
                    "tick": self.tick,
                    "round": round_,
                    "width": self.width,
                    "height": self.height,
                    "cells": board.tobytes(),
                    "territory": territory_plane(board).tobytes(),
                    "units": [int(np.count_nonzero(board == A)), int(np.count_nonzero(board == B))],
                    "scores": list(history[-1].scores if history else (0, 0)),
                    "to_place": None,
                    "history": [[*h.units, *h.territory] for h in history],
                    "generation": generation,
                    "generations": self.config.generations,
                }

    def public_config(self) -> dict[str, Any]:
        """What every seat learns at the start: the board's size and the rule options."""
        return {
            **self.config.to_mapping(),
            "min_units": 1,
            "radius": RADIUS,
            "inner_radius": INNER,
            "threshold": THRESHOLD,
        }

    def state_hash(self) -> str:
        """BLAKE2b over the board, the round, the turn, the counts so far and the pending refusals."""
        h = hashlib.blake2b(digest_size=16)
        h.update(np.array([self.tick, self.round, self._turn, *self.placed_any], "<i8").tobytes())
        h.update(np.array(self.board.shape, "<i8").tobytes())
        h.update(self.board.tobytes())
        h.update(np.array([[*r.units, *r.territory] for r in self.history], "<i8").reshape(-1).tobytes())
        for seat in (0, 1):
            h.update(repr([r.to_wire() for r in self._rejected[seat]]).encode())
        return h.hexdigest()


__all__ = ["EMPTY", "ClothConfig", "ClothEngine", "RoundScore", "neutral_board"]
