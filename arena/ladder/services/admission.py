"""The ladder's admission service: who may queue or play, from a bot's hello to a revoke.

A bot's hello carries its ladder token. The token is checked against the store in a worker thread
(the store blocks; the poller's task must not), then the bot joins the queue (`queue`), or
takes back its seat in a match under way (`starter`). The limits a public server needs, each refusal
with its own error code (docs/ladder.md):

- a wrong token is `bad_hello`; too many from one address lock that address's wrong tokens out
  (`locked_out`; `lockout.TokenLockout`, which the owner's replay endpoint shares), for a time
  that doubles with each lock-out. A lock-out refuses guesses, not good tokens: a valid token
  from a locked address still plays (a bot reconnecting mid-match keeps its seat), and does not
  reset the count. Tokens are counted as they arrive, before their check, so
  that wrong tokens sent at once are refused `locked_out` past the limit, whatever order their
  checks finish in;
- a token sent in clear over a network (plain listener, peer not on this machine) is refused
  (`tls_required`) unless the host said ``insecure``;
- a bot may have one connection queued and ``max_matches`` matches at a time (`busy`); the queue
  has a cap (`queue_full`); an address has a cap on its open connections, and on its spectators
  (`too_many_connections`, applied by the lobby from accept on, before any hello);
- a bot whose connection drops mid-match and that comes back with its token within the grace
  (`TickSettings.reconnect_grace`) takes its seat again (`Match.reattach`).

Admission also keeps the sessions in line with the store after the ladder's commands change it
(`on_changes`, fed by the database's change log): a revoked bot's connections end, a rotated token's
connection ends, a changed limit applies from the next pairing, a paused or banned bot's queued
connection ends (`paused`; a match it plays goes on), and such a bot's hellos are refused `paused`
with the reason until it is resumed or unbanned.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Callable, Set
from dataclasses import dataclass
from typing import Any

import trio

from cellarena.arena.ladder.identity import tokens
from cellarena.arena.ladder.identity.lockout import Failures, TokenLockout
from cellarena.arena.ladder.records import BotRecord
from cellarena.arena.ladder.rules import LadderRules
from cellarena.arena.ladder.services.changes import DatabaseWatch
from cellarena.arena.ladder.services.lifecycle import LadderService
from cellarena.arena.ladder.services.queue import MatchQueue, Queued
from cellarena.arena.ladder.services.revocations import renewed_by_owner, stale
from cellarena.arena.ladder.services.starter import MatchStarter
from cellarena.arena.ladder.store.ladder_store import LadderStore, LadderStoreError
from cellarena.sdk import protocol
from cellarena.sdk.client import is_loopback
from cellarena.server.net.connection import Connection
from cellarena.server.play.seating import WaitingRoom

log = logging.getLogger("cellarena.ladder")


@dataclass
class _Pending:
    """A bot whose token is being checked: whether its hello follows redirects, and whether it came
    past its address's limit of wrong tokens (counting those still being checked)."""

    follows_redirect: bool
    host: str
    over_limit: bool
    #: The version its hello said (None: none).
    version: str | None = None


def peer_host(conn: Connection) -> str:
    """The client's address: what a trusted proxy said it is, or the socket's peer."""
    return conn.host


