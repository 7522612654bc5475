"""`ladder replay`: download a match's replay with your bot's debug drawings."""

from __future__ import annotations

import json
from pathlib import Path

import click

from cellarena.arena.cli.ladder.remote import check_url, fail, token_file_option, token_from


@click.command("replay")
@click.argument("match_id", metavar="ID", type=click.IntRange(1))
@token_file_option
@click.option(
    "--url",
    default="http://127.0.0.1:8080",
    show_default=True,
    help="The ladder's pages (`ladder web`).",
)
@click.option("--out", type=click.Path(dir_okay=False), help="Where to write it. [default: ladder-ID.replay]")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: ok and out, or error.")
def replay_download(match_id: int, token_file: str, url: str, out: str | None, as_json: bool) -> None:
    """Download match ID's replay with your bot's debug drawings (the public copy has none).

    The token goes in an Authorization header, never in the URL; over anything but loopback use an
    https URL, or the token crosses the network in clear. Exit status 0 once the file is written,
    1 when the ladder refuses (a wrong token, not your bot's match) or cannot be reached.
    """
    import urllib.error
    import urllib.request

    token = token_from(token_file)
    check_url(url, param_hint="--url", secret="the token")
    target = Path(out) if out else Path(f"ladder-{match_id}.replay")
    request = urllib.request.Request(
        f"{url.rstrip('/')}/api/replays/{match_id}/owner", headers={"Authorization": f"Bearer {token}"}
    )

    try:
        with urllib.request.urlopen(request, timeout=60) as answer:
            data = answer.read()
    except urllib.error.HTTPError as exc:
        detail = exc.read().decode("utf-8", "replace").strip()[:300]
        fail(as_json, f"the ladder refused (HTTP {exc.code}): {detail}")
    except (urllib.error.URLError, OSError) as exc:
        fail(as_json, f"cannot reach the ladder at {url} ({getattr(exc, 'reason', exc)})")
    try:
        target.write_bytes(data)
    except OSError as exc:
        fail(as_json, f"{target}: cannot write it ({exc.strerror or exc})")
    if as_json:
        click.echo(json.dumps({"ok": True, "out": str(target), "match": match_id}))
    else:
        click.echo(f"{target}: match {match_id}'s replay, with your bot's debug drawings")
