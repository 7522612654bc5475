"""`cellarena ladder house list` and `house remove` (issue 42, point 1), in this process (click's runner)."""

from __future__ import annotations

import json
from pathlib import Path

from cellarena_cli import invoke

from cellarena.arena.ladder.store.ladder_store import LadderStore


def ladder(tmp_path: Path, *args: str) -> tuple[int, str]:
    return invoke("ladder", "--dir", str(tmp_path), *args)


def test_house_list_shows_each_house_bot_its_state_and_command_and_remove_revokes_it(tmp_path: Path) -> None:
    assert ladder(tmp_path, "house", "add", "builder", "python builder.py", "--game", "rezzo")[0] == 0
    assert ladder(tmp_path, "house", "add", "walker", "python walker.py", "--game", "rezzo")[0] == 0
    assert ladder(tmp_path, "bot", "add", "alice", "--game", "rezzo")[0] == 0
    with LadderStore(tmp_path / "ladder.sqlite", create=False) as store:
        store.pause("walker", "3 failures in a row (never_connected)")
    code, out = ladder(tmp_path, "house", "list")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2 and "alice" not in out  # outside bots are `bot list`'s
    assert lines[0].split()[:5] == ["builder", "rezzo", "active", "failures", "0"]
    assert lines[0].endswith("python builder.py")
    assert lines[1].split()[:3] == ["walker", "rezzo", "paused"] and "never_connected" in lines[1]

    code, out = ladder(tmp_path, "house", "remove", "walker", "--json")
    assert code == 0 and json.loads(out) == {"name": "walker", "removed": True}
    code, out = ladder(tmp_path, "house", "list", "--json")
    assert code == 0
    [row] = json.loads(out)["house_bots"]
    assert (
        row["name"] == "builder" and row["state"] == "active" and row["house_command"] == "python builder.py"
    )
    with LadderStore(tmp_path / "ladder.sqlite", create=False) as store:
        walker = store.bot("walker")
        assert walker is not None and walker.revoked is not None
        assert next(e.action for e in store.audit_log() if e.bot == "walker") == "revoke"


def test_house_remove_names_what_is_wrong_with_the_name(tmp_path: Path) -> None:
    assert ladder(tmp_path, "bot", "add", "alice", "--game", "rezzo")[0] == 0
    code, out = ladder(tmp_path, "house", "remove", "alice")
    assert code == 2 and "alice is not a house bot" in out and "ladder bot revoke alice" in out
    code, out = ladder(tmp_path, "house", "remove", "nobody")
    assert code == 2 and "no bot named 'nobody'" in out
    code, out = ladder(tmp_path, "house", "list")
    assert code == 0 and "no house bots; add one with `cellarena ladder house add" in out
