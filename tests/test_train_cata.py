"""`cellarena train cata`: imitation for a second game through the same code as Rezzo's. Two matches of
the example bot lookahead against random_legal, played in-process and recorded, are exported; a
`new-bot cata NAME --template trained` folder is trained from the export alone, the same command
writes the same bytes, the evaluation plays the example bots, and the folder's bot plays the weights
in a match over TCP. The win rate is docs/training.md's measured claim, not a test.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pyarrow.parquet as pq
import pytest
from cellarena_cli import CLI, ROOT, cellarena
from click.testing import CliRunner

from cellarena.arena.cli import main
from cellarena.sdk import MatchInfo
from cellarena.sdk.games import cata
from cellarena.server.games.cata.engine import CataEngine
from cellarena.server.replay import ReplayWriter, read_replay, verify
from cellarena.server.training.bot_folder import load_module

BOTS = ROOT / "example_bots" / "cata"
CONFIG = {"size": 16, "max_turns": 12}


def record(path: Path, seat: int) -> None:
    """A match of lookahead (in ``seat``) against random_legal, recorded as its replay."""
    look = load_module(BOTS / "lookahead.py").Lookahead(generation_budget=300)
    rand = load_module(BOTS / "random_legal.py").RandomLegal()
    bots = [look, rand] if seat == 0 else [rand, look]
    names = ["lookahead", "random_legal"] if seat == 0 else ["random_legal", "lookahead"]
    engine = CataEngine.new(CONFIG, seed=seat)
    for s, b in enumerate(bots):
        b.info = MatchInfo(seat=s, players=2, names=tuple(names), game="cata")
    writer = ReplayWriter(path, engine, seed=seat, names=names, events=True)
    while engine.result() is None:
        tick = engine.tick
        moves = {
            s: cata.move_for(bots[s].on_tick(cata.make_view({"tick": tick, **req})))
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
    tmp = tmp_path_factory.mktemp("cata")
    (tmp / "replays").mkdir()
    for seat in (0, 1):
        record(tmp / "replays" / f"m{seat}.replay", seat)
    exported = invoke("replay", "export", str(tmp / "replays"), "--out", str(tmp / "data"))
    assert exported.exit_code == 0, exported.output
    folder = tmp / "cnet"
    made = cellarena("new-bot", "cata", "cnet", "--template", "trained", "--dir", str(folder))
    assert made.returncode == 0, made.stderr
    reports = []
    for out in ("a.npz", "b.npz"):
        ran = invoke(
            "train", "cata", "--dataset", str(tmp / "data"), "--imitate", "lookahead", "--bot-dir",
            str(folder), "--out", str(tmp / out), "--epochs", "5", "--eval", "0", "--json",
        )  # fmt: skip
        assert ran.exit_code == 0, ran.output
        reports.append(json.loads(ran.output))
    return {"tmp": tmp, "folder": folder, "reports": reports}


def test_the_samples_are_the_imitated_bots_moves_and_the_bytes_repeat(trained: dict[str, Any]) -> None:
    tmp, reports = trained["tmp"], trained["reports"]
    moves = 0
    for part in (tmp / "data").rglob("*.parquet"):
        rows = pq.read_table(part, columns=["bot", "action"]).to_pylist()
        moves += sum(1 for r in rows if r["bot"] == "lookahead" and r["action"] is not None)
    assert reports[0]["ok"] and reports[0]["seats"] == 2 and reports[0]["samples"] == moves > 20
    assert sum(reports[0]["moves"].values()) == moves
    assert set(reports[0]["moves"]) <= {"strike", "block", "meditate", "pass"}
    assert (tmp / "a.npz").read_bytes() == (tmp / "b.npz").read_bytes()


def test_the_evaluation_plays_the_example_bots(trained: dict[str, Any]) -> None:
    tmp = trained["tmp"]
    ran = invoke(
        "train", "cata", "--dataset", str(tmp / "data"), "--imitate", "lookahead", "--bot-dir",
        str(trained["folder"]), "--out", str(tmp / "c.npz"), "--epochs", "1", "--eval", "2",
        "--against", "random_legal", "--bots-dir", str(BOTS), "--size", "16", "--max-turns", "12",
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert "against random_legal: won" in ran.output and " of 2, drew " in ran.output
    refused = invoke("train", "cata", "--dataset", str(tmp / "data"), "--imitate", "lookahead",
                     "--out", str(tmp / "d.npz"))  # fmt: skip
    assert refused.exit_code == 2 and "--bot-dir" in refused.output  # cata has no default bot folder


def test_the_folder_plays_the_weights_over_tcp(trained: dict[str, Any]) -> None:
    """The folder's bot.py plays policy.npz (its default) in a match over TCP (its own test runs the
    same, twice, as test_train_rezzo.py checks for Rezzo's folder)."""
    folder = trained["folder"]
    (folder / "policy.npz").write_bytes((trained["tmp"] / "a.npz").read_bytes())
    replay = trained["tmp"] / "cnet.replay"
    ran = subprocess.run(
        [*CLI, "match", "cata", "--bot", "cnet=python bot.py", "--bot",
         "random=python -m cellarena.sdk.opponents cata", "--size", "16", "--max-turns", "12", "--fast",
         "--replay", str(replay), "--json"],
        cwd=folder, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    result = json.loads(ran.stdout)
    assert result["invalid"]["cnet"] == 0 and "cnet" not in result["forfeits"], ran.stdout
    recorded = read_replay(replay)
    verify(recorded)
    assert recorded.complete and any(0 in t.moves for t in recorded.ticks)
