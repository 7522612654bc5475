"""What a newcomer tripped over on the way to a first bot (issue 27, point 6), each fixed and held
here: two commands that named one match's length with two numbers, ..."""

from __future__ import annotations

import json
from pathlib import Path

from cellarena_cli import ROOT, cellarena

BOTS = ROOT / "example_bots"


def test_match_and_replay_verify_count_one_match_the_same(tmp_path: Path) -> None:
    """A Rezzo loss happens in a tick before that tick's moves: the match's result counts that tick
    (179), the replay holds 178 ticks of moves. `verify` printed 178 where `match` printed 179."""
    replay = tmp_path / "m.replay"
    bots = ["--bot", f"builder=python {BOTS / 'rezzo' / 'builder.py'}"]
    bots += ["--bot", f"raider=python {BOTS / 'rezzo' / 'raider.py'}"]
    played = cellarena("match", "rezzo", *bots, "--fast", "--replay", str(replay))
    assert played.returncode == 0, played.stderr
    verified = cellarena("replay", "verify", str(replay))
    assert verified.returncode == 0, verified.stderr
    report = json.loads(cellarena("replay", "verify", "--json", str(replay)).stdout)["replays"][0]
    ticks = report["ticks_verified"]
    assert report["moves_verified"] == ticks - 1  # the case in point: ended by a loss, before the moves
    assert f"after {ticks} ticks" in played.stdout.splitlines()[0]
    assert verified.stdout.strip() == (
        f"ok: {ticks} ticks verified, {ticks - 1} with moves (the game ended before the last one's moves)"
    )
    as_json = json.loads(cellarena("match", "rezzo", *bots, "--fast", "--json").stdout)
    assert as_json["ticks"] == ticks
