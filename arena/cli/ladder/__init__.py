"""`cellarena ladder`: host a public ladder. Register bots, serve rated matches, print the standings.

Everything a ladder keeps is in its database: a SQLite file in the ladder's folder (``--dir``,
default ``./ladder``), or a PostgreSQL database (``--db postgresql://...``). Replays go to the
folder's ``replays/``. A bot's token is printed once, when it is made; the database keeps only a
hash of it. One module per sub-command group; this one gathers them under the ``ladder`` group.
"""

from __future__ import annotations

from pathlib import Path

import click

from cellarena.arena.cli.ladder import (
    bots,
    community,
    export,
    house,
    owners,
    rebuild,
    register,
    replay,
    season,
    serve,
    submit,
    web,
)
from cellarena.arena.cli.ladder.running import backup, systemd, up
from cellarena.arena.cli.ladder.where import Where


def _config_file(ctx: click.Context, _param: click.Parameter, path: Path | None) -> None:
    """Fill every option's default from the config file (docs/ladder.md, "One file to run a ladder"):
    its keys are the options' flags, and a flag given wins over the file."""
    if path is not None:
        from cellarena.arena.ladder.ops.config_file import read_config

        ctx.default_map = read_config(path, ladder).default_map()


@click.group()
@click.option(
    "--config",
    type=click.Path(dir_okay=False, path_type=Path),
    default=None,
    is_eager=True,  # read before the other options, whose defaults it gives
    expose_value=False,
    callback=_config_file,
    help="A TOML file of this ladder's options: --dir, --db, each game's `serve` options, `web`'s "
    '(docs/ladder.md, "One file to run a ladder"). A flag given here wins over the file.',
)
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=Path("ladder"),
    show_default=True,
    help="The ladder's folder: its SQLite database and its replays.",
)
@click.option(
    "--db",
    default=None,
    envvar="CELLARENA_LADDER_DB",
    help="A PostgreSQL database instead of the folder's SQLite file: postgresql://USER@HOST/NAME "
    "(CELLARENA_LADDER_DB; keep a password in ~/.pgpass, not here).",
)
@click.pass_context
def ladder(ctx: click.Context, folder: Path, db: str | None) -> None:
    """Host a public ladder: bots with secret tokens, a rated queue, standings that last."""
    if db is not None and not db.startswith(("postgresql://", "postgres://")):
        raise click.BadParameter(f"{db!r} is not a postgresql:// URL", param_hint="--db")
    ctx.obj = Where(folder, db)


for _command in (
    bots.bot,
    owners.owner,
    register.register,
    house.house,
    house.standings,
    season.season,
    web.web,
    replay.replay_download,
    export.export,
    submit.submit,
    rebuild.rebuild,
    serve.serve,
    backup.backup,
    backup.restore,
    up.up,
    systemd.systemd,
    # The community ladder's commands (pauses, bans, challenges, the audit log).
    *community.COMMANDS,
):
    ladder.add_command(_command)
for _command in community.BOT_COMMANDS:
    bots.bot.add_command(_command)
