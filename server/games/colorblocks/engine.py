"""The Colorblocks engine: turns, the turn cap and results around the rules in the SDK's `Board`.

One decision point is one player's turn: `pending()` asks only the seat to move, `apply()` plays its
list of actions in order (each refusal counted and reported back in that seat's next request), then
starts the other seat's turn, which spawns its unit. ``tick`` counts turns of both players.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from dataclasses import dataclass, replace
from typing import Any, ClassVar

import numpy as np

from cellarena.sdk.games.colorblocks import (
    GUARDS,
    MAX_ACTIONS,
    MAX_TURNS,
    PLAYERS,
    Board,
    Refused,
    color,
    objective,
)
from cellarena.server.games import causes
from cellarena.server.games.base import Events, Result, event
from cellarena.server.games.colorblocks.maps import parse_map, read_map
from cellarena.server.games.config import GameConfig, option


@dataclass(frozen=True)
class ColorblocksConfig(GameConfig):
    """Options of a Colorblocks match; `docs/games/colorblocks.md` explains each."""

    game: ClassVar[str] = "colorblocks"

    map: str = option("classic", "a built-in map's name or the path of a map file")
    max_turns: int = option(MAX_TURNS, "turns per player before the game is a draw", min=1, max=10000)
    guards: int = option(GUARDS, "guards per player", min=0, max=100)
    #: The map's text; when given it is used instead of loading ``map``. Replays carry it.
    map_text: str | None = option(None, "the map's text, used instead of loading map")

    def max_decisions(self) -> int:
        return PLAYERS * self.max_turns


class ColorblocksEngine:
    """One Colorblocks match between seat 0 (red, moves first) and seat 1 (blue)."""

    name: ClassVar[str] = "colorblocks"
    default_tick_rate: ClassVar[float] = 2.0
    default_budget_ms: ClassVar[float | None] = 1000.0

    def __init__(self, board: Board, config: ColorblocksConfig) -> None:
        self.board = board
        self.config = config
        self.players = PLAYERS
        self.max_turns = config.max_turns
        self.tick = 0
        #: Per seat: [index, reason] of each action refused in its last turn.
        self.refused: list[list[list[Any]]] = [[] for _ in range(PLAYERS)]
        self._result: Result | None = None
        board.begin_turn(0)

    @classmethod
    def new(cls, config: Mapping[str, Any] | ColorblocksConfig, seed: int = 0) -> ColorblocksEngine:
        """Load the map and start seat 0's first turn. The game has no randomness: ``seed`` is unused."""
        cfg = config if isinstance(config, ColorblocksConfig) else ColorblocksConfig.from_mapping(config)
        if cfg.map_text is None:
            text, source = read_map(cfg.map)
            cfg = replace(cfg, map_text=text)
        else:
            source = f"<map {cfg.map}>"
        blocks = parse_map(cfg.map_text or "", source)
        return cls(Board.from_blocks(blocks, cfg.guards), cfg)

    # ----------------------------------------------------------------- the match loop's side
    @property
    def to_move(self) -> int:
        return self.tick % PLAYERS

    @property
    def turn(self) -> int:
        """The turn number of the seat to move, from 1."""
        return self.tick // PLAYERS + 1

    def pending(self) -> dict[int, dict[str, Any]]:
        if self._result is not None:
            return {}
        seat = self.to_move
        return {
            seat: {
                "seat": seat,
                "turn": self.turn,
                "max_turns": self.max_turns,
                **self.board.to_request(),
                "refused": [list(r) for r in self.refused[seat]],
            }
        }

    def decode(self, seat: int, request: Mapping[str, Any], answer: Any) -> list[Any] | None:
        """The list of actions; anything but a list of at most MAX_ACTIONS entries is malformed."""
        if not isinstance(answer, (list, tuple)) or len(answer) > MAX_ACTIONS:
            return None
        return list(answer)

    def apply(self, actions: Mapping[int, Any]) -> Events:
        """Play the mover's actions in order, then end its turn and start the other seat's."""
        events = Events()
        if self._result is not None:
            return events
        seat = self.to_move
        for other, raw in actions.items():
            if other != seat and raw is not None:
                events.count(events.malformed, other)
        raw = actions.get(seat)
        refused: list[list[Any]] = []
        if raw is not None and not isinstance(raw, (list, tuple)):
            events.count(events.malformed, seat)
            refused.append([-1, "the moves field must be a list of actions"])
            raw = None
        before = self._tally()
        for i, action in enumerate(raw or ()):
            if i >= MAX_ACTIONS:
                events.count(events.malformed, seat)
                refused.append([i, f"at most {MAX_ACTIONS} actions per turn"])
                continue
            try:
                self.board.play(seat, action)
            except Refused as exc:
                events.count(events.malformed if exc.malformed else events.illegal, seat)
                refused.append([i, exc.reason])
            if self.board.winner is not None:
                break
        self.refused[seat] = refused
        events.log.extend(self._turn_events(seat, before))
        self.tick += 1
        if self.board.winner is not None:
            events.losers = [1 - seat]
            self._finish(self.board.winner, f"seat {seat} captured the objective")
        elif self.tick >= PLAYERS * self.max_turns:
            self._finish(None, f"turn limit {self.max_turns} reached")
        else:
            self.board.begin_turn(self.to_move)
        return events

    def _tally(self) -> tuple[list[int], list[set[Any]], list[set[tuple[int, int]]]]:
        """Per seat: its colour blocks, its units' ids and its objectives' cells."""
        blocks = self.board.blocks
        counts = [int(np.count_nonzero(blocks == color(s))) for s in range(PLAYERS)]
        units: list[set[Any]] = [set() for _ in range(PLAYERS)]
        for uid, unit in self.board.units.items():
            units[unit.owner].add(uid)
        cells = []
        for s in range(PLAYERS):
            ys, xs = np.nonzero(blocks == objective(s))
            cells.append({(int(x), int(y)) for y, x in zip(ys, xs, strict=True)})
        return counts, units, cells

    def _turn_events(
        self, seat: int, before: tuple[list[int], list[set[Any]], list[set[tuple[int, int]]]]
    ) -> list[dict[str, Any]]:
        """What ``seat``'s turn did: blocks of each colour won or lost, units removed (eliminations)
        and objectives captured."""
        counts, units, cells = self._tally()
        out = []
        change = [counts[s] - before[0][s] for s in range(PLAYERS)]
        if any(change):
            out.append(event("blocks", self.tick, seat=seat, change=change, blocks=counts))
        for s in range(PLAYERS):
            for uid in sorted(before[1][s] - units[s], key=str):
                out.append(event("unit_removed", self.tick, seat=s, unit=uid, by=seat))
            for x, y in sorted(before[2][s] - cells[s], key=lambda c: (c[1], c[0])):
                out.append(event("objective_captured", self.tick, seat=s, cell=[x, y], by=seat))
        return out

    def _finish(self, winner: int | None, reason: str) -> None:
        ranks = {s: 1 if winner is None or s == winner else 2 for s in range(PLAYERS)}
        scores = {s: float(np.count_nonzero(self.board.blocks == color(s))) for s in range(PLAYERS)}
        blocks = [int(scores[s]) for s in range(PLAYERS)]
        if winner is not None:
            loser = 1 - winner
            text = f"{{{winner}}} captured {{{loser}}}'s last objective at tick {self.tick}"
            c = causes.cause("objective_captured", self.tick, by=winner, loser=loser, text=text)
        else:
            text = (
                f"the turn limit {self.max_turns} was reached at tick {self.tick} "
                f"(blocks {blocks[0]} to {blocks[1]})"
            )
            c = causes.cause(causes.TICK_CAP, self.tick, blocks=blocks, text=text)
        self._result = Result(
            ranks=ranks,
            winner=winner,
            reason=reason,
            ticks=self.tick,
            scores=scores,
            causes=causes.for_every_seat(PLAYERS, c),
        )

    def result(self) -> Result | None:
        return self._result

    # ----------------------------------------------------------------- frames and hashes
    def frame(self) -> dict[str, Any]:
        """The full public state: the board fields of a request plus whose turn it is."""
        return {
            "tick": self.tick,
            "turn": self.turn,
            "to_move": self.to_move,
            "winner": self.board.winner,
            **self.board.to_request(),
        }

    def public_config(self) -> dict[str, Any]:
        return {
            "map": self.config.map,
            "width": self.board.width,
            "height": self.board.height,
            "max_turns": self.max_turns,
            "guards": self.config.guards,
        }

    def state_hash(self) -> str:
        """BLAKE2b over the blocks, guards, units, reserves, spawn choices, refusals and the tick."""
        b = self.board
        h = hashlib.blake2b(digest_size=16)
        h.update(
            np.array(
                [self.tick, b.width, b.height, b.next_id, -1 if b.winner is None else b.winner], "<i8"
            ).tobytes()
        )
        h.update(b.blocks.astype(np.uint8).tobytes())
        h.update(b.guards.astype(np.int8).tobytes())
        units = sorted(b.units.values(), key=lambda u: u.id)
        h.update(repr([u.to_list() for u in units]).encode())
        h.update(
            repr(
                (b.reserves, b.next_spawn, b.placed, b.guard_moved, sorted(b.moved), sorted(b.acted))
            ).encode()
        )
        h.update(repr(self.refused).encode())
        return h.hexdigest()
