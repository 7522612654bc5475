"""`cellarena replay verify` and `cellarena replay show`. `cellarena.arena.cli` adds the group.

The replay module (and numpy, rich, the engines) is imported inside the commands, so that importing
this group costs only click.
"""

from __future__ import annotations

import json
import sys
from typing import TYPE_CHECKING, Any

import click

from cellarena.server.cli.json_errors import FileFault, file_failed
from cellarena.server.cli.params import ranged_option
from cellarena.server.cli.replay_export import replay_export
from cellarena.server.cli.replay_fork import replay_fork
from cellarena.server.cli.web_options import allowed_host_option, page_hosts, page_socket

if TYPE_CHECKING:
    from rich.console import Console

    from cellarena.server.games import Engine
    from cellarena.server.replay import Replay, VerifyReport


@click.group()
def replay() -> None:
    """Check and look at replay files (docs/replays.md describes the format)."""


replay.add_command(replay_fork)
replay.add_command(replay_export)


@replay.command("verify")
@click.argument("paths", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option(
    "--allow-incomplete",
    is_flag=True,
    help="Exit 0 for a replay without a result (a match cut short) if every tick it has verifies.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object: ok, and per file its path, ok, complete, ticks_verified (as the match's "
    "result counts them), moves_verified (ticks whose moves were re-applied), summary, mismatch, or error.",
)
def replay_verify(paths: tuple[str, ...], allow_incomplete: bool, as_json: bool) -> None:
    """Re-simulate each replay and check every tick's state hash and the result.

    Prints "ok: N ticks verified" (N as `cellarena match` counts the match's ticks), or where the
    first mismatch is. Exit status 0 if every file verifies, 1 if any has a mismatch, cannot be
    read, or is incomplete (unless --allow-incomplete).
    """
    from cellarena.server.replay import ReplayError, read_replay, verify

    failed = False
    found: list[dict[str, Any]] = []
    for path in paths:
        prefix = f"{path}: " if len(paths) > 1 else ""
        try:
            report = verify(read_replay(path))
        except ReplayError as exc:
            if not as_json:
                click.echo(f"error: {exc}", err=True)
            found.append({"path": path, "ok": False, "error": str(exc), "code": "file"})
            failed = True
            continue
        passed = report.ok and (report.complete or allow_incomplete)
        found.append(_verified(report, passed))
        if not as_json:
            click.echo(prefix + report.summary())
        failed = failed or not passed
    if as_json:
        click.echo(json.dumps({"ok": not failed, "replays": found}))
    if failed:
        sys.exit(1)


@replay.command("strip-debug")
@click.argument("src", metavar="IN", type=click.Path(dir_okay=False))
@click.argument("dst", metavar="OUT", type=click.Path(dir_okay=False))
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object: ok, out and ticks (the ticks that had a drawing), or error.",
)
def replay_strip_debug(src: str, dst: str, as_json: bool) -> None:
    """Copy replay IN to OUT without the bots' debug drawings (docs/replays.md).

    Everything else is copied byte for byte, so OUT verifies as IN does. OUT may not be IN.
    Exit status 0 once OUT is written, 1 if IN cannot be read or OUT cannot be written.
    """
    import os

    from cellarena.server.replay import ReplayError, strip_debug

    if os.path.exists(dst) and os.path.exists(src) and os.path.samefile(src, dst):
        file_failed(f"OUT ({dst}) is IN; give another file to write", as_json)
    try:
        stripped = strip_debug(src, dst)
    except ReplayError as exc:
        file_failed(str(exc), as_json)
    except OSError as exc:
        file_failed(f"{dst}: cannot write it ({exc.strerror or exc})", as_json)
    if as_json:
        click.echo(json.dumps({"ok": True, "out": dst, "ticks": stripped}))
    else:
        click.echo(f"{dst}: written; debug drawings removed from {stripped} ticks")


def _verified(report: VerifyReport, passed: bool) -> dict[str, Any]:
    """One file's verification as JSON; ``ok`` is whether it passes (the exit status's view)."""
    m = report.mismatch
    return {
        "path": report.path,
        "ok": passed,
        "complete": report.complete,
        "ticks_verified": report.ticks_verified,
        "moves_verified": report.ticks_verified if report.moves_verified is None else report.moves_verified,
        "summary": report.summary(),
        "mismatch": None
        if m is None
        else {"tick": m.tick, "what": m.what, "expected": _plain(m.expected), "got": _plain(m.got)},
        "incomplete_reason": report.incomplete_reason or None,
    }


