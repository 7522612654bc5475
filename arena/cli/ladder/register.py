"""`ladder register`: sign up on a remote ladder's pages, and make a first bot there."""

from __future__ import annotations

import json
import shlex
from pathlib import Path
from typing import Any

import click

from cellarena.arena.cli.ladder.remote import check_url, fail
from cellarena.arena.ladder.connect_commands import Address, connect_commands, kit_command
from cellarena.server.cli.params import optional_option


@click.command("register")
@click.argument("url")
@click.option("--name", required=True, help="Your owner name on that ladder.")
@click.option(
    "--password-file",
    required=True,
    type=click.Path(dir_okay=False),
    help="A file holding your password (never give a password on the command line).",
)
@optional_option("--invite-file", click.Path(dir_okay=False), "A file holding the host's invite code.")
@click.option("--bot", default=None, help="Also make a bot of this name (once your account is active).")
@click.option(
    "--game",
    default=None,
    help="The bot's game, on a ladder of several games. [default: the ladder's one game]",
)
@optional_option(
    "--token-file",
    click.Path(dir_okay=False),
    "Where to write the bot's token (made 0600). [default: BOT.token]",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: owner, bot, or error.")
def register(
    url: str,
    name: str,
    password_file: str,
    invite_file: str | None,
    bot: str | None,
    game: str | None,
    token_file: str | None,
    as_json: bool,
) -> None:
    """Sign up to the ladder whose pages are at URL (https), and with --bot make your first bot.

    Your password and the bot's token cross the network, so URL must be https (plain http only to this
    machine). The token is written to --token-file, never printed. Exit status 0 when done; 1 when the
    ladder refuses (a taken name, a wrong invite, too many sign-ups) or cannot be reached."""
    check_url(url, param_hint="URL", secret="your password")
    password = _secret(password_file, "--password-file")
    invite = _secret(invite_file, "--invite-file") if invite_file else None
    target = Path(token_file) if token_file else Path(f"{bot}.token")
    signed = _post(url, "/api/signup", {"name": name, "password": password, "invite": invite}, as_json)
    out: dict[str, Any] = {"ok": True, "owner": signed["owner"]}
    if signed["owner"]["status"] != "active":
        if not as_json:
            click.echo(f"signed up as {name}; the ladder's host approves new owners: wait for them")
        else:
            click.echo(json.dumps(out))
        return
    if bot is not None:
        asked: dict[str, str | None] = {"owner": name, "password": password, "name": bot}
        if game is not None:
            asked["game"] = game
        made = _post(url, "/api/owner/bots", asked, as_json)
        _write_token(target, made["token"], as_json)
        out["bot"] = {"name": made["name"], "game": made["game"], "token_file": str(target)}
        address = Address.from_json(made.get("connect"))
        if address is not None:
            commands = connect_commands(address, bot, str(target))
            out["bot"]["connect"] = {
                **address.to_json(),
                "ca": made["connect"].get("ca"),
                "commands": {c.kit: c.command for c in commands},
            }
    if as_json:
        click.echo(json.dumps(out))
        return
    click.echo(f"signed up as {name}")
    if bot is not None:
        click.echo(f"made bot {bot}; its token is in {target} (0600)")
        _say_how_to_connect(url, made, bot, str(target))


def _say_how_to_connect(url: str, made: dict[str, Any], bot: str, target: str) -> None:
    """The Python SDK's command that plays ``bot`` where the ladder says its game is (`connect_commands`,
    as the pages show it), and where the other kits' are; a ladder too old to say prints the flags."""
    address = Address.from_json(made.get("connect"))
    if address is None:
        where = f"{url.rstrip('/')}/connect"
        click.echo(f"connect with --ladder --token-file {target} (the ladder's pages say where: {where})")
        return
    tls = ", TLS" if address.tls else ""
    click.echo(
        f"{address.game} plays at {address.host}:{address.port}{tls}; connect it from its folder with:"
    )
    ca = made["connect"].get("ca")
    if address.own_ca and isinstance(ca, str):
        click.echo(
            f"  curl -fsSo {address.ca_file} {shlex.quote(ca)}   # the ladder's own certificate, to trust"
        )
    click.echo(f"  {kit_command('python', address, bot, target).command}")
    click.echo(f"every kit's command (TypeScript, Java, C++, Rust): {url.rstrip('/')}/connect")


def _secret(path: str, option: str) -> str:
    """The secret in the file ``path`` (a password, an invite), or ``option``'s error."""
    try:
        text = Path(path).read_text("utf-8").strip()
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(f"{path}: cannot read it ({exc})", param_hint=option) from None
    if not text:
        raise click.BadParameter(f"{path}: the file is empty", param_hint=option)
    return text


def _post(url: str, path: str, body: dict[str, str | None], as_json: bool) -> dict[str, Any]:
    """POST ``body`` as JSON to the pages at ``url``; the answer's JSON, or the command fails."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"{url.rstrip('/')}{path}",
        data=json.dumps(body).encode(),
        headers={"content-type": "application/json", "accept": "application/json"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            return dict(json.loads(answer.read()))
    except urllib.error.HTTPError as exc:
        try:
            detail = str(json.loads(exc.read()).get("error", ""))
        except (ValueError, AttributeError):
            detail = ""
        fail(as_json, f"the ladder refused (HTTP {exc.code}): {detail[:300] or exc.reason}")
    except (urllib.error.URLError, OSError) as exc:
        fail(as_json, f"cannot reach the ladder at {url} ({getattr(exc, 'reason', exc)})")


def _write_token(target: Path, token: str, as_json: bool) -> None:
    """The bot's token into ``target``, readable by its user alone (0600)."""
    import os

    try:
        fd = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        with os.fdopen(fd, "w") as f:
            f.write(token + "\n")
    except OSError as exc:
        fail(as_json, f"{target}: cannot write the token ({exc.strerror or exc}); rotate it on the pages")
