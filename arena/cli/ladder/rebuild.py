"""`ladder rebuild`: build and validate live submitted versions again, after the host upgraded the
SDK or a toolchain (docs/ladder.md, "Rebuilding after an upgrade")."""

from __future__ import annotations

import json
import logging
from typing import TYPE_CHECKING

import click

from cellarena.arena.cli.ladder.community import actor
from cellarena.arena.cli.ladder.where import Where

if TYPE_CHECKING:
    from cellarena.arena.ladder.services.builds import Rebuilt


@click.command("rebuild")
@click.argument("bots", nargs=-1)
@click.option("--all", "every", is_flag=True, help="Every bot with a live version, of every game.")
@click.option(
    "--isolate/--no-isolate",
    default=True,
    show_default=True,
    help="Play the validation matches isolated, as `ladder serve --isolate` plays submitted bots.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object per version, as each ends.")
@click.pass_obj
def rebuild(where: Where, bots: tuple[str, ...], every: bool, isolate: bool, as_json: bool) -> None:
    """Build each live version of BOTS (or --all) again from its archive, confined and offline, and
    play its validation match again. One that passes plays on from the new build; one that fails keeps
    its old build and its bot is paused with the reason, shown on its owner's page. Run it on the
    ladder's machine, beside `ladder serve`: bots play on meanwhile."""
    # Imported here: `cellarena --help` loads every command's module, and these load trio and the builds.
    import trio

    from cellarena.arena.ladder.services.builds import BuildSettings, live_versions, rebuild_live
    from cellarena.arena.ladder.store.ladder_store import LadderStoreError
    from cellarena.server.bots.confinement import Limits

    if every == bool(bots):
        raise click.UsageError("name the bots to rebuild, or give --all (not both)")
    if where.db is None and not where.folder.is_dir():
        raise click.BadParameter(f"{where.folder} is no ladder's folder", param_hint="--dir")
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    with where.store() as store:
        try:
            versions = live_versions(store, None if every else list(bots))
        except LadderStoreError as exc:
            raise click.ClickException(str(exc)) from None
        if not versions:
            click.echo("no bot has a live version: nothing to rebuild")
            return
        settings = BuildSettings(where.folder)

        async def run() -> list[Rebuilt]:
            return await rebuild_live(
                store, settings, versions, match_limits=Limits(), isolate=isolate, actor=actor()
            )

        done = trio.run(run)
    for rebuilt in done:
        if as_json:
            click.echo(json.dumps(rebuilt.to_json()))
        elif rebuilt.ok:
            click.echo(
                f"{rebuilt.version.label}: rebuilt and validated in {rebuilt.seconds:.1f} s; it plays on"
            )
        else:
            click.echo(f"{rebuilt.version.label}: its rebuild failed ({rebuilt.reason}); the bot is paused")
    if not all(r.ok for r in done):
        raise SystemExit(1)
