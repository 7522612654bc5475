"""The ladder's way of seating bots: a queue of identified bots, matched up by rating.

A bot's hello carries its ladder token. The token is checked against the store in a worker thread
(the store blocks; the poller's task must not), then the bot waits in the queue. Every
``match_every`` seconds the matchmaker (`matchmaker.match_up`, a pure function) pairs the bots that
wait; each pairing is written to the store as a running match before it starts, and its result (or
its voiding) is written when it ends. Results go to the store in one task, one at a time, in the
order the matches ended.

The limits a public server needs, each refusal with its own error code (docs/ladder.md):

- a wrong token is `bad_hello`; too many from one address lock that address out (`locked_out`),
  for a time that doubles with each lock-out;
- a token sent in clear over a network (plain listener, peer not on this machine) is refused
  (`tls_required`) unless the host said ``insecure``;
- a bot may have one connection queued and ``max_matches`` matches at a time (`busy`); the queue
  has a cap (`queue_full`); an address has a cap on its open connections (`too_many_connections`);
- a bot whose connection drops mid-match and that comes back with its token within the grace
  (`TickSettings.reconnect_grace`) takes its seat again (`Match.reattach`).
"""

from __future__ import annotations

import collections
import functools
import logging
import math
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import trio

from cellarena.arena.ladder.hand_off import HandOff, HandOffError
from cellarena.arena.ladder.matchmaker import Pairing, Policy, Waiting, match_up
from cellarena.arena.ladder.records import BotRecord, SeatResult
from cellarena.arena.ladder.stats import LadderStats
from cellarena.arena.ladder.store import LadderStore, LadderStoreError
from cellarena.arena.ratings import Rating, initial
from cellarena.sdk import protocol
from cellarena.sdk.client import is_loopback
from cellarena.server.connection import Connection
from cellarena.server.games.causes import with_sentences
from cellarena.server.hosted import HostedMatch, token_digest
from cellarena.server.match import Match, MatchOutcome
from cellarena.server.seating import Seating, WaitingRoom

log = logging.getLogger("cellarena.ladder")

#: Seconds between two reads of the whole standings and bot list (`_load_ratings`).
RELOAD_EVERY = 10.0


@dataclass(frozen=True)
class LadderRules:
    """The limits of a public ladder; the defaults suit one host on the internet."""

    #: Bots queued at most; more are refused with `queue_full`.
    max_queue: int = 1000
    #: Connections open at once from one address (a bot, its reconnections, a few spectators).
    max_connections_per_address: int = 16
    #: Wrong tokens from one address before it is locked out...
    failed_tokens: int = 5
    #: ...for this many seconds, doubled at each further lock-out, up to max_lockout.
    lockout: float = 60.0
    max_lockout: float = 3600.0
    #: Accept tokens over a plain (not TLS) connection from another machine. Off: a token must not
    #: cross a network in clear.
    insecure: bool = False
    #: How often the matchmaker looks at the queue (seconds).
    match_every: float = 0.1


@dataclass
class _Queued:
    """A bot in the queue: its connection, when it joined (trio's clock), and whether it follows a
    ``redirect`` (its hello's ``accepts``)."""

    conn: Connection
    bot: BotRecord
    since: float
    follows_redirect: bool = False


@dataclass
class _Live:
    """A ladder match under way: its number in the lobby, its id in the store, its bots by seat."""

    match: Match
    ladder_id: int
    bots: tuple[BotRecord, ...]


@dataclass(frozen=True)
class _Ended:
    """A ladder match that ended with a result, here or on the cluster, to be written down."""

    ladder_id: int
    bots: tuple[BotRecord, ...]
    outcome: MatchOutcome
    replay: str | None


@dataclass
class _Failures:
    """Wrong tokens from one address, and its lock-out."""

    count: int = 0
    lockouts: int = 0
    locked_until: float = -math.inf
    last: float = 0.0


