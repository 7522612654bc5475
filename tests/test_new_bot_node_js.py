"""`cellarena new-bot GAME NAME --lang js`: a JavaScript bot folder on the TypeScript kit for every game,
which builds (type-checked as JavaScript), passes its own test and whose README's commands run. The
TypeScript folders are test_new_bot_node.py's (node_bot_folders.py has what both check)."""

from __future__ import annotations

from pathlib import Path

import pytest
from node_bot_folders import check_draws, check_folder, written_and_built

from cellarena.arena.cli.new_bot import offered


@pytest.fixture(scope="module")
def folders(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    return written_and_built(tmp_path_factory.mktemp("js_bots"), "js")


@pytest.mark.parametrize("game", offered("js"))
def test_the_js_folder_builds_passes_its_own_test_and_its_readme_runs(
    folders: dict[str, Path], game: str
) -> None:
    check_folder(folders[game], game, "js")


@pytest.mark.parametrize("game", offered("js"))
def test_the_js_templates_draw_through_the_kits_debug(
    folders: dict[str, Path], game: str, tmp_path: Path
) -> None:
    """The kit's `onTick(view, debug)` in each game's JavaScript template (node_bot_folders.check_draws)."""
    check_draws(folders[game], game, "js", tmp_path)
