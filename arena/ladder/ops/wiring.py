"""A ladder as a service: the store, a lobby seating from the rated queue, until a signal stops it.

`build` makes the ladder's services (`seating`: admission, the queue, the match starter, results) and
wires them to each other and to a lobby; `run_ladder` drives their one lifecycle (`lifecycle`):

- initialize, before the lobby listens: the results service claims the database as its game's one
  server (servers of other games may share it),
  refuses a database whose match ids stop below the replays beside it (`replay_files.check_replays`),
  writes the results a previous run kept on disk during a database outage (`spool.ResultSpool`), then
  voids the game's matches a previous run left under way (a SIGKILL, a power cut): they have no result and
  change no rating; admission starts reading the change log from its newest entry;
- run, in the lobby's nursery (`LadderSeating.run`);
- graceful shutdown, at the first stop signal: admission takes no more bots, the queue pairs no more;
- shutdown, once the lobby has stopped: the starter voids the matches it cut short, here and on the
  cluster, and the results service writes those handed to it; so every match in the store ends either
  finished, whole, or void.
"""

from __future__ import annotations

import functools
import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from cellarena.arena.ladder.connect_commands import Endpoint
from cellarena.arena.ladder.hosting.worker_pool import LocalWorkers
from cellarena.arena.ladder.matchmaking.matchmaker import Policy
from cellarena.arena.ladder.matchmaking.pools import pool_mode
from cellarena.arena.ladder.ops.endpoint import endpoint_of, record_endpoint
from cellarena.arena.ladder.policy import CommunityPolicy
from cellarena.arena.ladder.rules import LadderRules
from cellarena.arena.ladder.services.admission import Admission
from cellarena.arena.ladder.services.builds import BuildSettings
from cellarena.arena.ladder.services.changes import DatabaseWatch
from cellarena.arena.ladder.services.counters import LadderStats
from cellarena.arena.ladder.services.handed import HandedConnections
from cellarena.arena.ladder.services.house import HouseBots, HouseTls
from cellarena.arena.ladder.services.match_results import Results
from cellarena.arena.ladder.services.match_results import prepare as results_prepare
from cellarena.arena.ladder.services.queue import MatchQueue
from cellarena.arena.ladder.services.seating import LadderSeating
from cellarena.arena.ladder.services.spool import ResultSpool
from cellarena.arena.ladder.services.starter import HandsOff, MatchStarter
from cellarena.arena.ladder.services.submitted_bots import SubmittedBots
from cellarena.arena.ladder.store.ladder_store import LadderStore
from cellarena.server.bots.confinement import Limits
from cellarena.server.games import get_engine
from cellarena.server.games.base import ConfigError
from cellarena.server.net.trusted_proxies import TrustedProxies
from cellarena.server.play.lobby import Lobby, LobbyConfig
from cellarena.server.play.match import TickSettings
from cellarena.server.service import serve_until_signalled

log = logging.getLogger("cellarena.ladder")


@dataclass(frozen=True)
class LadderConfig:
    """What one ladder plays: one game, its base config, the map pool, pacing and limits."""

    game: str
    #: The engine config of every match; the map pool's key (``map_key``) is set per match.
    engine_config: dict[str, Any]
    #: The config key a map goes in (the game plugin's ``map_key``), or None if the game has no maps.
    map_key: str | None = None
    #: The pool (None: the base config's own map).
    maps: tuple[str | None, ...] = (None,)
    settings: TickSettings = field(default_factory=lambda: TickSettings(reconnect_grace=5.0))
    host: str = "127.0.0.1"
    port: int = 7777
    #: Serve TLS with this context (`cellarena.server.net.tls.server_context`), or plain TCP.
    tls: ssl.SSLContext | None = None
    rules: LadderRules = field(default_factory=LadderRules)
    #: Proxies whose connections start with a PROXY header naming the client (``--trusted-proxy``).
    trusted_proxies: TrustedProxies = field(default_factory=TrustedProxies)
    #: Where replays go (``ladder-<match id>.replay``), or None for none.
    replay_dir: Path | None = None
    #: Where results wait that the database cannot take (an outage), or None: such results are lost.
    spool_dir: Path | None = None
    #: The spool folder of a ladder from before servers per game (any game's results; this game's are
    #: written at start), or None.
    legacy_spool_dir: Path | None = None
    #: Where house bots' logs go; None: house bots are not started.
    log_dir: Path | None = None
    #: Seconds a bot waits in the queue before a house bot is started for it.
    house_after: float = 5.0
    #: How house bots are confined (docs/security.md).
    house_limits: Limits = field(default_factory=Limits)
    #: How house bots reach a TLS bot port (`house.HouseTls`), or None: plain TCP.
    house_tls: HouseTls | None = None
    #: Seconds a house bot may go neither queued nor playing before it is stopped (`house.HouseBots`).
    house_idle_limit: float = 30.0
    #: Seconds a connection has to say hello before the lobby closes it.
    hello_timeout: float = LobbyConfig.hello_timeout
    isolate: bool = False
    seed: int = 0
    #: Where and how submitted versions are built (`services.builds`); None: they are not.
    builds: BuildSettings | None = None
    #: Pausing, versions and challenges (written to the database as the server starts).
    policy: CommunityPolicy = field(default_factory=CommunityPolicy)
    #: What a proxy or NAT shows bots from outside (``--public-host``, ``--public-port``; None: the
    #: listening address and port), and the certificate chain file bots may be told to trust: recorded
    #: for the pages' connect page as the server listens (`ops.endpoint`).
    public_host: str | None = None
    public_port: int | None = None
    tls_cert: str | None = None

    def config_for(self, map_name: str | None) -> dict[str, Any]:
        if map_name is None or self.map_key is None:
            return dict(self.engine_config)
        return {**self.engine_config, self.map_key: map_name}


