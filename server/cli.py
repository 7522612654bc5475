"""The server side's commands: sim, bench, maps, serve and match. `cellarena.arena.cli` gathers them."""

from __future__ import annotations

import json
import sys
from typing import Any

import click

from cellarena.server.cli_params import FiniteFloatRange, writable_folder
from cellarena.server.game_cli import GameGroup
from cellarena.server.games.base import ConfigError
from cellarena.server.games.rezzo.options import map_option as _map_option


@click.group()
def sim() -> None:
    """Run a game headless, with built-in agents, and report what happened."""


@sim.command("rezzo")
@_map_option
@click.option(
    "--ticks",
    default=300,
    show_default=True,
    type=click.IntRange(1, 1_000_000),
    help="Decision points to run (fewer if the match ends).",
)
@click.option(
    "--agents",
    "policy",
    type=click.Choice(["idle", "random"]),
    default="random",
    show_default=True,
    help="What every agent does: nothing, or seeded random moves.",
)
@click.option("--seed", default=0, show_default=True, type=int, help="Seed for the random agents.")
@click.option(
    "--max-ticks", default=3000, show_default=True, type=click.IntRange(1), help="The match's tick cap."
)
@click.option("--torus", is_flag=True, help="Wrap the world's edges (rule variant).")
@click.option(
    "--enemy-bases-only",
    is_flag=True,
    help="Only an enemy base next to your flag makes you lose (rule variant own_base_counts=false).",
)
@click.option("--board/--no-board", default=True, show_default=True, help="Print the final world.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def sim_rezzo(
    map_: str,
    ticks: int,
    policy: str,
    seed: int,
    max_ticks: int,
    torus: bool,
    enemy_bases_only: bool,
    board: bool,
    as_json: bool,
) -> None:
    """A Rezzo match between built-in agents on MAP: flags formed, result and state hash."""
    from rich.console import Console

    from cellarena.server.games.rezzo.engine import RezzoConfig
    from cellarena.server.games.rezzo.render import render
    from cellarena.server.games.rezzo.sim import simulate

    config = RezzoConfig(map=map_, max_ticks=max_ticks, torus=torus, own_base_counts=not enemy_bases_only)
    try:
        report = simulate(config, ticks, policy, seed)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="--map") from None
    if as_json:
        click.echo(json.dumps(report.to_json()))
        return
    eng = report.engine
    console = Console(highlight=False)
    console.print(
        f"Rezzo on [bold]{eng.map_name}[/] ({eng.width}x{eng.height}, {eng.players} players, "
        f"{eng.agents_per_player} agent(s) each), {policy} agents, seed {seed}"
    )
    for p in range(eng.players):
        first = report.first_flag.get(p)
        console.print(
            f"  player {p}: first flag at tick {first if first is not None else '-'}, "
            f"{report.illegal.get(p, 0)} illegal moves"
        )
    r = report.result
    if r is None:
        console.print(f"after {report.ticks} ticks: still running")
    elif r.winner is None:
        tied = sorted(s for s, rank in r.ranks.items() if rank == 1)
        console.print(f"tick {r.ticks}: draw between players {tied} ({r.reason})")
    else:
        console.print(f"tick {r.ticks}: player {r.winner} wins ({r.reason})")
    console.print(f"state hash {eng.state_hash()}")
    if board:
        console.print(render(eng.cells(), [(a.x, a.y, a.facing) for a in eng.agents() if a.alive]))


def _bench_command(game: str) -> click.Command:
    from cellarena.server.game_cli import game_cli, load_command

    target = game_cli(game).bench
    if target is None:

        @click.command(game)
        def no_bench() -> None:
            raise click.UsageError(f"{game} has no benchmark yet")

        return no_bench
    return load_command(target)


bench = GameGroup(
    "bench",
    factory=_bench_command,
    help="Benchmarks: speed and memory goals, as ratios measured side by side in one run.",
)


@click.group()
def maps() -> None:
    """List, check and show Rezzo maps."""


@maps.command("list")
def maps_list() -> None:
    """The built-in maps."""
    from cellarena.server.games.rezzo.maps import builtin_maps, load_map

    for name in builtin_maps():
        m = load_map(name)
        click.echo(
            f"{name:10} {m.width}x{m.height}  {m.players} players  {m.agents_per_player} agent(s) each"
            f"  {m.name}"
        )


@maps.command("check")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
def maps_check(paths: tuple[str, ...]) -> None:
    """Validate map files; each error names file:line:col. Exit status 1 if any is invalid."""
    from cellarena.server.games.rezzo.maps import load_map

    bad = 0
    for path in paths:
        try:
            m = load_map(path)
        except ConfigError as exc:
            click.echo(f"error: {exc}", err=True)
            bad += 1
        else:
            click.echo(
                f"{path}: ok ({m.width}x{m.height}, {m.players} players, {m.agents_per_player} agent(s) each)"
            )
    if bad:
        sys.exit(1)


@maps.command("show")
@click.argument("name")
def maps_show(name: str) -> None:
    """Print a map (built-in name or path) as the world it starts as."""
    from rich.console import Console

    from cellarena.server.games.rezzo.maps import load_map
    from cellarena.server.games.rezzo.render import render

    try:
        m = load_map(name)
    except ConfigError as exc:
        raise click.BadParameter(str(exc), param_hint="NAME") from None
    Console(highlight=False).print(render(m.cells, [(a.x, a.y, a.facing) for a in m.agents]))


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
    from cellarena.server.game_cli import game_cli

    cli = game_cli(game)
    mine, _ = cli.split(values)
    return cli.config(**mine)


def config_error(game: str, exc: Exception) -> click.BadParameter:
    """A ConfigError as a usage error, pointed at ``--map`` when the game has maps."""
    from cellarena.server.game_cli import game_cli

    hint = "--map" if game_cli(game).map_key else None
    return click.BadParameter(str(exc), param_hint=hint)


def _serve_command(game: str) -> click.Command:
    from cellarena.server.game_cli import game_cli
    from cellarena.server.games import get_engine

    cli = game_cli(game)

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
        *tick_options(get_engine(game)),
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
        f"Serve {game} ({cli.summary}): wait for bots, seat them in arrival order, run matches. "
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
    from cellarena.server.game_cli import game_cli
    from cellarena.server.games import get_engine

    cli = game_cli(game)

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
        if watch and cli.render is None:
            raise click.BadParameter(f"{game} cannot be drawn in the terminal yet", param_hint="--watch")
        config = engine_config(game, game_values)
        if log_dir:
            folder = writable_folder(Path(log_dir), "--log-dir")
        else:
            folder = Path(tempfile.mkdtemp(prefix="cellarena-match-"))
        replay_file = Path(replay_path) if replay_path else folder / "match.replay"
        if replay_path:  # the default lies in the log folder, checked above
            writable_folder(replay_file.parent, "--replay")
        watcher = _Watcher(cli.render) if watch else None
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
        *tick_options(get_engine(game)),
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
        f"Play one {game} match ({cli.summary}): start a server on a free loopback port, launch each "
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
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
def bench_server(levels: list[int], seconds: float, as_json: bool) -> None:
    """Agents one server process serves at 15 Hz (99% of ticks in their slot and every answer in time)."""
    import logging

    from cellarena.server.bench import run

    logging.getLogger("cellarena.server").setLevel(logging.ERROR)  # the load's own disconnects are expected
    result = run(levels, seconds=seconds)
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
