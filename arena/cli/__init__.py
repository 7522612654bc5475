"""`cellarena`: the one command. The root group gathers the server layer's commands
(`cellarena.server.cli`), the arena's (`tournament`, in this package) and the ones game plugins add
at the root (Rezzo's `maps`).
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from collections.abc import MutableMapping, Sequence
from typing import Any

import click

from cellarena.server.cli.json_errors import error_object, wants_json

#: The built-in commands ("module:attr"), each imported when it is asked for (run, or listed by
#: ``--help``): a start of `cellarena match` so imports none of the ladder's modules (importing the
#: command took 0.32 s of CPU with every command imported, 0.18 s alone, on a 2-core CI machine).
BUILT_IN = {
    "bench": "cellarena.server.cli.bench:bench",
    "ladder": "cellarena.arena.cli.ladder:ladder",
    "match": "cellarena.server.cli.match:match",
    "new-bot": "cellarena.arena.cli.new_bot:new_bot",
    "replay": "cellarena.server.cli.replay:replay",
    "results": "cellarena.arena.cli.results:results",
    "serve": "cellarena.server.cli.serve:serve",
    "sim": "cellarena.server.cli.sim:sim",
    "tournament": "cellarena.arena.cli.tournament:tournament",
    "train": "cellarena.server.cli.train:train",
    "web": "cellarena.arena.cli.web:web",
}
#: numpy's OpenBLAS threads: one unless the environment says otherwise (`_one_blas_thread`).
BLAS_THREADS_VARIABLE = "OPENBLAS_NUM_THREADS"
#: The arena's benchmarks, which it adds to the server's `cellarena bench` group.
ARENA_BENCHMARKS = {
    "tournament": "cellarena.arena.bench:command",
    "ladder": "cellarena.arena.ladder.ops.bench:command",
    "ratings": "cellarena.arena.ratings.bench:command",
}


def _built_in(name: str) -> click.Command:
    module, _, attr = BUILT_IN[name].partition(":")
    command: click.Command = getattr(importlib.import_module(module), attr)
    if name == "bench":
        from cellarena.server.cli.game_cli import GameGroup

        assert isinstance(command, GameGroup)
        for bench_name, target in ARENA_BENCHMARKS.items():
            command.add_lazy(bench_name, target)
    return command


def _version() -> str:
    # Read when --version asks, not at every start.
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("cellarena")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


def _one_blas_thread(environ: MutableMapping[str, str]) -> None:
    """numpy's OpenBLAS on one thread in this process and what it starts, unless the user chose.

    Why: at import OpenBLAS starts a thread per core, which spin before they sleep: 0.06 s of CPU at
    every start of a command, a match server, a bot or a worker on a 2-core machine (more on more
    cores), for matrix products that none of them makes big enough to share out. A ladder host runs
    one match a core, and a bot is charged for its CPU. Set before any command imports numpy."""
    environ.setdefault(BLAS_THREADS_VARIABLE, "1")


def _print_version(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value and not ctx.resilient_parsing:
        click.echo(f"cellarena, version {_version()}")
        ctx.exit()


class _Root(click.Group):
    """The root group: the built-in commands (`BUILT_IN`), and the ones game plugins add at the root
    (``maps``), each imported when asked for."""

    def _from_games(self) -> dict[str, tuple[str, str]]:
        """Command name -> (game, "module:attr") of each root command a game plugin adds."""
        from cellarena.server.games import plugins

        found: dict[str, tuple[str, str]] = {}
        for p in plugins():
            for name, target in p.root_commands.items():
                if name in self.commands or name in BUILT_IN:
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
        _one_blas_thread(os.environ)
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
        return sorted(set(super().list_commands(ctx)) | set(BUILT_IN) | set(self._from_games()))

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        known = super().get_command(ctx, cmd_name)
        if known is not None:
            return known
        if cmd_name in BUILT_IN:
            self.add_command(_built_in(cmd_name), cmd_name)
            return self.commands[cmd_name]
        found = self._from_games().get(cmd_name)
        if found is None:
            return None
        from cellarena.server.games.plugin import load

        command: Any = load(found[1])
        return command


@click.group(cls=_Root, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--version",
    "-V",
    is_flag=True,
    expose_value=False,
    is_eager=True,
    callback=_print_version,
    help="Show the version and exit.",
)
def main() -> None:
    """cellarena: bots play cellular-automaton games over TCP; an arena runs tournaments."""
