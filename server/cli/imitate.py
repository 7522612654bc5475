"""`cellarena train GAME`'s command, made for each game that offers imitation (a `GameImitation` in
``cellarena.server.training.GAME.imitation``): behaviour cloning of one bot's rows of an exported
dataset into a bot folder's network, then the result played in-process against the game's example
bots (docs/training.md). The options are the same for every game but the evaluation's match options
and the defaults, which the game's spec gives. ``--reinforce`` (`reinforce`) trains the same folder
from its own play instead, where the game has reward terms.

Only the dataset is read, never the imitated bot's program; numpy and pyarrow load when it runs.
"""

from __future__ import annotations

import importlib
import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from cellarena.server.cli.reinforce import reinforce_options, run_reinforce

if TYPE_CHECKING:
    from cellarena.server.training.trainer import GameImitation


def imitation_of(game: str) -> GameImitation | None:
    """The game's `GameImitation`: ``IMITATION`` of ``cellarena.server.training.GAME.imitation``, where
    a game that offers imitation keeps it; None for a game without one."""
    try:
        module = importlib.import_module(f"cellarena.server.training.{game}.imitation")
    except ModuleNotFoundError:
        return None
    found: GameImitation | None = getattr(module, "IMITATION", None)
    return found


def _match_option(key: str, default: Any, text: str) -> click.Option:
    kind = click.IntRange(1) if isinstance(default, int) else str
    return click.Option([f"--{key.replace('_', '-')}", key], default=default, show_default=True, type=kind,
                        help=text)  # fmt: skip


def imitation_command(spec: GameImitation) -> click.Command:
    """The `train GAME` command of the game ``spec`` describes: its defaults (the example bots played,
    the bot folder) and its evaluation's match options (the engine's config keys) are the spec's."""
    game = spec.game
    against = spec.against
    bot_dir = None if spec.bot_dir is None else Path(spec.bot_dir)

    def command(**kw: Any) -> None:
        from cellarena.server.training.imitation import ImitationError
        from cellarena.server.training.trainer import evaluate, imitate

        if kw["reinforce"]:
            run_reinforce(spec, kw)
            return
        for needed in ("dataset", "imitate"):
            if kw[needed] is None:
                raise click.UsageError(
                    f"Missing option '--{needed}': imitation learns from an exported dataset "
                    "(--dataset DIR --imitate BOT); --reinforce learns from its own play instead"
                )
        if kw["bot_dir"] is None:
            raise click.UsageError(
                f"Missing option '--bot-dir': the bot folder to train (`cellarena new-bot {game} NAME "
                "--template trained` writes one)"
            )
        imitation = spec
        out, matches = kw["out"], kw["matches"]
        try:
            done = imitate(imitation, kw["dataset"], kw["imitate"], out, kw["bot_dir"], kw["epochs"],
                           kw["seed"], kw["balance"], kw["winners_only"])  # fmt: skip
            if not kw["as_json"]:
                click.echo(
                    f"learned {kw['imitate']}'s moves from {done.seats} seats ({done.samples} samples) in "
                    f"{done.seconds:.1f} s: fit {done.accuracy:.1%}; wrote {out}"
                )
            opponents = [o for o in kw["against"].split(",") if o] if matches else []
            config = {key: kw[key] for key in spec.match_options}
            results = evaluate(imitation, kw["bot_dir"], out, kw["bots_dir"], opponents, matches, config)
        except ImitationError as exc:
            raise click.ClickException(str(exc)) from None
        if kw["as_json"]:
            click.echo(json.dumps({"ok": True, "out": str(out), "seats": done.seats, "samples": done.samples,
                                   "accuracy": done.accuracy, "seconds": done.seconds, "moves": done.moves,
                                   "matches": results}))  # fmt: skip
            return
        for opponent, r in results.items():
            click.echo(
                f"against {opponent}: won {r['wins']} of {matches}, drew {r['draws']}, lost {r['losses']}"
            )

    params: list[click.Parameter] = [
        click.Option(["--dataset"], type=click.Path(path_type=Path),
                     help="Imitation: an exported dataset (`cellarena replay export` or `ladder export`)."),
        click.Option(["--imitate"], metavar="BOT",
                     help="Imitation: the bot whose moves to learn (its name in the dataset)."),
        click.Option(["--out"], required=True, type=click.Path(dir_okay=False, path_type=Path),
                     help="The weights file to write (.npz)."),
        click.Option(["--bot-dir"], type=click.Path(file_okay=False, path_type=Path), default=bot_dir,
                     show_default=bot_dir is not None,
                     help="The bot folder whose network (policy.py) is trained and whose bot.py plays the "
                     f"evaluation (`cellarena new-bot {game} NAME --template trained` writes one)."),
        click.Option(["--epochs"], default=30, show_default=True, type=click.IntRange(1, 10_000),
                     help="Passes over the samples."),
        click.Option(["--seed"], default=0, show_default=True, type=int,
                     help="Seeds the network and the order of samples."),
        click.Option(["--balance"], default=0.0, show_default=True, type=click.FloatRange(0, 1),
                     help="Weigh rare moves up: 0 none, 1 every move counts as much in total."),
        click.Option(["--winners-only"], is_flag=True,
                     help="Learn only from the matches the imitated bot won."),
        click.Option(["--eval", "matches"], default=20, show_default=True, type=click.IntRange(0, 10_000),
                     help="Matches against each of --against at the end, seats in turn (0: none)."),
        click.Option(["--against"], default=against, show_default=True,
                     help="The example bots the evaluation plays, comma-separated."),
        click.Option(["--bots-dir"], type=click.Path(file_okay=False, path_type=Path),
                     default=Path(f"example_bots/{game}"), show_default=True,
                     help="The folder of the example bots the evaluation plays."),
        *(_match_option(key, default, text) for key, (default, text) in spec.match_options.items()),
        *reinforce_options(),
        click.Option(["--json", "as_json"], is_flag=True, help="Print one JSON object at the end."),
    ]  # fmt: skip
    return click.Command(
        game,
        callback=command,
        params=params,
        help=f"""Train a bot folder's network (--out): learn BOT's moves from an exported dataset
        (--dataset DIR --imitate BOT), or reinforce it with the reward terms (--reinforce); then play it.

        Imitation: each seat BOT played in the dataset's {game} matches is replayed in tick order through
        the bot folder's own inputs (policy.observe) and fitted to the moves the game applied.
        Reinforcement (games with reward terms: Rezzo): the network plays --opponent in the vector
        environment and learns from the rewards (docs/training.md). Seeded: the same command writes
        the same bytes.""",
    )
