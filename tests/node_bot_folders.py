"""`new-bot --lang ts|js` folders for tests: every game's, written and built together for one language
(one `tsc -b` on the kit's installed packages: node_kit.build_bot_folders), and the checks each folder
passes. test_new_bot_node.py (TypeScript) and test_new_bot_node_js.py (JavaScript) use them: two files,
so that pytest-xdist's two processes each take one."""

from __future__ import annotations

import re
from pathlib import Path

from node_kit import build_bot_folders, need_node
from test_new_bot import run_readme_line

from cellarena.arena.cli.new_bot import GameTemplate, offered, write_bot


def written_and_built(root: Path, lang: str) -> dict[str, Path]:
    """Every game's bot in ``lang``, as `new-bot` writes it, built; by game."""
    need_node()
    # Written in this process: test_ts_kit.py runs the command itself for these languages.
    made = {
        game: write_bot(game, f"my_{lang}_{game}", lang, root / f"my_{lang}_{game}").folder
        for game in offered(lang)
    }
    build_bot_folders(made.values())
    return made


def check_folder(folder: Path, game: str, lang: str) -> None:
    """The folder holds what it should, and its README's commands run: its own test (a match in each
    seat) always, the `cellarena match` line for the TypeScript Rezzo bot only (it is the Python bots'
    line with another command, and each folder's own test plays its bot already); `npm ci` was done
    for all folders at once, and the tournament line is left to test_ts_kit.py's tournament."""
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
    for command in commands[1:3] if (game, lang) == ("rezzo", "ts") else commands[1:2]:
        done = run_readme_line(command, folder)
        assert done.returncode == 0, f"{command}\n{done.stdout}\n{done.stderr}"
        if command == "python -m pytest":
            assert "2 passed" in done.stdout  # a match in each seat


def check_draws(folder: Path, game: str, lang: str, tmp_path: Path) -> None:
    """The kit's `onTick(view, debug)` (sdk/kits/typescript/src/debug.ts): a game's JavaScript or
    TypeScript template, playing itself, sends a text line with every answer, and mark the cells
    they act on where the game has them (Rezzo: the enemy geysers they see, placed on the board by the
    server; cloth: each unit; colorblocks: each placement), as the replay keeps them. A short match
    (the game's `short` options, as the bots' own tests play) shows every answer as well as a full one."""
    import json

    from cellarena_cli import run_here

    from cellarena.server.replay import read_replay

    replay = tmp_path / "m.replay"
    bots = [a for seat in ("a", "b") for a in ("--bot", f"{seat}=node {folder / 'dist/src/bot.js'}")]
    extra = ["--map", "duel", "--max-ticks", "60"] if game == "rezzo" else list(GameTemplate.of(game).short)
    # In this process (the bots are node processes still): the `cellarena match` line of check_folder
    # runs the command as a process.
    proc = run_here(
        "match", game, *bots, *extra, "--fast", "--replay", str(replay),
        "--log-dir", str(tmp_path / "logs"), "--json",
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["invalid"] == {"a": 0, "b": 0}, lang
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