@dataclass
class _BotState:
    """What the matchmaker remembers of a bot between its matches."""

    last_seat: int | None = None
    last_opponents: tuple[str, ...] = ()


def peer_host(conn: Connection) -> str:
    """The address part of a connection's ``host:port`` (IPv6 addresses keep their colons)."""
    return conn.peer.rsplit(":", 1)[0]


class LadderSeating(Seating):
    """Seats identified bots from a rated queue (see the module docstring).

    ``config_for(map)`` is the engine config of a match on that map of the pool; ``policy`` is the
    matchmaker's. ``seed`` makes the matchmaker's choices (and so the maps and match seeds)
    reproducible from the same queue.
    """

    def __init__(
        self,
        store: LadderStore,
        game: str,
        policy: Policy,
        config_for: Callable[[str | None], dict[str, Any]],
        *,
        rules: LadderRules | None = None,
        seed: int = 0,
        on_match: Callable[[int, Match], None] | None = None,
        hand_off: HandOff | None = None,
        replay_dir: Path | None = None,
    ) -> None:
        self.store = store
        self.game = game
        self.policy = policy
        self.config_for = config_for
        self.rules = rules if rules is not None else LadderRules()
        self.seed = seed
        #: Called with (ladder match id, match) as each match starts (replays, logs).
        self.on_match = on_match
        self.queue: dict[str, _Queued] = {}
        #: Ladder match id -> its replay file, for those that have one (set by the service).
        self.replays: dict[int, str] = {}
        #: The ladder id of the match being started, while `Lobby.start_match` makes it (its replay).
        self.starting_id: int | None = None
        self.live: dict[Match, _Live] = {}
        #: Plays matches on a cluster when every bot of a pairing follows redirects; None: all here.
        self.hand_off = hand_off
        #: Where the replays of matches played on the cluster are written.
        self.replay_dir = replay_dir
        #: Matches under way on the cluster: ladder id -> bots by seat.
        self.remote: dict[int, tuple[BotRecord, ...]] = {}
        self._nursery: trio.Nursery | None = None
        self._room = WaitingRoom(on_leave=self._left)
        #: Token checks under way: each connection, and whether its hello accepts a redirect.
        self._pending: dict[Connection, bool] = {}
        self._failures: dict[str, _Failures] = {}
        #: Each bot's current rating, as the store had it after the last result.
        self.ratings: dict[str, Rating] = {}
        self._house: list[BotRecord] = []
        self._bots: dict[str, _BotState] = {}
        #: Bots taken from the queue for a match that is being written down and started.
        self._starting: set[str] = set()
        self._rounds = 0
        self._loaded_at = -math.inf
        #: Queue waits, the matchmaker's CPU and the ticks played (`cellarena bench ladder` reads them).
        self.stats = LadderStats()
        self._results: tuple[trio.MemorySendChannel[_Ended], trio.MemoryReceiveChannel[_Ended]]
        self._results = trio.open_memory_channel(math.inf)
        self._checks: tuple[
            trio.MemorySendChannel[tuple[Connection, str]], trio.MemoryReceiveChannel[tuple[Connection, str]]
        ]
        self._checks = trio.open_memory_channel(math.inf)

    # ----------------------------------------------------------------- hello
    def check(self, conn: Connection, hello: dict[str, Any]) -> tuple[str, str] | None:
        host = peer_host(conn)
        now = trio.current_time()
        failures = self._failures.get(host)
        if failures is not None and failures.locked_until > now:
            wait = math.ceil(failures.locked_until - now)
            return protocol.LOCKED_OUT, f"too many wrong tokens from {host}; refused for another {wait} s"
        if not isinstance(hello.get("token"), str):
            return protocol.BAD_HELLO, "this is a ladder: send the 'token' your bot was registered with"
        if not conn.tls and not is_loopback(host) and not self.rules.insecure:
            return (
                protocol.TLS_REQUIRED,
                "this ladder takes tokens only over TLS; connect with TLS (the SDK's --tls)",
            )
        if self.lobby.connections_from(host) > self.rules.max_connections_per_address:
            return (
                protocol.TOO_MANY_CONNECTIONS,
                f"{host} has {self.rules.max_connections_per_address} connections open already",
            )
        if len(self.queue) + len(self._pending) >= self.rules.max_queue:
            return (
                protocol.QUEUE_FULL,
                f"the queue holds {self.rules.max_queue} bots; come back in a few seconds",
            )
        return None

    def admit(self, conn: Connection, hello: dict[str, Any]) -> None:
        """Hold the connection while its token is checked (in `run`'s task)."""
        if self._room.add(conn):
            self._pending[conn] = "redirect" in hello.get("accepts", ())
            self._checks[0].send_nowait((conn, hello["token"]))

    def waiting(self) -> list[Connection]:
        return list(self._room.conns)

    def _left(self, conn: Connection) -> None:
        self._pending.pop(conn, None)
        for name, queued in list(self.queue.items()):
            if queued.conn is conn:
                del self.queue[name]

    async def _check_tokens(self) -> None:
        async for conn, token in self._checks[1]:
            try:
                bot = await trio.to_thread.run_sync(self.store.authenticate, token)
            except LadderStoreError as exc:
                log.error("cannot check a token: %s", exc)
                self._pending.pop(conn, None)
                conn.fail(protocol.SHUTDOWN, "the ladder cannot read its database now; come back later")
                continue
            follows_redirect = self._pending.pop(conn, None)
            if follows_redirect is None or conn.closed:
                continue  # gone meanwhile
            self._identified(conn, bot, follows_redirect)

    def _identified(self, conn: Connection, bot: BotRecord | None, follows_redirect: bool = False) -> None:
        host = peer_host(conn)
        if bot is None or not bot.active:
            self._failed_token(host)
            conn.fail(
                protocol.BAD_HELLO,
                "unknown or revoked token; ask the ladder's host for your bot's current token",
            )
            return
        self._failures.pop(host, None)
        conn.name = bot.name
        if bot.game != self.game:
            conn.fail(
                protocol.BAD_HELLO, f"{bot.name} is registered for {bot.game}; this ladder plays {self.game}"
            )
            return
        if self._reattach(conn, bot):
            return
        if bot.name in self.queue or bot.name in self._starting:
            conn.fail(protocol.BUSY, f"{bot.name} already has a connection in the queue")
            return
        # A match on the cluster is over for its bots before its result has come back here: a bot
        # back from one queues at once, and is paired once the result is in (`_pairings`).
        playing = sum(1 for live in self.live.values() if any(b.id == bot.id for b in live.bots))
        if playing >= bot.max_matches:
            conn.fail(
                protocol.BUSY,
                f"{bot.name} is playing {playing} match(es), its limit; come back when one ends",
            )
            return
        self.queue[bot.name] = _Queued(conn, bot, trio.current_time(), follows_redirect)
        log.info("%s (%s) joins the queue (%d waiting)", bot.name, conn.peer, len(self.queue))

    def _failed_token(self, host: str) -> None:
        now = trio.current_time()
        failures = self._failures.setdefault(host, _Failures())
        failures.count += 1
        failures.last = now
        if failures.count >= self.rules.failed_tokens:
            seconds = min(self.rules.max_lockout, self.rules.lockout * 2**failures.lockouts)
            failures.locked_until = now + seconds
            failures.lockouts += 1
            failures.count = 0
            log.warning(
                "%s sent %d wrong tokens: locked out for %g s", host, self.rules.failed_tokens, seconds
            )

    def _reattach(self, conn: Connection, bot: BotRecord) -> bool:
        """A bot back on a new connection while its seat waits for it: it takes the seat again."""
        for live in self.live.values():
            for index, seated in enumerate(live.bots):
                seat = live.match.seats[index]
                if seated.id != bot.id or seat.connected or seat.forfeit_tick is not None:
                    continue
                if live.match.over:
                    continue
                live.match.reattach(index, conn)
                return True
        return False

    # ----------------------------------------------------------------- the queue
    async def run(self) -> None:
        """Check tokens, match up the queue, and record results, until cancelled."""
        await self._load_ratings()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._check_tokens)
            nursery.start_soon(self._record_results)
            while True:
                await trio.sleep(self.rules.match_every)
                for pairing in self._pairings():
                    await self._start(pairing)
                await self.void_vanished()
                self._forget_old_failures()

    def _pairings(self) -> list[Pairing]:
        if len(self.queue) < self.policy.seats:
            return []
        now = trio.current_time()
        busy = self._busy()
        queue = [
            Waiting(
                bot=name,
                since=q.since,
                rating=self.ratings.get(name, initial()),
                last_seat=self._bots.get(name, _BotState()).last_seat,
                last_opponents=self._bots.get(name, _BotState()).last_opponents,
            )
            for name, q in self.queue.items()
            if name not in busy
        ]
        if len(queue) < self.policy.seats:
            return []
        self._rounds += 1
        cpu = time.thread_time()
        pairings = match_up(queue, now, self.policy, hash((self.seed, self._rounds)) & 0x7FFFFFFF)
        self.stats.matchmaking_cpu += time.thread_time() - cpu
        self.stats.matchmaking_passes += 1
        return pairings

    async def _start(self, pairing: Pairing) -> None:
        self._starting.update(pairing.bots)
        try:
            await self._start_match(pairing)
        finally:
            self._starting.difference_update(pairing.bots)

    async def _start_match(self, pairing: Pairing) -> None:
        seated = [self.queue.pop(name) for name in pairing.bots if name in self.queue]
        now = trio.current_time()
        self.stats.waits.extend(max(0.0, now - q.since) for q in seated)
        if len(seated) != len(pairing.bots):  # cannot happen: the pairing came from this queue
            self._requeue(seated)
            return
        bots = tuple(q.bot for q in seated)
        try:
            ladder_id = await trio.to_thread.run_sync(
                self.store.begin_match, self.game, pairing.map, pairing.seed, [b.id for b in bots]
            )
        except LadderStoreError as exc:
            log.error("cannot record a new match (%s); its bots are told to come back later", exc)
            for q in seated:
                q.conn.fail(protocol.SHUTDOWN, "the ladder cannot record matches now; come back later")
            return
        gone = [q for q in seated if q.conn.closed]
        if gone:  # a bot left while the match was written down: the others wait on
            await self._void(ladder_id, f"{', '.join(q.bot.name for q in gone)} left before the start")
            self._requeue([q for q in seated if not q.conn.closed])
            return
        if self.hand_off is not None and all(q.follows_redirect for q in seated):
            assert self._nursery is not None
            self.remote[ladder_id] = bots
            self._note_seats(bots)
            self._nursery.start_soon(self._play_there, ladder_id, pairing, seated)
        else:
            self._play_here(ladder_id, pairing, seated)

    def _play_here(self, ladder_id: int, pairing: Pairing, seated: list[_Queued]) -> None:
        """Start the match in this process's lobby."""
        bots = tuple(q.bot for q in seated)
        names = [b.name for b in bots]
        self.starting_id = ladder_id
        try:
            match = self.lobby.start_match(
                [q.conn for q in seated], names, engine_config=self.config_for(pairing.map), seed=pairing.seed
            )
        finally:
            self.starting_id = None
        if match is None:  # the lobby logged why and told the bots
            self._nursery_void(ladder_id, "the match could not start (an internal error)")
            return
        self.live[match] = _Live(match, ladder_id, bots)
        self.stats.matches_started += 1
        self._note_seats(bots)
        log.info("ladder match %d (%s): %s", ladder_id, pairing.map or "default map", " vs ".join(names))
        if self.on_match is not None:
            self.on_match(ladder_id, match)

    def _note_seats(self, bots: tuple[BotRecord, ...]) -> None:
        """Remember each bot's seat and opponents, for the matchmaker's next pairings."""
        names = [b.name for b in bots]
        for i, b in enumerate(bots):
            self._bots[b.name] = _BotState(last_seat=i, last_opponents=tuple(n for n in names if n != b.name))

    def _nursery_void(self, ladder_id: int, reason: str) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(self._void, ladder_id, reason)

    async def _play_there(self, ladder_id: int, pairing: Pairing, seated: list[_Queued]) -> None:
        """Have the cluster host the match, send its bots there, and hand its result to the recorder.

        If no worker takes it, the match is played here after all: the bots are still connected."""
        assert self.hand_off is not None
        bots = tuple(q.bot for q in seated)
        tokens = [secrets.token_urlsafe(32) for _ in bots]
        job = HostedMatch(
            ladder_id,
            self.game,
            self.config_for(pairing.map),
            pairing.seed,
            tuple(b.name for b in bots),
            tuple(token_digest(t) for t in tokens),
            self.lobby.config.settings,
        )
        try:
            where = await self.hand_off.start(job)
        except HandOffError as exc:
            del self.remote[ladder_id]
            if any(q.conn.closed for q in seated):
                await self._void(ladder_id, f"the cluster did not host it ({exc}) and a bot left meanwhile")
                self._requeue([q for q in seated if not q.conn.closed])
                return
            log.warning("ladder match %d: the cluster did not host it (%s); playing it here", ladder_id, exc)
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
        for q, token in zip(seated, tokens, strict=True):
            q.conn.send_message(protocol.redirect(where.host, where.port, token, tls=where.tls))
            self._nursery_close(q.conn)
        try:
            result = await self.hand_off.result(ladder_id)
        except HandOffError as exc:
            self.remote.pop(ladder_id, None)
            await self._void(ladder_id, str(exc))
            return
        self.remote.pop(ladder_id, None)
        if result.outcome is None or not result.anybody_came:
            why = "no bot reached the match host" if not result.anybody_came else "it ended without a result"
            await self._void(ladder_id, why)
            return
        replay = await self._write_replay(ladder_id, result.replay)
        self._count(result.outcome)
        self._results[0].send_nowait(_Ended(ladder_id, bots, result.outcome, replay))

    def _nursery_close(self, conn: Connection) -> None:
        """Close ``conn`` once its last frames (the redirect) are out, or after a second."""

        async def close() -> None:
            await conn.flush(1.0)
            conn.close("redirected")

        assert self._nursery is not None
        self._nursery.start_soon(close)

    async def _write_replay(self, ladder_id: int, data: bytes | None) -> str | None:
        """Write a cluster match's replay where this ladder keeps its own; its path, or None."""
        if data is None or self.replay_dir is None:
            return None
        path = self.replay_dir / f"ladder-{ladder_id:06d}.replay"
        try:
            await trio.to_thread.run_sync(path.write_bytes, data)
        except OSError as exc:
            log.error("ladder match %d: cannot write its replay %s (%s)", ladder_id, path, exc)
            return None
        return str(path)

    def _requeue(self, queued: list[_Queued]) -> None:
        for q in queued:
            self.queue[q.bot.name] = q

    def _forget_old_failures(self) -> None:
        """Addresses that stopped sending wrong tokens an hour ago are forgotten (memory stays bounded)."""
        now = trio.current_time()
        for host, f in list(self._failures.items()):
            if f.locked_until < now and now - f.last > self.rules.max_lockout:
                del self._failures[host]

    # ----------------------------------------------------------------- results
    def record(self, outcome: MatchOutcome) -> None:
        """The lobby's ``on_result``: a ladder match ended with a result, written in `run`'s task.

        Called right as the match leaves the lobby's running matches, with no checkpoint between,
        so a match that left without coming here ended without a result (`void_vanished`)."""
        live = next((lv for lv in self.live.values() if lv.match.number == outcome.number), None)
        self._count(outcome)
        if live is not None:
            del self.live[live.match]
            ended = _Ended(live.ladder_id, live.bots, outcome, self.replays.get(live.ladder_id))
            self._results[0].send_nowait(ended)

    def _count(self, outcome: MatchOutcome) -> None:
        stats = self.stats
        stats.matches_ended += 1
        stats.ticks += outcome.ticks
        stats.agent_ticks += outcome.ticks * len(outcome.names)
        stats.late_ticks += outcome.late_ticks
        stats.behind_ticks += outcome.behind_ticks
        stats.bad_ticks += outcome.bad_ticks

    def ladder_id(self, match: Match) -> int | None:
        live = self.live.get(match)
        return None if live is None else live.ladder_id

    async def _record_results(self) -> None:
        async for ended in self._results[1]:
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
                )
                for i in range(len(ended.bots))
            ]
            try:
                finish = functools.partial(
                    self.store.finish_match,
                    ended.ladder_id,
                    seats,
                    reason=outcome.result.reason,
                    ticks=outcome.ticks,
                    replay=ended.replay,
                )
                record = await trio.to_thread.run_sync(finish)
            except LadderStoreError as exc:
                log.error("the result of ladder match %d is lost: %s", ended.ladder_id, exc)
                continue
            # The new ratings come with the result; the whole table only now and then (house bots
            # added or revoked meanwhile), not once per result.
            for seat in record.seats:
                if seat.after is not None:
                    self.ratings[seat.bot] = seat.after
            if trio.current_time() - self._loaded_at >= RELOAD_EVERY:
                await self._load_ratings()

    async def void_vanished(self) -> None:
        """Void the matches that left the lobby without a result (cut short, or an internal error)."""
        running = set(self.lobby.running)
        for match in [m for m in self.live if m not in running]:
            live = self.live.pop(match)
            await self._void(live.ladder_id, "the match ended without a result")

    async def void_unfinished(self, reason: str) -> None:
        """Void every match still under way (the ladder stops), here and on the cluster."""
        for match in list(self.live):
            await self._void(self.live.pop(match).ladder_id, reason)
        for ladder_id in list(self.remote):
            del self.remote[ladder_id]
            if self.hand_off is not None:
                self.hand_off.cancel(ladder_id)
            await self._void(ladder_id, reason)

    async def _void(self, ladder_id: int, reason: str) -> None:
        try:
            await trio.to_thread.run_sync(self.store.void_match, ladder_id, reason)
        except LadderStoreError as exc:
            log.error("cannot void ladder match %d (%s); it is voided at the next start", ladder_id, exc)

    async def _load_ratings(self) -> None:
        """The ratings and the house bots, as the store has them now."""
        self._loaded_at = trio.current_time()
        try:
            table = await trio.to_thread.run_sync(self.store.standings, self.game)
            bots = await trio.to_thread.run_sync(self.store.list_bots, self.game)
        except LadderStoreError as exc:
            log.error("cannot read the ratings: %s", exc)
            return
        self.ratings = {s.bot: Rating(s.mu, s.sigma) for s in table}
        self._house = [b for b in bots if b.house_command is not None and b.active]

    def house_bots(self) -> list[BotRecord]:
        """The game's house bots (`house`), as of the last result."""
        return list(self._house)

    def _busy(self) -> set[str]:
        """Bots playing as many matches as they may (only a bot back from a match on the cluster
        whose result has not come back yet can be in the queue and here)."""
        if not self.remote:
            return set()
        counts = collections.Counter(b.name for bots in self._under_way() for b in bots)
        return {q.bot.name for q in self.queue.values() if counts[q.bot.name] >= q.bot.max_matches}

    def _under_way(self) -> list[tuple[BotRecord, ...]]:
        """The bots of every match under way, here or on the cluster."""
        return [live.bots for live in self.live.values()] + list(self.remote.values())

    def playing(self) -> set[str]:
        """The bots in a match under way."""
        return {b.name for bots in self._under_way() for b in bots}
