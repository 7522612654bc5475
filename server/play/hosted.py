"""One match hosted for another server: a ladder hands a match to this machine, and its bots come here.

A ladder that plays its matches on a cluster (docs/ladder.md, "Matches on a cluster") sends each
bot a ``redirect`` to the machine that hosts its match, with a fresh seat token. This module is
that machine's side, with no cluster in it: `host_match` opens a lobby for the one match, says
where it listens (``publish``), seats the bots by their tokens, plays, and returns the outcome and
the replay's bytes for the ladder to record. The cluster glue is the ladder's
(`cellarena.arena.ladder.hosting.cluster_hand_off`).

The seat tokens themselves never come here: the job carries only their SHA-256 digests, so the
cluster's own channels (which may be plain TCP) never carry a secret; a bot's token crosses the
network only from the ladder to the bot and from the bot to this host, over TLS unless both ends
are this machine or the host said ``insecure``. A bot whose connection drops may come back with its
token within the match's reconnection grace, as on the ladder itself.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import logging
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from cellarena.sdk.client import is_loopback
from cellarena.sdk.protocol import BAD_HELLO, SEAT_TAKEN
from cellarena.server.games.base import Engine
from cellarena.server.net.connection import Connection
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import MatchOutcome, Recorder, TickSettings
from cellarena.server.play.seating import Refusal, ReservedSeating
from cellarena.server.replay import ReplayWriter
from cellarena.server.scratch_folders import owned_folder

log = logging.getLogger("cellarena.hosted")

#: Seconds the bots have to arrive after the match host starts listening.
DEFAULT_CONNECT_TIMEOUT = 15.0


def token_digest(token: str) -> str:
    """What a hosted match knows of a seat token: its SHA-256, in hex."""
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


class HostingError(RuntimeError):
    """This machine cannot host the match (no TLS for a public address, a bad config, no port)."""


@dataclass(frozen=True)
class HostedMatch:
    """A match to host: what the ladder decided, and how to listen. Picklable, and free of secrets."""

    ladder_id: int
    game: str
    engine_config: dict[str, Any]
    seed: int
    names: tuple[str, ...]
    #: `token_digest` of each seat's token, by seat.
    token_digests: tuple[str, ...]
    settings: TickSettings = field(default_factory=TickSettings)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    #: The address the bots are sent to; None: the caller fills in the machine's own.
    public_host: str | None = None
    #: Serve TLS with this certificate and key (paths on the hosting machine).
    tls_cert: str | None = None
    tls_key: str | None = None
    #: Take tokens over plain TCP from other machines (the ladder's ``--insecure``).
    insecure: bool = False
    #: Seconds after which the match is given up whatever happens (a bound on a stuck worker).
    time_limit: float = 3600.0

    @property
    def tls(self) -> bool:
        return self.tls_cert is not None


@dataclass(frozen=True)
class HostedResult:
    """What comes back: the outcome (None: the match ended without one), whether each seat's bot
    ever came, the replay file's bytes, and where it was played."""

    ladder_id: int
    outcome: MatchOutcome | None
    connected: tuple[bool, ...]
    replay: bytes | None
    host: str
    port: int

    @property
    def anybody_came(self) -> bool:
        return any(self.connected)


