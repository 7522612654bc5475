"""`cellarena tournament GAME`: a local round-robin between bot programs, resumable, with ratings."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cellarena.arena.cluster import ClusterSpec, cluster_option
from cellarena.server.cli.confine_options import confine, confine_options
from cellarena.server.cli.game_cli import GameCli, GameGroup, config_error, engine_config, game_cli
from cellarena.server.cli.params import (
    PacingArgs,
    command_args,
    connect_timeout_option,
    decorate,
    first_budget_option,
    map_list,
    ranged_option,
    tick_options,
    time_bank_option,
    writable_folder,
)
from cellarena.server.games import ConfigError, words

if TYPE_CHECKING:
    from cellarena.arena.runner import RunReport, TournamentSpec


def _maps(cli: GameCli, value: str | None) -> list[str | None]:
    if value is None:
        return list(cli.default_maps) or [None]
    return list(map_list(value))


def _bots(
    bot_options: tuple[str, ...], bots_dirs: tuple[str, ...], exclude: tuple[str, ...], game: str
) -> list[Any]:
    """The bots of every --bots-dir and every --bot, together; a name used twice is an error."""
    from cellarena.arena.discovery import DiscoveryError, FoundBot, check_unique, discover, excluded, prepare
    from cellarena.server.bots.launcher import BotSpec

    if not bot_options and not bots_dirs:
        raise click.UsageError("give bots: --bot NAME=COMMAND and/or --bots-dir DIR (each may be repeated)")
    found: list[FoundBot] = []
    for bots_dir in bots_dirs:
        try:
            found += discover(Path(bots_dir), game, exclude)
        except DiscoveryError as exc:
            raise click.BadParameter(str(exc), param_hint="--bots-dir") from None
    for option in bot_options:
        try:
            spec = BotSpec.parse(option)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--bot") from None
        if not excluded(spec.name, exclude):
            found.append(FoundBot(spec, Path(f"--bot {spec.name}=...")))
    try:
        check_unique(found)
        if len(found) < 2:
            raise DiscoveryError(f"a tournament needs at least 2 bots, found {len(found)}")
        prepare(found)
    except DiscoveryError as exc:
        raise click.BadParameter(str(exc), param_hint="--bot/--bots-dir") from None
    return [f.spec for f in found]


@dataclass(frozen=True)
class TournamentArgs(PacingArgs):
    """What `tournament GAME` was told, but the game's own options."""

    bots: tuple[str, ...]
    bots_dir: tuple[str, ...]
    exclude: tuple[str, ...]
    maps: str | None
    rounds: int
    jobs: int | None
    out: str | None
    seed: int
    connect_timeout: float
    as_json: bool
    cluster: ClusterSpec | None
    strict: bool


def _tournament_command(game: str) -> click.Command:
    from cellarena.server.games import get_engine

    cli = game_cli(game)
    engine_class = get_engine(game)

    def tournament(**values: Any) -> None:
        args, game_values = command_args(TournamentArgs, values)
        run_tournament_command(game, args, game_values)

    doc = (
        f"A round-robin {game} tournament: every group of bots plays every map in every seat order, "
        "--rounds times, --jobs at once; then standings with ratings (docs/tournaments.md#ratings). "
        "Results are committed to SQLite after every match: run the same command again to resume."
    )
    return click.command(game, help=doc)(decorate(tournament, _options(game, cli, engine_class)))


def run_tournament_command(game: str, args: TournamentArgs, game_values: dict[str, Any]) -> None:
    """Play the tournament ``args`` say, print its standings (or one JSON object), and exit 1 when a
    match failed; every error in what it was told is a click error, said before any match starts."""
    spec = tournament_spec(game, args, game_values)
    folder = writable_folder(Path(args.out) if args.out else Path("runs") / f"tournament-{game}", "--out")
    report = _play(spec, folder, args)
    why = _why(folder)
    if args.as_json:
        click.echo(json.dumps({**_report_json(report, folder), "why": why}))
    else:
        _print_standings(report, folder)
        _print_why(why, folder)
    if report.failed:
        sys.exit(1)