def build(
    store: LadderStore,
    config: LadderConfig,
    hand_off: HandsOff | None = None,
    *,
    notify: Callable[[str], None] = lambda text: None,
) -> tuple[Lobby, LadderSeating]:
    """The lobby and the ladder's services, wired (`seating`; the starter hands matches to
    ``hand_off``, a cluster or local workers, when given). Every map of the pool is loaded here, so
    a bad config or map fails (ConfigError) before anyone connects."""
    engine_class = get_engine(config.game)
    players = {engine_class.new(config.config_for(m), config.seed).players for m in config.maps}
    if len(players) != 1:
        raise ConfigError(
            f"the maps of a ladder's pool must have the same seats; these have {sorted(players)}"
        )
    rules = config.rules
    database = DatabaseWatch(store, every=rules.poll_every)
    stats = LadderStats()
    results = Results(
        store,
        config.game,
        database,
        spool=None if config.spool_dir is None else ResultSpool(config.spool_dir),
        legacy_spool=None if config.legacy_spool_dir is None else ResultSpool(config.legacy_spool_dir),
        replay_dir=config.replay_dir,
        notify=notify,
    )
    policy = Policy(
        seats=players.pop(),
        maps=config.maps,
        starve_after=rules.starve_after,
        uncertainty_window=rules.uncertainty_window,
    )
    queue = MatchQueue(
        policy,
        results,
        database,
        every=rules.match_every,
        seed=config.seed,
        stats=stats,
        pending_challenges=functools.partial(store.pending_challenges, config.game),
        pools=pool_mode(rules.pools),
    )
    starter = MatchStarter(
        store,
        config.game,
        config.config_for,
        queue,
        results,
        every=rules.match_every,
        hand_off=hand_off,
        replay_dir=config.replay_dir,
        stats=stats,
    )
    queue.bind(starter)
    admission = Admission(store, config.game, queue, starter, database, rules=rules)
    seating = LadderSeating(admission, queue, starter, results, database)
    lobby_config = LobbyConfig(
        config.game,
        config.config_for(config.maps[0]),
        config.settings,
        host=config.host,
        port=config.port,
        matches=None,
        seed=config.seed,
        on_result=starter.record,
        tls=config.tls,
        max_connections_per_address=rules.max_connections_per_address,
        max_spectators_per_address=rules.max_spectators_per_address,
        trusted_proxies=config.trusted_proxies,
        hello_timeout=config.hello_timeout,
    )
    return Lobby(lobby_config, seating), seating


def prepare(
    store: LadderStore,
    config: LadderConfig,
    spool: ResultSpool | None,
    notify: Callable[[str], None] = lambda text: None,
) -> None:
    """What a ladder server does to its store before it serves (`match_results.prepare`, which the results
    service's `initialize` runs); LadderStoreError when it must not serve, with nothing voided."""
    legacy = None if config.legacy_spool_dir is None else ResultSpool(config.legacy_spool_dir)
    results_prepare(store, config.replay_dir, spool, notify, game=config.game, legacy_spool=legacy)


