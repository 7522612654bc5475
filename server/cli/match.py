"""`cellarena match GAME`: one match between bot programs on this machine, with the result printed.

One subcommand per registered game, made from its `GameCli`; ``--watch`` draws it with the renderer
its plugin names.
"""

from __future__ import annotations

import dataclasses
import json
import sys
from typing import Any

import click

from cellarena.server.cli.confine_options import confine, confine_options
from cellarena.server.cli.game_cli import GameGroup, config_error, engine_config
from cellarena.server.cli.params import (
    PacingArgs,
    command_args,
    connect_timeout_option,
    decorate,
    first_budget_option,
    ranged_option,
    tick_options,
    time_bank_option,
    writable_folder,
)
from cellarena.server.cli.run import configure_logging, run_trio
from cellarena.server.cli.web_options import bind_web, web_options
from cellarena.server.games import words
from cellarena.server.games.base import ConfigError
from cellarena.server.games.causes import with_sentences

#: `server.match.MISSED_IN_A_ROW` (that module pulls in trio, which `cellarena --help` does not load).
MISSED_IN_A_ROW = 25
#: Late ticks in a row from which `match` warns of a slow bot (below the forfeit).
WARN_LATE_IN_A_ROW = 5

#: `cellarena match`'s exit status when the match was played but a seat failed in it: forfeited
#: (crashed, never connected, hung), was refused by the server or stopped by a limit, or its bot
#: exited with an error. The result is printed all the same; 1 and 2 stay click's errors, 130 Ctrl-C.
SEAT_FAILED = 3
EXIT_STATUS = (
    "Exit status: 0 when the match was played and every bot stayed in it; 3 when it was played but a "
    "bot forfeited (crashed, never connected, hung), was refused or stopped, or exited with an error "
    "(the result is printed all the same); 1 when the match could not be played; 2 for a usage error; "
    "130 on Ctrl-C."
)


@dataclasses.dataclass(frozen=True)
class MatchArgs(PacingArgs):
    """What `match GAME` was told, but the game's own options."""

    bots: tuple[str, ...]
    seed: int
    max_late_in_a_row: int
    replay_path: str | None
    log_dir: str | None
    connect_timeout: float
    as_json: bool
    keep_temp: bool
    watch: bool
    web: bool
    web_port: int
    verbose: bool


def _match_command(game: str) -> click.Command:
    from cellarena.server.games import plugin

    game_plugin = plugin(game)
    cli = game_plugin.game_cli()

    def match_game(**values: Any) -> None:
        args, game_values = command_args(MatchArgs, values)
        MatchRun(game, args, game_values).run()

    doc = (
        f"Play one {game} match ({game_plugin.summary}): start a server on a free loopback port, launch each "
        "bot, play, and print the result."
    )
    return click.command(game, help=doc, epilog=EXIT_STATUS)(decorate(match_game, _options(game_plugin, cli)))


