"""`cellarena new-bot GAME NAME --lang ts|js`: a bot folder on the TypeScript kit for every game, which
builds, passes its own test (a match in each seat against cellarena's random bot), and whose README's
commands run. The folders are written and built together once (node_kit.build_bot_folders: one `tsc`
for all, on the kit's installed packages); test_ts_kit.py runs a folder's own `npm ci` for real."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest
from cellarena_cli import cellarena
from node_kit import build_bot_folders, need_node
from test_new_bot import run_readme_line

from cellarena.arena.cli.new_bot import NODE_BUILD, NODE_LANGUAGES, offered

COMBINATIONS = [(game, lang) for lang in NODE_LANGUAGES for game in offered(lang)]


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[tuple[str, str], Path]:
    """Every game's bot in both languages, as `new-bot` wrote them, built."""
    need_node()
    root = tmp_path_factory.mktemp("node_bots")
    made = {}
    for game, lang in COMBINATIONS:
        name = f"my_{lang}_{game}"
        proc = cellarena("new-bot", game, name, "--lang", lang, "--dir", str(root / name), "--json")
        assert proc.returncode == 0, proc.stderr
        made[(game, lang)] = root / name
    build_bot_folders(made.values())
    return made


def test_every_game_has_a_ts_and_a_js_template() -> None:
    from cellarena.server.games import game_names

    assert offered("ts") == offered("js") == game_names()


@pytest.mark.parametrize(("game", "lang"), COMBINATIONS)
def test_the_folder_builds_passes_its_own_test_and_its_readme_runs(
    folders: dict[tuple[str, str], Path], game: str, lang: str
) -> None:
    folder = folders[(game, lang)]
    name = folder.name
    files = {p.relative_to(folder).as_posix() for p in folder.rglob("*") if "node_modules" not in p.parts}
    source = "src/bot.ts" if lang == "ts" else "src/bot.js"
    assert {
        source,
        "bot.toml",
        "package.json",
        "package-lock.json",
        "tsconfig.json",
        f"test_{name}.py",
    } <= files
    assert {"cellarena/index.ts", f"cellarena/games/{game}.ts", "cellarena/README.md"} <= files
    assert "dist/src/bot.js" in files
    readme = (folder / "README.md").read_text()
    commands = re.search(r"```sh\n(.*?)```", readme, re.DOTALL).group(1).splitlines()  # type: ignore[union-attr]
    assert commands[:2] == ["npm ci", "python -m pytest"] and len(commands) == 4
    # `npm ci` was done for all folders at once (the fixture); the rest run as a user runs them. To keep
    # the suite quick, the `cellarena match` line runs for TypeScript only (a JavaScript folder differs
    # in its bot's source alone, which its own test plays), and the tournament line is left to the
    # tournament test of test_ts_kit.py.
    for command in commands[1:3] if lang == "ts" else commands[1:2]:
        done = run_readme_line(command, folder)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        if command == "python -m pytest":
            assert "2 passed" in done.stdout  # a match in each seat


def test_the_written_test_builds_the_bot_first_and_fails_a_bot_that_does_not_compile(
    folders: dict[tuple[str, str], Path],
) -> None:
    """The test plays the bot as its source is now: a type error fails the build, and so the test."""
    folder = folders[("cata", "ts")]
    source = folder / "src" / "bot.ts"
    text = source.read_text()
    source.write_text(text.replace("return options[", "return 42 as unknown as string; options["))
    try:
        done = run_readme_line("python -m pytest", folder)
        assert done.returncode == 1 and "tsc -b` failed" in done.stdout and "error TS" in done.stdout, (
            done.stdout
        )
    finally:
        source.write_text(text)
        subprocess.run([*NODE_BUILD], cwd=folder, capture_output=True, check=True, timeout=300)