def _plain(value: Any) -> Any:
    """A value as JSON takes it: bytes as a list of byte values, tuples as lists, others as text."""
    if isinstance(value, bytes | bytearray):
        return list(value)
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    if hasattr(value, "tolist"):  # numpy
        return _plain(value.tolist())
    return str(value)


@replay.command("show")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option(
    "--tick",
    "-t",
    type=int,
    default=None,
    help="The decision point to show. Default: the end of the replay.",
)
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print one JSON object: the replay's game, config, seed and names, the tick, the game's "
    "frame at that tick (bytes as lists of byte values), its result, the picture's lines and the "
    "legend's.",
)
def replay_show(path: str, tick: int | None, as_json: bool) -> None:
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
        raise FileFault(str(exc), path) from None
    if as_json:
        click.echo(json.dumps(_shown(rep, engine)))
        return
    console = Console(highlight=False)
    _show_header(console, rep, engine, at_end=tick is None)
    _show_state(console, rep, engine)


def _shown(rep: Replay, engine: Engine) -> dict[str, Any]:
    """`replay show` as JSON: what the text shows, as data."""
    from cellarena.server.games import plugin

    result = engine.result()
    render = plugin(rep.game).renderer()
    legend = plugin(rep.game).render_legend()
    return {
        "path": rep.path,
        "game": rep.game,
        "config": _plain({k: v for k, v in rep.config.items() if k != "map_text"}),
        "seed": rep.seed,
        "names": list(rep.names),
        "tick": engine.tick,
        "frame": _plain(engine.frame()),
        "result": None
        if result is None
        else {
            "ticks": result.ticks,
            "winner": result.winner,
            "reason": result.reason,
            "ranks": {str(k): v for k, v in result.ranks.items()},
            "scores": {str(k): v for k, v in result.scores.items()},
        },
        "match_result": _plain(rep.result),
        "picture": None if render is None else render(engine).plain.splitlines(),
        "legend": None if legend is None else legend(rep.names).plain.splitlines(),
    }


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
    render = game.renderer()
    if viewer is not None:
        viewer(console, engine, lambda seat: _seat(rep, seat))
    elif render is not None:
        console.print(render(engine), soft_wrap=True)
    else:
        for key, value in engine.frame().items():
            if not isinstance(value, bytes | bytearray):
                console.print(f"{key}: {value}", soft_wrap=True)
    legend = game.render_legend()
    if legend is not None:
        console.print(legend(rep.names), soft_wrap=True)


@replay.command("view")
@click.argument("path", type=click.Path(dir_okay=False))
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to listen on.")
@ranged_option("--port", 8765, click.IntRange(0, 65535), "0: any free port.")
@click.option("--open", "open_browser", is_flag=True, help="Open the page in the default web browser.")
@allowed_host_option
def replay_view(path: str, host: str, port: int, open_browser: bool, allowed_host: tuple[str, ...]) -> None:
    """Serve one replay to a web browser and print the page's address (docs/web.md).

    The frames come from re-simulating the replay, every hash checked. Needs the ``web`` extra
    (pip install 'cellarena[web]'). Stops with Ctrl-C.
    """
    try:
        from cellarena.server.web.replays import viewer_app
        from cellarena.server.web.serving import serve_until_interrupted, url_of
    except ImportError as exc:
        click.echo(f"error: the viewer needs the 'web' extra ({exc}); pip install 'cellarena[web]'", err=True)
        sys.exit(1)
    from pathlib import Path

    from cellarena.server.replay import ReplayError, read_replay

    try:
        read_replay(path)  # a bad file is a command-line error, before anything listens
    except ReplayError as exc:
        raise FileFault(str(exc), path) from None
    allowed = page_hosts(host, allowed_host)
    sock = page_socket(host, port)
    app = viewer_app(Path(path), allowed)
    url = url_of(sock, "/replays/replay/")
    serve_until_interrupted(app, sock, f"serving {path} at {url}  (Ctrl-C stops)", url, open_browser)
