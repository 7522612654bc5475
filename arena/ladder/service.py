"""A ladder as a service: the store, a lobby seating from the rated queue, until a signal stops it.

Start-up, in this order: claim the database as its one server; refuse a database whose match ids stop
below the replays beside it (`replay_files.check_replays`); write the results a previous run kept on
disk during a database outage (`spool.ResultSpool`); then void the matches a previous run left under
way (a SIGKILL, a power cut): they have no result and change no rating. A graceful stop voids the ones
it cuts short the same way, so every match in the store ends either finished, whole, or void.
"""

from __future__ import annotations

import logging
import socket
import ssl
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import trio

from cellarena.arena.ladder.hand_off import HandOff
from cellarena.arena.ladder.house import HouseBots
from cellarena.arena.ladder.matchmaker import Policy
from cellarena.arena.ladder.replay_files import check_replays, replay_path
from cellarena.arena.ladder.seating import LadderRules, LadderSeating
from cellarena.arena.ladder.spool import ResultSpool
from cellarena.arena.ladder.store import LadderStore, LadderStoreError
from cellarena.server.confinement import Limits
from cellarena.server.games import get_engine
from cellarena.server.games.base import ConfigError, Engine
from cellarena.server.lobby import Lobby, LobbyConfig
from cellarena.server.match import Recorder, TickSettings
from cellarena.server.replay import ReplayWriter
from cellarena.server.service import serve_until_signalled
from cellarena.server.trusted_proxies import TrustedProxies

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
    #: Serve TLS with this context (`cellarena.server.tls.server_context`), or plain TCP.
    tls: ssl.SSLContext | None = None
    rules: LadderRules = field(default_factory=LadderRules)
    #: Proxies whose connections start with a PROXY header naming the client (``--trusted-proxy``).
    trusted_proxies: TrustedProxies = field(default_factory=TrustedProxies)
    #: Where replays go (``ladder-<match id>.replay``), or None for none.
    replay_dir: Path | None = None
    #: Where results wait that the database cannot take (an outage), or None: such results are lost.
    spool_dir: Path | None = None
    #: Where house bots' logs go; None: house bots are not started.
    log_dir: Path | None = None
    #: Seconds a bot waits in the queue before a house bot is started for it.
    house_after: float = 5.0
    #: How house bots are confined (docs/security.md).
    house_limits: Limits = field(default_factory=Limits)
    isolate: bool = False
    seed: int = 0

    def config_for(self, map_name: str | None) -> dict[str, Any]:
        if map_name is None or self.map_key is None:
            return dict(self.engine_config)
        return {**self.engine_config, self.map_key: map_name}


def build(
    store: LadderStore, config: LadderConfig, hand_off: HandOff | None = None
) -> tuple[Lobby, LadderSeating]:
    """The lobby and its ladder seating (which hands matches to ``hand_off``'s cluster when given).
    Every map of the pool is loaded here, so a bad config or map fails (ConfigError) before anyone
    connects."""
    engine_class = get_engine(config.game)
    players = {engine_class.new(config.config_for(m), config.seed).players for m in config.maps}
    if len(players) != 1:
        raise ConfigError(
            f"the maps of a ladder's pool must have the same seats; these have {sorted(players)}"
        )
    seating = LadderSeating(
        store,
        config.game,
        Policy(seats=players.pop(), maps=config.maps),
        config.config_for,
        rules=config.rules,
        seed=config.seed,
        hand_off=hand_off,
        replay_dir=config.replay_dir,
        spool=None if config.spool_dir is None else ResultSpool(config.spool_dir),
    )

    def recorder(number: int, engine: Engine, names: list[str], seed: int) -> Recorder | None:
        ladder_id = seating.starting_id
        if config.replay_dir is None or ladder_id is None:
            return None
        path = replay_path(config.replay_dir, ladder_id)
        # Exclusive: a replay of another ladder under that name stays (the lobby logs it, and the
        # match is played without one).
        writer = ReplayWriter(path, engine, seed=seed, names=names, exclusive=True, events=True)
        seating.replays[ladder_id] = str(path)
        return writer

    lobby_config = LobbyConfig(
        config.game,
        config.config_for(config.maps[0]),
        config.settings,
        host=config.host,
        port=config.port,
        matches=None,
        seed=config.seed,
        recorder=recorder,
        on_result=seating.record,
        tls=config.tls,
        max_connections_per_address=config.rules.max_connections_per_address,
        max_spectators_per_address=config.rules.max_spectators_per_address,
        trusted_proxies=config.trusted_proxies,
    )
    return Lobby(lobby_config, seating), seating


def prepare(
    store: LadderStore,
    config: LadderConfig,
    spool: ResultSpool | None,
    notify: Callable[[str], None] = lambda text: None,
) -> None:
    """What a ladder server does before it serves (the module docstring's order); LadderStoreError
    when it must not serve, with nothing voided."""
    store.claim_server()
    if config.replay_dir is not None:
        check_replays(store, config.replay_dir)
    if spool is not None and spool.pending():
        try:
            written = spool.flush(store)
        except LadderStoreError as exc:
            raise LadderStoreError(
                f"{exc}; results of matches played by the last run wait in {spool.folder} and must be "
                "written before anything is voided: start again once the database takes writes"
            ) from None
        notify(f"wrote {written} result(s) a previous run kept on disk")
    voided = store.void_running()
    if voided:
        notify(f"voided {len(voided)} match(es) a previous run left under way")


async def run_ladder(
    store: LadderStore,
    config: LadderConfig,
    *,
    on_listening: Callable[[int], None] = lambda port: None,
    notify: Callable[[str], None] = lambda text: None,
    hand_off: HandOff | None = None,
    health_sock: socket.socket | None = None,
) -> None:
    """Serve the ladder until a signal (or cancellation) stops it; see the module docstring. With
    ``hand_off``, matches between bots that follow redirects are played on its cluster; with
    ``health_sock`` (bound), ``/health`` is served there (`cellarena.arena.ladder.health`)."""
    lobby, seating = build(store, config, hand_off)
    await trio.to_thread.run_sync(prepare, store, config, seating.spool, notify)
    await seating.database.start()  # changes from now on: what came before is in the store already
    try:
        async with trio.open_nursery() as nursery:
            if health_sock is not None:
                from cellarena.arena.ladder.health import serve_health

                nursery.start_soon(serve_health, seating, health_sock)

            def listening(port: int) -> None:
                on_listening(port)
                if config.log_dir is not None:
                    house = HouseBots(
                        store,
                        seating,
                        config.log_dir,
                        after=config.house_after,
                        limits=config.house_limits,
                        isolate=config.isolate,
                    )
                    nursery.start_soon(house.run, port)

            await serve_until_signalled(lobby, on_listening=listening, notify=notify)
            nursery.cancel_scope.cancel()  # the house bots' task, which stops them
    finally:
        with trio.CancelScope(shield=True):
            await seating.void_unfinished("the ladder stopped while it was under way")
