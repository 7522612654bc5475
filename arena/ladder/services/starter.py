"""The ladder's match starter service: a pairing is written down, then played here or on the cluster.

Each pairing is written to the store as a running match before it starts. Where it is played is the
starter's one choice: in this process's lobby (`MatchHost.start_match`, with a replay writer for that
ladder match), or, when every bot of the pairing follows redirects and a hand-off is given
(`HandsOff`), on a cluster's worker or a local worker process, whose bots are sent there with seat
tokens of that match alone and whose result and replay come back here: the queue, admission and
results do not know where a match is played.

The starter owns the matches under way: it gives a bot that comes back within the grace its seat
again, hands each result to the results service, voids the matches that left without one, and, as
the ladder stops (`shutdown`), voids those it cuts short, here and on the cluster.
"""

from __future__ import annotations

import collections
import functools
import logging
import secrets
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, Protocol, runtime_checkable

import trio

from cellarena.arena.ladder.errors import ChallengeRefusedError, SeatRefusedError
from cellarena.arena.ladder.hosting.cluster_hand_off import HandOffError, Hosting
from cellarena.arena.ladder.hosting.seat_launch import LaunchingMatch, SeatLaunch
from cellarena.arena.ladder.matchmaking.matchmaker import Pairing
from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.services.counters import LadderStats
from cellarena.arena.ladder.services.lifecycle import LadderService
from cellarena.arena.ladder.services.live_matches import Live, LiveMatches
from cellarena.arena.ladder.services.match_results import Ended, Results
from cellarena.arena.ladder.services.queue import MatchQueue, Queued
from cellarena.arena.ladder.services.revocations import revoked_message, rotated_message
from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError
from cellarena.arena.ladder.store.replay_files import replay_path, write_new
from cellarena.sdk import protocol
from cellarena.server.games.base import Engine
from cellarena.server.net.connection import Connection
from cellarena.server.play.hosted import HostedMatch, HostedResult, token_digest
from cellarena.server.play.match import ExplainGone, Match, MatchOutcome, Recorder
from cellarena.server.play.seating import MatchHost, WaitingRoom
from cellarena.server.replay import ReplayWriter

log = logging.getLogger("cellarena.ladder")


class HandsOff(Protocol):
    """Where the starter can send a match to be played away from this process: Dask's cluster
    (`cluster_hand_off.HandOff`) and local worker processes (`worker_pool.LocalWorkers`), unseen by the
    queue, admission and results. `start` says where the match listens for its bots (`HandOffError`
    if nobody hosts it), `result` waits for its end, `cancel` gives it up."""

    async def start(self, match: HostedMatch) -> Hosting: ...

    async def result(self, ladder_id: int) -> HostedResult: ...

    def cancel(self, ladder_id: int) -> None: ...


@runtime_checkable
class Relays(Protocol):
    """A `HandsOff` whose matches spectators of the ladder's port can watch (`LocalWorkers`): `relay`
    passes match ``ladder_id``'s spectator stream to ``conn`` until it ends (False: it ended before
    it started, and ``conn`` is untouched)."""

    async def relay(self, ladder_id: int, conn: Connection) -> bool: ...


