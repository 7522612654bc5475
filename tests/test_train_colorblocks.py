"""`cellarena train colorblocks`: imitation for Colorblocks through the same code as Rezzo's and
C.A.T.A.'s. Two short matches of the example bot greedy against random_legal, played in-process and
recorded, are exported; a `new-bot colorblocks NAME --template trained` folder is trained from the
export alone, the samples are greedy's recorded actions (each turn's, then its end), the same command
writes the same bytes, the evaluation plays the example bots, and the folder's bot plays the weights
in a match over TCP. The win rate is docs/training.md's measured claim, not a test.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import msgpack
import pyarrow.parquet as pq
import pytest
from cellarena_cli import CLI, ROOT, cellarena
from click.testing import CliRunner

from cellarena.arena.cli import main
from cellarena.sdk import MatchInfo
from cellarena.sdk.games import colorblocks
from cellarena.server.games.colorblocks.engine import ColorblocksEngine
from cellarena.server.replay import ReplayWriter, read_replay, verify
from cellarena.server.training.bot_folder import load_module
from cellarena.server.training.colorblocks.imitation import turn_samples

BOTS = ROOT / "example_bots" / "colorblocks"
CONFIG = {"max_turns": 8}


def record(path: Path, seat: int) -> None:
    """A match of greedy (in ``seat``) against random_legal, recorded as its replay."""
    greedy = load_module(BOTS / "greedy.py").Greedy()
    rand = load_module(BOTS / "random_legal.py").RandomLegal()
    bots = [greedy, rand] if seat == 0 else [rand, greedy]
    names = ["greedy", "random_legal"] if seat == 0 else ["random_legal", "greedy"]
    engine = ColorblocksEngine.new(CONFIG)
    for s, b in enumerate(bots):
        b.info = MatchInfo(seat=s, players=2, names=tuple(names), game="colorblocks")
    writer = ReplayWriter(path, engine, seed=seat, names=names, events=True)
    while engine.result() is None:
        tick = engine.tick
        moves = {
            s: colorblocks.actions_of(bots[s].on_tick(colorblocks.make_view({"tick": tick, **req})))
            for s, req in engine.pending().items()
        }
        writer.record(tick, moves, engine, events=engine.apply(moves).log)
    result = engine.result()
    assert result is not None
    writer.finish(result)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("colorblocks")
    (tmp / "replays").mkdir()
    for seat in (0, 1):
        record(tmp / "replays" / f"m{seat}.replay", seat)
    exported = invoke("replay", "export", str(tmp / "replays"), "--out", str(tmp / "data"))
    assert exported.exit_code == 0, exported.output
    folder = tmp / "cbnet"
    made = cellarena("new-bot", "colorblocks", "cbnet", "--template", "trained", "--dir", str(folder))
    assert made.returncode == 0, made.stderr
    reports = []
    for out in ("a.npz", "b.npz"):
        ran = invoke(
            "train", "colorblocks", "--dataset", str(tmp / "data"), "--imitate", "greedy", "--bot-dir",
            str(folder), "--out", str(tmp / out), "--epochs", "3", "--eval", "0", "--json",
        )  # fmt: skip
        assert ran.exit_code == 0, ran.output
        reports.append(json.loads(ran.output))
    return {"tmp": tmp, "folder": folder, "reports": reports}


def test_the_samples_are_the_imitated_bots_moves_and_the_bytes_repeat(trained: dict[str, Any]) -> None:
    tmp, reports = trained["tmp"], trained["reports"]
    net = load_module(trained["folder"] / "policy.py")
    turns = actions = 0
    for part in (tmp / "data").rglob("*.parquet"):
        rows = pq.read_table(part, columns=["bot", "tick", "observation", "action"]).to_pylist()
        for r in rows:
            if r["bot"] != "greedy" or r["action"] is None:
                continue
            sent = msgpack.unpackb(r["action"])
            view = colorblocks.make_view({"tick": r["tick"], **msgpack.unpackb(r["observation"])})
            labels = [s[3] for s in turn_samples(view, sent, net)]
            # every action greedy sent is legal: one sample each, in order, then the turn's end
            before = colorblocks.make_view({"tick": r["tick"], **msgpack.unpackb(r["observation"])})
            for action, label in zip(sent, labels, strict=False):
                assert net.CODES_OF.legal(before)[label][:4] == action[:4]
                assert before.play(action)
            assert labels[len(sent) :] == [net.CODES_OF.end_turn]
            turns += 1
            actions += len(sent)
    report = reports[0]
    assert report["ok"] and report["seats"] == 2 and report["samples"] == turns + actions > 20
    assert report["moves"]["end_turn"] == turns and report["moves"]["spawn"] > 0
    assert (tmp / "a.npz").read_bytes() == (tmp / "b.npz").read_bytes()


def test_the_evaluation_plays_the_example_bots(trained: dict[str, Any]) -> None:
    tmp = trained["tmp"]
    ran = invoke(
        "train", "colorblocks", "--dataset", str(tmp / "data"), "--imitate", "greedy", "--bot-dir",
        str(trained["folder"]), "--out", str(tmp / "c.npz"), "--epochs", "1", "--eval", "2",
        "--against", "random_legal", "--bots-dir", str(BOTS), "--max-turns", "8",
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert "against random_legal: won" in ran.output and " of 2, drew " in ran.output
    refused = invoke("train", "colorblocks", "--dataset", str(tmp / "data"), "--imitate", "greedy",
                     "--out", str(tmp / "d.npz"))  # fmt: skip
    assert refused.exit_code == 2 and "--bot-dir" in refused.output  # no default bot folder


def test_the_folder_plays_the_weights_over_tcp(trained: dict[str, Any]) -> None:
    """The folder's bot.py plays policy.npz (its default) in a match over TCP."""
    folder = trained["folder"]
    (folder / "policy.npz").write_bytes((trained["tmp"] / "a.npz").read_bytes())
    replay = trained["tmp"] / "cbnet.replay"
    ran = subprocess.run(
        [*CLI, "match", "colorblocks", "--bot", "cbnet=python bot.py", "--bot",
         "random=python -m cellarena.sdk.opponents colorblocks", "--max-turns", "8", "--fast",
         "--replay", str(replay), "--json"],
        cwd=folder, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["invalid"]["cbnet"] == 0 and "cbnet" not in result["forfeits"], ran.stdout
    recorded = read_replay(replay)
    verify(recorded)
    assert recorded.complete and any(0 in t.moves for t in recorded.ticks)
