"""`cellarena train rezzo`: the closed loop of docs/training.md made small. A tournament of builder and
random_walker, its export, and the training from the export alone; then the trained bot, loading the
new weights, plays a match. The pipeline's contract is checked here (rows from the dataset only,
weights written, the same bytes twice, a legal match), not the win rate: that is the doc's measured
claim.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow.parquet as pq
import pytest
from cellarena_cli import CLI, ROOT, here, run_here
from click.testing import CliRunner

from cellarena.server.dataset.fields import METADATA_KEY
from cellarena.server.replay import Replay, read_replay, verify

BOTS = ROOT / "example_bots" / "rezzo"
PY = sys.executable


@pytest.fixture(scope="module")
def loop(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A tiny tournament (builder and random_walker on duel, both seats), its export, and two runs of
    the same training command, from a copy of the trained bot's folder (without its committed weights)."""
    tmp = tmp_path_factory.mktemp("loop")
    # In this process: see `run_here` on tournaments.
    ran = run_here(
        "tournament", "rezzo",
        "--bot", f"builder={PY} {BOTS / 'builder.py'}",
        "--bot", f"random_walker={PY} {BOTS / 'random_walker.py'}",
        "--max-ticks", "400", "-j", "2", "--out", str(tmp / "t"), "--json",
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    exported = here("replay", "export", str(tmp / "t" / "matches"), "--out", str(tmp / "data"))
    assert exported.exit_code == 0, exported.output
    # The bot folder trained is the one `new-bot --template trained` writes.
    bot_dir = tmp / "my_net"
    made = run_here("new-bot", "rezzo", "my_net", "--template", "trained", "--dir", str(bot_dir), "--json")
    assert made.returncode == 0, made.stderr
    reports = []
    for out in ("a.npz", "b.npz"):
        trained = here(
            "train", "rezzo", "--dataset", str(tmp / "data"), "--imitate", "builder",
            "--out", str(tmp / out), "--bot-dir", str(bot_dir), "--epochs", "3", "--eval", "0", "--json",
        )  # fmt: skip
        assert trained.exit_code == 0, trained.output
        reports.append(json.loads(trained.output))
    return {
        "tmp": tmp,
        "bot_dir": bot_dir,
        "reports": reports,
        "commands": json.loads(made.stdout)["commands"],
    }


def test_training_reads_the_builders_rows_of_the_dataset_only(loop: dict[str, Any]) -> None:
    # Builder's program is nowhere the training looks: its samples are the dataset's rows of builder
    # in which it was asked to move, one per live agent (duel: one agent a seat).
    rows = 0
    for part in (loop["tmp"] / "data").rglob("*.parquet"):
        table = pq.read_table(part, columns=["bot", "observation"]).to_pylist()
        rows += sum(1 for r in table if r["bot"] == "builder" and r["observation"] is not None)
    # A tournament's replays are all named match.replay: the export names each match after its folder.
    names = sorted(p.parent.name for p in (loop["tmp"] / "data").rglob("*.parquet"))
    assert names == ["match=0000-builder-vs-random_walker-duel", "match=0001-random_walker-vs-builder-duel"]
    report = loop["reports"][0]
    assert report["ok"] and report["seats"] == 2 and report["samples"] == rows > 0
    assert sum(report["moves"].values()) == rows and report["matches"] == {}


def test_the_same_command_writes_the_same_bytes(loop: dict[str, Any]) -> None:
    a, b = (loop["tmp"] / "a.npz").read_bytes(), (loop["tmp"] / "b.npz").read_bytes()
    assert a == b and len(a) > 100_000
    assert loop["reports"][0]["accuracy"] == loop["reports"][1]["accuracy"]


def test_an_export_of_schema_1_trains_to_the_same_bytes(loop: dict[str, Any]) -> None:
    """A dataset exported before schema 1.1 (no ``view`` columns, version "1") still trains: its
    msgpack observations are decoded as the export decodes them, into the very same weights. A major
    version this cellarena does not know is refused, naming the file."""
    tmp = loop["tmp"]
    old, new = tmp / "data-v1", tmp / "data-v2"
    shutil.copytree(tmp / "data", old)
    shutil.copytree(tmp / "data", new)
    for folder, version in ((old, b"1"), (new, b"2.0")):
        for part in folder.rglob("*.parquet"):
            table = pq.read_table(part).drop_columns(["view", "view_shape", "agents"])
            pq.write_table(table.replace_schema_metadata({METADATA_KEY: version}), part)
    args = ("--imitate", "builder", "--bot-dir", str(loop["bot_dir"]), "--epochs", "3", "--eval", "0")
    trained = here("train", "rezzo", "--dataset", str(old), "--out", str(tmp / "v1.npz"), *args)
    assert trained.exit_code == 0, trained.output
    assert (tmp / "v1.npz").read_bytes() == (tmp / "a.npz").read_bytes()
    refused = here("train", "rezzo", "--dataset", str(new), "--out", str(tmp / "v2.npz"), *args)
    assert refused.exit_code == 1 and "dataset schema version 2.0, but this cellarena reads version 1.1" in (
        refused.output
    )
    assert "/part-0.parquet" in refused.output and not (tmp / "v2.npz").exists()


def _play_over_tcp(loop: dict[str, Any], name: str, weights: Path, opponent: str, max_ticks: int) -> Replay:
    """The folder's bot.py with ``weights`` in seat 0 against example bot ``opponent`` over TCP: the
    replay, verified, every answer of seat 0 well formed."""
    replay = loop["tmp"] / f"{name}.replay"
    ran = run_here(
        "match", "rezzo",
        "--bot", f"{name}={PY} {loop['bot_dir'] / 'bot.py'} --weights {weights}",
        "--bot", f"{opponent}={PY} {BOTS / (opponent + '.py')}",
        "--max-ticks", str(max_ticks), "--fast", "--replay", str(replay),
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    recorded = read_replay(replay)
    verify(recorded)
    assert all(not t.invalid.get(0) for t in recorded.ticks), f"{name}'s answers were well formed"
    return recorded


def test_the_trained_bot_loads_the_weights_and_plays_a_legal_match(loop: dict[str, Any]) -> None:
    """The new-bot folder's bot.py, with the trained weights, against an example bot over TCP."""
    recorded = _play_over_tcp(loop, "trained", loop["tmp"] / "a.npz", "random_walker", 150)
    assert recorded.complete and len(recorded.ticks) > 100


def test_new_bot_template_trained_is_a_folder_the_trainer_trains_and_that_passes_its_test(
    loop: dict[str, Any],
) -> None:
    """`cellarena new-bot rezzo NAME --template trained` (the folder every test here trains): its
    README's train command writes policy.npz from the export (the smallest training: one epoch), and
    its own test passes, playing those weights over TCP. (It plays an example bot in the next test.)"""
    folder = loop["bot_dir"]
    assert sorted(p.name for p in folder.iterdir() if p.name != "__pycache__") == [
        "README.md", "bot.py", "bot.toml", "policy.py", "test_my_net.py"
    ]  # fmt: skip
    # The trainer's network, as the example's: the template is a copy of it, kept the same.
    assert (folder / "policy.py").read_text() == (BOTS / "trained" / "policy.py").read_text()
    train = next(c for c in loop["commands"] if c.startswith("cellarena train rezzo"))
    assert (
        train == "cellarena train rezzo --dataset DATASET --imitate BOT --bot-dir . --out policy.npz --eval 0"
    )
    args = train.replace("DATASET", str(loop["tmp"] / "data")).replace("BOT", "builder").split()[1:]
    trained = subprocess.run(
        [*CLI, *args, "--epochs", "1"], cwd=folder, capture_output=True, text=True, timeout=120, check=False
    )
    assert trained.returncode == 0 and (folder / "policy.npz").is_file(), trained.stderr
    tested = subprocess.run(
        [PY, "-m", "pytest", "-q", "-p", "no:cacheprovider"], cwd=folder, capture_output=True, text=True,
        timeout=300, check=False,
    )  # fmt: skip
    assert tested.returncode == 0 and "2 passed" in tested.stdout, tested.stdout + tested.stderr


def test_the_evaluation_plays_the_bot_folder_against_the_example_bots(loop: dict[str, Any]) -> None:
    tmp = loop["tmp"]
    ran = here(
        "train", "rezzo", "--dataset", str(tmp / "data"), "--imitate", "builder", "--out", str(tmp / "c.npz"),
        "--bot-dir", str(loop["bot_dir"]), "--epochs", "1", "--eval", "2", "--against", "random_walker",
        "--max-ticks", "60", "--bots-dir", str(BOTS),
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert "against random_walker: won" in ran.output and " of 2, drew " in ran.output


def test_training_in_process_leaves_no_trace_in_sys_path_or_sys_modules(loop: dict[str, Any]) -> None:
    """The trainer loads the bot folder's policy.py and bot.py (and the example bots) in this process,
    each under a name of its own; bot.py's `from policy import ...` works while it loads, and then
    neither the folder on sys.path nor a plain `policy` or `bot` module is left for the next import."""
    tmp, folder = loop["tmp"], loop["bot_dir"]
    path, plain = list(sys.path), {n: sys.modules.get(n) for n in ("policy", "bot", "random_walker")}
    ran = here(
        "train", "rezzo", "--dataset", str(tmp / "data"), "--imitate", "builder", "--out", str(tmp / "d.npz"),
        "--bot-dir", str(folder), "--epochs", "1", "--eval", "1", "--against", "random_walker",
        "--max-ticks", "20", "--bots-dir", str(BOTS),
    )  # fmt: skip
    assert ran.exit_code == 0, ran.output
    assert sys.path == path and {n: sys.modules.get(n) for n in plain} == plain
    loaded = [m for m in sys.modules.values() if str(folder) in str(getattr(m, "__file__", "") or "")]
    assert sorted(Path(str(m.__file__)).name for m in loaded) == ["bot.py", "policy.py"]
    assert all(m.__name__.startswith("cellarena_bot_file_") for m in loaded)


def test_bad_input_is_a_clear_error(loop: dict[str, Any]) -> None:
    tmp, bot_dir = loop["tmp"], str(loop["bot_dir"])
    common = ("--out", str(tmp / "x.npz"), "--bot-dir", bot_dir, "--eval", "0")
    ran = here("train", "rezzo", "--dataset", str(tmp / "nope"), "--imitate", "builder", *common)
    assert ran.exit_code == 1 and "--dataset" in ran.output and "cellarena replay export" in ran.output
    ran = here("train", "rezzo", "--dataset", str(tmp / "data"), "--imitate", "nobody", *common)
    assert ran.exit_code == 1 and "--imitate nobody" in ran.output and "builder, random_walker" in ran.output
    ran = here("train", "rezzo", "--dataset", str(tmp / "t"), "--imitate", "builder", *common)
    assert ran.exit_code == 1 and "no rezzo matches" in ran.output
    ran = here(
        "train", "rezzo", "--dataset", str(tmp / "data"), "--imitate", "builder", "--out", str(tmp / "x.npz"),
        "--bot-dir", str(tmp),
    )  # fmt: skip
    assert ran.exit_code == 1 and f"--bot-dir {tmp}: no policy.py" in ran.output
    assert not (tmp / "x.npz").exists()


def test_other_games_say_what_there_is() -> None:
    """Every game of cellarena has a trainer; a game without one (a plug-in's) says "not yet"."""
    from cellarena.server.cli.train import _not_yet

    ran = CliRunner().invoke(_not_yet("newgame"), ["--dataset", "d"])
    assert ran.exit_code == 1
    assert "`cellarena train newgame`: not yet" in ran.output and "cellarena replay export" in ran.output
    listed = here("train", "--help")
    assert listed.exit_code == 0
    assert all(g in listed.output for g in ("rezzo", "cata", "cloth", "colorblocks", "drop2df"))


# ================================================================================ --reinforce
@pytest.fixture(scope="module")
def reinforced(loop: dict[str, Any]) -> dict[str, Any]:
    """`train rezzo --reinforce` twice with the same options, on a budget of seconds: the new-bot folder's
    network, fresh, against random_walker and a trained bot folder (the imitated weights, a.npz), with a
    reward for wire built that makes the returns differ within a few steps."""
    tmp = loop["tmp"]
    rival = tmp / "rival"
    shutil.copytree(loop["bot_dir"], rival, ignore=shutil.ignore_patterns("policy.npz", "__pycache__"))
    shutil.copy(tmp / "a.npz", rival / "policy.npz")
    reports = []
    for out in ("r1.npz", "r2.npz"):
        ran = here(
            "train", "rezzo", "--reinforce", "--bot-dir", str(loop["bot_dir"]), "--out", str(tmp / out),
            "--opponent", "random_walker", "--opponent", str(rival),
            "--bots-dir", str(BOTS), "--steps", "12", "--worlds", "2", "--seed", "3",
            "--reward", "wire_built=0.1", "--eval", "0", "--json",
        )  # fmt: skip
        assert ran.exit_code == 0, ran.output
        reports.append(json.loads(ran.output))
    return {"tmp": tmp, "reports": reports}


def test_reinforcement_trains_the_folders_network_and_the_same_seed_writes_the_same_bytes(
    reinforced: dict[str, Any],
) -> None:
    tmp, report = reinforced["tmp"], reinforced["reports"][0]
    assert report["ok"] and report["steps"] == 12 and report["agent_steps"] == 24 and report["updates"] == 1
    assert report["from"] == "a fresh network (seed 3)"
    assert report["opponents"] == ["random_walker", str(tmp / "rival")]
    assert report["rewards"] == {"outcome": 1.0, "enemy_flag_distance": 0.05, "own_flag_distance": 0.05,
                                 "wire_built": 0.1}  # fmt: skip
    assert report["reward_per_agent_step"] > 0  # wire built, paid
    assert (tmp / "r1.npz").read_bytes() == (tmp / "r2.npz").read_bytes()
    again = reinforced["reports"][1]
    assert again == {**report, "seconds": again["seconds"], "out": again["out"]}


def test_the_reinforced_weights_load_into_the_bot_and_play_a_match(
    loop: dict[str, Any], reinforced: dict[str, Any]
) -> None:
    """The folder's bot.py plays the reinforced weights over TCP, every answer well formed; and the
    command's own evaluation plays them in-process."""
    tmp = loop["tmp"]
    recorded = _play_over_tcp(loop, "reinforced", tmp / "r1.npz", "raider", 60)
    assert recorded.complete and recorded.names[0] == "reinforced" and len(recorded.ticks) == 60
    played = here(
        "train", "rezzo", "--reinforce", "--bot-dir", str(loop["bot_dir"]), "--out", str(tmp / "r3.npz"),
        "--from-weights", str(tmp / "r1.npz"), "--steps", "2", "--worlds", "1", "--opponent", "random",
        "--eval", "2", "--against", "raider", "--max-ticks", "30", "--bots-dir", str(BOTS),
    )  # fmt: skip
    assert played.exit_code == 0, played.output
    assert f"reinforced from {tmp / 'r1.npz'} for 2 steps" in played.output
    assert "against raider: won" in played.output and " of 2, drew " in played.output


def test_returns_are_discounted_and_cut_where_an_episode_ended() -> None:
    from cellarena.server.training.rezzo.reinforce import _returns

    rewards = np.array([[0.0, 1.0], [0.0, 0.0], [1.0, 2.0]])
    ends = np.array([[False, True], [False, False], [False, False]])
    got = _returns(rewards, ends, 0.5)
    assert got.tolist() == [[0.25, 1.0], [0.5, 1.0], [1.0, 2.0]]


def test_reinforce_refuses_bad_arguments_and_games_without_reward_terms(loop: dict[str, Any]) -> None:
    tmp, bot_dir = loop["tmp"], str(loop["bot_dir"])
    out = ("--out", str(tmp / "bad.npz"))
    ran = here("train", "cata", "--reinforce", "--bot-dir", str(tmp), *out)
    assert ran.exit_code == 1 and "cata has no reward terms to reinforce with" in ran.output
    assert "imitation works: `cellarena train cata --dataset DIR --imitate BOT" in ran.output
    ran = here("train", "rezzo", "--reinforce", "--bot-dir", str(tmp / "missing"), *out)
    assert ran.exit_code == 2 and f"--bot-dir {tmp / 'missing'}: no such folder" in ran.output
    ran = here("train", "rezzo", "--reinforce", "--bot-dir", str(tmp), *out)
    assert ran.exit_code == 1 and f"--bot-dir {tmp}: no policy.py in it" in ran.output
    ran = here("train", "rezzo", "--bot-dir", bot_dir, *out)
    assert ran.exit_code == 2 and "Missing option '--dataset'" in ran.output and "--reinforce" in ran.output
    ran = here("train", "rezzo", "--reinforce", "--dataset", str(tmp / "data"), "--bot-dir", bot_dir, *out)
    assert ran.exit_code == 2 and "leave out --dataset and --imitate" in ran.output
    bad = {
        ("--reward", "wire"): "give TERM=WEIGHT",
        ("--reward", "wires=1"): "unknown reward term 'wires'",
        ("--opponent", "nobody"): "--opponent nobody: neither random, an example bot",
        ("--from-weights", str(tmp / "nope.npz")): f"--from-weights: no weights at {tmp / 'nope.npz'}",
    }
    for args, message in bad.items():
        ran = here("train", "rezzo", "--reinforce", "--bot-dir", bot_dir, *out, "--bots-dir", str(BOTS),
                     "--steps", "1", "--worlds", "1", "--eval", "0", *args)  # fmt: skip
        assert ran.exit_code in (1, 2) and message in ran.output, (args, ran.output)
    assert not (tmp / "bad.npz").exists()
