"""On a ladder the bots' debug drawings belong to their owners (docs/ladder.md): the public download
of a replay has none, and each owner gets their own bot's, and no other's, with the bot's token."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path

from bot_files import RAW_BOT
from browser import viewer
from cellarena_cli import run_here
from game_servers import add_ladder_bot

from cellarena.arena.ladder.scoring.settlement import settle
from cellarena.arena.ladder.store.ladder_store import LadderStore, SeatResult
from cellarena.server.replay import read_replay, verify

DRAWER = Path(__file__).parent / "bots" / "drawer.py"


def _ladder_with_a_drawn_match(tmp_path: Path) -> tuple[Path, Path, int, Path]:
    """A ladder of alice (draws through the SDK) and bob (floods raw drawings), with one finished
    match of theirs whose replay holds both bots' drawings; alice's and bob's token files."""
    alice, bob = add_ladder_bot(tmp_path, "alice"), add_ladder_bot(tmp_path, "bob")
    replay = tmp_path / "replays" / "m1.replay"
    replay.parent.mkdir()
    played = run_here(
        "match", "rezzo", "--bot", f"alice=python {DRAWER}", "--bot", f"bob={RAW_BOT} flood",
        "--fast", "--max-ticks", "12", "--replay", str(replay), "--log-dir", str(tmp_path / "logs"),
    )  # fmt: skip
    assert played.returncode == 0, played.stderr
    rep = read_replay(replay)
    assert any(0 in t.debug for t in rep.ticks) and any(1 in t.debug for t in rep.ticks)
    store = LadderStore(tmp_path / "ladder.sqlite")
    try:
        ids = {b.name: b.id for b in store.list_bots("rezzo")}
        match_id = store.begin_match("rezzo", "duel", rep.seed, [ids["alice"], ids["bob"]])
        store.finish_match(
            match_id,
            [SeatResult(1), SeatResult(1)],
            reason="test",
            ticks=12,
            replay=str(replay),
            settle=settle,
        )
    finally:
        store.close()
    return alice, bob, match_id, replay


def test_a_strangers_download_has_no_drawings_and_each_owner_gets_all_of_their_own(tmp_path: Path) -> None:
    alice, bob, match_id, original = _ladder_with_a_drawn_match(tmp_path)
    full = read_replay(original)
    with viewer("ladder", "--dir", str(tmp_path), "web", "rezzo", "--port", "0") as url:
        public = tmp_path / "public.replay"
        with urllib.request.urlopen(f"{url}api/replays/{match_id}/file", timeout=30) as answer:
            public.write_bytes(answer.read())
        assert b"\xa5debug" not in public.read_bytes()  # no "debug" key (debug_dropped counts stay)
        stranger = read_replay(public)
        assert all(t.debug == {} for t in stranger.ticks) and verify(stranger).ok

        for token, seat, name in ((alice, 0, "alice"), (bob, 1, "bob")):
            out = tmp_path / f"{name}.replay"
            got = run_here(
                "ladder", "replay", str(match_id), "--token-file", str(token), "--url", url, "--out", str(out)
            )
            assert got.returncode == 0, got.stderr
            mine = read_replay(out)
            assert [t.debug.get(seat) for t in mine.ticks] == [t.debug.get(seat) for t in full.ticks]
            assert all(set(t.debug) <= {seat} for t in mine.ticks)  # never the other bot's
            assert verify(mine).ok
            assert token.read_text().strip() not in got.stdout + got.stderr

        wrong = tmp_path / "wrong.token"
        wrong.write_text("not a token\n")
        refused = run_here(
            "ladder", "replay", str(match_id), "--token-file", str(wrong), "--url", url, "--json"
        )
        assert refused.returncode == 1 and "401" in json.loads(refused.stdout)["error"]
        missing = run_here("ladder", "replay", "999", "--token-file", str(alice), "--url", url)
        assert missing.returncode == 1 and "404" in missing.stderr
        request = urllib.request.Request(f"{url}api/replays/{match_id}/owner")  # no token at all
        try:
            urllib.request.urlopen(request, timeout=30)
            raise AssertionError("the owner's endpoint answered without a token")
        except urllib.error.HTTPError as exc:
            assert exc.code == 401
        _wrong_tokens_are_locked_out_like_the_bot_ports(url, match_id, alice, tmp_path)

    published = ("ladder", "--dir", str(tmp_path), "web", "rezzo", "--port", "0", "--public-debug")
    with viewer(*published) as url:
        data = urllib.request.urlopen(f"{url}api/replays/{match_id}/file", timeout=30).read()
    assert data == original.read_bytes()  # the host chose to publish them


def _owner_status(url: str, match_id: int, token: str) -> int:
    request = urllib.request.Request(
        f"{url}api/replays/{match_id}/owner", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as answer:
            return int(answer.status)
    except urllib.error.HTTPError as exc:
        return exc.code


def _wrong_tokens_are_locked_out_like_the_bot_ports(
    url: str, match_id: int, alice: Path, tmp_path: Path
) -> None:
    """The owner's endpoint counts wrong tokens by address as the bot port does (LadderRules: 5, then
    a lock-out): the wrong token sent above was the first, four more are still told 401, the next is
    refused 429 as a guess from a locked-out address, and a good token still gets its replay."""
    assert [_owner_status(url, match_id, f"cla_guess{i}") for i in range(4)] == [401] * 4
    assert _owner_status(url, match_id, "cla_guess5") == 429
    locked = run_here(
        "ladder", "replay", str(match_id), "--token-file", str(tmp_path / "wrong.token"), "--url", url
    )
    assert locked.returncode == 1 and "429" in locked.stderr, locked.stderr
    assert _owner_status(url, match_id, alice.read_text().strip()) == 200


def test_ladder_replay_sends_no_token_in_clear_off_this_machine(tmp_path: Path) -> None:
    token = add_ladder_bot(tmp_path, "alice")
    done = run_here("ladder", "replay", "1", "--token-file", str(token), "--url", "http://192.0.2.1:8080")
    assert done.returncode == 2 and "https" in done.stderr