def _why(folder: Path) -> list[dict[str, Any]]:
    """Per bot, why its matches ended, as `cellarena results` says it (`arena.why`)."""
    from cellarena.arena.results import ResultsError, TournamentResults

    try:
        return TournamentResults(folder).why()
    except ResultsError:  # no match recorded (every one failed): nothing to say why of
        return []


def _print_why(why: list[dict[str, Any]], folder: Path) -> None:
    """The short "why" under the standings: each bot's ends by cause, forfeits, invalid answers and
    failures with the log and first exception; then where the rest is."""
    from cellarena.arena.runner import SERVER_LOG
    from cellarena.arena.why import why_lines

    if why:
        click.echo("why, per bot (won, drew, lost: by each match's cause for that bot):")
        for line in why_lines(why):
            click.echo(f"  {line}")
    click.echo(f"each match's cause and every failure: cellarena results {folder}")
    if (folder / SERVER_LOG).is_file():
        click.echo(f"the match servers' log: {folder / SERVER_LOG}")


def tournament_spec(game: str, args: TournamentArgs, game_values: dict[str, Any]) -> TournamentSpec:
    """The tournament from what the command was told: its bots found, its maps checked."""
    from cellarena.arena.runner import TournamentSpec
    from cellarena.server.play.match import MISSED_IN_A_ROW

    limits, isolate = confine(game_values)
    specs = _bots(args.bots, args.bots_dir, args.exclude, game)
    if len(specs) < 2:
        raise click.UsageError(f"a tournament needs at least 2 bots, got {len(specs)}")
    settings = args.tick_settings(max_missed_in_a_row=MISSED_IN_A_ROW)
    return TournamentSpec(
        game=game,
        bots=tuple(specs),
        maps=tuple(_map_configs(game, args, game_values, len(specs))),
        rounds=args.rounds,
        seed=args.seed,
        settings=settings,
        connect_timeout=args.connect_timeout,
        limits=limits,
        isolate=isolate,
        strict=args.strict,
    )


def _map_configs(
    game: str, args: TournamentArgs, game_values: dict[str, Any], bots: int
) -> list[tuple[str | None, dict[str, Any], int]]:
    """(map, engine config, seats) of every map to play; a map with more seats than bots is refused."""
    from cellarena.server.games import get_engine

    cli = game_cli(game)
    engine_class = get_engine(game)
    map_names = _maps(cli, args.maps)
    if args.maps is not None and cli.map_key is None:
        raise click.BadParameter(f"{game} has no maps; leave --maps out", param_hint="--maps")
    map_configs = []
    for name in map_names:
        config = engine_config(game, game_values)
        if name is not None and cli.map_key is not None:
            config[cli.map_key] = name
        try:
            seats = engine_class.new(config, args.seed).players
        except ConfigError as exc:
            raise config_error(game, exc) from None
        if seats > bots:
            raise click.UsageError(
                f"map {name} has {seats} seats but only {bots} bots were given; add bots or "
                "choose another map"
            )
        map_configs.append((name, config, seats))
    return map_configs


def _play(spec: TournamentSpec, folder: Path, args: TournamentArgs) -> RunReport:
    """Run the tournament on a local pool or the cluster, with a progress bar unless --json; an
    interrupt stops every bot and exits 130, keeping what finished."""
    from cellarena.arena.job import WrongGameError
    from cellarena.arena.tournament_store import StoreError

    display = None if args.as_json else _Display()
    try:
        return _run_on_executor(spec, folder, args, display)
    except StoreError as exc:
        raise click.BadParameter(str(exc), param_hint="--out") from None
    except WrongGameError as exc:
        if display:
            display.stop()
        raise click.ClickException(f"{exc}. Finished matches are kept in {folder}.") from None
    except KeyboardInterrupt:
        if display:
            display.stop()
        click.echo(
            f"interrupted; every bot process was stopped. Finished matches are kept in {folder}; "
            "run the same command again to play the rest.",
            err=True,
        )
        sys.exit(130)
    finally:
        if display:
            display.stop()


