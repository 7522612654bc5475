"""docs/training.md runs as written: its shell and Python blocks, in order, in a fresh folder, with this
checkout's environment on PATH; the bot it trains beats the random bot in the tournament it runs. And
the trained bot plays what its policy chose in the environment, and says what is wrong with its weights."""

from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import runpy
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from cellarena.arena.discovery import discover
from cellarena.sdk.games.cata import ACTIONS, View, action_move, encode_answer
from cellarena.sdk.protocol.messages import tick
from cellarena.server.env.games.cata import CataAECEnv

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "training.md"
INSTALL = "pip install -e '.[rl]'"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[str, str]]:
    """The doc's runnable blocks, in order: (language, text) for every ``sh`` and ``python`` fence.
    Fences without a language are output or excerpts, shown, not run."""
    return [(m[1], m[2]) for m in FENCE.finditer(DOC.read_text()) if m[1] in ("sh", "python")]


def _run_python_block(script: Path, text: str, number: int) -> str:
    """A ``python`` block saved as ``script`` and run as ``python script`` runs it (as ``__main__``, in
    the current folder), but in this process: the blocks import what the suite has imported already,
    and a process each cost a second or two of imports. What it printed."""
    script.write_text(text)
    printed = io.StringIO()
    try:
        with contextlib.redirect_stdout(printed):
            runpy.run_path(str(script), run_name="__main__")
    except Exception as exc:
        raise AssertionError(f"block {number} of {DOC.name} failed:\n{text}\n{printed.getvalue()}") from exc
    return printed.getvalue()


def test_the_doc_trains_a_bot_that_beats_the_random_bot(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    found = blocks()
    # The install step is the first block; this test runs in an environment where it was done.
    assert found[0] == ("sh", INSTALL + "\n")
    import gymnasium  # noqa: F401  (the [rl] extra is installed, as the install step says)
    import pettingzoo  # noqa: F401

    # "Run the commands from the root of a cellarena checkout": the folder they run in has the
    # checkout's example_bots, and everything they write lands in it, not in the checkout.
    (tmp_path / "example_bots").symlink_to(ROOT / "example_bots")
    env = {**os.environ, "PATH": f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"}
    outputs: list[str] = []
    monkeypatch.chdir(tmp_path)
    for number, (language, text) in enumerate(found[1:], start=2):
        if language == "python":
            outputs.append(_run_python_block(tmp_path / f"block{number}.py", text, number))
            continue
        proc = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", text],
            check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=900,
        )  # fmt: skip
        assert proc.returncode == 0, (
            f"block {number} of {DOC.name} failed:\n{text}\n{proc.stdout}\n{proc.stderr}"
        )
        outputs.append(proc.stdout)
    by_command = dict(zip([text for _, text in found[1:]], outputs, strict=True))

    random_match = next(out for text, out in by_command.items() if "CataAECEnv(" in text)
    assert "finished with reward" in random_match and "rule black" in random_match  # render("ansi")
    training = next(out for text, out in by_command.items() if "train.py" in text)
    assert "wrote cata.npz" in training and (tmp_path / "cata.npz").is_file()
    tournament = next(out for text, out in by_command.items() if "cellarena tournament" in text)
    lines = tournament.splitlines()
    at = next(i for i, line in enumerate(lines) if line.startswith("{"))
    report = json.loads(lines[at])
    standings = {row["bot"]: row for row in report["standings"]}
    assert report["failed"] == [] and report["played"] == report["total"] == 6
    assert [row["bot"] for row in report["standings"]] == ["trained", "random"]
    trained, rand = standings["trained"], standings["random"]
    assert trained["wins"] > trained["losses"] and trained["wins"] > rand["wins"]
    assert trained["crashes"] == 0 and trained["late_rate"] == 0.0
    table = "\n".join(lines[at + 1 :])  # what `cellarena results` printed after the JSON
    assert "trained" in table and table.index("trained") < table.index("random")  # best first


TRAINED = ROOT / "example_bots" / "cata" / "trained"


def test_the_bot_plays_what_the_policy_chose_in_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    """A match in the environment, seat 0 played by a policy on the environment's observations: at each
    of its moves the bot, given the request as the server sends it, answers the same move."""
    monkeypatch.syspath_prepend(str(TRAINED))
    try:
        policy_module = importlib.import_module("policy")
        bot_module = importlib.import_module("bot")
    finally:  # such plain names must not stay importable for other tests
        sys.modules.pop("policy", None)
        sys.modules.pop("bot", None)
    rng = np.random.default_rng(0)
    policy = policy_module.Policy(rng.normal(size=(ACTIONS, policy_module.FEATURES)))
    bot = bot_module.Trained(policy)
    env = CataAECEnv({"size": 16, "max_turns": 12})
    env.reset(seed=1)
    checked = 0
    for agent in env.agent_iter():
        obs, _, terminated, truncated, info = env.last()
        if terminated or truncated:
            env.step(None)
            continue
        mask = info["action_mask"]
        if agent == "player_1":
            env.step(int(rng.choice(np.flatnonzero(mask))))
            continue
        action = policy.act(obs, mask)
        request = env.engine.pending()[0]
        view = View.from_message(dict(tick(env.engine.tick, 0, request)))
        assert encode_answer(bot.on_tick(view), request) == list(action_move(action))
        checked += 1
        env.step(action)
    assert checked >= 2 * 12 - 2


def test_the_bot_says_where_its_weights_are_missing(tmp_path: Path) -> None:
    missing = tmp_path / "nowhere.npz"
    proc = subprocess.run(
        [sys.executable, str(TRAINED / "bot.py"), "--weights", str(missing), "--port", "1"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 1
    assert str(missing) in proc.stderr and "train.py --out" in proc.stderr
    (tmp_path / "bad.npz").write_bytes(b"not numpy")
    proc = subprocess.run(
        [sys.executable, str(TRAINED / "bot.py"), "--port", "1"],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "CATA_WEIGHTS": str(tmp_path / "bad.npz")},
    )
    assert proc.returncode == 1 and "bad.npz: not weights saved by train.py" in proc.stderr


def test_a_tournament_over_example_bots_trains_the_bot_first() -> None:
    """`--bots-dir example_bots` finds the trained bot by its bot.toml, whose setup writes the weights
    its command loads (setup itself is the doc's training command, run above)."""
    found = {bot.spec.name: bot for bot in discover(ROOT / "example_bots", "cata")}
    assert {"trained", "random_legal", "lookahead"} <= set(found)
    trained = found["trained"]
    assert trained.spec.cwd == str(TRAINED) and trained.creates == "cata.npz"
    assert trained.setup is not None and "train.py --out cata.npz" in trained.setup
    assert "--weights cata.npz" in trained.spec.command
