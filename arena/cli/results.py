"""`cellarena results RUNS_DIR`: a finished (or running) tournament's standings, head-to-head and failures."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click


@click.command("results")
@click.argument("runs_dir", metavar="RUNS_DIR", type=click.Path(file_okay=False))
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object (names never shortened).")
def results(runs_dir: str, as_json: bool) -> None:
    """Print the standings, a head-to-head matrix (wins-draws-losses of each row bot against each column
    bot) and the failures of the tournament whose --out folder is RUNS_DIR."""
    from cellarena.arena.results import ResultsError, read_results

    try:
        data = read_results(Path(runs_dir))
    except ResultsError as exc:
        raise click.BadParameter(str(exc), param_hint="RUNS_DIR") from None
    if as_json:
        click.echo(json.dumps(data))
        return
    _print(data)


def _print(data: dict[str, Any]) -> None:
    from rich.console import Console
    from rich.table import Table

    console = Console(highlight=False)
    standings = Table(title="standings")
    # W/D/L as in the tournament's own table: ten columns fit an 80-column terminal unfolded.
    for col in ("#", "bot", "rating", "matches", "W", "D", "L", "late", "invalid", "crashes"):
        # Names fold onto more lines rather than being cut: a table never hides a bot's name.
        standings.add_column(col, justify="left" if col == "bot" else "right", overflow="fold")
    for i, s in enumerate(data["standings"], 1):
        standings.add_row(
            str(i), s["bot"], f"{s['rating']:.2f}", str(s["matches"]), str(s["wins"]), str(s["draws"]),
            str(s["losses"]), f"{s['late_rate']:.1%}", f"{s.get('invalid_rate', 0.0):.1%}", str(s["crashes"]),
        )  # fmt: skip
    console.print(standings)
    if drawn := [s for s in data["standings"] if s.get("bank_drawn_ms")]:
        console.print(
            "time bank drawn (docs/protocol.md#the-time-bank): "
            + ", ".join(f"{s['bot']} {s['bank_drawn_ms']} ms" for s in drawn)
        )
    order = [s["bot"] for s in data["standings"]]
    h2h = data["head_to_head"]
    matrix = Table(title="head to head (row bot against column #: wins-draws-losses)")
    matrix.add_column("#", justify="right")
    matrix.add_column("bot", overflow="fold")
    for i in range(1, len(order) + 1):
        matrix.add_column(str(i), justify="right")
    for i, a in enumerate(order, 1):
        cells = []
        for b in order:
            r = h2h.get(a, {}).get(b)
            cells.append("·" if r is None else f"{r['wins']}-{r['draws']}-{r['losses']}")
        matrix.add_row(str(i), a, *cells)
    console.print(matrix)
    from cellarena.server.games import words

    console.print(
        "W/D/L: wins, draws, losses; "
        + "; ".join(f"{k} = {words.COUNTS[k]}, per tick" for k in ("late", "invalid"))
    )
    # Each match's cause, one line a match: what decided it, in the words `cellarena match` uses.
    for m in data.get("matches", []):
        losers = [s for s in m["seats"] if s["rank"] > 1] or m["seats"]
        said = "; ".join(s["cause"].get("text") or s["cause"]["cause"] for s in losers)
        click.echo(f"{m['match']}: {m['winner'] or 'draw'} after {m['ticks']} ticks: {said}")
    from cellarena.arena.why import why_lines

    click.echo("why, per bot (won, drew, lost: by each match's cause for that bot):")
    for line in why_lines(data.get("why", [])):
        click.echo(f"  {line}")
    failures = data["failures"]
    if not failures:
        click.echo("failures: none")
        return
    click.echo(f"failures: {len(failures)}")
    for f in failures:
        why = f"; {f['reason']}" if f.get("reason") else ""
        code = f" (exit status {f['exit_code']})" if f.get("exit_code") is not None else ""
        exc = f.get("exception")
        at = "" if not exc or exc.get("tick") is None else f" at tick {exc['tick']}"
        raised = f"; first exception{at}: {exc['text']}" if exc else ""
        # One line each, unwrapped, so the log path can be copied.
        click.echo(f"{f['bot']} {f['what']} in {f['match']}{code}{why}{raised}; log: {f.get('log')}")
