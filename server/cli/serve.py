"""`cellarena serve GAME`: host matches that bots connect to over TCP, until a signal stops it.

One subcommand per registered game, made from its `GameCli`; the serving itself, signals included,
is `cellarena.server.service.serve_until_signalled`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from typing import TYPE_CHECKING, Any

import click

from cellarena.server.cli.game_cli import GameGroup, config_error, engine_config
from cellarena.server.cli.params import (
    PacingArgs,
    command_args,
    decorate,
    first_budget_option,
    listen_options,
    tick_options,
    time_bank_option,
    tls_context,
    tls_options,
    writable_folder,
)
from cellarena.server.cli.run import configure_logging, run_trio
from cellarena.server.cli.web_options import bind_web, web_options
from cellarena.server.games.base import ConfigError

if TYPE_CHECKING:
    from cellarena.server.play.lobby import Lobby
    from cellarena.server.play.match import MatchOutcome


@dataclass(frozen=True)
class ServeArgs(PacingArgs):
    """What `serve GAME` was told, but the game's own options."""

    players: int | None
    host: str
    port: int
    matches: int | None
    replay_dir: str | None
    seed: int
    web: bool
    web_port: int
    verbose: bool
    tls_cert: str | None
    tls_key: str | None
    batch: bool
    workers: int


def _serve_command(game: str) -> click.Command:
    from cellarena.server.games import plugin

    game_plugin = plugin(game)
    cli = game_plugin.game_cli()

    def serve_game(**values: Any) -> None:
        args, game_values = command_args(ServeArgs, values)
        serve_command(game, args, game_values)

    doc = (
        f"Serve {game} ({game_plugin.summary}): wait for bots, seat them in arrival order, run matches. "
        "Ctrl-C or SIGTERM stops: matches under way end without a result, every client is told "
        "(error code shutdown), and the server exits; a second signal stops at once."
    )
    return click.command(game, help=doc)(decorate(serve_game, _options(game_plugin, cli)))


def serve_command(game: str, args: ServeArgs, game_values: dict[str, Any]) -> None:
    """Serve ``game`` as ``args`` say until a signal stops it, each result a JSON line on stdout; every
    error in what it was told is a click error, said before anyone connects."""
    import gc

    configure_logging(args.verbose)
    web_sock = bind_web(args.web_port) if args.web else None
    feed: Any = None
    if web_sock is not None:
        from cellarena.server.web.live import LiveFeed

        feed = LiveFeed(game)

    def report(outcome: MatchOutcome) -> None:
        click.echo(json.dumps({"match": outcome.number, **outcome.to_json()}))
        if feed is not None:
            feed.publish_result(outcome.number, outcome.to_json())

    lobby = _lobby(game, args, game_values, report)
    # What start-up made (modules, the first engine) lives as long as the server, so full garbage
    # collections, which pause every match, need not walk it again and again.
    gc.collect()
    gc.freeze()
    _serve(game, lobby, args, web_sock, feed)


def _lobby(
    game: str, args: ServeArgs, game_values: dict[str, Any], report: Callable[[MatchOutcome], None]
) -> Lobby:
    """The lobby ``args`` ask for: in this process, or a front over worker processes."""
    from cellarena.server.play.lobby import Lobby, LobbyConfig

    config = LobbyConfig(
        game,
        engine_config(game, game_values),
        args.tick_settings(),
        host=args.host,
        port=args.port,
        matches=args.matches,
        seed=args.seed,
        on_result=report,
        recorder=_replay_recorder(args.replay_dir),
        tls=tls_context(args.tls_cert, args.tls_key),
        batch=args.batch,
    )
    if args.workers > 1 and config.tls is not None:
        raise click.BadParameter(
            f"{args.workers} workers cannot serve TLS: a TLS session cannot move to a worker process; "
            "leave --workers out (one process), or end TLS in a proxy in front of the port",
            param_hint="--workers",
        )
    try:
        if args.workers > 1:
            from cellarena.server.workers.front import WorkerLobby

            lobby: Lobby = WorkerLobby(config, args.workers)
        else:
            lobby = Lobby(config)
    except ConfigError as exc:
        raise config_error(game, exc) from None
    if args.players is not None and args.players != lobby.players:
        raise click.BadParameter(
            f"this {game} config has {lobby.players} seats, not {args.players}", param_hint="--players"
        )
    return lobby


