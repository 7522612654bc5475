"""`--maps`: one parser and one rule for every command that takes a list of maps (`tournament`,
`ladder serve`, `bench tournament`): an empty list or a map named twice is a usage error that names
the option."""

from __future__ import annotations

from pathlib import Path

import click
import pytest
from cellarena_cli import invoke

from cellarena.server.cli.params import map_list


def test_the_rule() -> None:
    assert map_list(" duel, field ,") == ["duel", "field"]
    with pytest.raises(click.BadParameter, match="at least one map"):
        map_list(" , ")
    with pytest.raises(click.BadParameter, match="duel is listed twice"):
        map_list("duel,field,duel")


@pytest.mark.parametrize("value", [",", "duel,duel"])
def test_every_command_refuses_the_same(tmp_path: Path, value: str) -> None:
    commands = [
        ["tournament", "rezzo", "--bots-dir", "example_bots", "--out", str(tmp_path / "t")],
        ["ladder", "--dir", str(tmp_path / "l"), "serve", "rezzo", "--port", "0"],
        ["bench", "tournament", "--bots-dir", "example_bots/rezzo"],
    ]
    for args in commands:
        code, out = invoke(*args, "--maps", value)
        assert code == 2, (args, out)
        assert "--maps" in out, (args, out)
        assert ("at least one map" if value == "," else "duel is listed twice") in out, (args, out)