class MatchStarter(LadderService):
    """Writes pairings down and starts them, here or on the cluster (see the module docstring).

    ``config_for(map)`` is the engine config of a match on that map of the pool. `bind` gives it the
    lobby it plays matches in (`LadderSeating.bind` does, as the lobby binds its seating).
    """

    name = "match starter"

    def __init__(
        self,
        store: LadderStore,
        game: str,
        config_for: Callable[[str | None], dict[str, Any]],
        queue: MatchQueue,
        results: Results,
        *,
        every: float,
        hand_off: HandsOff | None = None,
        replay_dir: Path | None = None,
        stats: LadderStats | None = None,
        on_match: Callable[[int, Match], None] | None = None,
    ) -> None:
        self.store = store
        self.game = game
        self.config_for = config_for
        self.queue = queue
        self.results = results
        #: How often matches that left without a result are looked for (the queue's pace).
        self.every = every
        #: Plays matches on a cluster when every bot of a pairing follows redirects; None: all here.
        self.hand_off = hand_off
        #: Where replays are written, of matches here and on the cluster (None: none).
        self.replay_dir = replay_dir
        self.stats = stats if stats is not None else LadderStats()
        #: Called with (ladder match id, match) as each match starts here (logs, tests).
        self.on_match = on_match
        self.lobby: MatchHost | None = None
        #: Why a house bot's connection went, by its name (`HouseBots.explain`, wired by
        #: `run_ladder`); None: house bots that leave are ``disconnected`` like any other.
        self.explain_house: Callable[[str], Awaitable[dict[str, Any] | None]] | None = None
        #: Whether the ladder started bot NAME's process itself as a match starts (a submitted bot's
        #: live version, `submitted_bots`), which `explain_house` then explains as a house bot's.
        self.started_here: Callable[[str], bool] | None = None
        #: What a worker starts for bot NAME in match ID, a bot that cannot follow redirects (`seat_launch`).
        self.launch_there: Callable[[str, int], SeatLaunch | None] | None = None
        #: Matches under way here, by their match in the lobby, and their seats.
        self.live = LiveMatches()
        #: Matches under way on the cluster: ladder id -> bots by seat.
        self.remote: dict[int, tuple[BotRecord, ...]] = {}
        #: Ladder match id -> its replay file, for those that have one.
        self.replays: dict[int, str] = {}
        #: False once the ladder stops: pairings still handed over are given back.
        self.open = True
        #: Spectators waiting for the next match, here or relayed from a worker (only with `Relays`).
        self.watchers = WaitingRoom(state=protocol.State.WATCHING_SOON)
        self._nursery: trio.Nursery | None = None

    def bind(self, lobby: MatchHost) -> None:
        self.lobby = lobby

    # ----------------------------------------------------------------- lifecycle
    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Hold the nursery of matches handed to the cluster, and void the matches that left the
        lobby without a result, every ``every`` seconds, until cancelled."""
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            task_status.started()
            while True:
                await trio.sleep(self.every)
                await self.void_vanished()

    async def graceful_shutdown(self) -> None:
        self.open = False

    async def shutdown(self) -> None:
        await self.void_unfinished("the ladder stopped while it was under way")

    # ----------------------------------------------------------------- starting
    async def start(self, pairing: Pairing, seated: list[Queued]) -> None:
        """Write ``pairing`` down as a running match, then play it here or on the cluster; bots that
        cannot play it now are told why, or put back in the queue."""
        if not self.open:
            self.queue.requeue(seated)
            return
        bots = tuple(q.bot for q in seated)
        begin = functools.partial(
            self.store.begin_match,
            self.game,
            pairing.map,
            pairing.seed,
            [b.id for b in bots],
            [q.digest for q in seated],
            versions=[q.version for q in seated],
            challenge=pairing.challenge,
        )
        try:
            ladder_id = await trio.to_thread.run_sync(begin)
        except ChallengeRefusedError as exc:
            # Cancelled or played meanwhile (the opponent began refusing challenges): its bots wait on.
            log.warning("ladder: challenge %s is not played: %s", pairing.challenge, exc)
            self.queue.requeue(seated)
            return
        except SeatRefusedError as exc:
            # The store knows better than the queue (a revoke or rotation not yet seen here): that bot
            # goes, the others wait on. Never the process: one bot's refusal is no reason to stop.
            log.warning("ladder: a pairing is dropped: %s", exc)
            self._refused(exc, seated)
            return
        except LadderStoreError as exc:
            log.error("cannot record a new match (%s); its bots are told to come back later", exc)
            for q in seated:
                q.conn.fail(protocol.SHUTDOWN, "the ladder cannot record matches now; come back later")
            return
        if pairing.challenge is not None:
            self.stats.challenges_played += 1
        gone = [q for q in seated if q.conn.closed]
        if gone:  # a bot left while the match was written down: the others wait on
            await self.results.void(ladder_id, f"{', '.join(q.bot.name for q in gone)} left before the start")
            self.queue.requeue([q for q in seated if not q.conn.closed])
            return
        if self.hand_off is not None and all(q.follows_redirect or _launchable(self, q) for q in seated):
            assert self._nursery is not None
            self.remote[ladder_id] = bots
            self.queue.note_seats(bots)
            self._nursery.start_soon(self._play_there, ladder_id, pairing, seated)
        else:
            self._play_here(ladder_id, pairing, seated)

    def _refused(self, exc: SeatRefusedError, seated: list[Queued]) -> None:
        """End the refused bot's connection (saying why), and put the rest of its pairing back."""
        back = []
        for q in seated:
            if q.bot.name != exc.bot:
                back.append(q)
            elif exc.why == "game":
                q.conn.fail(protocol.BAD_HELLO, f"{q.bot.name} no longer plays {self.game} here")
            elif exc.why == "rotated":
                q.conn.fail(protocol.REVOKED, rotated_message(q.bot.name))
            elif exc.why == "paused":
                q.conn.fail(protocol.PAUSED, str(exc))
            else:
                q.conn.fail(protocol.REVOKED, revoked_message(q.bot.name))
        self.queue.requeue([q for q in back if not q.conn.closed])

    def _recorder(self, ladder_id: int) -> Callable[[int, Engine, list[str], int], Recorder | None] | None:
        """The replay writer's maker for ladder match ``ladder_id`` (None: this ladder keeps none)."""
        if self.replay_dir is None:
            return None
        path = replay_path(self.replay_dir, ladder_id)

        def recorder(number: int, engine: Engine, names: list[str], seed: int) -> Recorder | None:
            # Exclusive: a replay of another ladder under that name stays (the lobby logs it, and the
            # match is played without one).
            writer = ReplayWriter(path, engine, seed=seed, names=names, exclusive=True, events=True)
            self.replays[ladder_id] = str(path)
            return writer

        return recorder

    def _play_here(self, ladder_id: int, pairing: Pairing, seated: list[Queued]) -> None:
        """Start the match in this process's lobby."""
        assert self.lobby is not None
        bots = tuple(q.bot for q in seated)
        names = [b.name for b in bots]
        match = self.lobby.start_match(
            [q.conn for q in seated],
            names,
            engine_config=self.config_for(pairing.map),
            seed=pairing.seed,
            recorder=self._recorder(ladder_id),
            meta={"ladder match": ladder_id},
            explain_gone=self._explain_gone(bots),
        )
        if match is None:  # the lobby logged why and told the bots
            self._nursery_void(ladder_id, "the match could not start (an internal error)")
            return
        for spectator in self.watchers.take():
            match.add_spectator(spectator)
        self.live[match] = Live(match, ladder_id, bots, [q.digest for q in seated])
        self.stats.matches_started += 1
        self.queue.note_seats(bots)
        log.info("ladder match %d (%s): %s", ladder_id, pairing.map or "default map", " vs ".join(names))
        if self.on_match is not None:
            self.on_match(ladder_id, match)

    def _explain_gone(self, bots: tuple[BotRecord, ...]) -> ExplainGone | None:
        """What a match of ``bots`` asks at its end why a seat's connection went: for a house bot,
        which the ladder started, `explain_house` (``exited``, ``limit``); for an outside bot,
        nothing (it stays ``disconnected``). None when no seat is a house bot's."""
        explain = self.explain_house
        here = self.started_here
        ours = [b.kind == "house" or (here is not None and here(b.name)) for b in bots]
        if explain is None or not any(ours):
            return None

        async def explain_gone(seat: int) -> dict[str, Any] | None:
            if not 0 <= seat < len(bots) or not ours[seat]:
                return None
            return await explain(bots[seat].name)

        return explain_gone

    def _nursery_void(self, ladder_id: int, reason: str) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(self.results.void, ladder_id, reason)

    async def _play_there(self, ladder_id: int, pairing: Pairing, seated: list[Queued]) -> None:
        """Have the cluster host the match, send its bots there, and hand its result to the recorder.

        If no worker takes it, the match is played here after all: the bots are still connected."""
        assert self.hand_off is not None and self.lobby is not None
        bots = tuple(q.bot for q in seated)
        seat_tokens = [secrets.token_urlsafe(32) for _ in bots]
        try:
            job = await _job(self, ladder_id, pairing, seated, seat_tokens)
            where = await self.hand_off.start(job)
        except HandOffError as exc:
            del self.remote[ladder_id]
            if any(q.conn.closed for q in seated):
                await self.results.void(ladder_id, f"no worker hosted it ({exc}) and a bot left meanwhile")
                self.queue.requeue([q for q in seated if not q.conn.closed])
                return
            log.warning("ladder match %d: no worker hosted it (%s); playing it here", ladder_id, exc)
            self._play_here(ladder_id, pairing, seated)
            return
        self.stats.matches_started += 1
        log.info(
            "ladder match %d (%s): %s, at %s:%d",
            ladder_id,
            pairing.map or "default map",
            " vs ".join(b.name for b in bots),
            where.host,
            where.port,
        )
        for q, token, launch in zip(seated, seat_tokens, job.launches, strict=True):
            if _hand_over(q.conn, where, token, launch):
                self._nursery_close(q.conn)
        for spectator in self.watchers.take():
            self._nursery_relay(ladder_id, spectator)
        try:
            result = await self.hand_off.result(ladder_id)
        except HandOffError as exc:
            self.remote.pop(ladder_id, None)
            await self.results.void(ladder_id, str(exc))
            return
        self.remote.pop(ladder_id, None)
        if result.outcome is None or not result.anybody_came:
            why = "no bot reached the match host" if not result.anybody_came else "it ended without a result"
            await self.results.void(ladder_id, why)
            return
        replay = await _write_replay(self.replay_dir, ladder_id, result.replay)
        self.stats.count_end(result.outcome)
        self.results.ended(Ended(ladder_id, bots, result.outcome, replay))

    def _nursery_close(self, conn: Connection) -> None:
        """Close ``conn`` once its last frames (the redirect) are out, or after a second."""

        async def close() -> None:
            await conn.flush(1.0)
            conn.close("redirected")

        assert self._nursery is not None
        self._nursery.start_soon(close)

    # ----------------------------------------------------------------- spectators
    def spectate(self, conn: Connection, hello: dict[str, Any]) -> bool:
        """A spectator's hello that names no match, when matches are played in workers that relay:
        True if the starter sees to it (the newest match is in a worker, or none is under way and
        it waits for the next, wherever that is played); False leaves it to the lobby (the newest
        match is here, or it names a match, which means one here)."""
        if not isinstance(self.hand_off, Relays) or hello.get("match") is not None:
            return False
        # A match here that is ending takes no spectator (`Lobby.watch`): it waits for the next.
        newest_here = max((lv.ladder_id for lv in self.live.values() if not lv.match.closing), default=0)
        newest_there = max(self.remote, default=0)
        if newest_here > newest_there:
            return False
        if newest_there:
            self._nursery_relay(newest_there, conn)
        else:
            self.watchers.add(conn)
        return True

    def _nursery_relay(self, ladder_id: int, conn: Connection) -> None:
        """Relay match ``ladder_id`` to spectator ``conn``; if it ended before it started, ``conn``
        waits for the next match."""
        assert isinstance(self.hand_off, Relays) and self._nursery is not None
        relays = self.hand_off

        async def relay() -> None:
            if not await relays.relay(ladder_id, conn) and not conn.closed:
                self.watchers.add(conn)

        self._nursery.start_soon(relay)

    # ----------------------------------------------------------------- ending
    def record(self, outcome: MatchOutcome) -> None:
        """The lobby's ``on_result``: a ladder match ended with a result, handed to the results service.

        Called right as the match leaves the lobby's running matches, with no checkpoint between,
        so a match that left without coming here ended without a result (`void_vanished`)."""
        live = next((lv for lv in self.live.values() if lv.match.number == outcome.number), None)
        self.stats.count_end(outcome)
        if live is not None:
            del self.live[live.match]
            self.results.ended(Ended(live.ladder_id, live.bots, outcome, self.replays.get(live.ladder_id)))

    async def void_vanished(self) -> None:
        """Void the matches that left the lobby without a result (cut short, or an internal error)."""
        if self.lobby is None:
            return
        running = set(self.lobby.running)
        for match in [m for m in self.live if m not in running]:
            live = self.live.pop(match)
            await self.results.void(live.ladder_id, "the match ended without a result")

    async def void_unfinished(self, reason: str) -> None:
        """Void every match still under way (the ladder stops), here and on the cluster."""
        for match in list(self.live):
            await self.results.void(self.live.pop(match).ladder_id, reason)
        for ladder_id in list(self.remote):
            del self.remote[ladder_id]
            if self.hand_off is not None:
                self.hand_off.cancel(ladder_id)
            await self.results.void(ladder_id, reason)

    def busy(self, waiting: dict[str, Queued]) -> set[str]:
        """Bots playing as many matches as they may (only a bot back from a match on the cluster
        whose result has not come back yet can be in the queue and here)."""
        if not self.remote:
            return set()
        counts = collections.Counter(b.name for bots in self._under_way() for b in bots)
        return {q.bot.name for q in waiting.values() if counts[q.bot.name] >= q.bot.max_matches}

    def _under_way(self) -> list[tuple[BotRecord, ...]]:
        """The bots of every match under way, here or on the cluster."""
        return [live.bots for live in self.live.values()] + list(self.remote.values())

    def playing(self) -> set[str]:
        """The bots in a match under way."""
        return {b.name for bots in self._under_way() for b in bots}


