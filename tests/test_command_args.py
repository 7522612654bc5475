"""A game command parses its options, then hands over to a function a test can call with them
(`server/cli/params.command_args`): here the tournament's, the server's and the ladder server's."""

from __future__ import annotations

from dataclasses import dataclass

import click
import pytest

from cellarena.server.cli.params import command_args


@dataclass(frozen=True)
class _Args:
    rounds: int
    as_json: bool


def test_a_commands_own_options_and_the_games_come_apart() -> None:
    args, game_values = command_args(_Args, {"rounds": 2, "map": "duel", "as_json": True})
    assert args == _Args(rounds=2, as_json=True)
    assert game_values == {"map": "duel"}


def _parsed(group: click.Group, game: str, argv: list[str]) -> dict[str, object]:
    """What click made of ``argv`` for ``group GAME``, without running the command."""
    command = group.get_command(click.Context(group), game)
    assert command is not None
    with command.make_context(game, argv) as ctx:
        return dict(ctx.params)


def test_a_tournament_is_made_from_its_args_without_running() -> None:
    from cellarena.arena.cli.tournament import TournamentArgs, tournament, tournament_spec

    values = _parsed(
        tournament, "rezzo", ["--bot", "a=python a.py", "--bot", "b=python b.py", "--rounds", "2"]
    )
    args, game_values = command_args(TournamentArgs, values)
    spec = tournament_spec("rezzo", args, dict(game_values))  # it takes the limits' options out
    assert [b.name for b in spec.bots] == ["a", "b"] and spec.rounds == 2 and spec.maps
    one_bot = TournamentArgs(**{**vars(args), "bots": ("a=python a.py",)})
    with pytest.raises(click.BadParameter, match="at least 2 bots"):
        tournament_spec("rezzo", one_bot, dict(game_values))


def test_the_servers_args_are_what_its_command_parsed() -> None:
    from cellarena.arena.cli.ladder.serve import LadderServeArgs, serve
    from cellarena.server.cli.serve import ServeArgs
    from cellarena.server.cli.serve import serve as serve_group

    args, _ = command_args(ServeArgs, _parsed(serve_group, "rezzo", ["--workers", "auto", "--port", "0"]))
    assert args.port == 0 and args.workers >= 1
    ladder_args, _ = command_args(LadderServeArgs, _parsed(serve, "rezzo", ["--grace", "2"]))
    assert ladder_args.grace == 2.0 and ladder_args.workers == 1
