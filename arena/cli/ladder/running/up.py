"""`ladder up CONFIG`: the whole ladder a config file names (docs/ladder.md, "One file to run a
ladder"), each `serve GAME` and the `web` a child process under one supervisor
(`arena/ladder/ops/supervisor.py`), its house bots registered first."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

import click

from cellarena.arena.cli.ladder.community import actor
from cellarena.arena.cli.ladder.where import Where
from cellarena.server.cli.params import FiniteFloatRange, ranged_option
from cellarena.server.cli.run import configure_logging, restore_logging_after_command, run_trio

if TYPE_CHECKING:
    from cellarena.arena.ladder.ops.config_file import HouseBot, LadderFile
    from cellarena.arena.ladder.ops.supervisor import Part

#: `cellarena` as this interpreter runs it: the parts need no `cellarena` script on PATH.
CELLARENA = (sys.executable, "-c", "from cellarena.arena.cli import main; main()")


@click.command()
@click.argument("config", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@ranged_option(
    "--grace",
    15.0,
    FiniteFloatRange(0, 600),
    "Seconds each part has to stop after SIGTERM (matches under way are voided) before SIGKILL.",
)
@click.option("--check", is_flag=True, help="Check the file and register its house bots; start nothing.")
@click.pass_context
def up(ctx: click.Context, config: Path, grace: float, check: bool) -> None:
    """Run the ladder CONFIG names: a `ladder serve GAME` per [games.GAME] table and, with a [web]
    table, `ladder web`, each a process of its own run in CONFIG's folder with `--config CONFIG`.
    A part that exits is started again (after 1 s, doubling to 60 s while it keeps failing); Ctrl-C
    or SIGTERM stops every part (SIGTERM, SIGKILL after --grace) and then `up` exits.

    The file's [[house]] bots are registered first (a bot already registered is left as it is)."""
    from cellarena.arena.ladder.ops.config_file import read_config

    group = ctx.parent.command if ctx.parent is not None else None
    assert isinstance(group, click.Group)  # `up` is a command of the ladder group
    file = read_config(config, group)
    file.check_runnable()
    parts = ladder_parts(file)
    configure_logging(False)
    _log_always()
    _register_house(where_of(file), file.house)
    if check:
        click.echo(f"{config}: {', '.join(p.name for p in parts)}", err=True)
        return
    _supervise(parts, grace)


def ladder_parts(file: LadderFile) -> list[Part]:
    """The processes ``file`` names, each with `--config` (absolute) and run in the file's folder, so
    that its relative paths and house bots' commands mean the same as for the parts."""
    from cellarena.arena.ladder.ops.supervisor import Part

    path = file.path.absolute()
    base = (*CELLARENA, "ladder", "--config", str(path))
    parts = [Part(f"serve {game}", (*base, "serve", game), path.parent) for game in file.games]
    if file.web is not None:
        parts.append(Part("web", (*base, "web", *live_arguments(file)), path.parent))
    return parts


def live_arguments(file: LadderFile) -> tuple[str, ...]:
    """`web`'s live view of each game the file serves and its pages show, unless [web] names its own
    live-port: ``--live-port GAME=auto`` (the port and TLS each `serve` records), and --live-host the
    loopback address of the serves' one host."""
    web = file.web or {}
    if "live_ports" in web:
        return ()
    from cellarena.server.web.live import loopback_for

    shown = [game for game in file.default_map()["web"]["games"] if game in file.games]
    args = [arg for game in shown for arg in ("--live-port", f"{game}=auto")]
    hosts = {file.games[game].get("host", "127.0.0.1") for game in shown}
    if len(hosts) == 1 and "live_host" not in web:
        args += ["--live-host", loopback_for(hosts.pop())]
    return tuple(args)


def where_of(file: LadderFile) -> Where:
    """The ladder's folder and database as the parts see them: the file's (the database variable
    first, as for `--db`)."""
    return Where(file.folder(), os.environ.get("CELLARENA_LADDER_DB") or file.ladder.get("db"))


def _register_house(where: Where, bots: tuple[HouseBot, ...]) -> None:
    import logging

    if not bots:
        return
    log = logging.getLogger("cellarena.ladder.up")
    with where.store() as store:
        known = {b.name: b for b in store.list_bots(None)}
        for bot in bots:
            there = known.get(bot.name)
            if there is None:
                store.add_bot(bot.name, bot.game, house_command=bot.command, actor=actor())
                log.info("registered house bot %s for %s: %s", bot.name, bot.game, bot.command)
                continue
            wanted = ("house", bot.game, bot.command, True)
            if (there.kind, there.game, there.house_command, there.active) != wanted:
                log.warning(
                    "house bot %s: the ladder has a bot of that name that is not this one (%s, %s, %s); "
                    "left as it is: give the house bot another name in the file (a name stays taken "
                    "after `ladder house remove`)",
                    bot.name, there.kind, there.game, there.house_command or "no command",
                )  # fmt: skip


def _log_always() -> None:
    """The supervisor's starts, exits and stops, whatever the level."""
    import logging

    logger = logging.getLogger("cellarena.ladder.up")
    restore_logging_after_command(logger)
    logger.setLevel(logging.INFO)


def _supervise(parts: list[Part], grace: float) -> None:
    from cellarena.arena.ladder.ops.supervisor import Backoff, process_runner, stop_on_signals, supervise

    async def main() -> None:
        import trio

        stop = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(stop_on_signals, stop)
            await supervise(parts, process_runner(grace), Backoff(), stop)
            nursery.cancel_scope.cancel()

    run_trio(main)
    click.echo("every part stopped", err=True)
