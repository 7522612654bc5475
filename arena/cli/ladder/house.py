"""`ladder house`: bots the ladder starts itself, and `ladder standings`, a game's table."""

from __future__ import annotations

import json

import click

from cellarena.arena.cli.ladder.community import actor
from cellarena.arena.cli.ladder.where import Where, game_argument, known_bot
from cellarena.arena.ladder.records import BotRecord


@click.group()
def house() -> None:
    """Bots the ladder starts itself when a bot would otherwise wait alone."""


@house.command("add")
@click.argument("name")
@click.argument("command")
@click.option("--game", required=True, help="The game the bot plays.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, game, command.")
@click.pass_obj
def house_add(where: Where, name: str, command: str, game: str, as_json: bool) -> None:
    """Register NAME, started with COMMAND (run from the folder `ladder serve` runs in), e.g.
    cellarena ladder house add builder "python example_bots/rezzo/builder.py" --game rezzo"""
    from cellarena.server.bots.launcher import BotSpec

    game_argument(game)
    try:
        BotSpec.parse(f"{name}={command}")
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="COMMAND") from None
    with where.store() as store:
        record, _ = store.add_bot(name, game, house_command=command, actor=actor())
    if as_json:
        click.echo(json.dumps({"name": record.name, "game": record.game, "command": command}))
        return
    click.echo(f"registered house bot {record.name} for {record.game}: {command}")


@house.command("list")
@click.option("--game", default=None, help="Only this game's house bots.")
@click.option("--json", "as_json", is_flag=True, help='Print one JSON object: {"house_bots": [...]}.')
@click.pass_obj
def house_list(where: Where, game: str | None, as_json: bool) -> None:
    """The house bots the ladder starts (removed ones are not listed): game, state (active, or paused
    and why), failed launches or matches in a row, and the command."""
    with where.store() as store:
        bots = [b for b in store.list_bots(game) if b.kind == "house" and b.active]
    if as_json:
        rows = [{**b.to_json(), "state": _state(b)} for b in bots]
        click.echo(json.dumps({"house_bots": rows}))
        return
    if not bots:
        click.echo("no house bots; add one with `cellarena ladder house add NAME COMMAND --game GAME`")
    for b in bots:
        why = f" ({b.stopped})" if b.stopped else ""
        click.echo(f"{b.name:24} {b.game:12} {_state(b):7} failures {b.failures}  {b.house_command}{why}")


def _state(bot: BotRecord) -> str:
    return "banned" if bot.banned else "paused" if bot.paused else "active"


@house.command("remove")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, removed.")
@click.pass_obj
def house_remove(where: Where, name: str, as_json: bool) -> None:
    """Stop starting house bot NAME: it is revoked (a match it plays ends as a revoked bot's) and leaves
    the standings; its matches stay in the history. A running `ladder serve` sees it at once."""

    with where.store() as store:
        record = known_bot(store.bot_table.bot_or_raise, name)
        if record.kind != "house":
            raise click.BadParameter(
                f"{name} is not a house bot (its owner runs it): `cellarena ladder bot revoke {name}` "
                "revokes it",
                param_hint="NAME",
            )
        store.revoke(name, actor=actor())
    click.echo(json.dumps({"name": name, "removed": True}) if as_json else f"removed house bot {name}")


@click.command()
@click.argument("game")
@click.option(
    "--season",
    "number",
    type=click.IntRange(min=1),
    default=None,
    help="A closed season's table, as it stood at its close (`ladder season list GAME`); default: the "
    "season being played.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def standings(where: Where, game: str, number: int | None, as_json: bool) -> None:
    """GAME's table: rating (mu - 3 sigma), matches, wins, draws, losses."""
    game_argument(game)
    title = f"{game} ladder"
    with where.store() as store:
        if number is None:
            table = store.standings(game)
        else:
            closed, table = store.season_standings(game, number)
            title = f"{game} ladder, {closed.name} (closed {closed.closed:%Y-%m-%d})"
    if as_json:
        body: dict[str, object] = {"game": game, "standings": [s.to_json() for s in table]}
        if number is not None:
            body["season"] = closed.to_json()
        click.echo(json.dumps(body))
        return
    from rich import box
    from rich.console import Console
    from rich.table import Table

    from cellarena.arena.ladder.records import STANDINGS_COLUMNS

    # No rules between columns, as the tournament's table. Every cell whole: a terminal narrower than
    # the table wraps its lines rather than have rich cut names and numbers to "25.…".
    out = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, collapse_padding=True)
    for col in STANDINGS_COLUMNS:
        out.add_column(col, justify="left" if col == "bot" else "right", no_wrap=True)
    for s in table:
        out.add_row(*s.cells())
    console = Console(highlight=False)
    needed = console.measure(out, options=console.options.update(max_width=1000)).maximum
    if needed > console.width:
        console = Console(highlight=False, width=needed)
    console.print(out)
