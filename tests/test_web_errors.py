"""Bad input to the viewer: a clear error on the command line, a readable page in the browser, never a
stack trace. Each case runs the real `cellarena replay view`."""

from __future__ import annotations

import socket
import struct
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import msgpack
import pytest
from browser import page_of, viewer
from cellarena_cli import cellarena

from cellarena.server.games.rezzo.engine import RezzoEngine
from cellarena.server.replay import ReplayWriter

LENGTH = struct.Struct(">I")


def _replay(path: Path, ticks: int = 30) -> Path:
    """A short Rezzo match of agents that do nothing, as a replay."""
    engine = RezzoEngine.new({"map": "duel", "max_ticks": 200}, 3)
    writer = ReplayWriter(path, engine, seed=3, names=["a", "b"])
    for _ in range(ticks):
        tick = engine.tick
        engine.apply({})
        writer.record(tick, {}, engine)
    writer.close()
    return path


def _records(path: Path) -> list[dict[str, Any]]:
    data, out, pos = path.read_bytes(), [], 0
    while pos < len(data):
        (n,) = LENGTH.unpack_from(data, pos)
        out.append(msgpack.unpackb(data[pos + 4 : pos + 4 + n], strict_map_key=False))
        pos += 4 + n
    return out


def _write(path: Path, records: list[dict[str, Any]]) -> Path:
    body = b"".join(LENGTH.pack(len(b)) + b for b in (msgpack.packb(r) for r in records))
    path.write_bytes(body)
    return path


def _fails(*args: str) -> str:
    proc = cellarena("replay", "view", *args, "--port", "0", timeout=30)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "Traceback" not in proc.stderr
    assert proc.stdout == ""  # nothing was served
    return proc.stderr.strip()


def test_a_missing_replay_is_a_command_line_error(tmp_path: Path) -> None:
    assert _fails(str(tmp_path / "none.replay")) == f"error: {tmp_path / 'none.replay'}: cannot open: " + (
        "No such file or directory"
    )


def test_a_corrupt_replay_is_a_command_line_error(tmp_path: Path) -> None:
    bad = tmp_path / "junk.replay"
    bad.write_bytes(b"\x00\x00\x00\x05hello world")
    assert _fails(str(bad)).startswith(f"error: {bad}: not a cellarena replay")


def test_a_replay_of_an_unknown_game_is_a_command_line_error(tmp_path: Path) -> None:
    records = _records(_replay(tmp_path / "r.replay"))
    records[0]["game"] = "chess"
    bad = _write(tmp_path / "chess.replay", records)
    err = _fails(str(bad))
    assert err.startswith(f"error: {bad}: unknown game 'chess'; known games: ")
    assert "rezzo" in err


def test_a_port_in_use_is_a_command_line_error(tmp_path: Path) -> None:
    path = _replay(tmp_path / "r.replay")
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        proc = cellarena("replay", "view", str(path), "--port", str(port), timeout=30)
    assert proc.returncode == 1
    assert proc.stderr.strip() == (
        f"error: --port {port}: 127.0.0.1:{port} is already in use; "
        "pick another with --port (0: any free port)"
    )


def test_unknown_pages_and_bad_queries_get_readable_errors(tmp_path: Path, browser: Any) -> None:
    path = _replay(tmp_path / "r.replay")
    with viewer("replay", "view", str(path), "--port", "0") as url, page_of(browser) as (page, _console):
        base = url.split("/replays/")[0]
        response = page.goto(base + "/replays/nosuch/")
        assert response.status == 404
        text = page.inner_text("body")
        assert "no replay 'nosuch'" in text and "Traceback" not in text
        assert page.title() == "error · cellarena"
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/api/replays/replay/frames?from=x")
        assert err.value.code == 400
        assert b"from='x': give a whole number in ASCII digits" in err.value.read()
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(base + "/api/replays/replay/frames?from=9999")
        assert err.value.code == 400
        assert b"from=9999: no such frame; this replay has frames 0 to 30" in err.value.read()


def test_a_replay_that_does_not_resimulate_shows_where_in_the_page(tmp_path: Path, browser: Any) -> None:
    records = _records(_replay(tmp_path / "r.replay"))
    records[6]["hash"] = "0" * 32  # tick record 5 (the header is record 0)
    bad = _write(tmp_path / "tampered.replay", records)
    with viewer("replay", "view", str(bad), "--port", "0") as url, page_of(browser) as (page, _console):
        page.goto(url)
        page.wait_for_function("document.getElementById('player')?.dataset.shown === '0'")
        page.evaluate("window.cellarenaPlayer.seek(20)")
        page.wait_for_function("document.getElementById('status')?.classList.contains('error')")
        status = page.inner_text("#status")
        tick = records[6]["tick"]
        # The file by its name: its folders stay on the server (docs/security.md, "The web pages").
        assert status.startswith(f"{bad.name}: tick {tick}: the state hash differs from the replay's")
        assert str(bad.parent) not in status
        assert "Traceback" not in page.content()