class HostedSeating(ReservedSeating):
    """`ReservedSeating` by token digest, where a token's newest connection takes its seat: before the
    start, and during the match while the seat has not forfeited (within the reconnection grace
    once its connection dropped). A ladder's token reached its bot alone, over TLS, so a second
    connection with it is that bot coming back, often before this side noticed the first one drop."""

    def __init__(self, digests: tuple[str, ...], names: list[str], *, timeout: float) -> None:
        super().__init__({d: seat for seat, d in enumerate(digests)}, names, timeout=timeout)
        #: Seats whose bot connected at some point.
        self.came: set[int] = set()

    def _seat_of(self, token: object) -> int | None:
        if not isinstance(token, str):
            return None
        digest = token_digest(token)
        # Compared in constant time, as every token is: no early exit on the first differing byte.
        found = None
        for known, seat in self.tokens.items():
            if hmac.compare_digest(known, digest):
                found = seat
        return found

    def _in_play(self, seat: int) -> bool:
        """Seat ``seat`` is in the match under way and has not forfeited: its bot may take it back."""
        running = self.lobby.running  # the one match, once started and until it ends
        return bool(running) and running[0].seats[seat].forfeit_tick is None and not running[0].over

    def check(self, conn: Connection, hello: dict[str, Any]) -> tuple[str, str] | None:
        seat = self._seat_of(hello.get("token"))
        if seat is None:
            return BAD_HELLO, "this match host seats only the bots its ladder sent here: send their token"
        if seat in self._played and not self._in_play(seat):
            return SEAT_TAKEN, "that token's seat has forfeited or its match is over"
        return None

    def refused(self, conn: Connection, hello: dict[str, Any], code: str, message: str) -> None:
        seat = self._seat_of(hello.get("token"))
        if seat is not None and seat not in self.seated and not self.lobby.matches_started:
            conn.name = self.names[seat]
            self.refusals[seat] = Refusal(code, message, hello.get("game"))

    def returning(self, hello: dict[str, Any]) -> bool:
        seat = self._seat_of(hello.get("token"))
        return seat is not None and seat in self._played

    def admit(self, conn: Connection, hello: dict[str, Any]) -> None:
        seat = self._seat_of(hello.get("token"))
        assert seat is not None  # check() let it in
        self.came.add(seat)
        if seat in self._played:
            for match in self.lobby.running:
                match.reattach(seat, conn)  # which closes the seat's old connection
            return
        old = self.seated.get(seat)
        if old is not None:
            old.close("replaced by the bot's new connection")
        # The base class finds the seat by the key its table holds: the digest.
        super().admit(conn, {**hello, "token": token_digest(hello["token"])})


def host_match(job: HostedMatch, publish: Callable[[str, int], None], *, host: str) -> HostedResult:
    """Host ``job`` (blocking: its own trio run), telling ``publish(host, port)`` where the bots go as
    soon as it listens. ``host`` is the address the bots are sent to, when the job names none."""
    return trio.run(_host, job, publish, job.public_host or host)


async def _host(job: HostedMatch, publish: Callable[[str, int], None], host: str) -> HostedResult:
    if job.tls_cert is None and not is_loopback(host) and not job.insecure:
        raise HostingError(
            f"the match would take seat tokens in clear at {host}: give the ladder --tls-cert/--tls-key "
            "(present at the same paths on every worker), or --insecure on a network you trust"
        )
    tls = None
    if job.tls_cert is not None:
        from cellarena.server.net.tls import TlsConfigError, server_context

        try:
            tls = server_context(job.tls_cert, job.tls_key or job.tls_cert)
        except TlsConfigError as exc:
            raise HostingError(str(exc)) from None
    outcomes: list[MatchOutcome] = []
    seating = HostedSeating(job.token_digests, list(job.names), timeout=job.connect_timeout)
    with owned_folder("cellarena-hosted-") as folder:
        replay = Path(folder) / "match.replay"

        def recorder(_number: int, engine: Engine, names: list[str], seed: int) -> Recorder:
            return ReplayWriter(replay, engine, seed=seed, names=names, events=True)

        lobby = Lobby(
            LobbyConfig(
                job.game,
                job.engine_config,
                job.settings,
                host=_bind_address(host),
                port=0,
                matches=1,
                seed=job.seed,
                recorder=recorder,
                on_result=outcomes.append,
                tls=tls,
            ),
            seating,
        )
        port = 0
        with trio.move_on_after(job.time_limit) as limit:
            async with trio.open_nursery() as nursery:
                port = await nursery.start(lobby.serve)  # serve() returns once the one match is over
                publish(host, port)
                log.info(
                    "hosting ladder match %d (%s) at %s:%d", job.ladder_id, " vs ".join(job.names), host, port
                )
        if limit.cancelled_caught:
            log.error(
                "ladder match %d outlasted its %g s limit; it ends without a result",
                job.ladder_id,
                job.time_limit,
            )
            outcomes.clear()
        data = replay.read_bytes() if replay.exists() and outcomes else None
    connected = tuple(seat in seating.came for seat in range(len(job.names)))
    return HostedResult(job.ladder_id, outcomes[0] if outcomes else None, connected, data, host, port)


def _bind_address(host: str) -> str:
    """Where to listen for bots sent to ``host``: on loopback for a loopback address (nothing else
    may reach it), else on every interface, as a public address may reach this machine through NAT."""
    if not is_loopback(host):
        return "0.0.0.0"
    return "127.0.0.1" if host == "localhost" else str(ipaddress.ip_address(host))
