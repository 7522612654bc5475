"""The ladder's results and ratings service: every match that ends is written down, one at a time.

Results go to the store in one task, in the order the matches ended (ratings are a function of the
results in that order). A result the database cannot take (an outage) waits on disk (`ResultSpool`)
and is written when the database answers again; results after it wait behind it. A match that ends
without one is voided; a void the database refused is done again when it answers. The service keeps
each bot's current rating, as the store had it after the last result, for the queue's pairings and
the house bots.

Start-up (`initialize`, in this order): claim the database as its game's one server (a server per game
may share one database); refuse a database whose
match ids stop below the replays beside it (`replay_files.check_replays`); write the results a
previous run kept on disk; then void the game's matches a previous run left under way (a SIGKILL, a
power cut): they have no result and change no rating. On `shutdown` the results already handed to it are
written (or kept on disk) before the process goes.
"""

from __future__ import annotations

import functools
import logging
import math
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from cellarena.arena.ladder.errors import MatchNotRunningError
from cellarena.arena.ladder.records import BotRecord, SeatResult
from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.services.changes import DatabaseWatch
from cellarena.arena.ladder.services.lifecycle import LadderService
from cellarena.arena.ladder.services.spool import ResultSpool
from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError
from cellarena.arena.ladder.store.replay_files import check_replays
from cellarena.arena.ratings import Rating
from cellarena.server.games.causes import with_sentences
from cellarena.server.play.match import MatchOutcome

log = logging.getLogger("cellarena.ladder")

#: Seconds between two reads of the whole standings and bot list (`load_ratings`).
RELOAD_EVERY = 10.0


@dataclass(frozen=True)
class Ended:
    """A ladder match that ended with a result, here or on the cluster, to be written down."""

    ladder_id: int
    bots: tuple[BotRecord, ...]
    outcome: MatchOutcome
    replay: str | None


def prepare(
    store: LadderStore,
    replay_dir: Path | None,
    spool: ResultSpool | None,
    notify: Callable[[str], None] = lambda text: None,
    *,
    game: str | None = None,
    legacy_spool: ResultSpool | None = None,
) -> None:
    """What a ladder server does to its store before it serves (the module docstring's order), as the
    server of ``game`` (None: of every game); LadderStoreError when it must not serve, with nothing
    voided. ``legacy_spool``: the spool folder of a ladder from before servers per game, whose results
    of ``game``'s matches are written first."""
    store.claim_server(game)
    if replay_dir is not None:
        check_replays(store, replay_dir)
    for kept, only in ((legacy_spool, game), (spool, None)):
        if kept is None or not kept.pending():
            continue
        try:
            written = kept.flush(store, game=only)
        except LadderStoreError as exc:
            raise LadderStoreError(
                f"{exc}; results of matches played by the last run wait in {kept.folder} and must be "
                "written before anything is voided: start again once the database takes writes"
            ) from None
        if written:
            notify(f"wrote {written} result(s) a previous run kept on disk")
    voided = store.void_running(game=game)
    if voided:
        notify(f"voided {len(voided)} match(es) a previous run left under way")