def _launchable(starter: MatchStarter, q: Queued) -> bool:
    """Whether a worker can start ``q``'s bot itself (the ladder started it here: `started_here`)."""
    here = starter.started_here
    return starter.launch_there is not None and here is not None and here(q.bot.name)


async def _job(
    starter: MatchStarter, ladder_id: int, pairing: Pairing, seated: list[Queued], seat_tokens: list[str]
) -> LaunchingMatch:
    """The job of a match handed off: its seats' token digests, and what its worker starts itself for
    a bot that cannot follow a redirect (`launch_there`, read in a thread); `HandOffError` if a bot
    can do neither."""
    assert starter.lobby is not None
    launches: list[SeatLaunch | None] = []
    for q in seated:
        launch = None
        if not q.follows_redirect and starter.launch_there is not None:
            launch = await trio.to_thread.run_sync(starter.launch_there, q.bot.name, ladder_id)
            if launch is None:
                raise HandOffError(f"{q.bot.name} can neither follow a redirect nor be started there")
        launches.append(launch)
    return LaunchingMatch(
        ladder_id,
        starter.game,
        starter.config_for(pairing.map),
        pairing.seed,
        tuple(q.bot.name for q in seated),
        tuple(token_digest(t) for t in seat_tokens),
        starter.lobby.settings,
        launches=tuple(launches),
    )


def _hand_over(conn: Connection, where: Hosting, token: str, launch: SeatLaunch | None) -> bool:
    """Send ``conn``'s bot to its match: a redirect (True: close ``conn`` once it is out), or, for a
    bot its worker starts afresh, nothing: this start of it only held its place in the queue."""
    if launch is None:
        conn.send_message(protocol.redirect(where.host, where.port, token, tls=where.tls))
        return True
    conn.close("its match is played where the ladder starts it again")
    return False


async def _write_replay(replay_dir: Path | None, ladder_id: int, data: bytes | None) -> str | None:
    """Write a cluster match's replay where this ladder keeps its own; its path, or None."""
    if data is None or replay_dir is None:
        return None
    path = replay_path(replay_dir, ladder_id)
    try:
        await trio.to_thread.run_sync(write_new, path, data)
    except OSError as exc:
        log.error("ladder match %d: cannot write its replay %s (%s)", ladder_id, path, exc)
        return None
    return str(path)