def _run_on_executor(
    spec: TournamentSpec, folder: Path, args: TournamentArgs, display: _Display | None
) -> RunReport:
    from cellarena.arena.runner import SERVER_LOG, default_jobs, local_pool, run_tournament

    progress = display.progress() if display else None
    if args.cluster is None:
        workers = args.jobs or default_jobs()
        folder.mkdir(parents=True, exist_ok=True)
        with local_pool(workers, folder / SERVER_LOG) as pool:
            return run_tournament(spec, folder, executor=pool, jobs=workers, progress=progress)
    from cellarena.arena.cluster import ClusterError, check_workers, open_cluster

    try:
        with open_cluster(args.cluster) as (executor, workers, addresses):
            check_workers(executor, spec)
            if display:
                click.echo(f"cluster: {workers} match(es) at once on {len(addresses)} worker(s)", err=True)
            return run_tournament(
                spec, folder, executor=executor, jobs=workers, progress=progress, ship_files=True
            )
    except ClusterError as exc:
        raise click.ClickException(str(exc)) from None


def _report_json(report: RunReport, folder: Path) -> dict[str, Any]:
    return {
        "standings": [s.to_json() for s in report.standings],
        "matches": report.already + report.played,
        "played": report.played,
        "total": report.total,
        "failed": [k for k, _ in report.failed],
        "problems": {
            bot: [{"reason": why, "matches": n} for why, n in notes] for bot, notes in report.notes.items()
        },
        "forfeits": {
            bot: [{"cause": word, "matches": n} for word, n in words]
            for bot, words in report.forfeits.items()
        },
        "results": str(folder / "results.sqlite"),
    }


def _options(game: str, cli: GameCli, engine_class: Any) -> list[Any]:
    """Every option of `tournament GAME`: the bots, the maps and the game's own, pacing, limits."""
    return [
        click.option(
            "--bot",
            "bots",
            multiple=True,
            metavar="NAME=COMMAND",
            help="A bot: its name and the command that starts it. Repeat for each bot; combines with "
            "--bots-dir.",
        ),
        click.option(
            "--bots-dir",
            type=click.Path(file_okay=False),
            multiple=True,
            help="Folder of bots: .py files with a __main__ block (not test_*.py, conftest.py) and folders "
            "with a bot.toml (a subfolder named after the game is used when present). Repeatable.",
        ),
        click.option(
            "--exclude",
            multiple=True,
            metavar="PATTERN",
            help="Leave out the bots whose name or file matches this glob (e.g. 'draft_*'). Repeatable.",
        ),
        click.option(
            "--maps",
            default=None,
            metavar="M,...",
            help="Comma-separated maps to play. [default: "
            + (",".join(cli.default_maps) if cli.default_maps else "the game's board")
            + "]",
        ),
        *cli.options,
        ranged_option(
            "--rounds",
            1,
            click.IntRange(1, 10_000),
            "Times every group of bots plays every map in every seat order.",
        ),
        click.option(
            "--jobs",
            "-j",
            type=click.IntRange(1, 512),
            default=None,
            help="Matches at once, each in its own process. [default: the number of cores]",
        ),
        click.option(
            "--out",
            type=click.Path(file_okay=False),
            default=None,
            help="Results folder (SQLite, replays, logs); rerun to resume. "
            f"[default: runs/tournament-{game}]",
        ),
        click.option("--seed", default=0, show_default=True, type=int, help="Seeds every match."),
        *tick_options(engine_class, fast_by_default=True),
        first_budget_option(),
        time_bank_option(),
        connect_timeout_option(),
        *confine_options(),
        click.option(
            "--strict",
            is_flag=True,
            help="Stop the tournament when a bot asks to play another game (by default that bot forfeits "
            "its matches, with the reason in the standings).",
        ),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object at the end."),
        cluster_option(
            "Play the matches on a Dask cluster: N local worker processes, or the workers of the "
            "scheduler at HOST:PORT (pip install 'cellarena[dask]'; see docs/scaling.md). --jobs is then "
            "the workers' threads."
        ),
    ]


