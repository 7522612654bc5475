"""The ladder's queue service: the bots that wait, and the pass timer that pairs them.

Every ``match_every`` seconds the matchmaker (`matchmaker.match_up`, a pure seeded function) pairs
the bots that wait, by the ratings the results service keeps; each pairing is handed to the match
starter (`Starts`), which writes it down and starts it, or gives its bots back. The queue remembers
each bot's last seat and opponents for the next pairings. During a database outage it pairs nobody:
its bots play as soon as the database is back. Pending challenges (`challenges`) go first: a
challenge whose two bots wait and are free is played before the matchmaker pairs the rest. With
``pools="separate"`` (`ladder serve --pools`) connected and submitted bots meet only their own kind
(`pools.pooled_match_up`); challenges may cross pools.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Protocol

import trio

from cellarena.arena.ladder.matchmaking.challenges import challenge_pairings
from cellarena.arena.ladder.matchmaking.matchmaker import Pairing, Policy, Waiting
from cellarena.arena.ladder.matchmaking.pools import Pool, PoolMode, pool_of, pooled_match_up
from cellarena.arena.ladder.records import BotRecord, Challenge
from cellarena.arena.ladder.services.changes import DatabaseWatch
from cellarena.arena.ladder.services.counters import LadderStats
from cellarena.arena.ladder.services.lifecycle import LadderService
from cellarena.arena.ladder.services.match_results import Results
from cellarena.arena.ladder.store.ladder_store import LadderStoreError
from cellarena.arena.ratings.ladder import initial
from cellarena.server.net.connection import Connection

log = logging.getLogger("cellarena.ladder")


@dataclass
class Queued:
    """A bot in the queue: its connection, when it joined (trio's clock), and whether it follows a
    ``redirect`` (its hello's ``accepts``)."""

    conn: Connection
    bot: BotRecord
    since: float
    follows_redirect: bool = False
    #: The digest of the token the connection identified itself with (a rotation ends it).
    digest: str | None = None
    #: The version its hello said, recorded with its matches (None: none).
    version: str | None = None
    #: Whether the ladder started it (a submitted bot's launch), not its owner.
    launched: bool = False

    @property
    def pool(self) -> Pool:
        """Which pool it plays in (`pools.pool_of`): connected, submitted or house."""
        return pool_of(self.bot.kind, self.launched)


@dataclass
class BotState:
    """What the matchmaker remembers of a bot between its matches."""

    last_seat: int | None = None
    last_opponents: tuple[str, ...] = ()


class Starts(Protocol):
    """What the queue needs of the match starter: a protocol, so the queue can be tested on its own."""

    async def start(self, pairing: Pairing, seated: list[Queued]) -> None:
        """Write the pairing down and start it; give back (`MatchQueue.requeue`) the bots that wait on."""
        ...

    def busy(self, waiting: dict[str, Queued]) -> set[str]:
        """Which of the ``waiting`` bots play as many matches as they may."""
        ...


class MatchQueue(LadderService):
    """The queue of identified bots and its matchmaking passes (see the module docstring).

    ``seed`` makes the matchmaker's choices (and so the maps and match seeds) reproducible from the
    same queue. `bind` gives it the starter it hands pairings to.
    """

    name = "queue"

    def __init__(
        self,
        policy: Policy,
        results: Results,
        database: DatabaseWatch,
        *,
        every: float,
        seed: int = 0,
        stats: LadderStats | None = None,
        pending_challenges: Callable[[], list[Challenge]] | None = None,
        pools: PoolMode = "mixed",
    ) -> None:
        self.policy = policy
        #: Whether connected and submitted bots meet (``mixed``) or only their own kind (``separate``).
        self.pools = pools
        self.results = results
        self.database = database
        self.every = every
        self.seed = seed
        self.stats = stats if stats is not None else LadderStats()
        self.starter: Starts | None = None
        #: The bots waiting, by name.
        self.waiting: dict[str, Queued] = {}
        #: Bots taken from the queue for a match that is being written down and started.
        self.starting: set[str] = set()
        #: False once the ladder stops: no more pairings.
        self.open = True
        self._bots: dict[str, BotState] = {}
        self._rounds = 0
        #: The game's pending challenges, as the store had them at the last change of them.
        self.challenges: list[Challenge] = []
        #: Reads the game's pending challenges from the store (None: this queue plays none).
        self.pending_challenges = pending_challenges

    def bind(self, starter: Starts) -> None:
        self.starter = starter

    # ----------------------------------------------------------------- lifecycle
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The pass timer: match up the queue every ``every`` seconds, until cancelled."""
        assert self.starter is not None, "bind the queue to a starter first"
        await self.load_challenges()
        task_status.started()
        while True:
            await trio.sleep(self.every)
            for pairing in self.pairings():
                await self._start(pairing)

    async def graceful_shutdown(self) -> None:
        self.open = False

    # ----------------------------------------------------------------- challenges
    async def load_challenges(self) -> None:
        """Read the pending challenges (at start, and when the change log says they changed)."""
        if self.pending_challenges is None:
            return
        try:
            self.challenges = await trio.to_thread.run_sync(self.pending_challenges)
        except LadderStoreError as exc:
            log.error("cannot read the pending challenges: %s", exc)

    def forget_challenge(self, challenge: int) -> None:
        """A challenge played (or gone meanwhile): not offered again."""
        self.challenges = [c for c in self.challenges if c.id != challenge]

    # ----------------------------------------------------------------- the queue
    def add(self, queued: Queued) -> None:
        self.waiting[queued.bot.name] = queued
        log.info("%s (%s) joins the queue (%d waiting)", queued.bot.name, queued.conn.peer, len(self.waiting))

    def left(self, conn: Connection) -> None:
        """``conn`` closed: its bot waits no longer."""
        for name, queued in list(self.waiting.items()):
            if queued.conn is conn:
                del self.waiting[name]

    def requeue(self, queued: list[Queued]) -> None:
        for q in queued:
            self.waiting[q.bot.name] = q

    def note_seats(self, bots: tuple[BotRecord, ...]) -> None:
        """Remember each bot's seat and opponents, for the matchmaker's next pairings."""
        names = [b.name for b in bots]
        for i, b in enumerate(bots):
            self._bots[b.name] = BotState(last_seat=i, last_opponents=tuple(n for n in names if n != b.name))

    def pairings(self) -> list[Pairing]:
        """One matchmaking pass over the bots that wait (none while stopping or the database is down)."""
        if len(self.waiting) < self.policy.seats or not self.database.up or not self.open:
            return []  # during an outage the queue waits: its bots play as soon as the database is back
        assert self.starter is not None
        now = trio.current_time()
        busy = self.starter.busy(self.waiting)
        self._rounds += 1
        round_seed = hash((self.seed, self._rounds)) & 0x7FFFFFFF
        challenged = challenge_pairings(
            self.challenges, [n for n in self.waiting if n not in busy], self.policy, round_seed
        )
        busy = busy | {name for pairing in challenged for name in pairing.bots}
        ratings = self.results.ratings
        queue = [
            Waiting(
                bot=name,
                since=q.since,
                rating=ratings.get(name, initial()),
                last_seat=self._bots.get(name, BotState()).last_seat,
                last_opponents=self._bots.get(name, BotState()).last_opponents,
            )
            for name, q in self.waiting.items()
            if name not in busy
        ]
        if len(queue) < self.policy.seats:
            return challenged
        cpu = time.thread_time()
        pools = {w.bot: self.waiting[w.bot].pool for w in queue}
        pairings = pooled_match_up(queue, pools, now, self.policy, round_seed, self.pools)
        self.stats.matchmaking_cpu += time.thread_time() - cpu
        self.stats.matchmaking_passes += 1
        return challenged + pairings

    async def _start(self, pairing: Pairing) -> None:
        assert self.starter is not None
        self.starting.update(pairing.bots)
        try:
            seated = [self.waiting.pop(name) for name in pairing.bots if name in self.waiting]
            now = trio.current_time()
            self.stats.waits.extend(max(0.0, now - q.since) for q in seated)
            if len(seated) != len(pairing.bots):  # cannot happen: the pairing came from this queue
                self.requeue(seated)
                return
            if pairing.challenge is not None:
                self.forget_challenge(pairing.challenge)
            await self.starter.start(pairing, seated)
        finally:
            self.starting.difference_update(pairing.bots)
