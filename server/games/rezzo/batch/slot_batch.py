"""A phase slot's Rezzo worlds, stepped together by the match server.

The matches of one server that tick in the same phase slot (`ticking.FixedRateDriver`) and whose
worlds have one shape share a `SlotBatch`. Each match's engine is then a `BatchedWorld`: a view of
its world in one `BatchedRezzo` that answers the match loop exactly as `RezzoEngine` would (the
same requests, frames, state hashes, events and results; tests/test_rezzo_slot_batch.py checks it
against the engine). The match loop stages each world's actions (`BatchedWorld.stage`) and one
`SlotBatch.step` resolves them all, and every viewport of the slot is one gather: numpy's (or
numba's) per-call cost is paid once per slot instead of once per match.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Mapping
from typing import Any, ClassVar

import numpy as np

from cellarena.sdk.games.rezzo import Facing
from cellarena.server.games.base import (
    BATCH_CAPACITY,
    Batching,
    DebugPlacing,
    Engine,
    Events,
    HashScheme,
    Result,
    sole_first,
)
from cellarena.server.games.rezzo.batch.batched import BatchedRezzo, resolve_backend
from cellarena.server.games.rezzo.engine import (
    HASH_VERSION,
    Agent,
    RezzoEngine,
    cap_reason,
    decode_moves,
    end_causes,
    loss_reason,
    parse_moves,
    state_digest,
    viewport_placer,
)

#: Without numba, the numpy batch pays from about this many worlds on (`slot_bench`, per match-tick
#: against the engines one by one: 8-seat bench matches 0.4x at 1 world, 1.0x at 4, 1.5x at 8; duels
#: 0.5x at 1, 1.5x at 4; with numba every size pays: 1.2x to 1.3x at 1 world, 3x to 5x at 16).
NUMPY_BATCH_FROM = 4


class SlotBatch:
    """Up to ``capacity`` Rezzo worlds with ``template``'s batch key, each a match's `BatchedWorld`.

    A free place is a world marked done, which `BatchedRezzo.step` leaves alone.
    """

    def __init__(
        self, template: RezzoEngine, capacity: int = BATCH_CAPACITY, *, backend: str = "auto"
    ) -> None:
        key = template.batch_key()
        if key is None:
            raise ValueError("this world cannot be batched (a torus, or a player is out)")
        self.key = key
        self.worlds = BatchedRezzo([template] * capacity, backend=backend)
        self.worlds.done[:] = True  # every place free until a world joins
        self._members: list[BatchedWorld | None] = [None] * capacity
        self._moves = np.zeros((capacity, self.worlds.n_agents), np.int64)
        self._staged = np.zeros(capacity, bool)
        self._alive_before = np.zeros_like(self.worlds.player_alive)
        # Viewports are gathered once per state of the batch, at the first `pending` that needs them.
        self._version = 0
        self._views_version = -1

    @property
    def room(self) -> int:
        return self._members.count(None)

    def __len__(self) -> int:
        return len(self._members) - self.room

    def join(self, engine: Engine) -> BatchedWorld | None:
        if not isinstance(engine, RezzoEngine) or engine.batch_key() != self.key or not self.room:
            return None
        b = self._members.index(None)
        self.worlds.load(b, engine)
        world = self._members[b] = BatchedWorld(self, b, engine)
        self._version += 1  # its viewports are not gathered yet
        return world

    def leave(self, engine: Any) -> None:
        if not isinstance(engine, BatchedWorld) or engine.batch is not self or engine.left:
            return
        b = engine.index
        engine.detach()
        self._members[b] = None
        self.worlds.done[b] = True
        self._staged[b] = False
        self._moves[b] = 0

    def step(self) -> None:
        staged = self._staged
        if not staged.any():
            return
        worlds = self.worlds
        worlds.illegal[staged] = 0
        np.copyto(self._alive_before, worlds.player_alive)
        worlds.step(self._moves, staged)
        self._version += 1
        # Per world, as Python values: a few array calls for the batch instead of a few per world.
        ticks, done = worlds.tick.tolist(), worlds.done.tolist()
        any_illegal: list[bool] = np.any(worlds.illegal, axis=1).tolist()
        lost = self._alive_before & ~worlds.player_alive
        any_lost: list[bool] = np.any(lost, axis=1).tolist()
        for b in np.flatnonzero(staged).tolist():
            member = self._members[b]
            assert member is not None  # a world that left is never staged
            illegal = worlds.illegal[b].tolist() if any_illegal[b] else None
            losers = np.flatnonzero(lost[b]).tolist() if any_lost[b] else None
            member.stepped(illegal, losers, ticks[b], done[b])
        self._moves[staged] = 0
        staged[:] = False

    def views(self) -> tuple[np.ndarray, np.ndarray]:
        """Every world's viewports, (B, N, 169) codes (owners relative to the viewer) and damage."""
        if self._views_version != self._version:
            self.worlds.views()
            self._views_version = self._version
        return self.worlds.view_codes, self.worlds.view_damage

    def stage(self, b: int, moves: Mapping[int, Mapping[int, int]]) -> None:
        """World ``b``'s moves for the next step: seat -> {agent index: move code}."""
        row, k = self._moves[b], self.worlds.agents_per_player
        for seat, agent_moves in moves.items():
            for index, move in agent_moves.items():
                row[seat * k + index] = move
        self._staged[b] = True


