"""`cellarena train cloth`: imitation for Cloth of Gold through the same code as Rezzo's and
C.A.T.A.'s. Two short matches of the example bot planner against random_placer, played in-process
and recorded, are exported; a `new-bot cloth NAME --template trained` folder is trained from the
export alone, the samples are planner's recorded units (each batch's, then its end), the same
command writes the same bytes, the evaluation plays the example bots, and the folder's bot plays the
weights in a match over TCP. The win rate is docs/training.md's measured claim, not a test.
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
from cellarena.sdk.games import cloth
from cellarena.server.games.cloth.engine import ClothEngine
from cellarena.server.replay import ReplayWriter, read_replay, verify
from cellarena.server.training.bot_folder import load_module

BOTS = ROOT / "example_bots" / "cloth"
CONFIG = {"max_rounds": 3, "generations": 20}


def record(path: Path, seat: int) -> None:
    """A match of planner (in ``seat``) against random_placer on the board of ``seat``, recorded."""
    plan = load_module(BOTS / "planner.py").Planner(seed=seat)
    rand = load_module(BOTS / "random_placer.py").RandomPlacer(seed=seat)
    bots = [plan, rand] if seat == 0 else [rand, plan]
    names = ["planner", "random_placer"] if seat == 0 else ["random_placer", "planner"]
    engine = ClothEngine.new(CONFIG, seed=seat)
    for s, b in enumerate(bots):
        b.info = MatchInfo(seat=s, players=2, names=tuple(names), game="cloth")
    writer = ReplayWriter(path, engine, seed=seat, names=names, events=True)
    while engine.result() is None:
        tick = engine.tick
        moves = {}
        for s, req in engine.pending().items():
            view = cloth.make_view({"tick": tick, **req})
            moves[s] = cloth.units_for(bots[s].on_tick(view), view.max_units)
        writer.record(tick, moves, engine, events=engine.apply(moves).log)
    result = engine.result()
    assert result is not None
    writer.finish(result)


def invoke(*args: str) -> Any:
    return CliRunner().invoke(main, list(args))


@pytest.fixture(scope="module")
def trained(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    tmp = tmp_path_factory.mktemp("cloth")
    (tmp / "replays").mkdir()
    for seat in (0, 1):
        record(tmp / "replays" / f"m{seat}.replay", seat)
    exported = invoke("replay", "export", str(tmp / "replays"), "--out", str(tmp / "data"))
    assert exported.exit_code == 0, exported.output
    folder = tmp / "clnet"
    made = cellarena("new-bot", "cloth", "clnet", "--template", "trained", "--dir", str(folder))
    assert made.returncode == 0, made.stderr
    reports = []
    for out in ("a.npz", "b.npz"):
        ran = invoke(
            "train", "cloth", "--dataset", str(tmp / "data"), "--imitate", "planner", "--bot-dir",
            str(folder), "--out", str(tmp / out), "--epochs", "2", "--eval", "0", "--json",
        )  # fmt: skip
        assert ran.exit_code == 0, ran.output
        reports.append(json.loads(ran.output))
    return {"tmp": tmp, "folder": folder, "reports": reports}


def test_the_samples_are_the_imitated_bots_moves_and_the_bytes_repeat(trained: dict[str, Any]) -> None:
    tmp, reports = trained["tmp"], trained["reports"]
    batches = units = 0
    for part in (tmp / "data").rglob("*.parquet"):
        rows = pq.read_table(part, columns=["bot", "tick", "observation", "action"]).to_pylist()
        for r in rows:
            if r["bot"] != "planner" or r["action"] is None:
                continue
            view = cloth.make_view({"tick": r["tick"], **msgpack.unpackb(r["observation"])})
            placed, refused = cloth.place(view.board, msgpack.unpackb(r["action"]), view.me, view.first)
            assert placed and not refused  # planner sends the units that stick
            batches += 1
            units += len(placed)
    report = reports[0]
    assert report["ok"] and report["seats"] == 2 and report["samples"] == batches + units
    assert report["moves"] == {"unit": units, "end": batches} and units > batches > 0
    assert (tmp / "a.npz").read_bytes() == (tmp / "b.npz").read_bytes()


def test_the_evaluation_plays_the_example_bots(trained: dict[str, Any]) -> None:
    tmp = trained["tmp"]
    ran = invoke(
        "train", "cloth", "--dataset", str(tmp / "data"), "--imitate", "planner", "--bot-dir",
        str(trained["folder"]), "--out", str(tmp / "c.npz"), "--epochs", "1", "--eval", "2",
        "--against", "random_placer", "--bots-dir", str(BOTS), "--max-rounds", "1", "--generations", "20",
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert "against random_placer: won" in ran.output and " of 2, drew " in ran.output
    refused = invoke("train", "cloth", "--dataset", str(tmp / "data"), "--imitate", "planner",
                     "--out", str(tmp / "d.npz"))  # fmt: skip
    assert refused.exit_code == 2 and "--bot-dir" in refused.output  # no default bot folder


def test_the_folder_plays_the_weights_over_tcp(trained: dict[str, Any]) -> None:
    """The folder's bot.py plays policy.npz (its default) in a match over TCP."""
    folder = trained["folder"]
    (folder / "policy.npz").write_bytes((trained["tmp"] / "a.npz").read_bytes())
    replay = trained["tmp"] / "clnet.replay"
    ran = subprocess.run(
        [*CLI, "match", "cloth", "--bot", "clnet=python bot.py", "--bot",
         "random=python -m cellarena.sdk.opponents cloth", "--max-rounds", "1", "--generations", "20",
         "--fast", "--replay", str(replay), "--json"],
        cwd=folder, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["invalid"]["clnet"] == 0 and "clnet" not in result["forfeits"], ran.stdout
    recorded = read_replay(replay)
    verify(recorded)
    assert recorded.complete and any(0 in t.moves for t in recorded.ticks)