class Admission(LadderService):
    """Checks hellos and tokens, counts wrong ones, and ends sessions the store no longer allows."""

    name = "admission"

    def __init__(
        self,
        store: LadderStore,
        game: str,
        queue: MatchQueue,
        starter: MatchStarter,
        database: DatabaseWatch,
        *,
        rules: LadderRules | None = None,
    ) -> None:
        self.store = store
        self.game = game
        self.queue = queue
        self.starter = starter
        self.database = database
        self.rules = rules if rules is not None else LadderRules()
        #: (house bot's name, connection) -> whether that house bot's own processes hold it
        #: (`house.HouseBots.holds`, wired by `wiring.run_ladder`): a house bot's token read from its
        #: pipe by another process seats nobody.
        self.house_owner: Callable[[str, Connection], bool] | None = None
        #: A token the ladder gave one launch of a submitted bot -> that bot's name, or None
        #: (`submitted_bots.SubmittedBots.token_of`): such a token seats only the launch's own processes.
        self.launch_token: Callable[[object], str | None] | None = None
        #: False once the ladder stops: hellos are told `shutdown`.
        self.open = True
        self._room = WaitingRoom(on_leave=self._left)
        #: Token checks under way, by connection.
        self._pending: dict[Connection, _Pending] = {}
        #: Wrong tokens and lock-outs, by client address (the owner's endpoint keeps its own alike).
        self.lockout = TokenLockout(self.rules)
        self._checks: tuple[
            trio.MemorySendChannel[tuple[Connection, str]], trio.MemoryReceiveChannel[tuple[Connection, str]]
        ]
        self._checks = trio.open_memory_channel(math.inf)

    # ----------------------------------------------------------------- lifecycle
    async def initialize(self) -> None:
        await self.database.start()  # changes from now on: what came before is in the store already

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Check tokens as they come, and forget old wrong ones now and then, until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._check_tokens)
            task_status.started()
            while True:
                await trio.sleep(self.rules.match_every)
                self._forget_old_failures()

    async def graceful_shutdown(self) -> None:
        self.open = False

    # ----------------------------------------------------------------- hello
    def check(self, conn: Connection, hello: dict[str, Any]) -> tuple[str, str] | None:
        """What the ladder refuses in a hello before its token is checked: (code, message), or None."""
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
        if not self.open:
            return protocol.SHUTDOWN, "the ladder is stopping; come back in a few seconds"
        if len(self.queue.waiting) + len(self._pending) >= self.rules.max_queue:
            return (
                protocol.QUEUE_FULL,
                f"the queue holds {self.rules.max_queue} bots; come back in a few seconds",
            )
        if not self.database.up and self.starter.live.seat_of(hello["token"]) is None:
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
            over = self.lockout.arriving(host)
            follows = "redirect" in hello.get("accepts", ())
            self._pending[conn] = _Pending(follows, host, over, hello.get("version"))
            self._checks[0].send_nowait((conn, hello["token"]))

    def _checked(self, conn: Connection) -> _Pending | None:
        """``conn``'s token check is over (or it left): no longer counted as being checked."""
        pending = self._pending.pop(conn, None)
        if pending is not None:
            self.lockout.checked(pending.host)
        return pending

    def waiting(self) -> list[Connection]:
        return list(self._room.conns)

    def _left(self, conn: Connection) -> None:
        self._checked(conn)
        self.queue.left(conn)

    async def _check_tokens(self) -> None:
        async for conn, token in self._checks[1]:
            launched = self.launch_token(token) if self.launch_token is not None else None
            try:
                if launched is not None:
                    bot = await trio.to_thread.run_sync(self.store.bot, launched)
                else:
                    bot = await trio.to_thread.run_sync(self.store.authenticate, token)
            except LadderStoreError as exc:
                self._checked(conn)
                if self.starter.live.reattach_known(conn, token):
                    continue
                log.error("cannot check a token: %s", exc)
                conn.fail(protocol.SHUTDOWN, "the ladder cannot read its database now; come back later")
                continue
            pending = self._checked(conn)
            if pending is None or conn.closed:
                continue  # gone meanwhile
            # A launch token is the ladder's, not the store's: nothing to check it against later.
            known = launched is None and tokens.looks_like_token(token)
            digest = tokens.token_digest(token) if known else None
            self._identified(
                conn,
                bot,
                pending.follows_redirect,
                digest,
                over_limit=pending.over_limit,
                version=pending.version,
                launched=launched is not None,
            )

    def _identified(
        self,
        conn: Connection,
        bot: BotRecord | None,
        follows_redirect: bool = False,
        digest: str | None = None,
        *,
        over_limit: bool = False,
        version: str | None = None,
        launched: bool = False,
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
                protocol.BAD_HELLO,
                f"{bot.name} is registered for {bot.game}; this port plays {self.game}: connect to the "
                f"port of the ladder's {bot.game} server (its host says which)",
            )
            return
        started_here = bot.kind == "house" or launched  # by the ladder: its own processes only
        if started_here and self.house_owner is not None and not self.house_owner(bot.name, conn):
            kind = "house" if bot.kind == "house" else "submitted"
            log.warning(
                "%s came with %s bot %s's token from another process: refused", conn.peer, kind, bot.name
            )
            conn.fail(
                protocol.BAD_HELLO,
                f"that token is {'a house' if bot.kind == 'house' else 'a submitted'} bot's: it seats only "
                "a connection of that bot's own processes (docs/security.md)",
            )
            return
        if self.starter.live.reattach(conn, bot, digest):
            return  # a paused bot still finishes the match it was playing
        if bot.stopped is not None:
            conn.fail(protocol.PAUSED, bot.stopped)
            return
        if bot.name in self.queue.waiting or bot.name in self.queue.starting:
            conn.fail(protocol.BUSY, f"{bot.name} already has a connection in the queue")
            return
        # A match on the cluster is over for its bots before its result has come back here: a bot
        # back from one queues at once, and is paired once the result is in (`MatchStarter.busy`).
        playing = self.starter.live.matches_here(bot)
        if playing >= bot.max_matches:
            conn.fail(
                protocol.BUSY,
                f"{bot.name} is playing {playing} match(es), its limit; come back when one ends",
            )
            return
        self.queue.add(Queued(conn, bot, trio.current_time(), follows_redirect, digest, version, launched))

    @property
    def failures(self) -> dict[str, Failures]:
        """Wrong tokens and lock-outs, by client address."""
        return self.lockout.failures

    def _failed_token(self, host: str, over_limit: bool) -> float | None:
        """Count a wrong token from ``host`` (`TokenLockout.failed`)."""
        return self.lockout.failed(host, over_limit, trio.current_time())

    def _forget_old_failures(self) -> None:
        self.lockout.forget_old(trio.current_time())

    # ----------------------------------------------------------------- changes made elsewhere
    async def check_bots(self, names: set[str]) -> None:
        """Bring the sessions of the bots ``names`` in line with the store as it is now."""
        if not names:
            return
        try:
            current = await trio.to_thread.run_sync(self.store.token_digests, sorted(names))
            rotated = self._rotated(current, names)
            by_owner: set[str] = set()
            if rotated:  # who renewed: the audit log, read only when a session's token changed
                audit = await trio.to_thread.run_sync(self.store.audit_log)
                by_owner = renewed_by_owner(audit, rotated)
        except LadderStoreError as exc:
            log.error("cannot read the bots that changed: %s", exc)
            return
        self.apply_bots(current, names, by_owner)

    def _rotated(self, current: dict[str, tuple[BotRecord, str]], names: set[str]) -> set[str]:
        """Those of ``names`` with a session here whose token is no longer the store's."""
        held = [(q.bot.name, q.digest) for q in self.queue.waiting.values()]
        for live in self.starter.live.values():
            held += [(b.name, d) for b, d in zip(live.bots, live.digests, strict=False)]
        return {
            name
            for name, digest in held
            if name in names and name in current and digest is not None
            and not tokens.digests_equal(digest, current[name][1])
        }  # fmt: skip

    async def check_everyone(self) -> None:
        """Check every session against the store (the change log may have moved on unread)."""
        names = set(self.queue.waiting) | {b.name for live in self.starter.live.values() for b in live.bots}
        await self.check_bots(names)

    def apply_bots(
        self,
        current: dict[str, tuple[BotRecord, str]],
        names: set[str],
        by_owner: Set[str] = frozenset(),
    ) -> None:
        """Bring the sessions of the bots ``names`` in line with the store (``current``: each such bot as
        the store has it now, with its token's digest; a name missing from it is gone).

        A revoked bot's queued connection is ended and its seats in matches here forfeit at once; a
        connection that identified itself with a token rotated since is ended (its bot may come back
        to its seat with the new token within the grace), unless its owner renewed it (``by_owner``):
        then its match plays on to its end on that connection (a renewal is never a forfeit), and the
        new token is for its next one; a changed limit applies from the next pairing. Each ended
        connection is told why (`revoked`), and who renewed a token. Matches on the cluster are out
        of reach: their bots were sent away with seat tokens of that match alone."""
        for name, queued in list(self.queue.waiting.items()):
            if name not in names:
                continue
            why = stale(current.get(name), queued.digest, by_owner=name in by_owner)
            if why is None:
                queued.bot = current[name][0]
                stopped = queued.bot.stopped
                if stopped is not None:  # paused or banned: it leaves the queue, saying why
                    del self.queue.waiting[name]
                    queued.conn.fail(protocol.PAUSED, stopped)
                continue
            del self.queue.waiting[name]
            queued.conn.fail(protocol.REVOKED, why)
        for live in self.starter.live.values():
            for index, bot in enumerate(live.bots):
                if bot.name not in names or live.match.over:
                    continue
                seat = live.match.seats[index]
                digest = live.digests[index] if index < len(live.digests) else None
                found = current.get(bot.name)
                why = stale(found, digest, by_owner=bot.name in by_owner)
                if why is None:
                    continue
                if found is None or not found[0].active:
                    live.match.expel(index, protocol.REVOKED, why)
                elif bot.name in by_owner:
                    continue  # the owner's renewal: this match plays on; the new token is for the next
                elif seat.connected and seat.conn is not None:
                    seat.conn.fail(protocol.REVOKED, why)
