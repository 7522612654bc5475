"""`cellarena web RUNS_DIR`: the results of the tournaments under a folder, as web pages (docs/web.md)."""

from __future__ import annotations

import sys
from pathlib import Path

import click

from cellarena.server.cli.params import ranged_option
from cellarena.server.cli.web_options import allowed_host_option, page_hosts, page_socket


@click.command("web")
@click.argument("runs_dir", type=click.Path(file_okay=False, path_type=Path))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@ranged_option("--port", 8765, click.IntRange(0, 65535), "0: any free port.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default web browser.")
@allowed_host_option
def web(runs_dir: Path, host: str, port: int, open_browser: bool, allowed_host: tuple[str, ...]) -> None:
    """Serve the standings, rating charts, matches and replays of the tournaments under RUNS_DIR.

    RUNS_DIR is a tournament's results folder (its --out) or a folder of them (runs/). The pages
    read the results databases without locking them, so a running tournament can be watched too.
    Needs the ``web`` extra. Stops with Ctrl-C.
    """
    try:
        from cellarena.arena.web.pages import results_app
        from cellarena.arena.web.results_source import ResultsError, ResultsSource, find_tournaments
        from cellarena.server.web.serving import serve_until_interrupted, url_of
    except ImportError as exc:
        click.echo(
            f"error: the web pages need the 'web' extra ({exc}); pip install 'cellarena[web]'", err=True
        )
        sys.exit(1)
    allowed = page_hosts(host, allowed_host)
    try:
        found = find_tournaments(runs_dir)
    except ResultsError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    sources: dict[str, ResultsSource] = dict(found)
    sock = page_socket(host, port)
    app = results_app(sources, allowed)
    url = url_of(sock, "/")
    what = f"{len(found)} tournament{'s' if len(found) != 1 else ''} from {runs_dir}"
    serve_until_interrupted(app, sock, f"serving {what} at {url}  (Ctrl-C stops)", url, open_browser)
