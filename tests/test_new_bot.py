"""`cellarena new-bot GAME NAME [--lang]`, as a user types it, outside the checkout: every folder it
writes passes its own test, and every command its README shows runs."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
import typecheck
from cellarena_cli import CLI, ROOT, cellarena, here, refused
from click.testing import Result

from cellarena.arena.cli.ladder.submit import pack
from cellarena.arena.cli.new_bot import COMPILED, LANGUAGES, NODE_LANGUAGES, GameTemplate, offered, write_bot
from cellarena.arena.ladder.submissions.unpack import unpack
from cellarena.server.bots.program import BotProgram

#: TypeScript and JavaScript bots are tested in test_new_bot_node.py, which builds them together; the
#: compiled languages' starters are built once and tested in test_native_kits.py.
COMBINATIONS = [
    (game, lang)
    for lang in LANGUAGES
    if lang not in NODE_LANGUAGES and lang not in COMPILED
    for game in offered(lang)
]


def _readme_commands(folder: Path) -> list[str]:
    """The shell block of the README, one command a line."""
    text = (folder / "README.md").read_text()
    block = re.search(r"```sh\n(.*?)```", text, re.DOTALL)
    assert block is not None, text
    return [line for line in block.group(1).splitlines() if line.strip()]


#: The environment a README's `python -m pytest` runs in. A bot author installs cellarena and pytest
#: alone, and the written test uses no plugin; this venv's plugins (playwright, hypothesis, xdist,
#: trio) would add some 2 s of imports to every run.
BOT_AUTHORS_PYTEST = {**os.environ, "PYTEST_DISABLE_PLUGIN_AUTOLOAD": "1"}


def run_readme_line(command: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """A README line as a user runs it: `python` is this interpreter, `cellarena` the command."""
    words = shlex.split(command)
    if words[0] == "cellarena":
        words = [*CLI, *words[1:]]
    elif words[0] == "python":
        words[0] = sys.executable
    env = BOT_AUTHORS_PYTEST if words[1:3] == ["-m", "pytest"] else None
    return subprocess.run(words, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)


def run_here(command: str, cwd: Path, monkeypatch: pytest.MonkeyPatch) -> Result:
    """A README's `cellarena` line run by this process (click's runner) in ``cwd``: the same run, its
    bots still processes, less the second of imports a `cellarena` process costs."""
    words = shlex.split(command)
    assert words[0] == "cellarena", command
    monkeypatch.chdir(cwd)
    return here(*words[1:])


#: The game whose README `cellarena match` line runs as a process; the others' are the same line but
#: for the game and its short options (asserted), and each folder's own test plays that very match.
MATCH_LINE_GAME = "drop2df"


@pytest.mark.parametrize(("game", "lang"), COMBINATIONS)
def test_the_folder_passes_its_own_test_and_its_readme_runs(
    game: str, lang: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    name = f"my_{game}"
    folder = tmp_path / name
    # In this process: test_the_default_folder_is_named_after_the_bot and test_a_broken_bot_fails_its_test
    # run `new-bot` as a process.
    args = ["new-bot", game, name, "--lang", lang, "--dir", str(folder), "--json"]
    made_here = here(*args)
    assert made_here.exit_code == 0, made_here.output
    made = json.loads(made_here.stdout)
    assert Path(made["folder"]) == folder and all(Path(f).parent == folder for f in made["files"])
    commands = _readme_commands(folder)
    assert commands == made["commands"] and commands[0] == "python -m pytest"
    assert len(commands) == 3
    test, match, tournament = commands
    bots = ["--bot", f"{name}=python {name}.py", "--bot", f"random=python -m cellarena.sdk.opponents {game}"]
    short = list(GameTemplate.of(game).short)
    assert shlex.split(match) == ["cellarena", "match", game, *bots, "--fast", *short]
    assert shlex.split(tournament) == ["cellarena", "tournament", game, *bots, *short, "--out", "runs"]
    done = run_readme_line(test, folder)
    assert done.returncode == 0, f"{test}\n{done.stdout}\n{done.stderr}"
    assert "2 passed" in done.stdout  # a match in each seat
    if game == MATCH_LINE_GAME:
        done = run_readme_line(match, folder)
        assert done.returncode == 0, f"{match}\n{done.stdout}\n{done.stderr}"
    played = run_here(tournament, folder, monkeypatch)
    assert played.exit_code == 0, f"{tournament}\n{played.output}"
    standings = run_here("cellarena results runs --json", folder, monkeypatch)
    results = json.loads(standings.stdout)
    assert {s["bot"] for s in results["standings"]} == {name, "random"}
    # The random opponent (`python -m cellarena.sdk.opponents GAME`) plays only legal moves, in each
    # seat, through a whole short match (this replaced a random-against-random match per game).
    seated = {[s["bot"] for s in m["seats"]].index("random") for m in results["matches"]}
    assert seated == {0, 1} and all(m["ticks"] > 1 for m in results["matches"]), results["matches"]
    random = [s for m in results["matches"] for s in m["seats"] if s["bot"] == "random"]
    assert all(s["invalid"] == s["illegal"] == 0 and not s["forfeit"] for s in random), results["matches"]


def test_the_python_bots_are_typed_and_lint_clean(tmp_path: Path) -> None:
    """What a newcomer starts from passes the checks this project holds its own code to."""
    for game in offered("python"):  # in this process: the command itself is run by the tests above
        write_bot(game, f"my_{game}", "python", tmp_path / game)
    config = ["--config", str(ROOT / "pyproject.toml")]
    for check in (["check"], ["format", "--check"]):
        ruff = subprocess.run(
            [sys.executable, "-m", "ruff", *check, *config, str(tmp_path)],
            capture_output=True,
            text=True,
            check=False,
        )
        assert ruff.returncode == 0, ruff.stdout + ruff.stderr
    # Strict, as a bot author checks a bot, and against the checkout's typed SDK (tests/typecheck.py).
    errors = typecheck.check_scripts(sorted(tmp_path.glob("*/*.py")))
    assert not errors, "\n".join(map(str, errors))


def test_a_broken_bot_fails_its_test(tmp_path: Path) -> None:
    """The written test catches a bot that crashes: it is a real test, not a formality."""
    folder = tmp_path / "broken"
    assert cellarena("new-bot", "cata", "broken", "--dir", str(folder)).returncode == 0
    bot = folder / "broken.py"
    crash = bot.read_text().replace("        moves = view.legal_moves()", "        raise SystemExit(5)")
    bot.write_text(crash)
    done = run_readme_line("python -m pytest", folder)
    assert done.returncode == 1 and "2 failed" in done.stdout, done.stdout


def test_the_default_folder_is_named_after_the_bot(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*CLI, "new-bot", "rezzo", "walker"], cwd=tmp_path, capture_output=True, text=True, check=False
    )
    assert proc.returncode == 0, proc.stderr
    folder = tmp_path / "walker"
    written = sorted(p.name for p in folder.iterdir())
    assert written == ["README.md", "bot.toml", "test_walker.py", "walker.py"]
    assert "python -m pytest" in proc.stdout and "class Walker(Bot):" in (folder / "walker.py").read_text()


@pytest.mark.parametrize(
    ("args", "option", "words"),
    [
        (["cloth", "x", "--lang", "cobol"], "--lang", "'cobol' is not one of"),
        (["chess", "x"], "GAME", "chess"),
        (["rezzo", "My-Bot"], "NAME", "cannot name a bot"),
        (["rezzo", "class"], "NAME", "cannot name a bot"),
        (["rezzo", "x", "--dir", "{tmp}/full"], "--dir", "already exists and is not an empty folder"),
    ],
)
def test_what_it_cannot_write_is_refused_naming_the_argument(
    tmp_path: Path, args: list[str], option: str, words: str
) -> None:
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "keep.txt").write_text("mine")
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    # In this process (cellarena_cli.refused): the tests above run the command as a process.
    error = json.loads(refused("new-bot", *argv, "--json").stdout)
    assert error["option"] == option and words in error["error"], error
    assert words in " ".join(refused("new-bot", *argv).stderr.split())
    assert (tmp_path / "full" / "keep.txt").read_text() == "mine"


def test_every_game_has_a_random_opponent_and_a_python_template() -> None:
    from cellarena.sdk.opponents import games, random_bot
    from cellarena.server.games import game_names

    assert games() == game_names() == offered("python")
    assert all(random_bot(g).game == g for g in games())


def test_without_pytest_new_bot_says_how_to_get_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """After `pip install cellarena` alone there is no pytest, which the written test needs."""
    import importlib.util

    from cellarena_cli import invoke

    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda name, *a: None if name == "pytest" else real(name, *a)
    )
    code, out = invoke("new-bot", "rezzo", "walker", "--dir", str(tmp_path / "walker"))
    assert code == 0, out
    assert f"{sys.executable} -m pip install pytest" in out
    assert "pip install pytest" in (tmp_path / "walker" / "README.md").read_text()
    monkeypatch.setattr(importlib.util, "find_spec", real)
    code, out = invoke("new-bot", "rezzo", "walker2", "--dir", str(tmp_path / "walker2"))
    assert code == 0 and "pip install pytest" not in out


@pytest.mark.parametrize("lang", sorted(LANGUAGES))
def test_every_folder_it_writes_is_ready_for_ladder_submit(tmp_path: Path, lang: str) -> None:
    """Each language's folder has the bot.toml that `ladder submit` packs and a ladder reads (issue 41):
    packed, unpacked as a ladder does, it is one bot program with new-bot's command."""
    game = "rezzo" if "rezzo" in offered(lang) else offered(lang)[0]
    written = write_bot(game, "walker", lang, tmp_path / "walker")
    unpacked = unpack(pack(written.folder), "tar.gz", tmp_path / "unpacked")
    program = BotProgram.from_folder(unpacked.folder)
    expected = COMPILED.get(lang, "node dist/src/bot.js" if lang in NODE_LANGUAGES else "python walker.py")
    assert program.command == expected.format(name="walker")
