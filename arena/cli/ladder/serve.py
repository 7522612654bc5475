"""`ladder serve GAME`: a ladder's server for one game, over its database.

The command parses its options into `LadderServeArgs` and hands over to `serve_ladder`: the config
(`ladder_config`), checked before anyone connects, then the server until a signal stops it.
"""

from __future__ import annotations

import contextlib
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any
from urllib.parse import quote

import click

from cellarena.arena.cli.ladder.match_hosts import cluster_hand_off, local_workers_for
from cellarena.arena.cli.ladder.serve_options import serve_options
from cellarena.arena.cli.ladder.where import Where
from cellarena.arena.cluster import ClusterSpec
from cellarena.arena.ladder.policy import NEW_VERSION_RATINGS
from cellarena.server.cli.confine_options import confine
from cellarena.server.cli.game_cli import GameCli, GameGroup, config_error, engine_config
from cellarena.server.cli.params import (
    PacingArgs,
    command_args,
    decorate,
    map_list,
    tls_context,
    trusted_proxies,
    writable_folder,
)
from cellarena.server.cli.run import configure_logging, run_trio
from cellarena.server.games.base import ConfigError

if TYPE_CHECKING:
    from cellarena.arena.ladder.ops.wiring import LadderConfig
    from cellarena.arena.ladder.store.ladder_store import LadderStore


@dataclass(frozen=True)
class LadderServeArgs(PacingArgs):
    """What `ladder serve GAME` was told, but the game's own options."""

    maps: str | None
    host: str
    port: int
    public_host: str | None
    public_port: int | None
    grace: float
    house_after: float
    insecure: bool
    seed: int
    verbose: bool
    tls_cert: str | None
    tls_key: str | None
    cluster: ClusterSpec | None
    cluster_host: str | None
    trusted_proxy: tuple[str, ...]
    health_port: int | None
    health_host: str
    pause_after: int
    new_version_rating: str
    challenges_per_day: int
    challenges_rated: bool
    workers: int
    workers_host: str | None
    starve_after: float
    pools: str


def _serve_command(game: str) -> click.Command:
    from cellarena.server.games import plugin

    game_plugin = plugin(game)
    cli = game_plugin.game_cli()

    def serve_game(**values: Any) -> None:
        where = click.get_current_context().find_object(Where)
        assert where is not None  # the ladder group made it
        args, game_values = command_args(LadderServeArgs, values)
        serve_ladder(game, cli, where, args, game_values)

    doc = (
        f"Serve a {game} ladder ({game_plugin.summary}): registered bots connect with their tokens, "
        "queue, and play rated matches against bots of close rating. Ctrl-C or SIGTERM stops; "
        "matches under way are voided (no rating change)."
    )
    return click.command(game, help=doc)(decorate(serve_game, serve_options(game_plugin, cli)))


serve = GameGroup("serve", factory=_serve_command, help="Serve a ladder of one game.")


def serve_ladder(
    game: str, cli: GameCli, where: Where, args: LadderServeArgs, game_values: dict[str, Any]
) -> None:
    """Serve ``game``'s ladder on ``where``'s database until a signal stops it; every error in what it
    was told is a click error, said before anyone connects."""
    from cellarena.arena.ladder.ops.wiring import build
    from cellarena.sdk.client import is_loopback

    config = ladder_config(game, cli, where, args, game_values)
    if not is_loopback(args.host) and not args.insecure and config.tls is None:
        click.echo(
            f"{args.host} is not a loopback address and this port is plain TCP: bots from other machines "
            "are refused (tls_required) so that no token crosses the network in clear; give "
            "--tls-cert/--tls-key (or --insecure to allow tokens in clear)",
            err=True,
        )
    local_workers = local_workers_for(
        args.workers, args.workers_host, config, args.cluster, args.tls_cert, args.tls_key, args.insecure,
        args.verbose,
    )  # fmt: skip
    if args.cluster is None and args.cluster_host is not None:
        raise click.BadParameter(
            "it names where bots reach the cluster's workers: give --cluster too",
            param_hint="--cluster-host",
        )
    health_sock = _health_socket(args.health_host, args.health_port)
    store = where.open()
    try:
        try:
            build(store, config)  # the config and every map of the pool, checked before serving
        except ConfigError as exc:
            raise config_error(game, exc) from None
        with contextlib.ExitStack() as stack:
            if health_sock is not None:
                stack.callback(health_sock.close)
            hand_off: Any = local_workers
            if args.cluster is not None:
                hand_off = stack.enter_context(
                    cluster_hand_off(
                        args.cluster, config, args.cluster_host, args.tls_cert, args.tls_key, args.insecure
                    )
                )
            _run(store, config, args, hand_off, health_sock, in_workers=local_workers is not None)
    finally:
        store.close()


