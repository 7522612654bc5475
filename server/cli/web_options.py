"""``--web`` and ``--web-port`` for `cellarena match` and `cellarena serve`: the live view (docs/web.md)."""

from __future__ import annotations

import socket
from typing import Any

import click


def web_options() -> list[Any]:
    return [
        click.option(
            "--web",
            is_flag=True,
            help="Show the match(es) live in a browser (needs the 'web' extra); prints the address.",
        ),
        click.option(
            "--web-port",
            type=click.IntRange(0, 65535),
            default=8766,
            show_default=True,
            help="Loopback port of the live view (0: any free port).",
        ),
    ]


def bind_web(port: int) -> socket.socket:
    """The live view's listening socket on loopback, or a clear usage error."""
    try:
        from cellarena.server.web.serving import BindError, bind
    except ImportError as exc:
        raise click.UsageError(f"--web needs the 'web' extra ({exc}); pip install 'cellarena[web]'") from None
    try:
        return bind("127.0.0.1", port)
    except BindError as exc:
        raise click.UsageError(str(exc).replace("--port", "--web-port")) from None
