"""`ladder owner`: the people who sign up on a ladder's pages: invites, approvals, admins, resets."""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator
from typing import Any

import click

from cellarena.arena.cli.ladder.community import actor
from cellarena.arena.cli.ladder.where import Where


@click.group()
def owner() -> None:
    """People who sign up on the pages (`ladder web --signup`): invites, approvals, lost passwords."""


@contextlib.contextmanager
def _accounts(where: Where) -> Iterator[Any]:
    try:
        from cellarena.arena.ladder.accounts.owners import AccountError, Accounts
    except ImportError as exc:
        raise click.UsageError(f"owners need the 'web' extra ({exc}); pip install 'cellarena[web]'") from None
    with where.store() as store:
        try:
            yield Accounts(store)
        except AccountError as exc:
            raise click.ClickException(str(exc)) from None


@owner.command("list")
@click.option("--json", "as_json", is_flag=True, help='Print one JSON object: {"owners": [...]}.')
@click.pass_obj
def owner_list(where: Where, as_json: bool) -> None:
    """Every owner, with their status (active, or pending the host's approval) and bots."""
    with _accounts(where) as accounts:
        rows = [(o, [b.name for b in accounts.bots(o)]) for o in accounts.owners()]
    if as_json:
        click.echo(json.dumps({"owners": [{**o.to_json(), "bots": bots} for o, bots in rows]}))
        return
    for o, bots in rows:
        click.echo(f"{o.name:24} {o.status:8} {', '.join(bots)}")


@owner.command("invite")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: invite.")
@click.pass_obj
def owner_invite(where: Where, as_json: bool) -> None:
    """Make an invite code (for `--signup invite`), printed once; each signs one owner up."""
    with _accounts(where) as accounts:
        code = accounts.make_invite()
    click.echo("an invite code (shown once; it signs up one owner):", err=True)
    click.echo(json.dumps({"invite": code}) if as_json else code)


@owner.command("approve")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, approved.")
@click.pass_obj
def owner_approve(where: Where, name: str, as_json: bool) -> None:
    """Let NAME, who signed up under `--signup approval`, log in."""
    with _accounts(where) as accounts:
        accounts.approve(name, actor=actor())
    if as_json:
        click.echo(json.dumps({"name": name, "approved": True}))
        return
    click.echo(f"approved {name}: they can log in now")


@owner.command("admin")
@click.argument("name")
@click.option("--remove", is_flag=True, help="No longer an admin.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, admin.")
@click.pass_obj
def owner_admin(where: Where, name: str, remove: bool, as_json: bool) -> None:
    """Make owner NAME an admin of the ladder: the pages' /admin then lets them approve owners and
    pause, resume, ban and unban bots, each written to the audit log under their name."""
    with _accounts(where) as accounts:
        accounts.set_admin(name, not remove, actor=actor())
    if as_json:
        click.echo(json.dumps({"name": name, "admin": not remove}))
        return
    click.echo(f"{name} is {'no longer' if remove else 'now'} an admin")


@owner.command("reset")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, code, expires_in.")
@click.pass_obj
def owner_reset(where: Where, name: str, as_json: bool) -> None:
    """NAME lost their password: print a one-time code (24 h) to send them over a channel you trust;
    they set a new password with it at the pages' /reset, which logs out all their sessions."""
    with _accounts(where) as accounts:
        code = accounts.make_reset_code(name)
    click.echo(f"a one-time code for {name} (shown once, works for 24 hours, at /reset):", err=True)
    click.echo(json.dumps({"name": name, "code": code, "expires_in": "24h"}) if as_json else code)


@owner.command("delete")
@click.argument("name")
@click.option("--yes", is_flag=True, help="Do not ask.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: name, revoked (bot names).")
@click.pass_obj
def owner_delete(where: Where, name: str, yes: bool, as_json: bool) -> None:
    """Delete NAME's account: their bots are revoked (their matches stay in the history, ownerless),
    their sessions end, the name is free again."""
    if not yes:
        click.confirm(f"delete {name} and revoke their bots?", abort=True)
    with _accounts(where) as accounts:
        revoked = accounts.delete_owner(name)
    if as_json:
        click.echo(json.dumps({"name": name, "revoked": list(revoked)}))
        return
    click.echo(f"deleted {name}" + (f"; revoked {', '.join(revoked)}" if revoked else ""))
