"""`ladder web --public-debug` publishes the bots' drawings, never their exceptions (wave 4: "A bot's
debug drawings and exceptions are its owner's"): the public player's frames and the public download
carry alice's drawings and none of bob's exception text, which bob's owner still gets with bob's token."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

from browser import viewer
from cellarena_cli import cellarena

from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store.ladder_store import LadderStore, SeatResult
from cellarena.server.replay import read_replay, verify

BOTS = Path(__file__).parent / "bots"
#: What tests/bots/raiser.py raises, as its answers' ``error`` says it.
RAISED = "no plan for tick"


def _ladder_match(tmp_path: Path) -> tuple[str, int]:
    """A ladder where alice (draws) played bob (raises every tick) once; bob's token, the match."""
    replay = tmp_path / "replays" / "m1.replay"
    replay.parent.mkdir()
    played = cellarena(
        "match", "rezzo", "--bot", f"alice=python {BOTS / 'drawer.py'}", "--bot",
        f"bob=python {BOTS / 'raiser.py'}", "--fast", "--max-ticks", "8", "--replay", str(replay),
        "--log-dir", str(tmp_path / "logs"),
    )  # fmt: skip
    assert played.returncode == 0, played.stderr
    rep = read_replay(replay)
    assert any(RAISED in t.debug.get(1, {}).get("error", "") for t in rep.ticks)
    store = LadderStore(tmp_path / "ladder.sqlite")
    try:
        alice, _ = store.add_bot("alice", "rezzo")
        bob, token = store.add_bot("bob", "rezzo")
        match_id = store.begin_match("rezzo", "duel", rep.seed, [alice.id, bob.id])
        seats = [SeatResult(1), SeatResult(2)]
        store.finish_match(match_id, seats, reason="test", ticks=8, replay=str(replay), settle=settle)
    finally:
        store.close()
    return token.secret, match_id


def _get(url: str, token: str | None = None) -> bytes:
    headers = {} if token is None else {"Authorization": f"Bearer {token}"}
    with urllib.request.urlopen(urllib.request.Request(url, headers=headers), timeout=30) as answer:
        return bytes(answer.read())


def test_public_debug_shows_the_drawings_and_keeps_each_exception_its_owners(tmp_path: Path) -> None:
    bob, match_id = _ladder_match(tmp_path)
    with viewer("ladder", "--dir", str(tmp_path), "web", "rezzo", "--port", "0", "--public-debug") as url:
        frames = json.loads(_get(f"{url}api/replays/{match_id}/frames?from=0&count=32"))
        public = _get(f"{url}api/replays/{match_id}/file")
        owners = _get(f"{url}api/replays/{match_id}/owner", bob)
    # The page's frames: alice's drawings, and not a word of bob's exception.
    assert any(f["debug"].get("0", {}).get("marks") for f in frames)
    assert RAISED not in json.dumps(frames)
    assert all("error" not in drawn for f in frames for drawn in f["debug"].values())
    # The download likewise, and it still verifies.
    assert RAISED.encode() not in public
    (tmp_path / "public.replay").write_bytes(public)
    published = read_replay(tmp_path / "public.replay")
    assert any(t.debug.get(0, {}).get("marks") for t in published.ticks) and verify(published).ok
    # Bob's owner gets bob's exceptions.
    (tmp_path / "bob.replay").write_bytes(owners)
    mine = read_replay(tmp_path / "bob.replay")
    assert any(RAISED in t.debug.get(1, {}).get("error", "") for t in mine.ticks) and verify(mine).ok
