"""`cellarena train rezzo`: behaviour cloning of one bot's rows of an exported dataset into a bot
folder's network, then the result played in-process against the example bots (docs/training.md).

Only the dataset is read, never the imitated bot's program; numpy and pyarrow load when it runs.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

DEFAULT_BOT_DIR = Path("example_bots/rezzo/trained")
DEFAULT_BOTS_DIR = Path("example_bots/rezzo")


@click.command("rezzo")
@click.option(
    "--dataset",
    required=True,
    type=click.Path(path_type=Path),
    help="An exported dataset (`cellarena replay export` or `cellarena ladder export`).",
)
@click.option(
    "--imitate", required=True, metavar="BOT", help="The bot whose moves to learn (its name in the dataset)."
)
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, path_type=Path),
    help="The weights file to write (.npz).",
)
@click.option(
    "--bot-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_BOT_DIR,
    show_default=True,
    help="The bot folder whose network (policy.py) is trained and whose bot.py plays the evaluation.",
)
@click.option(
    "--epochs", default=30, show_default=True, type=click.IntRange(1, 10_000), help="Passes over the samples."
)
@click.option(
    "--seed", default=0, show_default=True, type=int, help="Seeds the network and the order of samples."
)
@click.option(
    "--balance",
    default=0.0,
    show_default=True,
    type=click.FloatRange(0, 1),
    help="Weigh rare moves up: 0 none, 1 every move counts as much in total.",
)
@click.option("--winners-only", is_flag=True, help="Learn only from the matches the imitated bot won.")
@click.option(
    "--eval",
    "matches",
    default=20,
    show_default=True,
    type=click.IntRange(0, 10_000),
    help="Matches against each of --against at the end, seats in turn (0: none).",
)
@click.option(
    "--against",
    default="random_walker,raider",
    show_default=True,
    help="The example bots the evaluation plays, comma-separated.",
)
@click.option(
    "--bots-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=DEFAULT_BOTS_DIR,
    show_default=True,
    help="The folder of the example bots the evaluation plays.",
)
@click.option("--map", "map_name", default="duel", show_default=True, help="The evaluation's map.")
@click.option(
    "--max-ticks", default=3000, show_default=True, type=click.IntRange(1), help="The evaluation's tick cap."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object at the end.")
def command(
    dataset: Path,
    imitate: str,
    out: Path,
    bot_dir: Path,
    epochs: int,
    seed: int,
    balance: float,
    winners_only: bool,
    matches: int,
    against: str,
    bots_dir: Path,
    map_name: str,
    max_ticks: int,
    as_json: bool,
) -> None:
    """Learn BOT's moves from an exported dataset into the bot folder's network (--out), then play it.

    Each seat BOT played is replayed in tick order through the bot's own inputs (policy.observe) and
    fitted to the moves the game applied. Seeded: the same command writes the same bytes.
    """
    from cellarena.server.training.imitation import ImitationError
    from cellarena.server.training.rezzo.imitation import evaluate
    from cellarena.server.training.rezzo.imitation import imitate as run

    try:
        done = run(dataset, imitate, out, bot_dir, epochs, seed, balance, winners_only)
        if not as_json:
            click.echo(
                f"learned {imitate}'s moves from {done.seats} seats ({done.samples} samples) in "
                f"{done.seconds:.1f} s: fit {done.accuracy:.1%}; wrote {out}"
            )
        opponents = [o for o in against.split(",") if o] if matches else []
        results = evaluate(bot_dir, out, bots_dir, opponents, matches, map_name, max_ticks)
    except ImitationError as exc:
        raise click.ClickException(str(exc)) from None
    if as_json:
        click.echo(json.dumps({"ok": True, "out": str(out), "seats": done.seats, "samples": done.samples,
                               "accuracy": done.accuracy, "seconds": done.seconds, "moves": done.moves,
                               "matches": results}))  # fmt: skip
        return
    for name, r in results.items():
        click.echo(f"against {name}: won {r['wins']} of {matches}, drew {r['draws']}, lost {r['losses']}")
