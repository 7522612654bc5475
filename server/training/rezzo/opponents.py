"""Opponents for `RezzoVectorEnv`: policies over batched observations that play the seats the learner
does not.

An opponent is any callable ``opponent(observations, seats) -> moves``: ``observations`` is an
(M, 2, 13, 13) uint8 array, one row per opponent agent of every world (the learner's observation
layout), ``seats`` an `OpponentSeats` saying whose row is which, and the answer M move codes. So a
trained policy is an opponent as it is (`policy_opponent`), and so is a frozen copy of the learner
(`snapshot`, for self-play). `BotOpponent` plays any SDK bot class (`cellarena.sdk.opponents`' random
bot, or the example bots' classes loaded from their files) through its own ``on_tick``, one bot per
world and seat, with the `View` a match would give it. `OpponentMix` draws one of several opponents
for each world at the start of each episode (a pool of snapshots, or several bots).
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np

from cellarena.sdk.bot import MatchInfo
from cellarena.sdk.games.rezzo import Move, RezzoBot, View, Viewport, moves_for


@dataclass(frozen=True)
class OpponentSeats:
    """Which world, seat and agent each row of an opponent's batch is; all arrays have one row per
    opponent agent, in the same order every call (world, then seat, then agent index).

    ``alive``: the agent is in play (a dead agent's row holds a stale view; its move is ignored).
    ``tick``: its world's tick, as a bot's `View` has it. ``started``: its world began a new episode
    since the last call (an opponent with memory forgets it there). ``config``: the effective options
    of each world's current episode (``map``, ``max_ticks``, ``own_base_counts``...), by world.
    """

    world: np.ndarray
    seat: np.ndarray
    agent: np.ndarray
    alive: np.ndarray
    tick: np.ndarray
    started: np.ndarray
    players: int
    config: Sequence[dict[str, Any]]

    def rows(self, mask: np.ndarray) -> OpponentSeats:
        """The seats of the rows in ``mask`` only (for an opponent that plays some worlds)."""
        return OpponentSeats(
            self.world[mask],
            self.seat[mask],
            self.agent[mask],
            self.alive[mask],
            self.tick[mask],
            self.started[mask],
            self.players,
            self.config,
        )


class Opponent(Protocol):
    """A policy for the seats the learner does not play: one move code per row."""

    def __call__(self, observations: np.ndarray, seats: OpponentSeats) -> np.ndarray: ...


def policy_opponent(policy: Callable[[np.ndarray], Any]) -> Opponent:
    """An opponent that asks ``policy`` (observations -> moves, as the learner acts) for every row."""

    def play(observations: np.ndarray, seats: OpponentSeats) -> np.ndarray:
        return np.asarray(policy(observations), np.int64).reshape(len(observations))

    return play


def snapshot(policy: Callable[[np.ndarray], Any]) -> Opponent:
    """Self-play: an opponent playing a frozen deep copy of ``policy`` as it is now; later training
    of the learner does not change it."""
    return policy_opponent(copy.deepcopy(policy))


class BotOpponent:
    """Plays an SDK bot class (a `RezzoBot` subclass) in every opponent seat of every world.

    Each world and seat gets its own bot, made afresh at each episode's start and told the match by
    ``on_start`` (its ``info``, as the SDK's bot loop sets it); every tick it gets the `View` of its
    live agents, built from the same bytes the server would send, and its answer is read as the
    server reads it (`moves_for`). ``name`` is what replays call it.
    """

    def __init__(self, bot: Callable[[], RezzoBot], name: str | None = None) -> None:
        self.factory = bot
        self.name: str = name or str(getattr(bot, "__name__", "bot"))
        self._bots: dict[tuple[int, int], RezzoBot] = {}

    def __call__(self, observations: np.ndarray, seats: OpponentSeats) -> np.ndarray:
        moves = np.zeros(len(observations), np.int64)
        groups: dict[tuple[int, int], list[int]] = {}
        for row, (w, s) in enumerate(zip(seats.world.tolist(), seats.seat.tolist(), strict=True)):
            groups.setdefault((w, s), []).append(row)
        for (w, s), rows in groups.items():
            bot = self._bots.get((w, s))
            if bot is None or seats.started[rows[0]]:
                bot = self._bots[w, s] = self._start(w, s, seats)
            live = [r for r in rows if seats.alive[r]]
            if not live:
                continue
            viewports = [Viewport(observations[r, 0].tobytes(), observations[r, 1].tobytes()) for r in live]
            view = View(int(seats.tick[live[0]]), [int(seats.agent[r]) for r in live], viewports)
            for r, code in zip(live, moves_for(bot.on_tick(view), len(live)), strict=True):
                moves[r] = code
        return moves

    def _start(self, world: int, seat: int, seats: OpponentSeats) -> RezzoBot:
        bot = self.factory()
        names = tuple(str(self.name) if p == seat else f"seat {p}" for p in range(seats.players))
        bot.info = MatchInfo(
            seat=seat, players=seats.players, names=names, game="rezzo", config=dict(seats.config[world])
        )
        bot.on_start(bot.info)
        return bot


class OpponentMix:
    """One of ``opponents`` per world, drawn (with ``weights``) at each episode's start from ``seed``.

    `add` puts another one in the pool, e.g. a `snapshot` of the learner every so often: a pool of
    frozen past selves, as self-play wants. ``limit`` keeps the newest that many added ones (those
    given at construction stay).
    """

    def __init__(
        self,
        opponents: Sequence[Opponent],
        weights: Sequence[float] | None = None,
        *,
        seed: int = 0,
        limit: int = 8,
    ) -> None:
        if not opponents:
            raise ValueError("an OpponentMix needs at least one opponent")
        if weights is not None and len(weights) != len(opponents):
            raise ValueError(f"{len(weights)} weights for {len(opponents)} opponents")
        self.opponents = list(opponents)
        self.weights = list(weights) if weights is not None else [1.0] * len(opponents)
        self.fixed = len(opponents)
        self.limit = limit
        self.rng = np.random.default_rng(seed)
        #: Per world, the index of the opponent it plays this episode.
        self.choice: dict[int, int] = {}

    def add(self, opponent: Opponent, weight: float = 1.0) -> None:
        self.opponents.append(opponent)
        self.weights.append(weight)
        if len(self.opponents) - self.fixed > self.limit:
            del self.opponents[self.fixed], self.weights[self.fixed]
            self.choice = {w: min(c, len(self.opponents) - 1) for w, c in self.choice.items()}

    def __call__(self, observations: np.ndarray, seats: OpponentSeats) -> np.ndarray:
        p = np.asarray(self.weights, float)
        p /= p.sum()
        for w in np.unique(seats.world[seats.started]).tolist():
            self.choice[w] = int(self.rng.choice(len(self.opponents), p=p))
        for w in np.unique(seats.world).tolist():
            self.choice.setdefault(w, int(self.rng.choice(len(self.opponents), p=p)))
        picked = np.array([self.choice[w] for w in seats.world.tolist()], np.int64)
        moves = np.full(len(observations), int(Move.NOOP), np.int64)
        for i in np.unique(picked).tolist():
            mask = picked == i
            moves[mask] = self.opponents[i](observations[mask], seats.rows(mask))
        return moves
