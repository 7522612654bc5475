"""docs/training.md runs as written: its shell and Python blocks, in order, in a fresh folder, with this
checkout's environment on PATH; the bot it trains beats the random bot in the tournament it runs."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOC = ROOT / "docs" / "training.md"
INSTALL = "pip install -e '.[rl]'"
FENCE = re.compile(r"^```(\w*)\n(.*?)^```", re.MULTILINE | re.DOTALL)


def blocks() -> list[tuple[str, str]]:
    """The doc's runnable blocks, in order: (language, text) for every ``sh`` and ``python`` fence.
    Fences without a language are output or excerpts, shown, not run."""
    return [(m[1], m[2]) for m in FENCE.finditer(DOC.read_text()) if m[1] in ("sh", "python")]


def test_the_doc_trains_a_bot_that_beats_the_random_bot(tmp_path: Path) -> None:
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
    for number, (language, text) in enumerate(found[1:], start=2):
        if language == "sh":
            command = ["bash", "-euo", "pipefail", "-c", text]
        else:
            script = tmp_path / f"block{number}.py"
            script.write_text(text)
            command = [sys.executable, str(script)]
        proc = subprocess.run(
            command, check=False, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=300
        )
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
