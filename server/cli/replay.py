"""`cellarena replay verify` and `cellarena replay show`. `cellarena.arena.cli` adds the group.

The replay module (and numpy, rich, the engines) is imported inside the commands, so that importing
this group costs only click.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

import click

if TYPE_CHECKING:
    from rich.console import Console

    from cellarena.server.games import Engine
    from cellarena.server.replay import Replay


@click.group()
def replay() -> None:
    """Check and look at replay files (docs/replays.md describes the format)."""


@replay.command("verify")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--allow-incomplete",
    is_flag=True,
    help="Exit 0 for a replay without a result (a match cut short) if every tick it has verifies.",
)
def replay_verify(paths: tuple[str, ...], allow_incomplete: bool) -> None:
    """Re-simulate each replay and check every tick's state hash and the result.

    Prints "ok: N ticks verified", or where the first mismatch is. Exit status 0 if every file
    verifies, 1 if any has a mismatch, cannot be read, or is incomplete (unless --allow-incomplete).
    """
    from cellarena.server.replay import ReplayError, read_replay, verify

    failed = False
    for path in paths:
        prefix = f"{path}: " if len(paths) > 1 else ""
        try:
            report = verify(read_replay(path))
        except ReplayError as exc:
            click.echo(f"error: {exc}", err=True)
            failed = True
            continue
        click.echo(prefix + report.summary())
        if not report.ok or not (report.complete or allow_incomplete):
            failed = True
    if failed:
        sys.exit(1)


@replay.command("show")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--tick",
    "-t",
    type=int,
    default=None,
    help="The decision point to show. Default: the end of the replay.",
)
def replay_show(path: str, tick: int | None) -> None:
    """Print the board at tick T of a replay, with who is still in and where the agents are.

    The board is re-simulated from the start, checking every hash on the way. Exit status 1 if the
    file cannot be read, does not re-simulate, or has no tick T.
    """
    from rich.console import Console

    from cellarena.server.replay import ReplayError, board_at, read_replay

    try:
        rep = read_replay(path)
        engine = board_at(rep, tick)
    except ReplayError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    console = Console(highlight=False)
    _show_header(console, rep, engine, at_end=tick is None)
    _show_state(console, rep, engine)


def _seat(rep: Replay, seat: int) -> str:
    name = rep.names[seat] if 0 <= seat < len(rep.names) else "?"
    return f"{seat} ({name})"


def _show_header(console: Console, rep: Replay, engine: Engine, *, at_end: bool) -> None:
    config = ", ".join(f"{k}={v}" for k, v in rep.config.items() if k != "map_text")
    console.print(f"{rep.path}: {rep.game}, {config}, seed {rep.seed}", soft_wrap=True)
    console.print(f"tick {engine.tick}")
    frame = engine.frame()
    result = engine.result()
    if "alive" in frame:
        alive = frame["alive"]
        console.print("alive players: " + (", ".join(_seat(rep, s) for s in alive) or "none"))
    elif result is None:
        console.print("to act: " + (", ".join(_seat(rep, s) for s in sorted(engine.pending())) or "nobody"))
    if result is not None:
        console.print(f"game ended at tick {result.ticks}: {_outcome(rep, result.winner, result.reason)}")
    told = rep.result
    if (
        at_end
        and told is not None
        and (result is None or (told["winner"], told["reason"]) != (result.winner, result.reason))
    ):
        # The match server decided differently from the game (forfeits): say what the seats were told.
        console.print(
            f"match result at tick {told['ticks']}: {_outcome(rep, told['winner'], told['reason'])}"
        )


def _outcome(rep: Replay, winner: int | None, reason: str) -> str:
    return ("draw" if winner is None else f"player {_seat(rep, winner)} wins") + f" ({reason})"


def _show_state(console: Console, rep: Replay, engine: Engine) -> None:
    """The game's own viewer, else its `--watch` picture, else the frame's small fields."""
    from cellarena.server.games import plugin

    game = plugin(rep.game)
    viewer = game.replay_viewer()
    if viewer is not None:
        viewer(console, engine, lambda seat: _seat(rep, seat))
        return
    render = game.renderer()
    if render is not None:
        console.print(render(engine), soft_wrap=True)
        return
    for key, value in engine.frame().items():
        if not isinstance(value, bytes | bytearray):
            console.print(f"{key}: {value}", soft_wrap=True)


@replay.command("view")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@click.option(
    "--port", type=click.IntRange(0, 65535), default=8765, show_default=True, help="0: any free port."
)
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default web browser.")
def replay_view(path: str, host: str, port: int, open_browser: bool) -> None:
    """Serve one replay to a web browser and print the page's address (docs/web.md).

    The frames come from re-simulating the replay, every hash checked. Needs the ``web`` extra
    (pip install 'cellarena[web]'). Stops with Ctrl-C.
    """
    try:
        from cellarena.server.web.app import build_app
        from cellarena.server.web.replays import ReplayLibrary, replay_routes
        from cellarena.server.web.serving import BindError, bind, serve_until_interrupted, url_of
    except ImportError as exc:
        click.echo(f"error: the viewer needs the 'web' extra ({exc}); pip install 'cellarena[web]'", err=True)
        sys.exit(1)
    from pathlib import Path

    from cellarena.server.replay import ReplayError, read_replay

    try:
        read_replay(path)  # a bad file is a command-line error, before anything listens
    except ReplayError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    try:
        sock = bind(host, port)
    except BindError as exc:
        click.echo(f"error: {exc}", err=True)
        sys.exit(1)
    from starlette.responses import RedirectResponse
    from starlette.routing import Route

    library = ReplayLibrary.single("replay", Path(path))

    async def home(_request: object) -> RedirectResponse:
        return RedirectResponse("/replays/replay/")

    app = build_app([Route("/", home), *replay_routes(library)])
    url = url_of(sock, "/replays/replay/")
    serve_until_interrupted(app, sock, f"serving {path} at {url}  (Ctrl-C stops)", url, open_browser)