def _serve(game: str, lobby: Lobby, args: ServeArgs, web_sock: Any, feed: Any) -> None:
    """Serve until a signal, with the live view on ``web_sock`` if any."""
    from cellarena.server.service import serve_until_signalled

    host = args.host

    def listening(port: int) -> None:
        pids = lobby.worker_pids()
        in_workers = f", in {len(pids)} worker processes (pids {', '.join(map(str, pids))})" if pids else ""
        click.echo(
            f"serving {game} on {host}:{port}{' (TLS)' if lobby.config.tls else ''} "
            f"({lobby.players} seats per match{in_workers}); Ctrl-C stops",
            err=True,
        )

    async def main() -> None:
        if web_sock is None:
            await serve_until_signalled(
                lobby, on_listening=listening, notify=lambda text: click.echo(text, err=True)
            )
            return
        import trio

        from cellarena.server.web.live import LiveMatches, loopback_for, own_certificate, relay, serve_live
        from cellarena.server.web.serving import url_of

        def running() -> list[tuple[int, list[str]]]:
            return lobby.running_names()

        # The relays watch this server's own port: over TLS when it serves TLS, trusting its certificate.
        watch_tls = None if args.tls_cert is None else own_certificate(args.tls_cert)
        matches = LiveMatches(game, loopback_for(host), running, tls=watch_tls)
        async with trio.open_nursery() as nursery:

            def listening_and_watch(port: int) -> None:
                listening(port)
                click.echo(f"live view at {url_of(web_sock, '/live/')}", err=True)
                click.echo(f"every match under way at {url_of(web_sock, '/live/all')}", err=True)
                matches.port = port
                nursery.start_soon(partial(relay, loopback_for(host), port, feed, tls=watch_tls))

            nursery.start_soon(serve_live, web_sock, feed, matches)
            await serve_until_signalled(
                lobby, on_listening=listening_and_watch, notify=lambda text: click.echo(text, err=True)
            )
            nursery.cancel_scope.cancel()

    from cellarena.server.workers.front import WorkerStartError

    try:
        run_trio(main)
    except WorkerStartError as exc:
        raise click.ClickException(f"{exc} (its error is above)") from None
    except OSError as exc:
        raise click.ClickException(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("stopped", err=True)


def _options(game_plugin: Any, cli: Any) -> list[Any]:
    """Every option of `serve GAME`: the game's own, seats, pacing, the port, files, views, workers."""
    return [
        *cli.options,
        click.option(
            "--players",
            type=click.IntRange(1, 64),
            default=None,
            help="Seats per match; must agree with the config. [default: the config's]",
        ),
        *tick_options(game_plugin.engine_class()),
        first_budget_option(),
        time_bank_option(),
        *listen_options(),
        click.option(
            "--matches",
            type=click.IntRange(1),
            default=None,
            help="Stop after this many matches. [default: never]",
        ),
        click.option(
            "--replay-dir",
            type=click.Path(file_okay=False),
            default=None,
            help="Write a replay of every match here.",
        ),
        click.option(
            "--seed",
            default=0,
            show_default=True,
            type=int,
            help="Seed of the first match; then +1 per match.",
        ),
        *web_options(),
        click.option("-v", "--verbose", is_flag=True, help="Log connections and matches."),
        *tls_options(),
        click.option(
            "--batch/--no-batch",
            default=True,
            show_default=True,
            help="Step the fixed-rate matches of a phase slot as one batch, where the game offers it "
            "(Rezzo): the same results, less CPU. --no-batch steps each match on its own.",
        ),
        click.option(
            "--workers",
            default="1",
            show_default=True,
            callback=_workers,
            metavar="N|auto",
            help="Play the matches in N worker processes (auto: one per core this process may use); "
            "this process accepts the bots and hands each match's connections to a worker. Not with TLS.",
        ),
    ]


serve = GameGroup("serve", factory=_serve_command, help="Host matches that bots connect to over TCP.")


def _workers(_ctx: click.Context, _param: click.Parameter, value: str) -> int:
    from cellarena.server.workers.front import worker_count

    try:
        return worker_count(value)
    except ValueError as exc:
        raise click.BadParameter(str(exc)) from None


def _replay_recorder(replay_dir: str | None) -> Any:
    """A factory of replay writers for the lobby (picklable, for worker processes), or None."""
    if replay_dir is None:
        return None
    from pathlib import Path

    from cellarena.server.replay import ReplayFolder

    return ReplayFolder(str(writable_folder(Path(replay_dir), "--replay-dir")))
