"""The C++, Rust and Java kits (`cellarena/sdk/kits/`), through the starters `cellarena new-bot GAME
NAME --lang cpp|rust|java` writes for every game: each builds as its bot.toml says, the kit's own unit
tests pass with the language's runner (ctest, cargo test, a Java test main), each game's starter plays
a real match over TCP against an example bot, and a tournament brings a starter of every language
together. test_native_kits_ladder.py has the ladder's side: many matches, refusals, redirects, TLS,
--isolate.

The starters are built once and shared (tests/native_starters.py). Under CI=true a missing toolchain
fails.
"""

from __future__ import annotations

import json
import re
import shlex
import subprocess
import sys
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
from cellarena_cli import CLI, ROOT, cellarena, invoke
from native_starters import LANGS, Starters, need_toolchain, starters_of
from node_kit import build_bot_folders, need_node

from cellarena.arena.cli.new_bot import GameTemplate, offered, write_bot
from cellarena.sdk import protocol
from cellarena.server.replay import read_replay

#: The example bot each game's starter plays against.
OPPONENT = {
    "rezzo": ROOT / "example_bots" / "rezzo" / "random_walker.py",
    "cata": ROOT / "example_bots" / "cata" / "random_legal.py",
    "cloth": ROOT / "example_bots" / "cloth" / "random_placer.py",
    "drop2df": ROOT / "example_bots" / "drop2df" / "passer.py",
    "colorblocks": ROOT / "example_bots" / "colorblocks" / "random_legal.py",
}
#: A Rezzo map of six seats (24x24, one agent each): six bots in one match, where the tests below
#: would otherwise start a match process per pair (a tournament of six on the duel map plays thirty).
SIX_SEATS = ROOT / "tests" / "fixtures" / "rezzo_six_seats.txt"
#: Each kit's unit-test runner prints this when every test passed.
PASSED = {
    "cpp": r"100% tests passed, 0 tests failed out of 1",
    "rust": r"test result: ok\. [1-9]\d* passed; 0 failed",
    "java": r"(\d+) of \1 checks passed",
}


@pytest.fixture(scope="module")
def starters(request: pytest.FixtureRequest) -> Iterator[Starters]:
    yield starters_of(request.config)


def readme_commands(folder: Path) -> list[str]:
    block = re.search(r"```sh\n(.*?)```", (folder / "README.md").read_text(), re.DOTALL)
    assert block is not None
    return [line for line in block.group(1).splitlines() if line.strip()]


# ------------------------------------------------------------------ the starters and their own tests
@pytest.mark.parametrize("lang", LANGS)
def test_the_kits_own_tests_and_the_starters_test_pass(starters: Starters, lang: str) -> None:
    folder = starters.get(lang, "rezzo")
    commands = readme_commands(folder)
    # The README's order: build, the kit's tests, the pytest match test, a match, a tournament.
    assert commands[2] == "python -m pytest" and commands[3].startswith("cellarena match rezzo")
    runner = subprocess.run(
        shlex.split(commands[1]), cwd=folder, capture_output=True, text=True, timeout=300, check=False
    )
    out = runner.stdout + runner.stderr
    assert runner.returncode == 0, out
    assert re.search(PASSED[lang], out), out
    # The starter's own pytest file: it builds (bot.toml's setup) and plays both seats. Nothing changed
    # since the build, so the setup compiles nothing: the bot's binary or jar is the one that was there
    # (not checked for Rust: its starters share one cargo target folder, where another starter's build
    # in between has cargo link this one again).
    command = starters.command(lang, "rezzo")
    built = folder / (command[-1] if lang == "java" else command[0])
    before = built.stat().st_mtime_ns
    own = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=folder, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert own.returncode == 0 and "2 passed" in own.stdout, own.stdout + own.stderr
    assert lang == "rust" or built.stat().st_mtime_ns == before, f"{built} was built again, unchanged"


#: The other games' starters each play one real match in one language, the languages in turn, so every
#: game plays in a compiled kit and every kit plays more than Rezzo. All twelve would build and run
#: twelve starters, about 80 s of CPU, a tenth of what the whole suite may spend on two cores; what
#: differs by game is the starter's template and the kit's view of the game, and the kits' own tests
#: read every typed view (Rezzo's, C.A.T.A.'s) and the plain messages the other games' bots get. The
#: turn starts at Java, so the fourth game is Java's too: javac's build of a starter takes about half
#: the CPU of a C++ one's (a fresh clone builds every starter once).
MATCHED = [(LANGS[(i + 1) % len(LANGS)], g) for i, g in enumerate(g for g in offered("cpp") if g != "rezzo")]


