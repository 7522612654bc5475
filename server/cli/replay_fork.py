"""`cellarena replay fork`: a new match from a replay's state at tick N (`server.replay_fork`).

The fork's modules (trio, the engines) are imported inside the command, as the group's others are.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import click

from cellarena.server.cli.json_errors import FileFault
from cellarena.server.cli.params import FiniteFloatRange, ranged_option, writable_folder


@click.command("fork")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--tick", "-t", type=int, required=True, help="The decision point of PATH to start from.")
@click.option(
    "--bot",
    "bots",
    multiple=True,
    metavar="SEAT=COMMAND",
    help="A new bot for seat SEAT (0, 1, ...), named fork-SEAT, or SEAT:NAME=COMMAND to name it. "
    "Repeat per seat; a seat without one plays its recorded moves, then passes.",
)
@click.option("--out", "out", required=True, type=click.Path(dir_okay=False), help="The new replay's file.")
@click.option(
    "--fast/--realtime",
    default=True,
    show_default=True,
    help="Next tick as soon as every bot answered, or at the game's tick rate.",
)
@click.option(
    "--budget-ms",
    type=FiniteFloatRange(1, 60_000),
    default=None,
    help="Time per move in ms. [default: the game's]",
)
@click.option(
    "--log-dir",
    type=click.Path(file_okay=False),
    default=None,
    help="Where each bot's output goes. [default: beside --out, in OUT.logs]",
)
@ranged_option(
    "--connect-timeout",
    15.0,
    FiniteFloatRange(0.5, 600),
    "Seconds a new bot has to connect before it forfeits.",
)
@click.option(
    "--json", "as_json", is_flag=True, help="Print one JSON object: the result, out and forked_from."
)
def replay_fork(
    path: str,
    tick: int,
    bots: tuple[str, ...],
    out: str,
    fast: bool,
    budget_ms: float | None,
    log_dir: str | None,
    connect_timeout: float,
    as_json: bool,
) -> None:
    """Play a new, unrated match from PATH's state at --tick with the bots given (docs/replays.md).

    PATH must verify up to that tick. The new replay at --out names PATH and the tick in its header
    (``forked_from``) and verifies on its own. Exit status 0 when the fork was played and every new
    bot stayed in it, 3 when one failed (the result is printed all the same), 1 when it could not be
    played, 2 for a usage error.
    """
    from cellarena.server.bots.launcher import MatchFailedError
    from cellarena.server.cli.match import SEAT_FAILED, failed_seats
    from cellarena.server.cli.run import run_trio
    from cellarena.server.replay_fork import ForkError, plan_fork, play_fork, settings_for

    out_path = Path(out)
    if Path(path).resolve() == out_path.resolve():
        raise click.BadParameter(f"{out} is PATH; give another file to write", param_hint="--out")
    writable_folder(out_path.parent if str(out_path.parent) else Path("."), "--out")
    logs = writable_folder(Path(log_dir) if log_dir else Path(f"{out}.logs"), "--log-dir")
    try:
        plan = plan_fork(path, tick, bots)
    except ForkError as exc:
        if exc.option == "PATH":
            raise FileFault(str(exc), path) from None
        raise click.BadParameter(str(exc), param_hint=exc.option) from None
    settings = settings_for(plan, fast=fast, budget_ms=budget_ms, tick_rate=None)
    try:
        launched = run_trio(
            lambda: play_fork(plan, out_path, settings, log_dir=logs, connect_timeout=connect_timeout)
        )
    except MatchFailedError as exc:
        raise click.ClickException(f"{exc}; the bots' logs are in {logs}") from None
    new_bots = {spec.name for spec in plan.bots.values()}
    failed = [name for name in failed_seats(launched) if name in new_bots]
    summary: dict[str, Any] = {
        **launched.outcome.to_json(),
        "failed": failed,
        "stopped": {name: why for name, why in launched.stopped.items() if name in new_bots},
        "out": out,
        "forked_from": {"replay": path, "tick": plan.tick},
        "logs": str(logs),
    }
    if as_json:
        click.echo(json.dumps(summary))
    else:
        winner = summary["winner"]
        click.echo(f"forked {path} at tick {plan.tick}")
        click.echo(
            f"{winner + ' wins' if winner else 'draw'} after {summary['ticks']} ticks ({summary['reason']})"
        )
        for name, why in summary["stopped"].items():
            click.echo(f"{name} was stopped: {why} (--bot)", err=True)
        click.echo(f"replay: {out}")
        click.echo(f"check it with: cellarena replay verify {out}")
    if failed:
        sys.exit(SEAT_FAILED)