tournament = GameGroup(
    "tournament", factory=_tournament_command, help="Run local round-robin tournaments with ratings."
)


class _Display:
    """A rich progress bar on stderr while matches run."""

    def __init__(self) -> None:
        from rich.console import Console
        from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn

        self._progress = Progress(
            TextColumn("[bold]matches"),
            BarColumn(),
            MofNCompleteColumn(),
            TextColumn("{task.fields[note]}"),
            TextColumn("ETA"),
            TimeRemainingColumn(),
            console=Console(stderr=True),
            transient=False,
        )
        self._task: Any = None
        self._failed = 0
        self._stopped = False

    def progress(self) -> Any:
        from cellarena.arena.runner import Progress

        return Progress(start=self._start, advance=self._advance)

    def _start(self, total: int, done: int) -> None:
        note = f"({done} already played)" if done else ""
        self._task = self._progress.add_task("matches", total=total, completed=done, note=note)
        self._progress.start()

    def _advance(self, _match: Any, record: Any) -> None:
        if record is None:
            self._failed += 1
            self._progress.update(self._task, note=f"[red]{self._failed} failed")
        self._progress.advance(self._task)

    def stop(self) -> None:
        if not self._stopped:
            self._stopped = True
            self._progress.stop()


def _print_standings(report: Any, folder: Path) -> None:
    from rich import box
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    # No rules between columns: the eleven columns and whole bot names fit an 80-column terminal.
    table = Table(
        title=f"Standings after {report.already + report.played} of {report.total} matches",
        box=box.SIMPLE_HEAD,
        pad_edge=False,
        collapse_padding=True,
    )
    longest = max((len(s.bot) for s in report.standings), default=3)
    for col in ("rank", "bot", "rating", "mu", "sigma", "W", "D", "L", "late", "invalid", "crashes"):
        if col == "bot":
            table.add_column(col, no_wrap=True, min_width=min(longest, 24))
        else:
            table.add_column(col, justify="right", no_wrap=True)
    for i, s in enumerate(report.standings, 1):
        table.add_row(
            str(i),
            s.bot,
            f"{s.rating:.2f}",
            f"{s.mu:.2f}",
            f"{s.sigma:.2f}",
            str(s.wins),
            str(s.draws),
            str(s.losses),
            f"{s.late_rate:.1%}",
            f"{s.invalid_rate:.1%}",
            str(s.crashes),
        )
    console.print(table)
    console.print(
        "rating = mu - 3 sigma (the cellarena rating system, TrueSkill); "
        + "; ".join(f"{k} = {words.COUNTS[k]}, per tick" for k in ("late", "invalid"))
    )
    if drawn := [s for s in report.standings if getattr(s, "bank_drawn_ms", 0)]:
        # A line of its own rather than a twelfth column: the table keeps to 80 columns.
        console.print(
            "time bank drawn (docs/protocol.md#the-time-bank): "
            + ", ".join(f"{s.bot} {s.bank_drawn_ms} ms" for s in drawn)
        )
    for bot, notes in report.notes.items():
        for why, n in notes:
            console.print(f"[red]{bot}[/] forfeited or crashed in {n} match{'es' if n > 1 else ''}: {why}")
    if report.failed:
        console.print(
            f"[red]{len(report.failed)} matches failed and were not recorded[/]; rerun to retry them:"
        )
        for key, why in report.failed[:10]:
            console.print(f"  {key}: {why}")
    click.echo(f"results: {folder / 'results.sqlite'} (replays and logs in {folder / 'matches'})")
