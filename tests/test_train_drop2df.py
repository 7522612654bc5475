"""`cellarena train drop2df`: imitation for drop2df through the same code as Rezzo's and C.A.T.A.'s.
Three matches of the example bot planner against passer, played in-process and recorded, are
exported; a `new-bot drop2df NAME --template trained` folder is trained from the export alone, the
samples are the planner's recorded ops, the same command writes the same bytes, the evaluation plays
the example bots, and the folder's bot plays the weights in a match over TCP. The win rate is
docs/training.md's measured claim, not a test.
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
from cellarena.sdk.games import drop2df
from cellarena.server.games.drop2df.engine import Drop2dfEngine
from cellarena.server.replay import ReplayWriter, read_replay, verify
from cellarena.server.training.bot_folder import load_module
from cellarena.server.training.drop2df.imitation import action_of

BOTS = ROOT / "example_bots" / "drop2df"
CONFIG = {"turns": 12}


def record(path: Path, seed: int) -> None:
    """A match of planner (in seat ``seed % 2``) against passer on the board of ``seed``, recorded."""
    plan = load_module(BOTS / "planner.py").Planner()
    passer = load_module(BOTS / "passer.py").Passer()
    seat = seed % 2
    bots = [plan, passer] if seat == 0 else [passer, plan]
    names = ["planner", "passer"] if seat == 0 else ["passer", "planner"]
    engine = Drop2dfEngine.new(CONFIG, seed=seed)
    for s, b in enumerate(bots):
        b.info = MatchInfo(seat=s, players=2, names=tuple(names), game="drop2df")
    writer = ReplayWriter(path, engine, seed=seed, names=names, events=True)
    while engine.result() is None:
        tick = engine.tick
        moves = {
            s: drop2df.moves_for(bots[s].on_tick(drop2df.make_view({"tick": tick, **req})))
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
    tmp = tmp_path_factory.mktemp("drop2df")
    (tmp / "replays").mkdir()
    for seed in (0, 1, 2):
        record(tmp / "replays" / f"m{seed}.replay", seed)
    exported = invoke("replay", "export", str(tmp / "replays"), "--out", str(tmp / "data"))
    assert exported.exit_code == 0, exported.output
    folder = tmp / "dnet"
    made = cellarena("new-bot", "drop2df", "dnet", "--template", "trained", "--dir", str(folder))
    assert made.returncode == 0, made.stderr
    reports = []
    for out in ("a.npz", "b.npz"):
        ran = invoke(
            "train", "drop2df", "--dataset", str(tmp / "data"), "--imitate", "planner", "--bot-dir",
            str(folder), "--out", str(tmp / out), "--epochs", "5", "--eval", "0", "--json",
        )  # fmt: skip
        assert ran.exit_code == 0, ran.output
        reports.append(json.loads(ran.output))
    return {"tmp": tmp, "folder": folder, "reports": reports}


def test_the_samples_are_the_imitated_bots_moves_and_the_bytes_repeat(trained: dict[str, Any]) -> None:
    tmp, reports = trained["tmp"], trained["reports"]
    codes = drop2df.ActionCodes(11)
    kinds: dict[str, int] = {}
    for part in (tmp / "data").rglob("*.parquet"):
        rows = pq.read_table(part, columns=["bot", "action"]).to_pylist()
        for r in rows:
            if r["bot"] == "planner" and r["action"] is not None:
                action = action_of(msgpack.unpackb(r["action"]), codes)
                assert action is not None
                kind = "pass" if action == 0 else "edit" if action < 11 else "token"
                kinds[kind] = kinds.get(kind, 0) + 1
    assert reports[0]["ok"] and reports[0]["seats"] == 3 and reports[0]["samples"] == 3 * CONFIG["turns"]
    assert reports[0]["moves"] == kinds and kinds.get("edit", 0) > 0
    assert (tmp / "a.npz").read_bytes() == (tmp / "b.npz").read_bytes()


def test_the_evaluation_plays_the_example_bots(trained: dict[str, Any]) -> None:
    tmp = trained["tmp"]
    ran = invoke(
        "train", "drop2df", "--dataset", str(tmp / "data"), "--imitate", "planner", "--bot-dir",
        str(trained["folder"]), "--out", str(tmp / "c.npz"), "--epochs", "1", "--eval", "2",
        "--against", "passer", "--bots-dir", str(BOTS), "--turns", "12",
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert "against passer: won" in ran.output and " of 2, drew " in ran.output
    refused = invoke("train", "drop2df", "--dataset", str(tmp / "data"), "--imitate", "planner",
                     "--out", str(tmp / "d.npz"))  # fmt: skip
    assert refused.exit_code == 2 and "--bot-dir" in refused.output  # no default bot folder


def test_the_folder_plays_the_weights_over_tcp(trained: dict[str, Any]) -> None:
    """The folder's bot.py plays policy.npz (its default) in a match over TCP."""
    folder = trained["folder"]
    (folder / "policy.npz").write_bytes((trained["tmp"] / "a.npz").read_bytes())
    replay = trained["tmp"] / "dnet.replay"
    ran = subprocess.run(
        [*CLI, "match", "drop2df", "--bot", "dnet=python bot.py", "--bot",
         "random=python -m cellarena.sdk.opponents drop2df", "--turns", "12", "--fast",
         "--replay", str(replay), "--json"],
        cwd=folder, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["invalid"]["dnet"] == 0 and "dnet" not in result["forfeits"], ran.stdout
    recorded = read_replay(replay)
    verify(recorded)
    assert recorded.complete and len(recorded.ticks) == CONFIG["turns"]


def test_a_network_of_another_row_length_is_a_clear_error(trained: dict[str, Any]) -> None:
    tmp = trained["tmp"]
    other = tmp / "dnet12"
    other.mkdir()
    text = (trained["folder"] / "policy.py").read_text()
    assert "CELLS = 11\n" in text
    (other / "policy.py").write_text(text.replace("CELLS = 11\n", "CELLS = 12\n"))
    ran = invoke("train", "drop2df", "--dataset", str(tmp / "data"), "--imitate", "planner", "--bot-dir",
                 str(other), "--out", str(tmp / "e.npz"), "--eval", "0")  # fmt: skip
    assert ran.exit_code == 1 and "seat " in ran.output
    assert "this network reads rows of 12 cells (--length 9), got 11" in ran.output
    assert "train it again" in ran.output and not (tmp / "e.npz").exists()
