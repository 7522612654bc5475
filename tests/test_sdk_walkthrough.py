"""docs/sdk.md, run as a newcomer runs it: every shell command it shows, in order, in a fresh folder
(with the checkout's example bots beside it, as in a checkout), so the tutorial cannot drift from
what the commands do. The few commands that need what a test cannot have say why below."""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
from pathlib import Path

from cellarena_cli import CLI, ROOT
from game_servers import serve, start

DOC = ROOT / "docs" / "sdk.md"
#: Section 1's install line.
INSTALL = "python3 -m venv .venv && .venv/bin/pip install -e '.[author]'"
#: Commands of the doc this test does not run, and why; any other command it shows is run.
NOT_RUN = {
    INSTALL: "the suite runs in an install of its own; "
    "tests/test_author_install.py runs this install in a fresh venv (and the strict editable and the plain "
    "ones), then mypy on a new bot, the player and training in each",
    ". .venv/bin/activate": "shell state; each command here runs with the suite's interpreter",
    "python my_bot/my_bot.py --ladder --host ladder.example.org --tls --token-file alice.token": "needs a "
    "public ladder with a certificate; tests/test_sdk_ladder.py plays --ladder --tls-ca --token-file",
    # The kits' section: tests/test_native_kits.py builds every kit's starters once per run (a Rust
    # build is the suite's slowest compile) and plays them, in a tournament beside the example bots too.
    "cellarena new-bot rezzo my_rust_bot --lang rust": "tests/test_native_kits.py writes the starters",
    "cd my_rust_bot && cargo build --release --offline && python -m pytest": "tests/test_native_kits.py "
    "builds each starter and runs its kit's tests and its pytest file",
    "cellarena tournament rezzo --bots-dir my_rust_bot --bots-dir example_bots --exclude js_random "
    "--max-ticks 300 --out runs/kits": "tests/test_native_kits.py plays one starter per language in a "
    "tournament beside the example bots",
    "cellarena tournament rezzo --bots-dir my_cpp_bot --bots-dir my_rust_bot --bots-dir my_java_bot "
    "--bots-dir my_ts_bot --bots-dir example_bots --exclude js_random --out runs/all": "tests/"
    "test_native_kits.py plays a C++, a Rust, a Java and a TypeScript starter in one tournament beside the "
    "example bots",
}
#: Run against a `cellarena serve` on a free port in place of 7777 (another test may hold 7777).
NEEDS_SERVER = "python my_bot/my_bot.py --matches 10 --port 7777"


def doc_commands() -> list[str]:
    """Every line of every ```sh block, comments dropped, in the doc's order."""
    blocks = re.findall(r"```sh\n(.*?)```", DOC.read_text(), re.DOTALL)
    lines = [line.split("  #")[0].strip() for block in blocks for line in block.splitlines()]
    return [line for line in lines if line]


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    if words[0] == "cellarena":
        return [*CLI, *words[1:]]
    if words[0] == "python":
        return [sys.executable, *words[1:]]
    raise AssertionError(f"{command!r}: the walkthrough only runs cellarena and python commands")


def _save_the_offline_test(folder: Path) -> None:
    """Section 5's test file, saved where its first line says, as the reader would."""
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    (test,) = [b for b in blocks if b.startswith("# my_bot/")]
    (folder / test.splitlines()[0].removeprefix("# ")).write_text(test)


def test_the_doc_shows_the_bot_new_bot_writes() -> None:
    blocks = re.findall(r"```python\n(.*?)```", DOC.read_text(), re.DOTALL)
    from cellarena.arena.cli.new_bot import _fill, _template

    written = _fill(_template("rezzo", "bot.py.tmpl"), {"BOT_NAME": "my_bot", "BOT_CLASS": "MyBot"})
    assert blocks[0] == written


def test_every_command_of_the_tutorial_runs_in_order(tmp_path: Path) -> None:
    commands = doc_commands()
    assert {c for c in commands if c in NOT_RUN} == set(NOT_RUN)  # each reason still names a real line
    (tmp_path / "example_bots").symlink_to(ROOT / "example_bots")
    outputs: dict[str, str] = {}
    for command in commands:
        if command in NOT_RUN:
            continue
        if command == NEEDS_SERVER:
            outputs[command] = _against_a_server(command, tmp_path)
            continue
        if "test_choose.py" in command:  # section 5: the reader saved the file first
            _save_the_offline_test(tmp_path)
        done = subprocess.run(
            _argv(command), cwd=tmp_path, capture_output=True, text=True, timeout=600, check=False
        )
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        outputs[command] = done.stdout
    firsts = [c.split()[1] if c.startswith("cellarena") else c for c in outputs]
    assert firsts[:2] == ["new-bot", "python -m pytest my_bot"]  # the path starts from new-bot
    assert firsts[firsts.index("tournament") + 1] == "results"  # ...to a tournament entry
    assert "2 passed" in outputs["python -m pytest my_bot"]
    results = subprocess.run(
        [*CLI, "results", "runs/my-cup", "--json"], cwd=tmp_path, capture_output=True, text=True, check=True
    )
    standings = {s["bot"]: s for s in json.loads(results.stdout)["standings"]}
    assert set(standings) == {"my_bot", "builder", "raider", "random_walker", "trained"}
    assert standings["my_bot"]["matches"] == 8 and standings["my_bot"]["crashes"] == 0


def _against_a_server(command: str, folder: Path) -> str:
    """The doc's `--matches 10` line against `cellarena serve rezzo` with quick matches, and a random
    opponent playing the other seat of each."""
    server = serve(folder / "serve", "--matches", "10")
    try:
        ours = command.replace("--port 7777", f"--port {server.port}")
        bot = start(_argv(ours), folder / "serve", "my_bot", cwd=folder)
        opponent = [sys.executable, "-m", "cellarena.sdk.opponents", "rezzo", "--matches", "10"]
        other = start([*opponent, "--port", str(server.port)], folder / "serve", "random", cwd=folder)
        assert bot.wait(timeout=300) == 0, bot.stderr()
        assert other.wait(timeout=60) == 0, other.stderr()
        assert server.wait(timeout=60) == 0, server.stderr()
    finally:
        server.stop()
    results = [json.loads(line) for line in server.stdout().splitlines()]
    assert len(results) == 10 and all(r["forfeits"] == [] for r in results)
    return bot.stderr()
