"""`cellarena ladder` commands of a community ladder: pauses, bans, challenges, the audit log.

The host's commands (``pause``, ``resume``, ``ban``, ``unban``, ``challenge`` without ``--url``,
``bot challenges``) act on the ladder's database, each written to the audit log with the OS user who
ran it, and reach a running ``ladder serve`` through the database's change log. A bot's owner runs
``resume`` and ``challenge`` against a remote ladder's pages instead (``--url``, with the bot's
token in a file): the token goes in an Authorization header, never on a command line or in a URL.
"""

from __future__ import annotations

import getpass
import json
from typing import Any
from urllib.parse import quote

import click

from cellarena.arena.cli.ladder.remote import check_url, fail, post_as_bot, token_from
from cellarena.arena.cli.ladder.where import Where, known_bot


def actor() -> str:
    """Who ran an admin command: the OS user (the audit log's "who")."""
    try:
        return f"{getpass.getuser()} (cli)"
    except (KeyError, OSError):
        return "unknown user (cli)"


def _echo(as_json: bool, data: dict[str, Any], text: str) -> None:
    click.echo(json.dumps(data) if as_json else text)


def _remote(url: str, path: str, token_file: str, body: dict[str, Any], as_json: bool) -> dict[str, Any]:
    """POST ``body`` to the ladder's pages at ``url`` with the bot's token; the answer's JSON. The
    ladder's refusal (its message) or an unreachable ladder is one line and exit status 1."""
    token = token_from(token_file)
    check_url(url, param_hint="--url", secret="the token")
    data = json.dumps(body).encode()
    return post_as_bot(url, path, token, data, "application/json", as_json, timeout=30, detail_chars=400)


_url_option = click.option(
    "--url",
    default=None,
    help="A remote ladder's pages (`ladder web`): act as the bot's owner, with --token-file. "
    "Without it, act as the host on this ladder's database.",
)
_token_option = click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="The file holding the bot's token (with --url; never give a token on the command line).",
)
_json_option = click.option("--json", "as_json", is_flag=True, help="Print one JSON object.")


def _remote_args(url: str | None, token_file: str | None) -> bool:
    if url is not None and token_file is None:
        raise click.BadParameter("--url acts with the bot's token: give --token-file too", param_hint="--url")
    if url is None and token_file is not None:
        raise click.BadParameter("a token is for a remote ladder: give --url too", param_hint="--token-file")
    return url is not None


@click.command()
@click.argument("name")
@click.option("--reason", default="paused by the ladder's host", show_default=True, help="Why, shown to it.")
@_json_option
@click.pass_obj
def pause(where: Where, name: str, reason: str, as_json: bool) -> None:
    """Pause NAME (host): its hellos are refused `paused` with the reason until it is resumed."""
    with where.store() as store:
        record = known_bot(lambda n: store.pause(n, reason, actor=actor()), name)
    _echo(as_json, record.to_json(), f"paused {name}: {record.paused}")


@click.command()
@click.argument("name")
@_url_option
@_token_option
@_json_option
@click.pass_obj
def resume(where: Where, name: str, url: str | None, token_file: str | None, as_json: bool) -> None:
    """Resume the paused bot NAME: as the host, or as its owner with --url and --token-file."""
    if _remote_args(url, token_file):
        assert url is not None and token_file is not None
        answer = _remote(url, f"/api/bots/{quote(name, safe='')}/resume", token_file, {}, as_json)
        _echo(as_json, answer, f"resumed {name}" if answer.get("resumed") else f"{name} was not paused")
        return
    with where.store() as store:
        was = known_bot(store.bot, name)
        if was is None:
            raise click.BadParameter(f"there is no bot named {name!r}", param_hint="NAME")
        record = store.resume(name, actor=actor())
    text = f"resumed {name}" if was.paused else f"{name} was not paused"
    _echo(as_json, {**record.to_json(), "resumed": was.paused is not None}, text)


