"""`cellarena`: the one command. Subcommands live beside what they drive and are gathered here."""

from __future__ import annotations

from importlib.metadata import PackageNotFoundError, version

import click

from cellarena.arena.bench import command as bench_tournament
from cellarena.arena.tournament_cli import tournament
from cellarena.server.cli import bench, maps, match, serve, sim
from cellarena.server.replay_cli import replay


def _version() -> str:
    try:
        return version("cellarena")
    except PackageNotFoundError:  # running from a source tree that was never installed
        return "unknown"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(_version(), "--version", "-V", prog_name="cellarena")
def main() -> None:
    """cellarena: bots play cellular-automaton games over TCP; an arena runs tournaments."""


main.add_command(sim)
bench.add_command(bench_tournament)
main.add_command(bench)
main.add_command(maps)
main.add_command(serve)
main.add_command(match)
main.add_command(replay)
main.add_command(tournament)
