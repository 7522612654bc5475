"""Options of the commands that serve pages: ``--web`` and ``--web-port`` (the live view of `cellarena
match` and `cellarena serve`, docs/web.md), and ``--allowed-host`` (every page server a host names).
"""

from __future__ import annotations

import socket
import sys
from typing import TYPE_CHECKING, Any

import click

from cellarena.server.cli.params import ranged_option

if TYPE_CHECKING:
    from cellarena.server.web.hosts import AllowedHosts


def web_options() -> list[Any]:
    return [
        click.option(
            "--web",
            is_flag=True,
            help="Show the match(es) live in a browser (needs the 'web' extra); prints the address.",
        ),
        ranged_option(
            "--web-port", 8766, click.IntRange(0, 65535), "Loopback port of the live view (0: any free port)."
        ),
    ]


#: ``--allowed-host``, one meaning for `ladder web`, `cellarena web` and `replay view` (server/web/hosts.py).
allowed_host_option = click.option(
    "--allowed-host",
    metavar="NAME",
    multiple=True,
    help="A host name browsers reach the pages by (repeat for more; '*.example.org' for its subdomains): "
    "a request naming another Host gets 400. Always allowed: the --host address, and localhost on "
    "loopback. Required with --host 0.0.0.0 or ::.",
)


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


def page_hosts(host: str, allowed_host: tuple[str, ...]) -> AllowedHosts:
    """The hosts a page server on ``host`` answers (``--allowed-host``, its warning said), for `cellarena
    web` and `replay view`; else the error on stderr and exit status 1. Needs the 'web' extra."""
    from cellarena.server.web.hosts import AllowedHosts, HostsError

    try:
        allowed, warning = AllowedHosts.for_server(host, allowed_host)
    except HostsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    if warning is not None:
        click.echo(f"warning: {warning}", err=True)
    return allowed


def page_socket(host: str, port: int) -> socket.socket:
    """The page server's listening socket, or the error on stderr and exit status 1 (as `page_hosts`)."""
    from cellarena.server.web.serving import BindError, bind

    try:
        return bind(host, port)
    except BindError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
