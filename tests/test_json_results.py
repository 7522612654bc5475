"""`--json` on every command that prints a result: one JSON object on stdout, errors included (with
the file or option at fault), and the same exit status as the text. A walk over every command keeps
new ones from being added without it."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
from cellarena_cli import cellarena, run_here

from cellarena.arena.cli import main

#: Commands that serve until stopped (their output is an address or a stream), so have no one result.
SERVERS = {
    "cellarena ladder serve",
    "cellarena ladder up",
    "cellarena ladder web",
    "cellarena replay view",
    "cellarena serve",
    "cellarena web",
}


def _commands(
    command: click.Command, path: str, ctx: click.Context | None
) -> list[tuple[str, click.Command]]:
    if not isinstance(command, click.Group):
        return [(path, command)]
    sub = click.Context(command, parent=ctx, info_name=path.rsplit(" ", 1)[-1])
    out = []
    for name in command.list_commands(sub):
        found = command.get_command(sub, name)
        assert found is not None, name
        out += _commands(found, f"{path} {name}", sub)
    return out


def test_every_command_that_prints_a_result_has_json() -> None:
    missing = []
    for path, command in _commands(main, "cellarena", None):
        has_json = any("--json" in getattr(p, "opts", ()) for p in command.params)
        serves = any(path == s or path.startswith(s + " ") for s in SERVERS)
        if not has_json and not serves:
            missing.append(path)
        if serves:
            assert not has_json, f"{path} serves until stopped; take it out of SERVERS"
    assert missing == []


@pytest.fixture(scope="module")
def replay_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("replay") / "game.replay"
    bot = "python -m cellarena.sdk.opponents rezzo"
    proc = run_here(
        "match", "rezzo", "--bot", f"a={bot}", "--bot", f"b={bot}", "--fast", "--max-ticks", "40",
        "--replay", str(path), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return path


def _json(*args: str, status: int = 0) -> dict[str, object]:
    proc = run_here(*args, "--json")  # in this process: no start-up to pay
    assert proc.returncode == status, proc.stdout + proc.stderr
    assert proc.stderr == "" or status == 0
    data: dict[str, object] = json.loads(proc.stdout)
    return data


def test_replay_verify_and_show(replay_file: Path, tmp_path: Path) -> None:
    verified = _json("replay", "verify", str(replay_file))
    assert verified["ok"] is True
    assert verified["replays"] == [
        {"path": str(replay_file), "ok": True, "complete": True, "ticks_verified": 40, "moves_verified": 40,
         "summary": "ok: 40 ticks verified", "mismatch": None, "incomplete_reason": None},
    ]  # fmt: skip
    missing = tmp_path / "missing.replay"
    both = _json("replay", "verify", str(replay_file), str(missing), status=1)
    assert both["ok"] is False
    assert both["replays"][1] == {  # type: ignore[index]
        "path": str(missing), "ok": False, "code": "file",
        "error": f"{missing}: cannot open: No such file or directory",
    }  # fmt: skip

    shown = _json("replay", "show", str(replay_file), "--tick", "20")
    assert shown["tick"] == 20 and shown["names"] == ["a", "b"] and shown["game"] == "rezzo"
    frame = shown["frame"]
    assert isinstance(frame, dict) and len(frame["cells"]) == frame["width"] * frame["height"]
    assert shown["result"] is None and isinstance(shown["picture"], list)
    end = _json("replay", "show", str(replay_file))
    result = end["result"]
    assert isinstance(result, dict) and result["ticks"] == 40 and set(result["ranks"]) == {"0", "1"}
    error = _json("replay", "show", str(missing), status=1)
    assert error == {"error": f"{missing}: cannot open: No such file or directory", "code": "file",
                     "exit_code": 1, "file": str(missing)}  # fmt: skip
    text = cellarena("replay", "show", str(missing))  # the file's one process, as a user runs it
    assert (
        text.returncode == 1 and text.stderr == f"error: {missing}: cannot open: No such file or directory\n"
    )


def test_maps_list_check_show(tmp_path: Path) -> None:
    listed = _json("maps", "list")["maps"]
    assert isinstance(listed, list) and {"name": "duel", "title": "Duel", "width": 32, "height": 32,
                                         "players": 2, "agents_per_player": 1} in listed  # fmt: skip
    bad = tmp_path / "bad.map"
    bad.write_text("rezzo-map 1\nplayers: x\n")
    checked = _json("maps", "check", str(bad), status=1)
    assert checked["ok"] is False
    entry = checked["maps"][0]  # type: ignore[index]
    assert entry["file"] == str(bad) and entry["code"] == "file" and not entry["ok"]
    assert entry["error"].startswith(f"{bad}:{entry['line']}:{entry['column']}: no '---' line")
    shown = _json("maps", "show", "duel")
    assert shown["width"] == 32 and len(shown["rows"]) == 32 and len(shown["cells"]) == 32  # type: ignore[arg-type]
    assert {a["player"] for a in shown["agents"]} == {0, 1}  # type: ignore[union-attr]
    error = _json("maps", "show", "nowhere", status=2)
    assert error["option"] == "NAME" and "no built-in map of that name" in str(error["error"])


def test_ladder_bot_commands(tmp_path: Path) -> None:
    where = ["ladder", "--dir", str(tmp_path)]
    added = _json(*where, "bot", "add", "alice", "--game", "rezzo")
    assert added["name"] == "alice" and added["game"] == "rezzo" and str(added["token"]).startswith("cla_")
    rotated = _json(*where, "bot", "rotate", "alice")
    assert rotated["name"] == "alice" and rotated["token"] != added["token"]
    house = _json(*where, "house", "add", "walker", "python walker.py", "--game", "rezzo")
    assert house == {"name": "walker", "game": "rezzo", "command": "python walker.py"}
    assert _json(*where, "bot", "revoke", "alice") == {"name": "alice", "revoked": True}
    bots = _json(*where, "bot", "list")["bots"]
    assert [(b["name"], b["revoked"] is not None) for b in bots] == [("alice", True), ("walker", False)]  # type: ignore[union-attr]
    assert _json(*where, "bot", "list", "--game", "cata") == {"bots": []}  # still one object
    nobody = _json(*where, "bot", "revoke", "nobody", status=2)
    assert nobody["option"] == "NAME"
