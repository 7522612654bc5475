"""The server side's commands: sim, bench, serve and match. `cellarena.arena.cli` gathers them.

`sim` and `bench` show what the game plugins contribute to them (`sim rezzo`, `bench cata`);
`serve` and `match` make one subcommand per game from its `GameCli`.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from cellarena.server.cli.game_cli import GameGroup
from cellarena.server.cli.params import FiniteFloatRange, writable_folder
from cellarena.server.games.base import ConfigError

sim = GameGroup("sim", help="Run a game headless, with built-in agents, and report what happened.")

bench = GameGroup(
    "bench", help="Benchmarks: speed and memory goals, as ratios measured side by side in one run."
)


# ---------------------------------------------------------------------------- serve and match
def _run_trio(fn: Any) -> Any:
    """trio.run, re-raising the one exception inside nested exception groups.

    Nurseries wrap everything in groups, so without this a Ctrl-C or a bad port would never reach
    the commands' `except KeyboardInterrupt` / `except OSError`, and users would see a traceback.
    """
    import trio

    try:
        return trio.run(fn)
    except BaseExceptionGroup as group:
        leaf: BaseException = group
        while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
            leaf = leaf.exceptions[0]
        if leaf is group or isinstance(leaf, BaseExceptionGroup):
            raise
        raise leaf from None


def _tick_settings(tick_rate: float, budget_ms: float | None, fast: bool) -> Any:
    from cellarena.server.match import TickSettings

    return TickSettings(tick_rate=tick_rate, budget_ms=budget_ms, fast=fast)


def _configure_logging(verbose: bool) -> None:
    import logging

    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(message)s",
    )


def tick_options(engine_class: Any, *, fast_by_default: bool = False) -> list[Any]:
    """--tick-rate, --budget-ms and the fast switch, defaulting to the game's own pacing.

    A single match plays at the game's rate unless ``--fast``; a tournament, ``fast_by_default``,
    plays fast unless ``--realtime``.
    """
    rate = engine_class.default_tick_rate
    budget = engine_class.default_budget_ms
    if fast_by_default:
        fast = click.option(
            "--fast/--realtime",
            default=True,
            show_default=True,
            help="Next tick as soon as every seat answered, or at the fixed tick rate.",
        )
    else:
        fast = click.option(
            "--fast", is_flag=True, help="Start the next tick as soon as every seat answered."
        )
    return [
        click.option(
            "--tick-rate",
            default=rate,
            show_default=True,
            type=FiniteFloatRange(0.1, 1000),
            help="Ticks per second in fixed-rate mode.",
        ),
        click.option(
            "--budget-ms",
            default=budget,
            show_default=budget is not None,
            type=FiniteFloatRange(1, 60_000),
            help="Time per move in milliseconds, counted from when the frame was sent."
            + (" [default: one tick]" if budget is None else ""),
        ),
        fast,
    ]


def decorate(command: Any, options: list[Any]) -> Any:
    """``command`` with every click option of ``options``, in order."""
    for option in reversed(options):
        command = option(command)
    return command


def engine_config(game: str, values: dict[str, Any]) -> dict[str, Any]:
    """The engine config from the game's option values (the rest of ``values`` is ignored)."""
    from cellarena.server.cli.game_cli import game_cli

    cli = game_cli(game)
    mine, _ = cli.split(values)
    return cli.config(**mine)


def config_error(game: str, exc: Exception) -> click.BadParameter:
    """A ConfigError as a usage error, pointed at ``--map`` when the game has maps."""
    from cellarena.server.cli.game_cli import game_cli

    hint = "--map" if game_cli(game).map_key else None
    return click.BadParameter(str(exc), param_hint=hint)


