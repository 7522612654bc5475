"""The README's two set-up commands stay true: CI runs the second, and the first one's match plays."""

from __future__ import annotations

import json
import shlex
from pathlib import Path

from cellarena_cli import cellarena

ROOT = Path(__file__).resolve().parent.parent


def readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    block = text.split("```sh\n", 1)[1].split("```", 1)[0]
    return [line for line in block.splitlines() if line.strip()]


def test_readme_opens_with_exactly_two_commands() -> None:
    assert (ROOT / "README.md").read_text().startswith("# cellarena\n\n```sh\n")
    assert len(readme_commands()) == 2


def test_ci_runs_exactly_the_readme_test_command() -> None:
    ci = (ROOT / ".ci" / "run").read_text().strip().splitlines()
    assert ci[-1] == readme_commands()[1]


def test_the_first_command_runs_a_tournament_of_the_example_bots(tmp_path: Path) -> None:
    first = readme_commands()[0]
    args = shlex.split(first.split(".venv/bin/cellarena", 1)[1])
    assert args[:2] == ["tournament", "rezzo"]
    ticks = args.index("--max-ticks")
    args[ticks + 1] = "60"  # the same tournament, shorter
    proc = cellarena(*args, "--json", "--out", str(tmp_path), timeout=300)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["matches"] == result["total"] == 20 and result["failed"] == []
    standings = result["standings"]
    assert sorted(s["bot"] for s in standings) == [
        "builder",
        "js_random",
        "raider",
        "random_walker",
        "trained",
    ]
    assert all(s["crashes"] == 0 and s["matches"] == 8 for s in standings)
