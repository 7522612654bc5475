"""`cellarena new-bot GAME NAME --lang ts`: a bot folder on the TypeScript kit for every game, which
builds, passes its own test (a match in each seat against cellarena's random bot), and whose README's
commands run. The folders are written and built together once (node_bot_folders.py: one `tsc` for
all, on the kit's installed packages); test_ts_kit.py runs a folder's own `npm ci` for real, and
test_new_bot_node_js.py checks the JavaScript folders (a file of its own, so that pytest-xdist's two
processes share the work)."""

from __future__ import annotations

from pathlib import Path

import pytest
from node_bot_folders import check_folder, written_and_built
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
def test_the_js_and_ts_templates_draw_through_the_kits_debug(
    folders: dict[tuple[str, str], Path], game: str, tmp_path: Path
) -> None:
    """The kit's `onTick(view, debug)` (sdk/kits/typescript/src/debug.ts): each game's JavaScript and
    TypeScript templates, playing each other, send a text line with every answer, and mark the cells
    they act on where the game has them (Rezzo: the enemy geysers they see, placed on the board by the
    server; cloth: each unit; colorblocks: each placement), as the replay keeps them."""
    import json

    from cellarena_cli import cellarena

    from cellarena.server.replay import read_replay

    replay = tmp_path / "m.replay"
    bots = [
        a
        for lang in ("js", "ts")
        for a in ("--bot", f"{lang}=node {folders[(game, lang)] / 'dist/src/bot.js'}")
    ]
    extra = ["--map", "duel", "--max-ticks", "60"] if game == "rezzo" else []
    proc = cellarena(
        "match", game, *bots, *extra, "--fast", "--replay", str(replay),
        "--log-dir", str(tmp_path / "logs"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["invalid"] == {"js": 0, "ts": 0}
    rep = read_replay(replay)
    for seat in (0, 1):
        drawn = [(t, t.debug.get(seat)) for t in rep.ticks if seat in t.moves]
        assert drawn and all(d is not None and d["text"] for _, d in drawn), drawn[:2]
        said = {d["text"][0].split(":")[0].split()[0] for _, d in drawn if d}
        assert said <= {"tick", "turn", "round"}, said
        marks = [(t, m) for t, d in drawn if d for m in d.get("marks", [])]
        if game == "rezzo":
            assert all(m["colour"] == "#ffe119" and m["label"] == "target" for _, m in marks)
        elif game == "cloth":
            assert marks and all(
                [m["cell"] for m in d.get("marks", [])] == t.moves[seat] for t, d in drawn if d
            )
        elif game == "colorblocks":
            placed = [[a[1], a[2]] for t, _ in drawn for a in t.moves[seat] if a[0] == "place"]
            assert [m["cell"] for _, m in marks] == placed
        else:
            assert marks == []
    if game == "rezzo":
        assert any(m for t in rep.ticks for d in t.debug.values() for m in d.get("marks", []))