def ladder_config(
    game: str, cli: GameCli, where: Where, args: LadderServeArgs, game_values: dict[str, Any]
) -> LadderConfig:
    """The ladder's config from what the command was told: its folders made, its values checked."""
    from cellarena.arena.ladder.ops.wiring import LadderConfig
    from cellarena.arena.ladder.policy import CommunityPolicy
    from cellarena.arena.ladder.rules import LadderRules
    from cellarena.arena.ladder.services.builds import BuildSettings
    from cellarena.arena.ladder.services.house import HouseTls
    from cellarena.arena.ladder.services.spool import FOLDER as SPOOL_FOLDER

    trusted = trusted_proxies(args.trusted_proxy)
    configure_logging(args.verbose)
    house_limits, isolate = confine(game_values)  # for house bots (docs/security.md)
    pool: tuple[str | None, ...] = (None,)
    if args.maps:
        if cli.map_key is None:
            raise click.BadParameter(f"{game} has no maps", param_hint="--maps")
        pool = tuple(map_list(args.maps))
    elif cli.map_key is not None and cli.default_maps:
        pool = tuple(cli.default_maps)
    replay_dir = writable_folder(where.folder / "replays", "--dir")
    return LadderConfig(
        game,
        engine_config(game, game_values),
        map_key=cli.map_key,
        maps=pool,
        settings=args.tick_settings(reconnect_grace=args.grace),
        host=args.host,
        port=args.port,
        tls=tls_context(args.tls_cert, args.tls_key),
        rules=LadderRules(insecure=args.insecure, starve_after=args.starve_after, pools=args.pools),
        trusted_proxies=trusted,
        replay_dir=replay_dir,
        # A folder per game: several games' servers may share the ladder's folder and database.
        spool_dir=writable_folder(where.folder / SPOOL_FOLDER / quote(game, safe=""), "--dir"),
        legacy_spool_dir=where.folder / SPOOL_FOLDER,
        log_dir=writable_folder(where.folder / "logs", "--dir"),
        house_after=args.house_after,
        house_limits=house_limits,
        house_tls=None if args.tls_cert is None else HouseTls.of_certificate(args.tls_cert),
        isolate=isolate,
        seed=args.seed,
        # Versions uploaded to `ladder web` on the same folder (docs/ladder.md, "Submitting a bot").
        builds=BuildSettings(where.folder, game_values=dict(game_values)),
        policy=CommunityPolicy(
            pause_after=args.pause_after,
            new_version_rating=next(r for r in NEW_VERSION_RATINGS if r == args.new_version_rating),
            challenges_per_day=args.challenges_per_day,
            challenges_rated=args.challenges_rated,
        ),
        public_host=args.public_host,
        public_port=args.public_port,
        tls_cert=args.tls_cert,
    )


def _run(
    store: LadderStore, config: LadderConfig, args: LadderServeArgs, hand_off: Any, health_sock: Any, *,
    in_workers: bool,
) -> None:  # fmt: skip
    """Serve until a signal: the ladder's own errors are one line, Ctrl-C a clean stop."""
    import gc

    from cellarena.arena.ladder.hosting.worker_pool import WorkerStartError
    from cellarena.arena.ladder.ops.wiring import run_ladder
    from cellarena.arena.ladder.store.ladder_store import LadderStoreError

    gc.collect()
    gc.freeze()

    def listening(bound: int) -> None:
        on = f"; matches played on the cluster {args.cluster}" if args.cluster else ""
        if in_workers:
            on = f"; matches played in {args.workers} worker processes"
        if health_sock is not None:
            from cellarena.server.web.serving import url_of

            on += f"; health at {url_of(health_sock, '/health')}"
        click.echo(
            f"ladder: {config.game} on {args.host}:{bound}{' (TLS)' if config.tls else ''}, "
            f"maps {', '.join(m or 'default' for m in config.maps)}{on}; "
            f"database {store.where}; Ctrl-C stops",
            err=True,
        )

    async def main() -> None:
        await run_ladder(
            store,
            config,
            on_listening=listening,
            notify=lambda text: click.echo(text, err=True),
            hand_off=hand_off,
            health_sock=health_sock,
        )

    try:
        run_trio(main)
    except (OSError, LadderStoreError, WorkerStartError) as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("stopped", err=True)


def _health_socket(host: str, port: int | None) -> Any:
    """The bound socket of ``--health-port``, or None without it; a clear error if it cannot be."""
    if port is None:
        return None
    try:
        from cellarena.server.web.serving import BindError, bind
    except ImportError as exc:
        raise click.UsageError(
            f"--health-port needs the 'web' extra ({exc}); pip install 'cellarena[web]'"
        ) from None
    try:
        return bind(host, port)
    except BindError as exc:
        raise click.BadParameter(str(exc), param_hint="--health-port") from None
