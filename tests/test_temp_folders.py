"""`cellarena match` removes its temporary folder when the match ends, unless told `--keep-temp`.

Once as a process, as a user runs it (its TMPDIR read at its start); else in this process
(`run_here`: a process costs a second of imports), its bots still processes."""

from __future__ import annotations

import json
import os
import socket
import tempfile
from pathlib import Path

import pytest
from bot_files import RAW_BOT
from cellarena_cli import cellarena, refused, run_here


def _match(tmp: Path, *extra: str, process: bool = False) -> dict[str, object]:
    """`cellarena match` with ``tmp`` as its temporary folder, in this process unless ``process``."""
    tmp.mkdir(exist_ok=True)
    args = ("match", "rezzo", "--bot", f"a={RAW_BOT}", "--bot", f"b={RAW_BOT}", "--fast", "--max-ticks", "20")
    if process:
        proc = cellarena(*args, *extra, env={**os.environ, "TMPDIR": str(tmp)})
    else:
        # This process's tempfile read TMPDIR long ago: its folder is set as a new process's would be.
        with pytest.MonkeyPatch.context() as patch:
            patch.setattr(tempfile, "tempdir", str(tmp))
            proc = run_here(*args, *extra, env={"TMPDIR": str(tmp)})
    assert proc.returncode == 0, proc.stderr
    if "--json" in extra:
        result: dict[str, object] = json.loads(proc.stdout)
        return result
    return {"stdout": proc.stdout}


def test_the_temporary_folder_is_removed_when_the_match_ends(tmp_path: Path) -> None:
    result = _match(tmp_path / "t", "--json", process=True)  # once as a user runs it
    assert list((tmp_path / "t").glob("cellarena-match-*")) == []
    assert result["replay"] is None and result["logs"] == {}
    text = _match(tmp_path / "t")
    assert "no replay kept (give --replay FILE, --log-dir DIR or --keep-temp)" in str(text["stdout"])
    assert list((tmp_path / "t").glob("cellarena-match-*")) == []


def test_keep_temp_keeps_the_logs_and_the_replay(tmp_path: Path) -> None:
    result = _match(tmp_path / "t", "--json", "--keep-temp")
    (folder,) = (tmp_path / "t").glob("cellarena-match-*")
    assert result["replay"] == str(folder / "match.replay") and (folder / "match.replay").is_file()
    assert result["logs"] == {"a": str(folder / "a.log"), "b": str(folder / "b.log")}
    verify = run_here("replay", "verify", str(folder / "match.replay"))
    assert verify.returncode == 0, verify.stdout + verify.stderr


def test_an_asked_for_replay_outlives_the_temporary_folder(tmp_path: Path) -> None:
    replay = tmp_path / "keep.replay"
    result = _match(tmp_path / "t", "--json", "--replay", str(replay))
    assert result["replay"] == str(replay) and replay.is_file()
    assert list((tmp_path / "t").glob("cellarena-match-*")) == []


def test_a_refused_option_leaves_no_temporary_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A match refused before it starts (a busy --web-port, a --replay that cannot be written) makes
    no folder in the temporary folder: the checks come first."""
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    bots = ("--bot", f"a={RAW_BOT}", "--bot", f"b={RAW_BOT}", "--fast")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        web = refused("match", "rezzo", *bots, "--web", "--web-port", str(port))
    assert "--web-port" in web.stderr
    (tmp_path / "a-file").write_text("")
    replay = refused("match", "rezzo", *bots, "--replay", str(tmp_path / "a-file" / "m.replay"))
    assert "--replay" in replay.stderr
    assert list(tmp_path.glob("cellarena-match-*")) == []
