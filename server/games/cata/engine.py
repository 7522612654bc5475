"""The C.A.T.A. engine: two players rewrite the rule of a binary automaton on a shared board.

A turn is four decision points, one single move each, seat 1 (white) first: 1, 0, 1, 0. After the
fourth move comes the reaction phase: (a) meditation resets the board, (b) the tally costs each seat
the cells of the other colour, checks the win and the health thresholds (with their resets), and
(c) the automaton runs until it is static, cycles, or reaches the generation cap; after a cycle or
the cap the losing seat's favourite state is kept. `docs/games/cata.md` is the rulebook.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, ClassVar

import numpy as np

from cellarena.sdk.games.cata import (
    MOVE_ORDER,
    MOVES_PER_TURN,
    RULE_RESET_THRESHOLD,
    RULE_SIZE,
    START_HP,
    THRESHOLDS,
    Act,
    Automaton,
    identity_rule,
    pack_board,
    quadrants,
    react,
    refusal,
    white_count,
)
from cellarena.sdk.protocol import is_int
from cellarena.server.games import causes
from cellarena.server.games.base import ConfigError, Events, Result, event
from cellarena.server.games.config import GameConfig, option

MAX_SIZE = 1024


@dataclass(frozen=True)
class CataConfig(GameConfig):
    """Options of a C.A.T.A. match; `docs/games/cata.md` explains each."""

    game: ClassVar[str] = "cata"

    size: int = option(64, "the board's side, even (four equal quadrants)", min=2, max=MAX_SIZE)
    max_turns: int = option(200, "the turn cap", min=1)
    max_generations: int = option(512, "generations a reaction phase may run before it is capped", min=1)
    pick_window: int = option(64, "states the loser picks from after the cap", min=1)
    torus: bool = option(False, "whether the board wraps at its edges")

    def check(self) -> None:
        if self.size % 2:
            raise ConfigError(
                f"cata option size must be an even number from 2 to {MAX_SIZE} (four equal quadrants), "
                f"got {self.size}"
            )

    def max_decisions(self) -> int:
        return MOVES_PER_TURN * self.max_turns


class CataEngine:
    """One C.A.T.A. match. Seat 0 is black (rule entries 0-15), seat 1 white (entries 16-31)."""

    name: ClassVar[str] = "cata"
    default_tick_rate: ClassVar[float] = 1.0
    #: The lookahead example bot simulates every candidate's reaction phase: about 200 ms a move,
    #: and it stops evaluating at 30% of the budget.
    default_budget_ms: ClassVar[float | None] = 1000.0
    players = 2

    def __init__(self, config: CataConfig) -> None:
        self.config = config
        self.size = config.size
        #: Cells per health point: a quarter of the board.
        self.q = config.size * config.size // 4
        self.ca = Automaton(config.size, config.torus)
        self.ca.load(quadrants(config.size))
        self.rule = np.array(identity_rule(), np.uint8)
        self.health = [START_HP * self.q, START_HP * self.q]
        self.tick = 0
        self.turn = 1
        self.move = 0
        self.blocked = [False, False]
        self.meditated = [False, False]
        #: Thresholds (in health points) each seat has crossed; each triggers once.
        self.crossed: list[set[int]] = [set(), set()]
        self.refused: list[dict[str, Any] | None] = [None, None]
        self.last_reaction: dict[str, Any] | None = None
        self._log: list[dict[str, Any]] = []  # the events of the `apply` under way
        self._result: Result | None = None

    @classmethod
    def new(cls, config: Mapping[str, Any] | CataConfig, seed: int = 0) -> CataEngine:
        """Set up the quadrants and the identity rule. The game has no chance: ``seed`` is unused."""
        cfg = config if isinstance(config, CataConfig) else CataConfig.from_mapping(config)
        return cls(cfg)

    # ----------------------------------------------------------------- reading the state
    @property
    def board(self) -> np.ndarray:
        return self.ca.board

    def result(self) -> Result | None:
        return self._result

    def seat_to_move(self) -> int:
        return MOVE_ORDER[self.move]

    def moves_left(self, seat: int) -> int:
        return sum(1 for s in MOVE_ORDER[self.move :] if s == seat)

    def _position(self) -> dict[str, Any]:
        """What a request and a frame both say of the position, in their order."""
        return {
            "size": self.size,
            "board": pack_board(self.board),
            "rule": [int(v) for v in self.rule],
            "health": list(self.health),
            "cells_per_hp": self.q,
            "turn": self.turn,
            "move": self.move,
        }

    def pending(self) -> dict[int, dict[str, Any]]:
        """The one seat that moves now and everything it sees (see docs/protocol.md)."""
        if self._result is not None:
            return {}
        seat = self.seat_to_move()
        return {
            seat: {
                "seat": seat,
                **self._position(),
                "moves_left": self.moves_left(seat),
                "blocked": self.blocked[seat],
                "meditated": self.meditated[seat],
                "opponent_meditated": self.meditated[1 - seat],
                "refused": self.refused[seat],
                "last_reaction": self.last_reaction,
            }
        }

    # ----------------------------------------------------------------- moves
    @staticmethod
    def _parse(answer: Any) -> list[int] | None:
        """[kind, index] if ``answer`` is two ints with a known kind and an index 0..31, else None."""
        if not isinstance(answer, (list, tuple)) or len(answer) != 2:
            return None
        kind, index = answer
        if not (is_int(kind) and is_int(index)):
            return None
        if kind not in Act._value2member_map_ or not 0 <= index < RULE_SIZE:
            return None
        return [int(kind), int(index)]

    def decode(self, seat: int, request: Mapping[str, Any], answer: Any) -> list[int] | None:
        """``moves`` is [kind, index]: two ints, kind 0..3 (pass, strike, block, meditate), index 0..31."""
        return self._parse(answer)

    def apply(self, actions: Mapping[int, Any]) -> Events:
        """One single move of the seat to move; after the turn's fourth, the reaction phase."""
        events = Events()
        if self._result is not None:
            return events
        self._log = events.log
        seat = self.seat_to_move()
        for other in actions:
            if other != seat:
                events.count(events.malformed, other)  # nobody asked that seat
        self.refused[seat] = None
        raw = actions.get(seat)
        if raw is not None:
            move = self._parse(raw)
            if move is None:
                events.count(events.malformed, seat)
            else:
                self._play(seat, move, events)
        self.tick += 1
        self.move += 1
        if self.move == MOVES_PER_TURN:
            self._reaction()
            if self._result is not None:
                return events  # the last turn stays the current one in frames and results
            self.turn += 1
            self.move = 0
            self.blocked = [False, False]
            self.meditated = [False, False]
        return events

    def _play(self, seat: int, move: list[int], events: Events) -> None:
        kind, index = move
        reason = refusal(
            seat,
            kind,
            index,
            self.rule.tolist(),
            turn=self.turn,
            blocked=self.blocked[seat],
            meditated=self.meditated[seat],
            health=self.health,
        )
        if reason is not None:
            events.count(events.illegal, seat)
            self.refused[seat] = {"tick": self.tick, "move": move, "reason": reason}
            return
        if kind == Act.STRIKE:
            self.rule[index] = seat
        elif kind == Act.BLOCK:
            self.rule[index] = seat
            self.blocked[seat] = True
        elif kind == Act.MEDITATE:
            self.meditated[seat] = True

    # ----------------------------------------------------------------- the reaction phase
    def _reaction(self) -> None:
        meditated = list(self.meditated)
        if any(meditated):
            self.ca.load(quadrants(self.size))
        whites = white_count(self.board)
        blacks = self.size * self.size - whites
        before = list(self.health)
        self.health[0] -= whites
        self.health[1] -= blacks
        report: dict[str, Any] = {
            "turn": self.turn,
            "meditated": meditated,
            "tally": [whites, blacks],
            "crossed": [[], []],
            "reset": "none",
        }
        self.last_reaction = report
        if min(self.health) <= 0:
            self._log.append(self._reaction_event(report, before))
            self._finish("health reached 0")
            return
        strength = 0  # the strongest reset triggered: 0 none, 1 the board, 2 the board and the rule
        for seat in (0, 1):
            for t in THRESHOLDS:
                if t not in self.crossed[seat] and before[seat] > t * self.q >= self.health[seat]:
                    self.crossed[seat].add(t)
                    report["crossed"][seat].append(t)
                    strength = max(strength, 2 if t == RULE_RESET_THRESHOLD else 1)
        if strength:
            self.ca.load(quadrants(self.size))
        if strength == 2:
            self.rule[:] = identity_rule()
        report["reset"] = ("none", "board", "board_and_rule")[strength]
        if self.turn >= self.config.max_turns:
            self._log.append(self._reaction_event(report, before))
            self._finish(f"turn cap {self.config.max_turns} reached")
            return
        loser = None if self.health[0] == self.health[1] else int(np.argmin(self.health))
        reaction = react(
            self.ca,
            self.rule,
            loser=loser,
            max_generations=self.config.max_generations,
            pick_window=self.config.pick_window,
        )
        report |= reaction.to_mapping()
        self._log.append(self._reaction_event(report, before))

    def _reaction_event(self, report: Mapping[str, Any], before: Sequence[int]) -> dict[str, Any]:
        """The turn's reaction as an event: the health each seat lost and has, the resets, and the
        reaction's generations and how it ended (absent when the match ended before it ran)."""
        return event(
            "reaction",
            self.tick,
            turn=report["turn"],
            damage=[before[s] - self.health[s] for s in (0, 1)],
            health=list(self.health),
            crossed=[list(c) for c in report["crossed"]],
            reset=report["reset"],
            generations=report.get("generations"),
            ended=report.get("ended"),
        )

    def _finish(self, reason: str) -> None:
        h0, h1 = self.health
        if h0 == h1:
            ranks, winner = {0: 1, 1: 1}, None
            reason += ", equal health: a draw"
        else:
            winner = 0 if h0 > h1 else 1
            ranks = {winner: 1, 1 - winner: 2}
            reason += f", seat {winner} has more health"
        scores = {s: self.health[s] / self.q for s in (0, 1)}
        t = self.tick
        if min(self.health) <= 0:
            low = [s for s in (0, 1) if self.health[s] <= 0]
            who = " and ".join(f"{{{s}}}'s" for s in low)
            c = causes.cause(
                "health_zero",
                t,
                health=[h0, h1],
                text=f"{who} health reached 0 at tick {t} (health {h0} to {h1})",
            )
        else:
            cap = self.config.max_turns
            text = f"the turn cap {cap} was reached at tick {t}: health {h0} to {h1}, more health wins"
            c = causes.cause(causes.TICK_CAP, t, health=[h0, h1], text=text)
        self._result = Result(
            ranks=ranks,
            winner=winner,
            reason=reason,
            ticks=t,
            scores=scores,
            causes=causes.for_every_seat(2, c),
        )

    # ----------------------------------------------------------------- frames and hashes
    def frame(self) -> dict[str, Any]:
        """The full public state."""
        return {
            "tick": self.tick,
            **self._position(),
            "to_move": None if self._result is not None else self.seat_to_move(),
            "blocked": list(self.blocked),
            "meditated": list(self.meditated),
            "crossed": [sorted(c) for c in self.crossed],
            "refused": list(self.refused),
            "last_reaction": self.last_reaction,
        }

    def public_config(self) -> dict[str, Any]:
        """What both seats learn at the start."""
        return {
            **self.config.to_mapping(),
            "cells_per_hp": self.q,
            "start_health": START_HP * self.q,
            "thresholds": list(THRESHOLDS),
            "move_order": list(MOVE_ORDER),
        }

    def state_hash(self) -> str:
        """BLAKE2b over the board, the rule, the health and the turn's bookkeeping."""
        h = hashlib.blake2b(digest_size=16)
        h.update(np.array([self.tick, self.turn, self.move, self.size, *self.health], "<i8").tobytes())
        h.update(self.board.tobytes())
        h.update(self.rule.tobytes())
        h.update(bytes([*self.blocked, *self.meditated]))
        h.update(repr([sorted(c) for c in self.crossed]).encode())
        h.update(repr(self.refused).encode())
        return h.hexdigest()