def _serve_command(game: str) -> click.Command:
    from cellarena.server.games import plugin

    game_plugin = plugin(game)
    cli = game_plugin.game_cli()

    def serve_game(
        players: int | None,
        tick_rate: float,
        budget_ms: float | None,
        fast: bool,
        host: str,
        port: int,
        matches: int | None,
        replay_dir: str | None,
        seed: int,
        verbose: bool,
        **game_values: Any,
    ) -> None:
        import gc
        import signal

        import trio

        from cellarena.server.lobby import Lobby, LobbyConfig
        from cellarena.server.match import MatchOutcome

        _configure_logging(verbose)

        def report(outcome: MatchOutcome) -> None:
            click.echo(json.dumps({"match": outcome.number, **outcome.to_json()}))

        config = LobbyConfig(
            game,
            engine_config(game, game_values),
            _tick_settings(tick_rate, budget_ms, fast),
            host=host,
            port=port,
            matches=matches,
            seed=seed,
            on_result=report,
            recorder=_replay_recorder(replay_dir),
        )
        try:
            lobby = Lobby(config)
        except ConfigError as exc:
            raise config_error(game, exc) from None
        if players is not None and players != lobby.players:
            raise click.BadParameter(
                f"this {game} config has {lobby.players} seats, not {players}", param_hint="--players"
            )
        # What start-up made (modules, the first engine) lives as long as the server, so full garbage
        # collections, which pause every match, need not walk it again and again.
        gc.collect()
        gc.freeze()

        async def main() -> None:
            # Ctrl-C or SIGTERM (a service manager's stop) ends running matches without a result and
            # tells every client why; a second one stops at once.
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async with trio.open_nursery() as nursery:

                    async def serve_then_stop(task_status: trio.TaskStatus[int]) -> None:
                        await lobby.serve(task_status=task_status)
                        nursery.cancel_scope.cancel()

                    async def stop_on_signal() -> None:
                        async for _ in signals:
                            if lobby.stopping:
                                click.echo("stopping at once", err=True)
                                nursery.cancel_scope.cancel()
                                return
                            click.echo("stopping (again to stop at once)", err=True)
                            nursery.start_soon(stop_gracefully)

                    async def stop_gracefully() -> None:
                        cut = await lobby.shutdown()
                        click.echo(f"stopped; {cut} match(es) under way ended without a result", err=True)

                    bound = await nursery.start(serve_then_stop)
                    nursery.start_soon(stop_on_signal)
                    click.echo(
                        f"serving {game} on {host}:{bound} ({lobby.players} seats per match); Ctrl-C stops",
                        err=True,
                    )

        try:
            _run_trio(main)
        except OSError as exc:
            raise click.ClickException(str(exc)) from None
        except KeyboardInterrupt:
            click.echo("stopped", err=True)

    options = [
        *cli.options,
        click.option(
            "--players",
            type=click.IntRange(1, 64),
            default=None,
            help="Seats per match; must agree with the config. [default: the config's]",
        ),
        *tick_options(game_plugin.engine_class()),
        click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on."),
        click.option(
            "--port",
            default=7777,
            show_default=True,
            type=click.IntRange(0, 65535),
            help="TCP port (0: any).",
        ),
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
        click.option("-v", "--verbose", is_flag=True, help="Log connections and matches."),
    ]
    doc = (
        f"Serve {game} ({game_plugin.summary}): wait for bots, seat them in arrival order, run matches. "
        "Ctrl-C or SIGTERM stops: matches under way end without a result, every client is told "
        "(error code shutdown), and the server exits; a second signal stops at once."
    )
    return click.command(game, help=doc)(decorate(serve_game, options))


serve = GameGroup("serve", factory=_serve_command, help="Host matches that bots connect to over TCP.")


def _replay_recorder(replay_dir: str | None) -> Any:
    """A factory of replay writers for the lobby, or None."""
    if replay_dir is None:
        return None
    from pathlib import Path

    from cellarena.server.replay import ReplayWriter

    folder = writable_folder(Path(replay_dir), "--replay-dir")

    def make(number: int, engine: Any, names: list[str], seed: int) -> Any:
        return ReplayWriter(folder / f"match-{number:05d}.replay", engine, seed=seed, names=names)

    return make