@click.command()
@click.argument("name")
@click.option(
    "--reason", required=True, help="Why, shown to the bot at each refused hello and in the audit log."
)
@_json_option
@click.pass_obj
def ban(where: Where, name: str, reason: str, as_json: bool) -> None:
    """Ban NAME: refused `paused` (saying it is banned) until unbanned; its owner cannot resume it."""
    with where.store() as store:
        record = known_bot(lambda n: store.ban(n, reason, actor=actor()), name)
    _echo(as_json, record.to_json(), f"banned {name}: {record.banned}")


@click.command()
@click.argument("name")
@_json_option
@click.pass_obj
def unban(where: Where, name: str, as_json: bool) -> None:
    """Lift NAME's ban."""
    with where.store() as store:
        record = known_bot(lambda n: store.unban(n, actor=actor()), name)
    _echo(as_json, record.to_json(), f"unbanned {name}")


@click.command()
@click.argument("name")
@click.argument("opponent")
@_url_option
@_token_option
@_json_option
@click.pass_obj
def challenge(
    where: Where, name: str, opponent: str, url: str | None, token_file: str | None, as_json: bool
) -> None:
    """NAME challenges OPPONENT: the ladder plays them against each other once both are connected and
    free, within the quota of challenges per bot per day (`ladder serve --challenges-per-day`)."""
    from cellarena.arena.ladder.errors import ChallengeRefusedError

    if _remote_args(url, token_file):
        assert url is not None and token_file is not None
        made = _remote(url, "/api/challenges", token_file, {"opponent": opponent}, as_json)
        if made.get("challenger") != name:
            fail(as_json, f"that token is {made.get('challenger')}'s, not {name}'s")
    else:
        with where.store() as store:
            try:
                made = store.challenge(name, opponent, actor=actor()).to_json()
            except ChallengeRefusedError as exc:
                fail(as_json, str(exc))
    rated = "rated" if made["rated"] else "unrated"
    _echo(
        as_json,
        made,
        f"challenge {made['id']}: {name} against {opponent} ({rated}), played once both are free",
    )


@click.command()
@click.option("--limit", default=50, show_default=True, type=click.IntRange(1, 10_000), help="Newest N.")
@_json_option
@click.pass_obj
def audit(where: Where, limit: int, as_json: bool) -> None:
    """The audit log of admin actions, newest first: when, who, what, which bot, details."""
    with where.store() as store:
        entries = store.audit_log(limit)
    if as_json:
        click.echo(json.dumps({"audit": [e.to_json() for e in entries]}))
        return
    for e in entries:
        detail = f" ({e.detail})" if e.detail else ""
        click.echo(f"{e.at:%Y-%m-%d %H:%M:%S} UTC  {e.actor}  {e.action} {e.bot or ''}{detail}")


@click.command("challenges")
@click.argument("name")
@click.argument("choice", type=click.Choice(["accept", "refuse"]))
@_url_option
@_token_option
@_json_option
@click.pass_obj
def bot_challenges(
    where: Where, name: str, choice: str, url: str | None, token_file: str | None, as_json: bool
) -> None:
    """Whether NAME accepts or refuses challenges (refusing cancels those waiting against it)."""
    refuse = choice == "refuse"
    if _remote_args(url, token_file):
        assert url is not None and token_file is not None
        path = f"/api/bots/{quote(name, safe='')}/challenges"
        answer = _remote(url, path, token_file, {"refuse": refuse}, as_json)
    else:
        with where.store() as store:
            answer = known_bot(lambda n: store.refuse_challenges(n, refuse, actor=actor()), name).to_json()
    _echo(as_json, answer, f"{name} {'refuses' if refuse else 'accepts'} challenges")


#: `cellarena ladder` commands, and `cellarena ladder bot` commands (ladder.py adds them).
COMMANDS = (pause, resume, ban, unban, challenge, audit)
BOT_COMMANDS = (bot_challenges,)