# Rezzo's starters play the example bots in the tournament below, and the random bot in their own test.
@pytest.mark.parametrize(("lang", "game"), MATCHED)
def test_each_starter_plays_a_real_match_against_an_example_bot(
    starters: Starters, lang: str, game: str, tmp_path: Path
) -> None:
    """`cellarena match` starts the built bot (it plays on the connection it is handed, which owns its
    seat: a match reserves its seats, so a bot that connected without the right token would be
    refused) and plays it to the end."""
    folder = starters.get(lang, game)
    command = tomllib.loads((folder / "bot.toml").read_text())["command"]
    bot = f"{folder.name}={command}"
    other = f"example=python {OPPONENT[game]}"
    proc = subprocess.run(
        [*CLI, "match", game, "--bot", bot, "--bot", other, "--fast", *GameTemplate.of(game).short,
         "--log-dir", str(tmp_path), "--replay", str(tmp_path / "m.replay"), "--json"],
        cwd=folder, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    log = tmp_path / f"{folder.name}.log"
    said = log.read_text() if log.is_file() else "(no log)"
    assert proc.returncode == 0, f"{proc.stdout}\n{proc.stderr}\n{said}"
    result = json.loads(proc.stdout)
    assert result["forfeits"] == [] and result["exit_codes"][folder.name] == 0, said
    assert result["ticks"] > 0 and set(result["ranks"]) == {folder.name, "example"}
    assert result["invalid"][folder.name] == 0, said
    assert f"{folder.name}: error" not in said
    # The starter draws through its kit's debug API: a line of text each turn, and cloth's marks on
    # the cells it placed on (test_web_native_debug.py shows Rezzo's in the player); none dropped.
    rep = read_replay(tmp_path / "m.replay")
    seat = rep.names.index(folder.name)
    drawn = [t.debug[seat] for t in rep.ticks if seat in t.debug]
    assert drawn and all(d.get("text") for d in drawn), drawn[:3]
    if game == "cloth":
        marks = [m for d in drawn for m in d.get("marks", [])]
        assert any(m["colour"] == "#42d4f4" and m["label"] == "unit 1" for m in marks), drawn[:3]
    assert "debug drawing dropped" not in said and "debug_dropped" not in json.dumps(rep.result)


def test_without_the_handed_connection_a_kit_bot_takes_its_seat_by_the_token_pipe(
    starters: Starters, tmp_path: Path
) -> None:
    """Without CELLARENA_SOCKET_FD the bot connects by address with the seat token from its pipe
    (CELLARENA_TOKEN_FD, for launchers that hand over no connection) and plays; without the pipe too it
    has no token, and the match, which reserves its seats, refuses it: each handover is real. Both
    bots of every kit sit in one match, on a map of six seats (one match process for the six)."""
    bots, names = [], []
    for lang in LANGS:
        folder, command = starters.get(lang, "rezzo"), starters.command(lang, "rezzo")
        at = -1 if lang == "java" else 0  # java -jar build/x.jar; build/x; target/release/x
        command[at] = str(folder / command[at])
        for name, unset in (
            (f"{lang}_pipe", "-u CELLARENA_SOCKET_FD"),
            (f"{lang}_none", "-u CELLARENA_SOCKET_FD -u CELLARENA_TOKEN_FD"),
        ):
            bots += ["--bot", f"{name}=env {unset} {shlex.join(command)}"]
            names.append(name)
    proc = subprocess.run(
        [*CLI, "match", "rezzo", *bots, "--map", str(SIX_SEATS), "--fast", "--max-ticks", "20",
         "--log-dir", str(tmp_path), "--json"],
        cwd=tmp_path, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    result = json.loads(proc.stdout)
    said = {name: (tmp_path / f"{name}.log").read_text() for name in names}
    assert sorted(result["forfeits"]) == sorted(n for n in names if n.endswith("_none")), (proc.stderr, said)
    for lang in LANGS:
        pipe, none = f"{lang}_pipe", f"{lang}_none"
        assert result["exit_codes"][pipe] == 0 and result["invalid"][pipe] == 0, said[pipe]
        assert result["exit_codes"][none] == 1, said[none]
        assert f"{none}: error: the server sent error bad_hello" in said[none], said[none]
        assert "check the bot's token" in said[none], said[none]


def test_a_tournament_of_one_starter_per_language_and_the_python_example_bots(
    starters: Starters, tmp_path: Path
) -> None:
    """The issue's "done when": a starter of every language (C++, Rust, Java, TypeScript) enters by
    --bots-dir beside a Python example bot (found by --bots-dir too, and once more by --bot), their
    bot.toml's setup builds them first (incrementally), and the tournament, over real TCP, ends with
    standings. All six sit in every match, on a map of six seats, so every starter meets every other
    bot in each match and sits in every seat: six matches, where a round robin of pairs on the duel map
    played thirty (each starter against the random bot on the duel map, in both seats, is the
    starters' own test above). The other example bots' round robins are test_cluster.py's."""
    need_node()
    folders = [starters.get(lang, "rezzo") for lang in LANGS]
    ts = write_bot("rezzo", "ts_rezzo", "ts", tmp_path / "ts_rezzo").folder
    build_bot_folders([ts])  # its bot.toml's setup (npm ci) is test_ts_kit.py's
    folders.append(ts)
    dirs = [arg for f in folders for arg in ("--bots-dir", str(f))]
    proc = cellarena(
        "tournament", "rezzo", "--bots-dir", str(ROOT / "example_bots"), *dirs,
        *(arg for bot in ("js_random", "builder", "raider", "trained") for arg in ("--exclude", bot)),
        "--bot", f"walker=python {OPPONENT['rezzo']}", "--maps", str(SIX_SEATS),
        "--fast", "--max-ticks", "30", "--out", str(tmp_path / "runs"), "--json",
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    standings = json.loads(proc.stdout)["standings"]
    assert {s["bot"] for s in standings} == {*(f.name for f in folders), "random_walker", "walker"}
    assert all(s["crashes"] == 0 for s in standings), standings
    # Every bot played all six matches (one group, six seat orders), and each of its answers was read.
    assert all(s["matches"] == len(standings) == 6 for s in standings), standings
    assert all(s["invalid_rate"] == 0 for s in standings if s["bot"] != "walker"), standings


def test_a_starter_that_does_not_build_stops_the_tournament_naming_its_folder(
    starters: Starters, tmp_path: Path
) -> None:
    need_toolchain("java")
    folder = write_bot("rezzo", "broken", "java", tmp_path / "broken").folder  # in-process: no imports to pay
    bot = folder / "src" / "Broken.java"
    bot.write_text(bot.read_text().replace("return moves;", "return moves"))
    proc = cellarena(
        "tournament", "rezzo", "--bots-dir", str(folder), "--bot", f"walker=python {OPPONENT['rezzo']}",
        "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    assert proc.returncode == 2
    said = " ".join(proc.stderr.split())
    assert f"{folder / 'bot.toml'}: setup 'sh build.sh' failed" in said and "Broken.java" in said, said


def test_a_rust_bot_cannot_take_the_name_of_a_crate_it_needs(tmp_path: Path) -> None:
    folder = tmp_path / "x"
    code, out = invoke("new-bot", "rezzo", "cellarena", "--lang", "rust", "--dir", str(folder), "--json")
    assert code == 2
    error = json.loads(out)
    assert error["option"] == "NAME" and "clash with the crate cellarena" in error["error"]
    assert not folder.exists()


def test_new_bot_offers_every_game_in_the_compiled_languages() -> None:
    from cellarena.server.games import game_names

    assert offered("cpp") == offered("rust") == offered("java") == game_names()


KIT_SOURCES = ROOT / "sdk" / "kits"
#: Where each kit lists the refusals that mean "not now".
RETRY_LISTS = {
    "cpp": ("cpp/include/cellarena/bot.hpp", r"std::vector<std::string> codes\{([^}]*)\}"),
    "rust": ("rust/src/bot.rs", r"RETRY_LATER: \[&str; \d+\] = \[([^\]]*)\]"),
    "java": ("java/src/cellarena/Runner.java", r"RETRY_LATER = Arrays\.asList\(([^)]*)\)"),
}


@pytest.mark.parametrize("lang", LANGS)
def test_every_kit_comes_back_after_exactly_the_sdks_retry_later_codes(lang: str) -> None:
    """One registry of refusal codes (sdk/protocol/codes.py): a code added there must reach every kit."""
    path, pattern = RETRY_LISTS[lang]
    found = re.search(pattern, (KIT_SOURCES / path).read_text())
    assert found is not None, f"{path}: no RETRY_LATER list matching {pattern}"
    assert tuple(re.findall(r'"(\w+)"', found.group(1))) == protocol.RETRY_LATER


def test_the_rust_starter_builds_from_its_committed_cargo_lock_unchanged(starters: Starters) -> None:
    """The lock new-bot writes (the kit's, pinning Debian 12's crates, with the bot's entry in cargo's
    order) is the one cargo builds from: the build leaves it as it was. The Rezzo starter, which the
    kit's own tests build anyway: every game's lock is the kit's with the bot's entry."""
    folder = starters.get("rust", "rezzo")
    with tempfile.TemporaryDirectory() as fresh:
        written = write_bot("rezzo", folder.name, "rust", Path(fresh) / "bot").folder / "Cargo.lock"
        assert (folder / "Cargo.lock").read_text() == written.read_text()
    lock = (folder / "Cargo.lock").read_text()
    assert 'name = "serde"\nversion = "1.0.152"' in lock and 'name = "rmp-serde"\nversion = "1.1.1"' in lock