class MatchRun:
    """One `cellarena match`: what it was told, checked before any bot starts (`__init__`), then the
    match played, reported, and its temporary folder removed (`run`)."""

    def __init__(self, game: str, args: MatchArgs, game_values: dict[str, Any]) -> None:
        import tempfile
        from pathlib import Path

        from cellarena.server.bots.launcher import BotSpec
        from cellarena.server.games import plugin

        self.game = game
        self.args = args
        configure_logging(args.verbose)
        self.limits, self.isolate = confine(game_values)
        try:
            self.specs = BotSpec.parse_all(args.bots)
        except ValueError as exc:
            raise click.BadParameter(str(exc), param_hint="--bot") from None
        game_plugin = plugin(game)
        if args.watch and game_plugin.render is None:
            raise click.BadParameter(f"{game} cannot be drawn in the terminal yet", param_hint="--watch")
        self.config = engine_config(game, game_values)
        self.temporary = not args.log_dir and not args.keep_temp
        if args.replay_path:  # the default lies in the log folder, checked below
            writable_folder(Path(args.replay_path).parent, "--replay")
        self.web_sock = bind_web(args.web_port) if args.web else None
        # The folder last: an option refused above (a busy --web-port) leaves none behind in /tmp.
        if args.log_dir:
            self.folder = writable_folder(Path(args.log_dir), "--log-dir")
        else:
            self.folder = Path(tempfile.mkdtemp(prefix="cellarena-match-"))
        self.replay_file = Path(args.replay_path) if args.replay_path else self.folder / "match.replay"
        # The renderer (and rich, its terminal library) is loaded only to draw: most matches never do.
        self.watcher = _Watcher(game_plugin.renderer()) if args.watch else None
        #: The match once played and reported (the live view may still be up).
        self.finished: list[Any] = []
        self.pacing = args.tick_settings(max_missed_in_a_row=args.max_late_in_a_row or None)

    def run(self) -> None:
        """Play, report, and exit with `SEAT_FAILED` if a seat failed (130 on Ctrl-C)."""
        import shutil

        from cellarena.server.bots.launcher import MatchFailedError

        try:
            if self.web_sock is not None:
                run_trio(self.play_and_show)
                return
            launched = run_trio(self.play)
        except ConfigError as exc:
            raise config_error(self.game, exc) from None
        except ValueError as exc:
            raise click.UsageError(str(exc)) from None
        except MatchFailedError as exc:
            kept = "" if self.temporary else f"; the bots' logs are in {self.folder}"
            hint = kept or "; rerun with --keep-temp to keep the bots' logs"
            raise click.ClickException(f"{exc}{hint}") from None
        except KeyboardInterrupt:
            # An interrupted command exits 130, also after the match (its result is printed above):
            # the live page it closed was the command still running.
            if self.finished:
                click.echo("interrupted; the live view was stopped", err=True)
            else:
                click.echo("interrupted; every bot process was stopped", err=True)
            sys.exit(130)
        finally:
            if self.watcher:
                self.watcher.close()
            if self.web_sock is not None:
                self.web_sock.close()
            if self.temporary:  # nothing in it was asked for: the replay and logs go with the folder
                shutil.rmtree(self.folder, ignore_errors=True)
        self.report(launched)
        if failed_seats(launched):
            sys.exit(SEAT_FAILED)

    def report(self, launched: Any) -> None:
        """Print the match's result (one JSON object with --json)."""
        summary = self.summary(launched)
        if self.args.as_json:
            click.echo(json.dumps(summary))
        else:
            _print_match(summary)
        self.finished.append(launched)

    def summary(self, launched: Any) -> dict[str, Any]:
        outcome = launched.outcome
        replay_kept = self.args.replay_path is not None or not self.temporary
        failed = failed_seats(launched)
        names = outcome.names
        return {
            "failed": failed,
            "exit_codes": dict(launched.exit_codes),
            **outcome.to_json(),
            # The launcher's causes: the match's, with what it knows of a forfeit's process.
            "causes": {names[s]: c for s, c in with_sentences(launched.causes, names).items()},
            "late_in_a_row": {
                names[s]: {"ticks": n, "until_tick": until} for s, (n, until) in enumerate(outcome.late_runs)
            },
            "last_log_line": {name: launched.last_lines.get(name) for name in failed},
            "replay": str(self.replay_file) if replay_kept else None,
            "logs": {} if self.temporary else {name: str(path) for name, path in launched.logs.items()},
            "refused": {name: f"{r.code}: {r.message}" for name, r in launched.refused.items()},
            "stopped": launched.stopped,
        }

    async def play(self, on_listening: Any = None) -> Any:
        from cellarena.server.bots.launcher import play_match

        return await play_match(
            self.game,
            self.config,
            self.specs,
            # The match's only spectator is its user's live view (the server listens on loopback
            # for this match alone): it gets the bots' drawings (docs/web.md).
            dataclasses.replace(self.pacing, spectator_debug=True),
            seed=self.args.seed,
            log_dir=self.folder,
            connect_timeout=self.args.connect_timeout,
            recorder=_single_replay(self.replay_file),
            on_tick=self.watcher.update if self.watcher else None,
            on_listening=on_listening,
            limits=self.limits,
            isolate=self.isolate,
        )

    async def play_and_show(self) -> None:
        """The match with its live view, which stays up after it (until Ctrl-C).

        Ctrl-C is taken as a signal and cancels the lot: a KeyboardInterrupt raised into
        whichever task trio was running could land in a page's request, where hypercorn turned
        it into an error of its own and the command ended in a traceback.
        """
        import signal
        from functools import partial

        import trio

        from cellarena.server.web.live import LiveFeed, relay, serve_live
        from cellarena.server.web.serving import url_of

        web_sock = self.web_sock
        assert web_sock is not None
        feed = LiveFeed(self.game)
        interrupted = False

        async def stop_on_ctrl_c(signals: Any, scope: trio.CancelScope) -> None:
            nonlocal interrupted
            async for _ in signals:
                interrupted = True
                scope.cancel()
                return

        with trio.open_signal_receiver(signal.SIGINT) as signals:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(stop_on_ctrl_c, signals, nursery.cancel_scope)
                nursery.start_soon(serve_live, web_sock, feed)
                click.echo(f"live view at {url_of(web_sock, '/live/')}", err=True)
                launched = await self.play(
                    lambda port: nursery.start_soon(partial(relay, "127.0.0.1", port, feed, follow=False))
                )
                feed.publish_result(launched.outcome.number, launched.outcome.to_json())
                self.report(launched)
                click.echo("the live page stays up; Ctrl-C stops", err=True)
                await trio.sleep_forever()
        if interrupted:
            raise KeyboardInterrupt


