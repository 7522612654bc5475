"""`cellarena`: the one command. The root group gathers the server layer's commands
(`cellarena.server.cli`), the arena's (`tournament`, in this package) and the ones game plugins add
at the root (Rezzo's `maps`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from importlib.metadata import PackageNotFoundError, version
from typing import Any

import click

from cellarena.arena.cli.ladder import ladder
from cellarena.arena.cli.new_bot import new_bot
from cellarena.arena.cli.results import results
from cellarena.arena.cli.tournament import tournament
from cellarena.arena.cli.web import web
from cellarena.server.cli.bench import bench
from cellarena.server.cli.json_errors import error_object, wants_json
from cellarena.server.cli.match import match
from cellarena.server.cli.replay import replay
from cellarena.server.cli.replay_export import replay_export
from cellarena.server.cli.serve import serve
from cellarena.server.cli.sim import sim
from cellarena.server.cli.train import train


def _version() -> str:
    try:
        return version("cellarena")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


class _Root(click.Group):
    """The root group: the built-in commands, and the ones game plugins add at the root (``maps``)."""

    def _from_games(self) -> dict[str, tuple[str, str]]:
        """Command name -> (game, "module:attr") of each root command a game plugin adds."""
        from cellarena.server.games import plugins

        found: dict[str, tuple[str, str]] = {}
        for p in plugins():
            for name, target in p.root_commands.items():
                if name in self.commands:
                    raise click.ClickException(
                        f"the game plugin {p.name} adds a command {name!r}, which cellarena has already"
                    )
                if name in found:
                    raise click.ClickException(
                        f"the game plugins {found[name][0]} and {p.name} both add a command {name!r}; "
                        "uninstall one of them"
                    )
                found[name] = (p.name, target)
        return found

    def main(  # type: ignore[override]
        self, args: Sequence[str] | None = None, prog_name: str | None = None, **kw: Any
    ) -> Any:
        """Every command's errors as one JSON object on stdout when it was given --json."""
        argv = list(sys.argv[1:] if args is None else args)
        if kw.get("standalone_mode", True) is False or not wants_json(argv):
            return super().main(argv, prog_name, **kw)
        kw["standalone_mode"] = False
        try:
            result = super().main(argv, prog_name, **kw)
        except click.ClickException as exc:
            click.echo(json.dumps(error_object(exc)))
            sys.exit(exc.exit_code)
        except click.exceptions.Abort:
            click.echo("Aborted!", err=True)
            sys.exit(1)
        sys.exit(result if isinstance(result, int) else 0)

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self._from_games()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        known = super().get_command(ctx, cmd_name)
        if known is not None:
            return known
        found = self._from_games().get(cmd_name)
        if found is None:
            return None
        from cellarena.server.games.plugin import load

        command: Any = load(found[1])
        return command


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), "--version", "-V", prog_name="cellarena")
def main() -> None:
    """cellarena: bots play cellular-automaton games over TCP; an arena runs tournaments."""


main.add_command(sim)
bench.add_lazy("tournament", "cellarena.arena.bench:command")
bench.add_lazy("ladder", "cellarena.arena.ladder.ops.bench:command")
bench.add_lazy("ratings", "cellarena.arena.ratings.bench:command")
main.add_command(bench)
main.add_command(serve)
main.add_command(match)
main.add_command(replay)
replay.add_command(replay_export)
main.add_command(tournament)
main.add_command(ladder)
main.add_command(web)
main.add_command(results)
main.add_command(new_bot)
main.add_command(train)