class BatchedWorld(HashScheme, DebugPlacing):
    """One match's world in a `SlotBatch`, behind the engine interface: what `RezzoEngine` would say.

    `apply` is split: `stage` takes the actions and the batch's `step` resolves them (with the other
    worlds' actions), completing the events `stage` returned. Once the world has left its batch
    (`SlotBatch.leave`, when its match ends), it keeps answering with its last state.
    """

    name: ClassVar[str] = RezzoEngine.name
    default_tick_rate: ClassVar[float] = RezzoEngine.default_tick_rate
    default_budget_ms: ClassVar[float | None] = RezzoEngine.default_budget_ms
    HASH_VERSION: ClassVar[int] = HASH_VERSION

    def __init__(self, batch: SlotBatch, index: int, engine: RezzoEngine) -> None:
        self.batch, self.index = batch, index
        self.players, self.height, self.width = engine.players, engine.height, engine.width
        self.torus = False
        self.max_ticks, self.map_name = engine.max_ticks, engine.map_name
        self.agents_per_player = engine.agents_per_player
        self.config = engine.config
        self.tick = engine.tick
        self._public_config = engine.public_config()
        k = batch.worlds.agents_per_player
        present = [(a.player, a.index) for a in engine.agents()]
        #: The match's agents in the engine's order, as (player, index), and their places in the batch.
        self._present = present
        self._ids = np.array([p * k + i for p, i in present], np.intp)
        # Each seat's agents are 0..n-1 (`RezzoEngine.batch_key` admits no other): rows p*K .. p*K+n-1.
        counts = [sum(1 for p, _ in present if p == seat) for seat in range(self.players)]
        self._spans = [(seat * k, seat * k + n, list(range(n))) for seat, n in enumerate(counts)]
        self._events = Events()
        self._result: Result | None = None
        self._final: tuple[dict[str, Any], str, np.ndarray, np.ndarray, list[Agent]] | None = None

    @classmethod
    def new(cls, config: Mapping[str, Any], seed: int = 0) -> BatchedWorld:
        """A new match's world alone in a batch of its own (the server's worlds join a slot's)."""
        engine = RezzoEngine.new(config, seed)
        world = SlotBatch(engine, 1).join(engine)
        assert world is not None  # a new match has every player in
        return world

    @property
    def left(self) -> bool:
        return self._final is not None

    # ----------------------------------------------------------------- the match loop's calls
    def pending(self) -> dict[int, dict[str, Any]]:
        if self._final is not None or self._result is not None:
            return {}
        codes, damage = self.batch.views()
        worlds, b = self.batch.worlds, self.index
        codes, damage = codes[b], damage[b]
        alive = worlds.alive[b].tolist()
        out: dict[int, dict[str, Any]] = {}
        live_agents = 0
        tick = self.tick
        for seat, still_in in enumerate(worlds.player_alive[b].tolist()):
            if not still_in:
                continue
            lo, hi, indices = self._spans[seat]
            if all(alive[lo:hi]):  # the common case: a slice of rows, no gather
                agents, cells, dmg = list(indices), codes[lo:hi].tobytes(), damage[lo:hi].tobytes()
            else:
                live = [i for i in range(lo, hi) if alive[i]]
                agents, cells, dmg = [i - lo for i in live], codes[live].tobytes(), damage[live].tobytes()
            live_agents += len(agents)
            out[seat] = {"tick": tick, "agents": agents, "cells": cells, "damage": dmg}
        return out if live_agents else {}

    def decode(self, seat: int, request: Mapping[str, Any], answer: Any) -> dict[int, Any] | None:
        return decode_moves(request, answer)

    def debug_placer(
        self, seat: int, request: Mapping[str, Any]
    ) -> Callable[[int | None, list[int]], list[int] | None]:
        """Where a seat's debug cells are on the board (`viewport_placer`), as `RezzoEngine` says."""
        return viewport_placer(self.agents(), seat, request, (self.width, self.height, self.torus))

    def stage(self, actions: Mapping[int, Any]) -> Events:
        if self._final is not None:
            raise RuntimeError("this world has left its batch: its match is over")
        events = self._events = Events()
        if self._result is not None:
            return events
        player_alive = self.batch.worlds.player_alive[self.index]
        moves: dict[int, dict[int, int]] = {}
        for seat, raw in actions.items():
            if type(seat) is int and 0 <= seat < self.players and player_alive[seat]:
                if parsed := parse_moves(seat, raw, events, self.agents_per_player):
                    moves[seat] = parsed
            else:
                events.count(events.malformed, seat)
        self.batch.stage(self.index, moves)
        return events

    def apply(self, actions: Mapping[int, Any]) -> Events:
        """`stage`, then step the batch now (with whatever else is staged in it)."""
        events = self.stage(actions)
        self.batch.step()
        return events

    def stepped(self, illegal: list[int] | None, losers: list[int] | None, tick: int, done: bool) -> None:
        """The batch stepped this world: complete the staged events (``illegal``: per player, None if
        none; ``losers``: the players out in this step), and the result if it ended."""
        events = self._events
        if illegal is not None:
            for player, count in enumerate(illegal):
                if count:
                    events.illegal[player] = count
        if losers:
            events.losers = losers
        worlds, b = self.batch.worlds, self.index
        if worlds.events[b]:
            events.log.extend(worlds.events[b])
        self.tick = tick
        if done and self._result is None:
            alive = np.flatnonzero(worlds.player_alive[b]).tolist()
            # As `RezzoEngine` ends: by losses that left one player or none, else at the tick cap.
            by_losses = bool(events.losers) and len(alive) <= 1
            reason = loss_reason(len(alive)) if by_losses else cap_reason(self.max_ticks)
            ranks = {p: int(r) for p, r in enumerate(worlds.ranks[b].tolist())}
            ends = end_causes(self.players, alive, worlds.lost_causes[b], not by_losses, self.tick)
            self._result = Result(
                ranks=ranks, winner=sole_first(ranks), reason=reason, ticks=self.tick, causes=ends
            )

    def result(self) -> Result | None:
        return self._result

    # ----------------------------------------------------------------- the state, as the engine shows it
    def _agent_rows(self) -> list[list[Any]]:
        worlds, b, ids = self.batch.worlds, self.index, self._ids
        xs, ys = worlds.x[b, ids].tolist(), worlds.y[b, ids].tolist()
        facings, alive = worlds.facing[b, ids].tolist(), worlds.alive[b, ids].tolist()
        return [
            [p, i, x, y, f, a]
            for (p, i), x, y, f, a in zip(self._present, xs, ys, facings, alive, strict=True)
        ]

    def frame(self) -> dict[str, Any]:
        if self._final is not None:
            return dict(self._final[0])
        worlds, b = self.batch.worlds, self.index
        return {
            "tick": self.tick,
            "width": self.width,
            "height": self.height,
            "cells": worlds.cells(b).tobytes(),
            "damage": worlds.damage(b).tobytes(),
            "agents": self._agent_rows(),
            "alive": np.flatnonzero(worlds.player_alive[b]).tolist(),
        }

    def state_hash(self) -> str:
        """`RezzoEngine.state_hash` (scheme 2) of this world."""
        if self._final is not None:
            return self._final[1]
        frame = self.frame()
        size = (self.tick, self.width, self.height, self.players)
        return state_digest(size, (frame["cells"],), frame["damage"], frame["agents"], frame["alive"])

    def cells(self) -> np.ndarray:
        return self._final[2].copy() if self._final is not None else self.batch.worlds.cells(self.index)

    def damage(self) -> np.ndarray:
        return self._final[3].copy() if self._final is not None else self.batch.worlds.damage(self.index)

    def agents(self) -> list[Agent]:
        if self._final is not None:
            return [Agent(a.player, a.index, a.x, a.y, a.facing, a.alive) for a in self._final[4]]
        return [Agent(p, i, x, y, Facing(f), a) for p, i, x, y, f, a in self._agent_rows()]

    def public_config(self) -> dict[str, Any]:
        return dict(self._public_config)

    def detach(self) -> None:
        """Keep the last state: the batch is about to give this world's place to another."""
        if self._final is None:
            self._final = (self.frame(), self.state_hash(), self.cells(), self.damage(), self.agents())


class _RezzoBatching:
    """Rezzo's `Batching` (its plugin's ``batching``): `SlotBatch` for worlds of one `batch_key`."""

    def key(self, engine: Engine) -> Hashable | None:
        return engine.batch_key() if isinstance(engine, RezzoEngine) else None

    def batch_from(self) -> int:
        """Any number with the numba backend, `NUMPY_BATCH_FROM` without (`slot_bench`)."""
        return 1 if resolve_backend("auto") == "numba" else NUMPY_BATCH_FROM

    def new_batch(self, template: Engine, capacity: int) -> SlotBatch:
        if not isinstance(template, RezzoEngine):
            raise TypeError(f"a Rezzo batch holds Rezzo worlds, not {type(template).__name__}")
        return SlotBatch(template, capacity)


BATCHING: Batching = _RezzoBatching()
