"""`ladder bot`: register, list and revoke a ladder's bots, and renew their tokens."""

from __future__ import annotations

import json

import click

from cellarena.arena.cli.ladder.community import actor
from cellarena.arena.cli.ladder.where import Where, game_argument, known_bot


@click.group()
def bot() -> None:
    """Register, list, revoke bots and renew their tokens."""


@bot.command("add")
@click.argument("name")
@click.option("--game", required=True, help="The game the bot plays.")
@click.option(
    "--max-matches", type=click.IntRange(1, 100), default=1, show_default=True, help="Matches at a time."
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object, the token in it.")
@click.pass_obj
def bot_add(where: Where, name: str, game: str, max_matches: int, as_json: bool) -> None:
    """Register NAME and print its token, once: give it to the bot's author over a private channel."""
    game_argument(game)
    with where.store() as store:
        record, token = store.add_bot(name, game, max_matches=max_matches, actor=actor())
    click.echo(
        f"registered {record.name} for {record.game}; its token (shown once, keep it secret):", err=True
    )
    if as_json:
        about = {"name": record.name, "game": record.game, "max_matches": record.max_matches}
        click.echo(json.dumps({**about, "token": token.secret}))
        return
    click.echo(token.secret)


@bot.command("rotate")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, token.")
@click.pass_obj
def bot_rotate(where: Where, name: str, as_json: bool) -> None:
    """Give NAME a new token (printed once); the old one stops working at once."""
    with where.store() as store:
        token = known_bot(lambda n: store.rotate(n, actor=actor()), name)
    click.echo(f"new token for {name} (the old one no longer works):", err=True)
    click.echo(json.dumps({"name": name, "token": token.secret}) if as_json else token.secret)


@bot.command("revoke")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, revoked.")
@click.pass_obj
def bot_revoke(where: Where, name: str, as_json: bool) -> None:
    """Stop NAME from playing: its token no longer works; its matches stay in the history."""
    with where.store() as store:
        known_bot(lambda n: store.revoke(n, actor=actor()), name)
    click.echo(json.dumps({"name": name, "revoked": True}) if as_json else f"revoked {name}")


@bot.command("list")
@click.option("--game", default=None, help="Only this game's bots.")
@click.option("--json", "as_json", is_flag=True, help='Print one JSON object: {"bots": [...]}.')
@click.pass_obj
def bot_list(where: Where, game: str | None, as_json: bool) -> None:
    """Every registered bot (never its token)."""
    with where.store() as store:
        bots = store.list_bots(game)
    if as_json:
        click.echo(json.dumps({"bots": [record.to_json() for record in bots]}))
        return
    for record in bots:
        state = (
            "revoked" if record.revoked else "banned" if record.banned else "paused" if record.paused else ""
        )
        state = state or "active"
        house = f"  house: {record.house_command}" if record.house_command else ""
        click.echo(f"{record.name:24} {record.game:12} {state:8} max {record.max_matches}{house}")