async def run_ladder(
    store: LadderStore,
    config: LadderConfig,
    *,
    on_listening: Callable[[int], None] = lambda port: None,
    notify: Callable[[str], None] = lambda text: None,
    hand_off: HandsOff | None = None,
    health_sock: socket.socket | None = None,
) -> None:
    """Serve the ladder until a signal (or cancellation) stops it; see the module docstring. With
    ``hand_off``, matches between bots that follow redirects are played on its cluster, or in its
    worker processes (`hosting.worker_pool.LocalWorkers`, started here before the lobby listens and
    stopped after it; `WorkerStartError` if one cannot start); with
    ``health_sock`` (bound), ``/health`` is served there (`cellarena.arena.ladder.ops.health`)."""
    lobby, seating = build(store, config, hand_off, notify=notify)
    services = seating.services
    # The policy first: the pages and commands that take challenges, and a result counted from the
    # spool at start, read it from the database. It is the database's, so every game's server's.
    held = await trio.to_thread.run_sync(store.policy)
    if held != config.policy:
        changed = ", ".join(
            f"{name} {value} (was {held.to_settings()[name]})"
            for name, value in config.policy.to_settings().items()
            if held.to_settings()[name] != value
        )
        notify(
            f"the community policy changes for every game on this database: {changed}; give every game's "
            "server the same options"
        )
    await trio.to_thread.run_sync(store.set_policy, config.policy)
    await services.initialize()
    try:
        async with trio.open_nursery() as nursery:
            if isinstance(hand_off, LocalWorkers):
                await nursery.start(hand_off.run)
            if config.builds is not None:
                builds = config.builds.loop(
                    store, config.game, match_limits=config.house_limits, isolate=config.isolate
                )
                nursery.start_soon(builds.run)
            if health_sock is not None:
                from cellarena.arena.ladder.ops.health import serve_health

                nursery.start_soon(serve_health, seating, health_sock)

            def listening(port: int) -> None:
                on_listening(port)
                nursery.start_soon(record_endpoint, store.set_endpoint, _endpoint(config, port), notify)
                if config.log_dir is not None:
                    house = HouseBots(
                        store,
                        seating,
                        config.log_dir,
                        after=config.house_after,
                        idle_limit=config.house_idle_limit,
                        hello_timeout=lobby.config.hello_timeout,
                        limits=config.house_limits,
                        isolate=config.isolate,
                        tls=config.house_tls,
                    )
                    # A house bot's token seats only a connection its own processes hold.
                    seating.admission.house_owner = house.holds
                    # A launch that never joins the queue is a failure with its cause (refused, no hello).
                    seating.on_connected = house.connected
                    seating.on_hello = house.hello
                    # A house bot whose process exits mid-match reads `exited` or `limit`, not `disconnected`.
                    seating.starter.explain_house = house.explain
                    if config.builds is not None:
                        _start_submitted(nursery, store, config, house)
                        # An isolated submitted bot has no network: the ladder hands it its connection.
                        house.handed = HandedConnections(lobby.accept_handed)
                        seating.handed_secret = house.handed.secret
                    nursery.start_soon(house.run, port)

            await serve_until_signalled(
                lobby, on_listening=listening, notify=notify, on_stop=services.graceful_shutdown
            )
            if isinstance(hand_off, LocalWorkers) and seating.starter.remote:
                # The line above counted the lobby's own matches; these end as the workers stop.
                notify(
                    f"and {len(seating.starter.remote)} match(es) under way in workers ended without a result"
                )
            nursery.cancel_scope.cancel()  # the house bots', the builder's tasks and the workers: stops them
    finally:
        await services.shutdown()  # shielded: voids what was cut short, writes the last results


def _endpoint(config: LadderConfig, port: int) -> Endpoint:
    return endpoint_of(
        config.game, host=config.host, port=port, public_host=config.public_host,
        public_port=config.public_port, tls=config.tls, cert_file=config.tls_cert,
    )  # fmt: skip


def _start_submitted(
    nursery: trio.Nursery, store: LadderStore, config: LadderConfig, house: HouseBots
) -> None:
    """Bots with a live submitted version, started for matches by ``house``'s path (`submitted_bots`)."""
    assert config.builds is not None
    submitted = SubmittedBots(
        store,
        config.game,
        config.builds.folder,
        isolate=config.isolate,
        python_packages=config.builds.limits.python_packages,
        limits=config.house_limits,
        build_limits=config.builds.limits,
    )
    house.submitted = submitted
    # One that cannot follow a redirect (isolated) is started by the worker that plays its match.
    house.seating.starter.launch_there = submitted.seat_launch
    house.seating.admission.launch_token = submitted.token_of

    def moved(name: str, path: Path) -> None:
        launched = house.launched.get(name)
        if launched is not None:
            launched.log = path  # so that a seat's cause reads the log's last line where it now is

    submitted.on_log_moved = moved
    # Its process exiting mid-match is said as a house bot's is (``exited``, ``limit``).
    house.seating.starter.started_here = lambda name: name in house.running and name in submitted.live
    house.seating.starter.on_match = lambda ladder_id, match: submitted.match_started(
        ladder_id, [seat.name for seat in match.seats]
    )
    nursery.start_soon(submitted.run)
