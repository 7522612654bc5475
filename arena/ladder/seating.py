"""The ladder's way of seating bots: a queue of identified bots, matched up by rating.

A bot's hello carries its ladder token. The token is checked against the store in a worker thread
(the store blocks; the poller's task must not), then the bot waits in the queue. Every
``match_every`` seconds the matchmaker (`matchmaker.match_up`, a pure function) pairs the bots that
wait; each pairing is written to the store as a running match before it starts, and its result (or
its voiding) is written when it ends. Results go to the store in one task, one at a time, in the
order the matches ended.

The limits a public server needs, each refusal with its own error code (docs/ladder.md):

- a wrong token is `bad_hello`; too many from one address lock that address's wrong tokens out
  (`locked_out`), for a time that doubles with each lock-out. A lock-out refuses guesses, not good
  tokens: a valid token from a locked address still plays (a bot reconnecting mid-match keeps its
  seat), and does not reset the count. Tokens are counted as they arrive, before their check, so
  that wrong tokens sent at once are refused `locked_out` past the limit, whatever order their
  checks finish in;
- a token sent in clear over a network (plain listener, peer not on this machine) is refused
  (`tls_required`) unless the host said ``insecure``;
- a bot may have one connection queued and ``max_matches`` matches at a time (`busy`); the queue
  has a cap (`queue_full`); an address has a cap on its open connections, and on its spectators
  (`too_many_connections`, applied by the lobby from accept on, before any hello);
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from cellarena.arena.ladder import identity
from cellarena.arena.ladder.changes import POLL_EVERY, DatabaseWatch
from cellarena.arena.ladder.errors import MatchNotRunningError, SeatRefusedError
from cellarena.arena.ladder.hand_off import HandOff, HandOffError
from cellarena.arena.ladder.matchmaker import Pairing, Policy, Waiting, match_up
from cellarena.arena.ladder.records import BotRecord, Change, SeatResult
from cellarena.arena.ladder.replay_files import replay_path, write_new
from cellarena.arena.ladder.spool import ResultSpool
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
    #: Connections open at once from one address (a bot, its reconnections, a few spectators),
    #: counted from accept on (`LobbyConfig.max_connections_per_address`).
    max_connections_per_address: int = 16
    #: Of those, spectators.
    max_spectators_per_address: int = 4
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
    #: How often the server polls the database's change log (a revoke takes effect within this).
    poll_every: float = POLL_EVERY


@dataclass
class _Queued:
    """A bot in the queue: its connection, when it joined (trio's clock), and whether it follows a
    ``redirect`` (its hello's ``accepts``)."""

    conn: Connection
    bot: BotRecord
    since: float
    follows_redirect: bool = False
    #: The digest of the token the connection identified itself with (a rotation ends it).
    digest: str | None = None


@dataclass
class _Live:
    """A ladder match under way: its number in the lobby, its id in the store, its bots by seat."""

    match: Match
    ladder_id: int
    bots: tuple[BotRecord, ...]
    #: Per seat, the digest of the token its connection identified itself with.
    digests: list[str | None] = field(default_factory=list)


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

    #: Wrong tokens since the last lock-out (a valid token does not take any back).
    count: int = 0
    #: Tokens from the address being checked now: counted before their check finishes.
    checking: int = 0
    lockouts: int = 0
    locked_until: float = -math.inf
    last: float = 0.0


@dataclass
class _Pending:
    """A bot whose token is being checked: whether its hello follows redirects, and whether it came
    past its address's limit of wrong tokens (counting those still being checked)."""

    follows_redirect: bool
    host: str
    over_limit: bool


@dataclass
class _BotState:
    """What the matchmaker remembers of a bot between its matches."""

    last_seat: int | None = None
    last_opponents: tuple[str, ...] = ()


def revoked_message(name: str) -> str:
    return f"the ladder's host revoked {name}: its token no longer works"


def rotated_message(name: str) -> str:
    return (
        f"{name} has a new token (rotated by the ladder's host): the one this connection used no longer "
        "works; connect with the new one"
    )


def peer_host(conn: Connection) -> str:
    """The client's address: what a trusted proxy said it is, or the socket's peer."""
    return conn.host


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
        spool: ResultSpool | None = None,
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
        #: Where results wait that the database could not take (None: such a result is lost).
        self.spool = spool
        #: The change log's poller and the database's state.
        self.database = DatabaseWatch(store, every=self.rules.poll_every)
        #: Matches under way on the cluster: ladder id -> bots by seat.
        self.remote: dict[int, tuple[BotRecord, ...]] = {}
        self._nursery: trio.Nursery | None = None
        self._room = WaitingRoom(on_leave=self._left)
        #: Token checks under way, by connection.
        self._pending: dict[Connection, _Pending] = {}
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
        #: Matches to void that the database could not take (an outage): ladder id -> why.
        self._unvoided: dict[int, str] = {}
        self._checks: tuple[
            trio.MemorySendChannel[tuple[Connection, str]], trio.MemoryReceiveChannel[tuple[Connection, str]]
        ]
        self._checks = trio.open_memory_channel(math.inf)

    # ----------------------------------------------------------------- hello
    def check(self, conn: Connection, hello: dict[str, Any]) -> tuple[str, str] | None:
        # A locked-out address is not refused here: its good tokens still play (`_identified`).
        host = peer_host(conn)
        if not isinstance(hello.get("token"), str):
            return protocol.BAD_HELLO, "this is a ladder: send the 'token' your bot was registered with"
        # Through a trusted proxy, the hop to this server is the proxy's: on loopback it may have
        # ended the client's TLS itself (docs/ladder.md, "Behind a proxy").
        hop = conn.via if conn.via is not None else host
        if not conn.tls and not is_loopback(hop) and not self.rules.insecure:
            return (
                protocol.TLS_REQUIRED,
                "this ladder takes tokens only over TLS; connect with TLS (the SDK's --tls)",
            )
        if len(self.queue) + len(self._pending) >= self.rules.max_queue:
            return (
                protocol.QUEUE_FULL,
                f"the queue holds {self.rules.max_queue} bots; come back in a few seconds",
            )
        if not self.database.up and self._seat_of(hello["token"]) is None:
            # `shutdown`: every SDK released so far comes back later on it. A bot back to its seat in
            # a match under way here is let in: its token is known without the database.
            return (
                protocol.SHUTDOWN,
                "the ladder cannot reach its database now; come back in a few seconds",
            )
        return None

    def admit(self, conn: Connection, hello: dict[str, Any]) -> None:
        """Hold the connection while its token is checked (in `run`'s task). The token counts
        against its address now, as it arrives: were it counted only once checked, wrong tokens
        sent at once would all be checked before any of them started the lock-out."""
        if self._room.add(conn):
            host = peer_host(conn)
            failures = self._failures.setdefault(host, _Failures())
            over = failures.count + failures.checking >= self.rules.failed_tokens
            failures.checking += 1
            follows = "redirect" in hello.get("accepts", ())
            self._pending[conn] = _Pending(follows, host, over)
            self._checks[0].send_nowait((conn, hello["token"]))

    def _checked(self, conn: Connection) -> _Pending | None:
        """``conn``'s token check is over (or it left): no longer counted as being checked."""
        pending = self._pending.pop(conn, None)
        if pending is not None:
            failures = self._failures.get(pending.host)
            if failures is not None:
                failures.checking -= 1
        return pending

    def waiting(self) -> list[Connection]:
        return list(self._room.conns)

    def _left(self, conn: Connection) -> None:
        self._checked(conn)
        for name, queued in list(self.queue.items()):
            if queued.conn is conn:
                del self.queue[name]

    async def _check_tokens(self) -> None:
        async for conn, token in self._checks[1]:
            try:
                bot = await trio.to_thread.run_sync(self.store.authenticate, token)
            except LadderStoreError as exc:
                self._checked(conn)
                if self._reattach_known(conn, token):
                    continue
                log.error("cannot check a token: %s", exc)
                conn.fail(protocol.SHUTDOWN, "the ladder cannot read its database now; come back later")
                continue
            pending = self._checked(conn)
            if pending is None or conn.closed:
                continue  # gone meanwhile
            digest = identity.token_digest(token) if identity.looks_like_token(token) else None
            self._identified(conn, bot, pending.follows_redirect, digest, over_limit=pending.over_limit)

    def _identified(
        self,
        conn: Connection,
        bot: BotRecord | None,
        follows_redirect: bool = False,
        digest: str | None = None,
        *,
        over_limit: bool = False,
    ) -> None:
        host = peer_host(conn)
        if bot is None or not bot.active:
            locked = self._failed_token(host, over_limit)
            if locked is not None:
                conn.fail(
                    protocol.LOCKED_OUT,
                    f"too many wrong tokens from {host}; refused for another {math.ceil(locked)} s",
                )
                return
            conn.fail(
                protocol.BAD_HELLO,
                "unknown or revoked token; ask the ladder's host for your bot's current token",
            )
            return
        # A good token plays, from a locked-out address too, and takes back none of its wrong ones.
        conn.name = bot.name
        if bot.game != self.game:
            conn.fail(
                protocol.BAD_HELLO, f"{bot.name} is registered for {bot.game}; this ladder plays {self.game}"
            )
            return
        if self._reattach(conn, bot, digest):
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
        self.queue[bot.name] = _Queued(conn, bot, trio.current_time(), follows_redirect, digest)
        log.info("%s (%s) joins the queue (%d waiting)", bot.name, conn.peer, len(self.queue))

    def _failed_token(self, host: str, over_limit: bool) -> float | None:
        """Count a wrong token from ``host``; the seconds its lock-out has left if it came while the
        address was locked out, or past the limit (which starts the lock-out now); else None (the
        limit's own last token is still told `bad_hello`)."""
        now = trio.current_time()
        failures = self._failures.setdefault(host, _Failures())
        failures.last = now
        if failures.locked_until > now:
            return failures.locked_until - now
        if over_limit:
            return self._lock_out(host, failures, now)
        failures.count += 1
        if failures.count >= self.rules.failed_tokens:
            self._lock_out(host, failures, now)
        return None

    def _lock_out(self, host: str, failures: _Failures, now: float) -> float:
        seconds = min(self.rules.max_lockout, self.rules.lockout * 2**failures.lockouts)
        failures.locked_until = now + seconds
        failures.lockouts += 1
        failures.count = 0
        log.warning("%s sent %d wrong tokens: locked out for %g s", host, self.rules.failed_tokens, seconds)
        return seconds

    def _reattach(self, conn: Connection, bot: BotRecord, digest: str | None = None) -> bool:
        """A bot back on a new connection while its seat waits for it: it takes the seat again."""
        for live in self.live.values():
            for index, seated in enumerate(live.bots):
                seat = live.match.seats[index]
                if seated.id != bot.id or seat.connected or seat.forfeit_tick is not None:
                    continue
                if live.match.over:
                    continue
                live.match.reattach(index, conn)
                if index < len(live.digests):
                    live.digests[index] = digest
                return True
        return False

    def _seat_of(self, token: str) -> tuple[BotRecord, str] | None:
        """The bot of a match under way here that identified itself with ``token``, and its digest."""
        if not identity.looks_like_token(token):
            return None
        digest = identity.token_digest(token)
        for live in self.live.values():
            for index, known in enumerate(live.digests):
                if known is not None and identity.digests_equal(known, digest):
                    return live.bots[index], digest
        return None

    def _reattach_known(self, conn: Connection, token: str) -> bool:
        """Without the database (an outage), a bot may still take back its seat in a match under way
        here: the token it played with is known by its digest. A seat whose old connection the server
        has not yet seen close is taken too (the bot, which cannot queue now, is back on a new one);
        one that lost its connection first."""
        if not identity.looks_like_token(token):
            return False
        digest = identity.token_digest(token)
        seats = [
            (live.match.seats[index].connected, live, index)
            for live in self.live.values()
            if not live.match.over
            for index, known in enumerate(live.digests)
            if known is not None
            and identity.digests_equal(known, digest)
            and live.match.seats[index].forfeit_tick is None
        ]
        if not seats:
            return False
        _, live, index = min(seats, key=lambda s: s[0])
        conn.name = live.bots[index].name
        live.match.reattach(index, conn)
        return True

    # ----------------------------------------------------------------- changes made elsewhere
    async def on_changes(self, changes: list[Change]) -> None:
        """`DatabaseWatch`'s listener: act on what the ladder's commands (other processes) changed."""
        names = {c.bot for c in changes if c.bot is not None}
        await self._check_bots(names)
        if any(c.kind in ("bot_added", "bot_revoked") for c in changes):
            await self._load_ratings()  # house bots come and go with the table

    async def on_back(self) -> None:
        """The database answers again: write the results kept on disk, and check every session
        against the store (the change log may have moved on while it could not be read)."""
        await self.flush_spool()
        for ladder_id, reason in list(self._unvoided.items()):
            await self._void(ladder_id, reason)
        await self._load_ratings()
        names = set(self.queue) | {b.name for live in self.live.values() for b in live.bots}
        await self._check_bots(names)

    async def flush_spool(self) -> None:
        if self.spool is None:
            return
        try:
            written = await trio.to_thread.run_sync(self.spool.flush, self.store)
        except LadderStoreError as exc:
            log.error("cannot write the results kept on disk yet: %s", exc)
            return
        if written:
            await self._load_ratings()

    async def _check_bots(self, names: set[str]) -> None:
        if not names:
            return
        try:
            current = await trio.to_thread.run_sync(self.store.token_digests, sorted(names))
        except LadderStoreError as exc:
            log.error("cannot read the bots that changed: %s", exc)
            return
        self.apply_bots(current, names)

    def apply_bots(self, current: dict[str, tuple[BotRecord, str]], names: set[str]) -> None:
        """Bring the sessions of the bots ``names`` in line with the store (``current``: each such bot as
        the store has it now, with its token's digest; a name missing from it is gone).

        A revoked bot's queued connection is ended and its seats in matches here forfeit at once; a
        connection that identified itself with a token rotated since is ended (its bot may come back
        to its seat with the new token within the grace); a changed limit applies from the next
        pairing. Each ended connection is told why (`revoked`). Matches on the cluster are out of
        reach: their bots were sent away with seat tokens of that match alone."""
        for name, queued in list(self.queue.items()):
            if name not in names:
                continue
            why = self._stale(current.get(name), queued.digest)
            if why is None:
                queued.bot = current[name][0]
                continue
            del self.queue[name]
            queued.conn.fail(protocol.REVOKED, why)
        for live in self.live.values():
            for index, bot in enumerate(live.bots):
                if bot.name not in names or live.match.over:
                    continue
                seat = live.match.seats[index]
                digest = live.digests[index] if index < len(live.digests) else None
                found = current.get(bot.name)
                why = self._stale(found, digest)
                if why is None:
                    continue
                if found is None or not found[0].active:
                    live.match.expel(index, protocol.REVOKED, why)
                elif seat.connected and seat.conn is not None:
                    seat.conn.fail(protocol.REVOKED, why)

    @staticmethod
    def _stale(current: tuple[BotRecord, str] | None, digest: str | None) -> str | None:
        """Why a session of a bot that the store now has as ``current`` must end; None if it may stay."""
        if current is None or not current[0].active:
            return revoked_message("this bot" if current is None else current[0].name)
        if digest is not None and not identity.digests_equal(digest, current[1]):
            return rotated_message(current[0].name)
        return None

    # ----------------------------------------------------------------- the queue
    async def run(self) -> None:
        """Check tokens, match up the queue, and record results, until cancelled."""
        await self._load_ratings()
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._check_tokens)
            nursery.start_soon(self._record_results)
            nursery.start_soon(self.database.run, self)
            while True:
                await trio.sleep(self.rules.match_every)
                for pairing in self._pairings():
                    await self._start(pairing)
                await self.void_vanished()
                self._forget_old_failures()

    def _pairings(self) -> list[Pairing]:
        if len(self.queue) < self.policy.seats or not self.database.up:
            return []  # during an outage the queue waits: its bots play as soon as the database is back
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
        begin = functools.partial(
            self.store.begin_match,
            self.game,
            pairing.map,
            pairing.seed,
            [b.id for b in bots],
            [q.digest for q in seated],
        )
        try:
            ladder_id = await trio.to_thread.run_sync(begin)
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

    def _refused(self, exc: SeatRefusedError, seated: list[_Queued]) -> None:
        """End the refused bot's connection (saying why), and put the rest of its pairing back."""
        back = []
        for q in seated:
            if q.bot.name != exc.bot:
                back.append(q)
            elif exc.why == "game":
                q.conn.fail(protocol.BAD_HELLO, f"{q.bot.name} no longer plays {self.game} here")
            elif exc.why == "rotated":
                q.conn.fail(protocol.REVOKED, rotated_message(q.bot.name))
            else:
                q.conn.fail(protocol.REVOKED, revoked_message(q.bot.name))
        self._requeue([q for q in back if not q.conn.closed])

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
        self.live[match] = _Live(match, ladder_id, bots, [q.digest for q in seated])
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
            self.lobby.settings,
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
        path = replay_path(self.replay_dir, ladder_id)
        try:
            await trio.to_thread.run_sync(write_new, path, data)
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
            if not f.checking and f.locked_until < now and now - f.last > self.rules.max_lockout:
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
                continue
            try:
                finish = functools.partial(self.store.finish_match, ended.ladder_id, seats, **about)
                record = await trio.to_thread.run_sync(finish)
            except MatchNotRunningError as exc:
                log.error("the result of ladder match %d does not count: %s", ended.ladder_id, exc)
                continue
            except LadderStoreError as exc:
                await self._keep(ended.ladder_id, seats, about, str(exc))
                continue
            # The new ratings come with the result; the whole table only now and then (house bots
            # added or revoked meanwhile), not once per result.
            for seat in record.seats:
                if seat.after is not None:
                    self.ratings[seat.bot] = seat.after
            if trio.current_time() - self._loaded_at >= RELOAD_EVERY:
                await self._load_ratings()

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
        except MatchNotRunningError:
            pass  # finished or voided already: nothing left to do
        except LadderStoreError as exc:
            # Tried again when the database answers after an outage (`on_back`), else at the next start.
            self._unvoided[ladder_id] = reason
            log.error("cannot void ladder match %d (%s); it is voided later", ladder_id, exc)
        else:
            self._unvoided.pop(ladder_id, None)

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