def _options(game_plugin: Any, cli: Any) -> list[Any]:
    """Every option of `match GAME`: the bots, the game's own, pacing, files, limits, the views."""
    return [
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
        first_budget_option(),
        ranged_option(
            "--max-late-in-a-row",
            MISSED_IN_A_ROW,
            click.IntRange(0),
            "A bot late (or silent) for this many ticks in a row forfeits as unresponsive, as in a "
            "tournament (0: never; it then plays no-ops for as long as it is late).",
        ),
        time_bank_option(),
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
            help="Where each bot's output goes. [default: a temporary folder, removed at the end]",
        ),
        click.option(
            "--keep-temp",
            is_flag=True,
            help="Keep the temporary folder (the bots' logs and the replay) when the match ends.",
        ),
        connect_timeout_option(),
        *confine_options(),
        click.option("--json", "as_json", is_flag=True, help="Print one JSON object."),
        click.option("--watch", is_flag=True, help="Draw the game live in the terminal."),
        *web_options(),
        click.option("-v", "--verbose", is_flag=True, help="Log connections."),
    ]


match = GameGroup(
    "match",
    factory=_match_command,
    help="Play one match between bot programs on this machine.",
    epilog=EXIT_STATUS,
)


def failed_seats(launched: Any) -> list[str]:
    """The bots that failed in a played match, sorted: forfeited, refused, stopped, or exited with an
    error (as a tournament counts crashes; a negative status is the launcher stopping a bot after
    the end, not a failure)."""
    codes: dict[str, int | None] = launched.exit_codes
    bad = {name for name, code in codes.items() if code is None or code > 0}
    forfeits = {launched.outcome.names[seat] for seat in launched.outcome.forfeits}
    return sorted(bad | forfeits | set(launched.refused) | set(launched.stopped))


def _print_match(summary: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.markup import escape
    from rich.table import Table

    console = Console(highlight=False)
    verdict = f"[bold]{escape(summary['winner'])}[/] wins" if summary["winner"] else "draw"
    console.print(f"{verdict} after {summary['ticks']} ticks ({escape(summary['reason'])})")
    causes = summary.get("causes", {})
    order = sorted(summary["ranks"].items(), key=lambda kv: kv[1])
    for name, _rank in reversed(order):  # why, one sentence a seat, the losers first
        if name in causes:
            click.echo(f"  why: {causes[name]['text']}")
    table = Table()
    for col in ("bot", "rank", "late", "invalid", "illegal", "cause"):
        table.add_column(col, justify="left" if col in ("bot", "cause") else "right")
    for name, rank in order:
        forfeit = " (forfeit)" if name in summary["forfeits"] else ""
        table.add_row(
            escape(name + forfeit),
            str(rank),
            str(summary["late"][name]),
            str(summary["invalid"][name]),
            str(summary["illegal"][name]),
            escape(causes.get(name, {}).get("cause", "")),
        )
    console.print(table)
    console.print("; ".join(f"{k} = {meaning}" for k, meaning in words.COUNTS.items()))
    _print_warnings(console, summary)
    # Paths go on lines of their own, unwrapped, so they can be copied.
    for name, path in summary["logs"].items():
        click.echo(f"log of {name}: {path}")
    if summary["replay"] is None:
        click.echo("no replay kept (give --replay FILE, --log-dir DIR or --keep-temp)")
        return
    click.echo(f"replay: {summary['replay']}")
    click.echo(f"check it with: cellarena replay verify {summary['replay']}")


def _print_warnings(console: Any, summary: dict[str, Any]) -> None:
    """What went wrong for each bot, under the table: bank drawn, late runs, invalid answers, refusals,
    stops and failures."""
    from rich.markup import escape

    causes = summary.get("causes", {})
    for name, drawn in summary.get("bank_drawn_ms", {}).items():
        if drawn:
            click.echo(f"{escape(name)} drew {drawn} ms of its time bank")
    for name, run in summary.get("late_in_a_row", {}).items():
        forfeited = causes.get(name, {}).get("cause") == "unresponsive"
        if run["ticks"] >= WARN_LATE_IN_A_ROW and not forfeited:
            console.print(
                f"[yellow]{escape(name)} was late {words.counted('tick', run['ticks'])} in a row[/] (up to "
                "tick "
                f"{run['until_tick']}): its on_tick is too slow for the budget; a late tick plays no move"
            )
    for name, count in summary["invalid"].items():
        if count:
            console.print(
                f"[yellow]{escape(name)} sent {words.counted('invalid', count)}[/]; its log says why"
            )
    for name, why in summary["refused"].items():
        console.print(f"[red]{escape(name)} was refused by the server[/] ({escape(why)}); it forfeits")
    for name, why in summary["stopped"].items():
        console.print(f"[red]{escape(name)} was stopped[/]: {escape(why)}")
    for name in summary["failed"]:
        code = summary["exit_codes"].get(name)
        if code is not None and code > 0:
            console.print(f"[red]{escape(name)} exited with status {code}[/] (its log says why)")
        line = summary.get("last_log_line", {}).get(name)
        if line:
            click.echo(f"last line of {name}'s log: {line}")


def _single_replay(path: Any) -> Any:
    from cellarena.server.replay import ReplayWriter

    def make(_number: int, engine: Any, names: list[str], seed: int) -> Any:
        path.parent.mkdir(parents=True, exist_ok=True)
        return ReplayWriter(path, engine, seed=seed, names=names, events=True)

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