def _match_command(game: str) -> click.Command:
    from cellarena.server.games import plugin

    game_plugin = plugin(game)
    cli = game_plugin.game_cli()

    def match_game(
        bots: tuple[str, ...],
        seed: int,
        tick_rate: float,
        budget_ms: float | None,
        fast: bool,
        replay_path: str | None,
        log_dir: str | None,
        connect_timeout: float,
        as_json: bool,
        watch: bool,
        verbose: bool,
        **game_values: Any,
    ) -> None:
        import tempfile
        from pathlib import Path

        from cellarena.server.launcher import BotSpec, MatchFailedError, play_match

        _configure_logging(verbose)
        try:
            specs = BotSpec.parse_all(bots)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--bot") from None
        render = game_plugin.renderer()
        if watch and render is None:
            raise click.BadParameter(f"{game} cannot be drawn in the terminal yet", param_hint="--watch")
        config = engine_config(game, game_values)
        if log_dir:
            folder = writable_folder(Path(log_dir), "--log-dir")
        else:
            folder = Path(tempfile.mkdtemp(prefix="cellarena-match-"))
        replay_file = Path(replay_path) if replay_path else folder / "match.replay"
        if replay_path:  # the default lies in the log folder, checked above
            writable_folder(replay_file.parent, "--replay")
        watcher = _Watcher(render) if watch else None
        try:
            launched = _run_trio(
                lambda: play_match(
                    game,
                    config,
                    specs,
                    _tick_settings(tick_rate, budget_ms, fast),
                    seed=seed,
                    log_dir=folder,
                    connect_timeout=connect_timeout,
                    recorder=_single_replay(replay_file),
                    on_tick=watcher.update if watcher else None,
                )
            )
        except ConfigError as exc:
            raise config_error(game, exc) from None
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        except MatchFailedError as exc:
            raise click.ClickException(f"{exc}; the bots' logs are in {folder}") from None
        except KeyboardInterrupt:
            click.echo("interrupted; every bot process was stopped", err=True)
            sys.exit(130)
        finally:
            if watcher:
                watcher.close()
        outcome = launched.outcome
        summary = {
            **outcome.to_json(),
            "replay": str(replay_file),
            "logs": {name: str(path) for name, path in launched.logs.items()},
            "refused": {name: f"{r.code}: {r.message}" for name, r in launched.refused.items()},
        }
        if as_json:
            click.echo(json.dumps(summary))
            return
        _print_match(summary)

    options = [
        click.option(
            "--bot",
            "bots",
            multiple=True,
            required=True,
            metavar="NAME=COMMAND",
            help="A bot: its name and the command that starts it. Repeat once per seat.",
        ),
        *cli.options,
        click.option("--seed", default=0, show_default=True, type=int, help="The match's seed."),
        *tick_options(game_plugin.engine_class()),
        click.option(
            "--replay",
            "replay_path",
            type=click.Path(dir_okay=False),
            default=None,
            help="Where to write the replay. [default: in the log folder]",
        ),
        click.option(
            "--log-dir",
            type=click.Path(file_okay=False),
            default=None,
            help="Where each bot's output goes. [default: a new temporary folder]",
        ),
        click.option(
            "--connect-timeout",
            default=15.0,
            show_default=True,
            type=FiniteFloatRange(0.5, 600),
            help="Seconds a bot has to connect before it forfeits.",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
        click.option("--watch", is_flag=True, help="Draw the game live in the terminal."),
        click.option("-v", "--verbose", is_flag=True, help="Log connections."),
    ]
    doc = (
        f"Play one {game} match ({game_plugin.summary}): start a server on a free loopback port, launch each "
        "bot, play, and print the result."
    )
    return click.command(game, help=doc)(decorate(match_game, options))


match = GameGroup(
    "match", factory=_match_command, help="Play one match between bot programs on this machine."
)


def _print_match(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    verdict = f"[bold]{summary['winner']}[/] wins" if summary["winner"] else "draw"
    console.print(f"{verdict} after {summary['ticks']} ticks ({summary['reason']})")
    table = Table()
    for col in ("bot", "rank", "late", "invalid", "illegal"):
        table.add_column(col, justify="left" if col == "bot" else "right")
    for name, rank in sorted(summary["ranks"].items(), key=lambda kv: kv[1]):
        forfeit = " (forfeit)" if name in summary["forfeits"] else ""
        table.add_row(
            name + forfeit,
            str(rank),
            str(summary["late"][name]),
            str(summary["invalid"][name]),
            str(summary["illegal"][name]),
        )
    console.print(table)
    for name, why in summary["refused"].items():
        console.print(f"[red]{name} was refused by the server[/] ({why}); it forfeits")
    # Paths go on lines of their own, unwrapped, so they can be copied.
    for name, path in summary["logs"].items():
        click.echo(f"log of {name}: {path}")
    click.echo(f"replay: {summary['replay']}")
    click.echo(f"check it with: cellarena replay verify {summary['replay']}")


def _single_replay(path: Any) -> Any:
    from cellarena.server.replay import ReplayWriter

    def make(_number: int, engine: Any, names: list[str], seed: int) -> Any:
        path.parent.mkdir(parents=True, exist_ok=True)
        return ReplayWriter(path, engine, seed=seed, names=names)

    return make


class _Watcher:
    """Redraws the game in the terminal at most 30 times a second."""

    def __init__(self, render: Any) -> None:
        import time

        from rich.console import Console
        from rich.live import Live

        self._render = render
        self._clock = time.monotonic
        self._last = 0.0
        self._live = Live(console=Console(stderr=True), auto_refresh=False, transient=False)
        self._live.start()

    def update(self, engine: Any) -> None:
        now = self._clock()
        if now - self._last < 1 / 30 and engine.result() is None:
            return
        self._last = now
        picture = self._render(engine)
        picture.append(f"tick {engine.tick}\n")
        self._live.update(picture, refresh=True)

    def close(self) -> None:
        self._live.stop()


def _levels(_ctx: click.Context, _param: click.Parameter, value: str) -> list[int]:
    try:
        levels = [int(v) for v in value.split(",") if v.strip()]
    except ValueError:
        raise click.BadParameter(
            f"{value!r} is not a comma-separated list of agent counts, e.g. 64,512"
        ) from None
    if not levels or any(n < 8 for n in levels):
        raise click.BadParameter(f"agent counts must be at least 8 (one match), got {value!r}")
    return sorted(levels)


@bench.command("server")
@click.option(
    "--levels",
    default="64,256,512,768,1024,1280,1536,1792,2048",
    show_default=True,
    callback=_levels,
    help="Agent counts to try, in rising order; the run stops at the first that misses the goal.",
)
@click.option(
    "--seconds", default=4.0, show_default=True, type=FiniteFloatRange(0.5, 120), help="Play time per level."
)
@click.option(
    "--game",
    default=None,
    help="The game to serve; its plugin must give a load benchmark. [default: the first such game by name]",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_server(levels: list[int], seconds: float, game: str | None, as_json: bool) -> None:
    """Agents one server process serves at 15 Hz (99% of ticks in their slot and every answer in time)."""
    import logging

    from cellarena.server.bench.server import bench_load, load_games, run

    game = game or load_games()[0]
    try:
        bench_load(game)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--game") from None
    logging.getLogger("cellarena.server").setLevel(logging.ERROR)  # the load's own disconnects are expected
    result = run(levels, seconds=seconds, game=game)
    if as_json:
        click.echo(json.dumps(result))
        return
    from rich.console import Console
    from rich.table import Table

    table = Table(title="One server process at 15 Hz; load bots in another process answer at once")
    for col in ("agents", "matches", "on time", "behind", "server CPU/agent-tick", "CPU share"):
        table.add_column(col, justify="right")
    for level in result["levels"]:
        table.add_row(
            str(level["agents"]),
            str(level["matches"]),
            f"{level['on_time']:.1%}",
            f"{level['behind_schedule']:.1%}",
            f"{level['cpu_us_per_agent_tick']:.0f} µs",
            f"{level['server_cpu_share']:.0%}",
        )
    console = Console()
    console.print(table)
    ok = result["max_agents_at_15hz"] >= 1000
    console.print(
        f"served at 15 Hz: {result['max_agents_at_15hz']} agents; goal 1000: "
        f"{'[green]met[/]' if ok else '[red]missed[/]'}"
    )
