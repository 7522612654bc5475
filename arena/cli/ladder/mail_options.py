"""`ladder web`'s mail options (docs/ladder.md "Mail"): the SMTP server, its TLS (and a private CA to
trust for it) and login, the sender's address, and whether sign-up verifies an address. Declared here,
applied with `mail_options`; the command hands `mail_settings`' result to the pages and runs its
sender in its nursery."""

from __future__ import annotations

import functools
import os
import stat
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any, TypeVar, cast

import click

from cellarena.server.cli.params import optional_option

F = TypeVar("F", bound=Callable[..., Any])

_OPTIONS = (
    click.option(
        "--smtp-host",
        default=None,
        help="Send mail (password resets, address checks, owners' notices) through this SMTP server. "
        "Without it: no mail; lost passwords take the host's codes (`ladder owner reset`).",
    ),
    optional_option(
        "--smtp-port",
        click.IntRange(1, 65535),
        "Its port. [default: 587 with starttls, 465 with tls, 25 with none]",
    ),
    click.option(
        "--smtp-tls",
        type=click.Choice(["starttls", "tls", "none"]),
        default="starttls",
        show_default=True,
        help="STARTTLS, TLS from the first byte (port 465), or none: only to a relay on this machine.",
    ),
    click.option(
        "--smtp-ca-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="Trust the SMTP server's certificate (STARTTLS or tls) when the CA certificates in this PEM "
        "file signed it (a private CA, or the server's own certificate), instead of the system's CAs.",
    ),
    click.option("--smtp-user", default=None, help="The SMTP login's user name (with --smtp-password-file)."),
    click.option(
        "--smtp-password-file",
        type=click.Path(dir_okay=False, path_type=Path),
        default=None,
        help="A file only the ladder's user reads, holding the SMTP login's password (never on the "
        "command line or in the environment).",
    ),
    click.option("--mail-from", default=None, help="The mails' sender address. [default: ladder@SMTP-HOST]"),
    click.option(
        "--verify-email/--no-verify-email",
        default=False,
        show_default=True,
        help="With --smtp-host: sign-up asks for an email address, and an owner makes bots once they "
        "have followed the link mailed to it.",
    ),
)

_DEFAULT_PORTS = {"starttls": 587, "tls": 465, "none": 25}


#: The parameters the options fill, which `mail_options` hands the command as one ``mail`` dict.
MAIL_PARAMS = (
    "smtp_host",
    "smtp_port",
    "smtp_tls",
    "smtp_ca_file",
    "smtp_user",
    "smtp_password_file",
    "mail_from",
    "verify_email",
)


def mail_options(command: F) -> F:
    """The mail options on ``command``, which receives their values as ``mail`` (for `mail_settings`)."""

    @functools.wraps(command)
    def gathered(*args: Any, **kwargs: Any) -> Any:
        mail = {name: kwargs.pop(name) for name in MAIL_PARAMS}
        return command(*args, mail=mail, **kwargs)

    wrapped: Any = gathered
    for option in reversed(_OPTIONS):
        wrapped = option(wrapped)
    return cast(F, wrapped)


def read_password(path: Path) -> str:
    """The password in ``path`` (its first line); a usage error naming the file if others may read it."""
    try:
        mode = path.stat().st_mode
        text = path.read_text("utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise click.BadParameter(
            f"{path}: cannot read it ({exc})", param_hint="--smtp-password-file"
        ) from None
    if mode & (stat.S_IRWXG | stat.S_IRWXO):
        raise click.BadParameter(
            f"{path}: other users may read the SMTP password; chmod 600 {path}",
            param_hint="--smtp-password-file",
        )
    password = text.splitlines()[0] if text.strip() else ""
    if not password:
        raise click.BadParameter(f"{path}: the file is empty", param_hint="--smtp-password-file")
    return password


def mail_settings(options: dict[str, Any], signup: str | None) -> Any:
    """The `SmtpSettings` the options name (None without --smtp-host); usage errors name the option."""
    from cellarena.arena.ladder.accounts.owner_mail import check_address
    from cellarena.arena.ladder.accounts.owners import AccountError
    from cellarena.arena.ladder.accounts.smtp import SmtpSettings, check_settings

    host = options["smtp_host"]
    if host is None:
        for name in ("smtp_user", "smtp_password_file", "mail_from", "smtp_port", "smtp_ca_file"):
            if options[name] is not None:
                raise click.UsageError(
                    f"--{name.replace('_', '-')} needs --smtp-host (the server to send through)"
                )
        if options["verify_email"]:
            raise click.UsageError("--verify-email needs --smtp-host: the ladder mails the links")
        return None
    if signup is None:
        raise click.UsageError("--smtp-host mails owners: give --signup too (the owners' pages)")
    tls = options["smtp_tls"]
    sender = options["mail_from"] or f"ladder@{host}"
    try:
        check_address(sender)
    except AccountError as exc:
        raise click.BadParameter(str(exc), param_hint="--mail-from") from None
    password_file = options["smtp_password_file"]
    settings = SmtpSettings(
        context=_ca_context(options["smtp_ca_file"], tls),
        host=host,
        port=options["smtp_port"] or _DEFAULT_PORTS[tls],
        sender=sender,
        tls=tls,
        user=options["smtp_user"],
        password=None if password_file is None else read_password(password_file),
        local_name=os.uname().nodename or "localhost",
    )
    try:
        check_settings(settings)
    except ValueError as exc:
        raise click.UsageError(str(exc)) from None
    return settings


def _ca_context(ca_file: Path | None, tls: str) -> Any:
    """``--smtp-ca-file``'s client TLS context (None: the system's CAs); a usage error naming the file
    when it cannot be read, or when no TLS is spoken."""
    if ca_file is None:
        return None
    if tls == "none":
        raise click.UsageError(
            "--smtp-ca-file is for the SMTP server's TLS, and --smtp-tls none speaks none: "
            "give --smtp-tls starttls or tls, or leave --smtp-ca-file out"
        )
    from cellarena.sdk.client import TLSError, tls_context

    try:
        return tls_context(str(ca_file))
    except TLSError as exc:
        raise click.BadParameter(str(exc), param_hint="--smtp-ca-file") from None


def mail_sender(
    accounts: Any, smtp: Any, verify_email: bool, store: Any, games: tuple[str, ...]
) -> list[Callable[[], Awaitable[None]]]:
    """With ``smtp``, the owners' pages' `Mailer` (set on their settings ``accounts``) and its sender
    task, for `ladder web`'s nursery; no task without."""
    if accounts is None or smtp is None:
        return []
    from cellarena.arena.ladder.accounts.mailer import Mailer

    accounts.mailer = Mailer(smtp, store=store, ladder_name=f"{' and '.join(games)} ladder")
    accounts.verify_email = verify_email
    return [accounts.mailer.run]
