"""`cellarena new-bot GAME NAME --lang ts`: a bot folder on the TypeScript kit for every game, which
builds, passes its own test (a match in each seat against cellarena's random bot), and whose README's
commands run. The folders are written and built together once (node_bot_folders.py: one `tsc` for
all, on the kit's installed packages); test_ts_kit.py runs a folder's own `npm ci` for real, and
test_new_bot_node_js.py checks the JavaScript folders (a file of its own, so that pytest-xdist's two
processes share the work)."""

from __future__ import annotations

from pathlib import Path

import pytest
from node_bot_folders import check_draws, check_folder, written_and_built
from node_kit import built_kit, need_node
from test_new_bot import run_readme_line

from cellarena.arena.cli.new_bot import offered, write_bot


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return written_and_built(tmp_path_factory.mktemp("ts_bots"), "ts")


def test_every_game_has_a_ts_and_a_js_template() -> None:
    from cellarena.server.games import game_names

    assert offered("ts") == offered("js") == game_names()


@pytest.mark.parametrize("game", offered("ts"))
def test_the_folder_builds_passes_its_own_test_and_its_readme_runs(
    folders: dict[str, Path], game: str
) -> None:
    check_folder(folders[game], game, "ts")


def test_the_written_test_builds_the_bot_first_and_fails_a_bot_that_does_not_compile(tmp_path: Path) -> None:
    """The test plays the bot as its source is now: a type error fails the build, and so the test."""
    need_node()
    folder = write_bot("cata", "broken", "ts", tmp_path / "broken").folder
    (folder / "node_modules").symlink_to(built_kit() / "node_modules", target_is_directory=True)
    source = folder / "src" / "bot.ts"
    text = source.read_text()
    assert "const move = options[" in text  # the template's line this test breaks
    source.write_text(text.replace("const move = options[", "const move = 42 as unknown as string; options["))
    done = run_readme_line("python -m pytest", folder)
    assert done.returncode == 1 and "error TS" in done.stdout, done.stdout
    assert "tsc -b` failed" in done.stdout and not (folder / "dist" / "src" / "bot.js").exists()


@pytest.mark.parametrize("game", offered("ts"))
def test_the_ts_templates_draw_through_the_kits_debug(
    folders: dict[str, Path], game: str, tmp_path: Path
) -> None:
    """The kit's `onTick(view, debug)` in each game's TypeScript template (node_bot_folders.check_draws)."""
    check_draws(folders[game], game, "ts", tmp_path)
