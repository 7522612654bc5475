"""A remote ladder's pages as the commands reach them: an address that keeps secrets off the network
in clear, a token read from its file, a POST with it, and a failure said in one line (or one JSON
object)."""

from __future__ import annotations

import contextlib
import json
import sys
from typing import Any, NoReturn
from urllib.parse import urlsplit

import click

#: ``--token-file`` of the commands that act as one bot on a remote ladder.
token_file_option = click.option(
    "--token-file",
    required=True,
    type=click.Path(dir_okay=False),
    help="The file holding your bot's ladder token (never give a token on the command line).",
)


def fail(as_json: bool, text: str) -> NoReturn:
    """The ladder refused or cannot be reached: one line on stderr (or JSON on stdout), exit status 1."""
    click.echo(json.dumps({"ok": False, "error": text}) if as_json else f"error: {text}", err=not as_json)
    sys.exit(1)


def check_url(url: str, *, param_hint: str, secret: str) -> None:
    """Refuse ``url`` unless it is http(s), and plain http unless it stays on this machine, where
    ``secret`` (what it would carry: "your password", "the token") would cross the network in clear."""
    from cellarena.sdk.client import is_loopback

    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise click.BadParameter(f"{url!r} is not an http(s) address", param_hint=param_hint)
    if parts.scheme == "http" and not is_loopback(parts.hostname):
        raise click.BadParameter(
            f"{url}: plain http off this machine would send {secret} in clear; use https",
            param_hint=param_hint,
        )


def token_from(token_file: str) -> str | None:
    """The bot's token in ``token_file``; a file that holds none is --token-file's error."""
    from cellarena.sdk.bot import read_token

    try:
        return read_token(None, token_file)
    except ValueError as exc:
        raise click.BadParameter(str(exc), param_hint="--token-file") from None


def post_as_bot(
    url: str,
    path: str,
    token: str | None,
    data: bytes,
    content_type: str,
    as_json: bool,
    *,
    timeout: float,
    detail_chars: int,
) -> dict[str, Any]:
    """POST ``data`` to ``path`` of the ladder's pages at ``url`` with the bot's token; the answer's
    JSON. The ladder's refusal (its message, at most ``detail_chars``) or an unreachable ladder is one
    line and exit status 1 (`fail`)."""
    import urllib.error
    import urllib.request

    request = urllib.request.Request(
        f"{url.rstrip('/')}{path}",
        data=data,
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Content-Type": content_type},
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return dict(json.loads(answer.read()))
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace").strip()
        with contextlib.suppress(ValueError, AttributeError):
            detail = str(json.loads(detail).get("error", detail))
        fail(as_json, f"the ladder refused (HTTP {exc.code}): {detail[:detail_chars]}")
    except (urllib.error.URLError, OSError, ValueError) as exc:
        fail(as_json, f"cannot reach the ladder at {url} ({getattr(exc, 'reason', exc)})")
