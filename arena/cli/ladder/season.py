"""`ladder season`: close a game's season (its table archived, the next reset or carried over); list."""

from __future__ import annotations

import json

import click

from cellarena.arena.cli.ladder.community import actor
from cellarena.arena.cli.ladder.where import Where, game_argument
from cellarena.arena.ratings.seasons import START_NEXT


@click.group()
def season() -> None:
    """Seasons: a closed season's table stays readable (`ladder standings GAME --season N`)."""


@season.command("close")
@click.argument("game")
@click.option(
    "--next",
    "how",
    type=click.Choice(START_NEXT),
    required=True,
    help="How the next season starts: reset (every bot from the initial rating, provisional again) or "
    "carry (each bot keeps its mu, its sigma widened).",
)
@click.option("--name", default=None, help="The closed season's name (default: 'Season N').")
@click.option("--json", "as_json", is_flag=True, help="Print the closed season as one JSON object.")
@click.pass_obj
def season_close(where: Where, game: str, how: str, name: str | None, as_json: bool) -> None:
    """Close GAME's season now: archive its table as it stands and start the next. A running
    `ladder serve` reads the new ratings within a second; matches being played count in the next season."""
    game_argument(game)
    with where.store() as store:
        closed = store.close_season(game, how, name=name, actor=actor())  # type: ignore[arg-type]
    if as_json:
        click.echo(json.dumps(closed.to_json()))
        return
    click.echo(
        f"closed {game} {closed.name} (season {closed.number}); the next season started by {how}: "
        f"its table is `cellarena ladder standings {game} --season {closed.number}`"
    )


@season.command("list")
@click.argument("game")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")
@click.pass_obj
def season_list(where: Where, game: str, as_json: bool) -> None:
    """GAME's closed seasons, oldest first."""
    game_argument(game)
    with where.store() as store:
        seasons = store.seasons(game)
    if as_json:
        click.echo(json.dumps({"game": game, "seasons": [s.to_json() for s in seasons]}))
        return
    if not seasons:
        click.echo(f"{game} has closed no season yet (the one being played is season 1)")
    for s in seasons:
        span = f"{s.started:%Y-%m-%d %H:%M} to {s.closed:%Y-%m-%d %H:%M} UTC"
        click.echo(f"{s.number}  {s.name}  {span}  next: {s.start_next}")
