"""`cellarena bench train` for Rezzo: train the example policy from scratch, then play it over TCP.

It runs `example_bots/rezzo/trained/train.py` (from ``--bots-dir``, so a checkout: the example bots are
not part of the installed package) into a weights file of its own, then two tournaments of the
trained bot, an ordinary SDK bot started by `cellarena tournament` like any other, against
random_walker and against raider on the duel map, both seats in turn. It reports the training's wall
time, agent-steps per second and the win counts, against the goals of issue 30: at most 15 minutes
of training, at least 16 wins of 20 against each.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import click

from cellarena.server.bench.harness import json_option, report
from cellarena.server.cli.params import ranged_option

#: Issue 30's goals.
GOAL_SECONDS = 15 * 60
GOAL_WINS = 0.8
OPPONENTS = ("random_walker", "raider")
#: How the bench starts the cellarena command in a child process (the one this process runs).
CELLARENA = (sys.executable, "-c", "from cellarena.arena.cli import main; main()")


def _train(trainer: Path, weights: Path, extra: list[str]) -> dict[str, Any]:
    """Run the trainer, echoing its progress to stderr; its closing JSON line."""
    command = [sys.executable, str(trainer), "--out", str(weights), "--eval", "0", "--json", *extra]
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    last = ""
    for line in proc.stdout:
        if not line.startswith("{"):  # the closing JSON line is the bench's to read, not to show
            click.echo(line.rstrip(), err=True)
        last = line
    if proc.wait() != 0:
        raise click.ClickException(f"training failed (exit {proc.returncode}): {shlex.join(command)}")
    result: dict[str, Any] = json.loads(last)
    return result


def _play(bot: Path, weights: Path, opponent: Path, rounds: int, out: Path, max_ticks: int) -> dict[str, int]:
    """A tournament of the trained bot against ``opponent``: the trained bot's wins, draws, losses."""
    shutil.rmtree(out, ignore_errors=True)  # the bench's own folder: a tournament there would resume
    python = shlex.quote(sys.executable)
    command = [
        *CELLARENA,
        "tournament",
        "rezzo",
        "--bot",
        f"trained={python} {shlex.quote(str(bot))} --weights {shlex.quote(str(weights))}",
        "--bot",
        f"{opponent.stem}={python} {shlex.quote(str(opponent))}",
        "--map",
        "duel",
        "--max-ticks",
        str(max_ticks),
        "--rounds",
        str(rounds),
        "--out",
        str(out),
        "--json",
    ]
    proc = subprocess.run(command, capture_output=True, text=True, check=False)
    if proc.returncode != 0:
        raise click.ClickException(f"the tournament against {opponent.stem} failed:\n{proc.stderr[-2000:]}")
    standings = json.loads(proc.stdout)["standings"]
    row = next(s for s in standings if s["bot"] == "trained")
    return {k: int(row[k]) for k in ("wins", "draws", "losses")}


def run(bots_dir: Path, out: Path, matches: int, max_ticks: int, train_args: list[str]) -> dict[str, Any]:
    folder = bots_dir / "rezzo" / "trained"
    trainer, bot = folder / "train.py", folder / "bot.py"
    for needed in (trainer, bot, *(bots_dir / "rezzo" / f"{o}.py" for o in OPPONENTS)):
        if not needed.is_file():
            raise click.ClickException(
                f"{needed} not found: run this from the root of a cellarena checkout, or pass "
                "--bots-dir with the checkout's example_bots folder"
            )
    out.mkdir(parents=True, exist_ok=True)
    weights = out / "rezzo.npz"
    began = time.monotonic()
    trained = _train(trainer, weights, train_args)
    result: dict[str, Any] = {
        "train_seconds": trained["seconds"],
        "train_cpu_seconds": trained.get("cpu_seconds"),
        "agent_steps": trained["agent_steps"],
        "steps_per_s": trained["steps_per_s"],
        "weights_bytes": weights.stat().st_size,
        "matches": {},
    }
    rounds = max(1, matches // 2)  # a round plays both seat orders
    for name in OPPONENTS:
        result["matches"][name] = _play(
            bot, weights, bots_dir / "rezzo" / f"{name}.py", rounds, out / f"vs-{name}", max_ticks
        )
    result["seconds"] = time.monotonic() - began
    result["load_average"] = os.getloadavg()[1]  # the last 5 minutes': a busy machine stretches wall time
    return result


@click.command("rezzo")
@click.option(
    "--bots-dir",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("example_bots"),
    show_default=True,
    help="The checkout's example_bots folder (the trainer and the opponents are read from it).",
)
@click.option(
    "--out",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("runs/bench-train"),
    show_default=True,
    help="Folder for the weights and the tournaments (replaced on every run).",
)
@ranged_option("--matches", 20, click.IntRange(2, 1000), "Matches per opponent.")
@ranged_option("--max-ticks", 3000, click.IntRange(1), "The tick cap.")
@click.option(
    "--train-args",
    default="",
    help="More options for train.py, e.g. '--rounds 2' for a quick try (not the goal).",
)
@json_option
def command(bots_dir: Path, out: Path, matches: int, max_ticks: int, train_args: str, as_json: bool) -> None:
    """Train the example Rezzo policy from scratch, then play it over TCP against random_walker and raider."""
    result = run(bots_dir, out, matches, max_ticks, shlex.split(train_args))
    if as_json:
        click.echo(json.dumps(result))
        return
    games = 2 * max(1, matches // 2)
    cpu = result["train_cpu_seconds"]
    rows = [
        ["training", f"{result['train_seconds']:.0f} s" + (f" ({cpu:.0f} s CPU)" if cpu is not None else ""),
         f"{result['agent_steps']:,} agent-steps", f"{result['steps_per_s']:,.0f} agent-steps/s"],
    ]  # fmt: skip
    for name, m in result["matches"].items():
        rows.append(
            [f"against {name}", f"won {m['wins']} of {games}", f"drew {m['draws']}", f"lost {m['losses']}"]
        )
    goals = [(f"training within {GOAL_SECONDS // 60} minutes", result["train_seconds"] <= GOAL_SECONDS)]
    goals += [
        (f"at least {GOAL_WINS:.0%} won against {name}", m["wins"] >= GOAL_WINS * games)
        for name, m in result["matches"].items()
    ]
    notes = [
        f"weights: {out / 'rezzo.npz'} ({result['weights_bytes']:,} bytes)",
        f"load average {result['load_average']:.1f} on {os.cpu_count()} cores at the end: on a busy machine "
        "the training's CPU time is closer to what a quiet one takes than its wall time",
    ]
    if train_args:
        notes.append(f"train.py ran with {train_args!r}: not the documented recipe")
    report("cellarena bench train rezzo", ["", "", "", ""], rows, goals, notes)