class Results(LadderService):
    """Writes results and voids to the store and keeps the ratings (see the module docstring)."""

    name = "results"

    def __init__(
        self,
        store: LadderStore,
        game: str,
        database: DatabaseWatch,
        *,
        spool: ResultSpool | None = None,
        legacy_spool: ResultSpool | None = None,
        replay_dir: Path | None = None,
        notify: Callable[[str], None] = lambda text: None,
    ) -> None:
        self.store = store
        self.game = game
        self.database = database
        #: Where results wait that the database could not take (None: such a result is lost).
        self.spool = spool
        #: The spool folder of a ladder from before servers per game, flushed at start (`prepare`).
        self.legacy_spool = legacy_spool
        self.replay_dir = replay_dir
        self.notify = notify
        #: Each bot's current rating, as the store had it after the last result.
        self.ratings: dict[str, Rating] = {}
        self._house: list[BotRecord] = []
        self._loaded_at = -math.inf
        self._results: tuple[trio.MemorySendChannel[Ended], trio.MemoryReceiveChannel[Ended]]
        self._results = trio.open_memory_channel(math.inf)
        #: Matches to void that the database could not take (an outage): ladder id -> why.
        self._unvoided: dict[int, str] = {}

    # ----------------------------------------------------------------- lifecycle
    async def initialize(self) -> None:
        await trio.to_thread.run_sync(
            functools.partial(
                prepare,
                self.store,
                self.replay_dir,
                self.spool,
                self.notify,
                game=self.game,
                legacy_spool=self.legacy_spool,
            )
        )

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Load the ratings (the queue pairs by them), then write results as they come."""
        await self.load_ratings()
        task_status.started()
        async for ended in self._results[1]:
            await self._write(ended)

    async def shutdown(self) -> None:
        """Write the results handed over but not yet written (kept on disk if the database is down)."""
        while True:
            try:
                ended = self._results[1].receive_nowait()
            except trio.WouldBlock:
                return
            await self._write(ended)

    # ----------------------------------------------------------------- results
    def ended(self, ended: Ended) -> None:
        """A match ended with a result: written in `run`'s task, after those that ended before it."""
        self._results[0].send_nowait(ended)

    async def _write(self, ended: Ended) -> None:
        outcome = ended.outcome
        said = with_sentences(outcome.result.causes, outcome.names)
        seats = [
            SeatResult(
                rank=outcome.result.ranks[i],
                late=outcome.late[i],
                invalid=outcome.invalid[i],
                illegal=outcome.illegal[i],
                forfeit=i in outcome.forfeits,
                cause=said.get(i),
                bank_drawn_ms=None if outcome.bank_drawn_ms is None else outcome.bank_drawn_ms[i],
            )
            for i in range(len(ended.bots))
        ]
        about: dict[str, Any] = {
            "reason": outcome.result.reason,
            "ticks": outcome.ticks,
            "replay": ended.replay,
        }
        if self.spool is not None and self.spool.pending():
            # Results are counted in the order matches ended: this one waits behind those on disk.
            await self._keep(ended.ladder_id, seats, about, "results before it wait on disk")
            if self.database.up:
                await self.flush_spool()
            return
        try:
            finish = functools.partial(
                self.store.finish_match, ended.ladder_id, seats, **about, settle=settle
            )
            record = await trio.to_thread.run_sync(finish)
        except MatchNotRunningError as exc:
            log.error("the result of ladder match %d does not count: %s", ended.ladder_id, exc)
            return
        except LadderStoreError as exc:
            await self._keep(ended.ladder_id, seats, about, str(exc))
            return
        # The new ratings come with the result; the whole table only now and then (house bots
        # added or revoked meanwhile), not once per result.
        for seat in record.seats:
            if seat.after is not None:
                self.ratings[seat.bot] = seat.after
        if trio.current_time() - self._loaded_at >= RELOAD_EVERY:
            await self.load_ratings()

    async def _keep(self, ladder_id: int, seats: list[SeatResult], about: dict[str, Any], why: str) -> None:
        """Keep a result the database cannot take now on disk (`ResultSpool`), to be written later."""
        if self.spool is None:
            log.error("the result of ladder match %d is lost: %s", ladder_id, why)
            return
        put = functools.partial(self.spool.put, ladder_id, seats, **about)
        try:
            path = await trio.to_thread.run_sync(put)
        except OSError as exc:
            log.error(
                "the result of ladder match %d is lost: %s; and it cannot be kept on disk either (%s)",
                ladder_id,
                why,
                exc,
            )
            return
        log.warning(
            "ladder match %d: result kept in %s until the database takes it (%s)", ladder_id, path, why
        )

    async def flush_spool(self) -> None:
        if self.spool is None:
            return
        try:
            written = await trio.to_thread.run_sync(self.spool.flush, self.store)
        except LadderStoreError as exc:
            log.error("cannot write the results kept on disk yet: %s", exc)
            return
        if written:
            await self.load_ratings()

    async def on_back(self) -> None:
        """The database answers again: write the results kept on disk, do the voids it refused, and
        read the ratings afresh."""
        await self.flush_spool()
        for ladder_id, reason in list(self._unvoided.items()):
            await self.void(ladder_id, reason)
        await self.load_ratings()

    # ----------------------------------------------------------------- voids
    async def void(self, ladder_id: int, reason: str) -> None:
        """Void a match that has no result (it changes no rating)."""
        try:
            await trio.to_thread.run_sync(self.store.void_match, ladder_id, reason)
        except MatchNotRunningError:
            pass  # finished or voided already: nothing left to do
        except LadderStoreError as exc:
            # Tried again when the database answers after an outage (`on_back`), else at the next start.
            self._unvoided[ladder_id] = reason
            log.error("cannot void ladder match %d (%s); it is voided later", ladder_id, exc)
        else:
            self._unvoided.pop(ladder_id, None)

    # ----------------------------------------------------------------- ratings
    async def load_ratings(self) -> None:
        """The ratings and the house bots, as the store has them now."""
        self._loaded_at = trio.current_time()
        try:
            table = await trio.to_thread.run_sync(self.store.standings, self.game)
            bots = await trio.to_thread.run_sync(self.store.list_bots, self.game)
        except LadderStoreError as exc:
            log.error("cannot read the ratings: %s", exc)
            return
        self.ratings = {s.bot: Rating(s.mu, s.sigma) for s in table}
        # A paused or banned house bot is not started: it would be refused at its hello.
        self._house = [b for b in bots if b.house_command is not None and b.active and b.stopped is None]

    def house_bots(self) -> list[BotRecord]:
        """The game's house bots (`house`), as of the last result."""
        return list(self._house)
