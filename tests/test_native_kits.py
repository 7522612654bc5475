"""The C++, Rust and Java kits (`cellarena/sdk/kits/`), through the starters `cellarena new-bot --lang
cpp|rust|java` writes: each starter builds in /tmp as its bot.toml says, the kit's own unit tests pass
with the language's runner (ctest, cargo test, a Java test main), and the bot plays real matches over
TCP against the example bots, keeps playing on a ladder that says "not now", stops on a refusal that
waiting cannot fix, and (Java) connects over TLS.

Each starter is built once per run and shared by the tests (a compile is the expensive part: the Rust
starters share one target folder, so serde is compiled once). Under CI=true a missing toolchain fails.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from cellarena_cli import CLI, ROOT, cellarena
from game_servers import Process, add_ladder_bot, ladder_serve, serve, start, wait_for
from scripted_server import ScriptedServer, match, refuse
from tls_proxy import TLSProxy, certificates

from cellarena.arena.cli.new_bot import COMPILED, GameTemplate, offered
from cellarena.arena.ladder.store import LadderStore
from cellarena.sdk import protocol

LANGS = sorted(COMPILED)
#: What each toolchain needs on this machine, and the Debian packages .ci/run installs for it.
TOOLS = {
    "cpp": (["g++", "cmake", "ctest"], "/usr/include/msgpack.hpp"),
    "rust": (["cargo", "rustc"], "/usr/share/cargo/registry"),
    "java": (["javac", "java", "jar"], "/usr/share/java/msgpack-core.jar"),
}
#: The example bot each game's starter plays against.
OPPONENT = {
    "rezzo": ROOT / "example_bots" / "rezzo" / "random_walker.py",
    "cata": ROOT / "example_bots" / "cata" / "random_legal.py",
    "cloth": ROOT / "example_bots" / "cloth" / "random_placer.py",
    "drop2df": ROOT / "example_bots" / "drop2df" / "passer.py",
    "colorblocks": ROOT / "example_bots" / "colorblocks" / "random_legal.py",
}
#: Each kit's unit-test runner prints this when every test passed.
PASSED = {
    "cpp": r"100% tests passed, 0 tests failed out of 1",
    "rust": r"test result: ok\. [1-9]\d* passed; 0 failed",
    "java": r"(\d+) of \1 checks passed",
}


def need_toolchain(lang: str) -> None:
    """Skip without the language's toolchain, except under CI, where it is a failure."""
    tools, library = TOOLS[lang]
    missing = [t for t in tools if shutil.which(t) is None] + ([] if Path(library).exists() else [library])
    if missing:
        why = f"the {lang} kit needs {', '.join(missing)} (.ci/run installs them from Debian)"
        if os.environ.get("CI") == "true":
            pytest.fail(why + "; CI must have them", pytrace=False)
        pytest.skip(why)


#: The bot names of the starters that are not named `LANG_GAME`: names whose classes share a name
#: with the kit's (Bot, Runner, Cata), which the starters allow by writing the kit's names in full.
CLASHING = {
    ("cpp", "cata"): "bot",
    ("rust", "cata"): "bot",
    ("java", "rezzo"): "runner",
    ("java", "cata"): "cata",
}


class Starters:
    """The starters of this run, written and built on first use, each in a folder `LANG_GAME` (which
    names the bot where cellarena starts it)."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: dict[tuple[str, str], Path] = {}

    def get(self, lang: str, game: str) -> Path:
        need_toolchain(lang)
        if (lang, game) in self.built:
            return self.built[(lang, game)]
        folder = self.root / f"{lang}_{game}"
        name = CLASHING.get((lang, game), folder.name)
        made = cellarena("new-bot", game, name, "--lang", lang, "--dir", str(folder))
        assert made.returncode == 0, made.stderr
        if lang == "rust":  # one target folder for every Rust starter: the crates compile once
            (self.root / "cargo-target").mkdir(exist_ok=True)
            (folder / "target").symlink_to(self.root / "cargo-target")
        setup = tomllib.loads((folder / "bot.toml").read_text())["setup"]
        build = subprocess.run(
            shlex.split(setup), cwd=folder, capture_output=True, text=True, timeout=900, check=False
        )
        assert build.returncode == 0, f"{setup}:\n{build.stdout}\n{build.stderr}"
        self.built[(lang, game)] = folder
        return folder

    def command(self, lang: str, game: str) -> list[str]:
        """The built bot's command line, run in its folder."""
        folder = self.get(lang, game)
        return shlex.split(tomllib.loads((folder / "bot.toml").read_text())["command"])


@pytest.fixture(scope="module")
def starters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Starters]:
    yield Starters(tmp_path_factory.mktemp("kits"))


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
    # The starter's own pytest file: it builds (bot.toml's setup, incremental here) and plays both seats.
    own = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        cwd=folder, capture_output=True, text=True, timeout=600, check=False,
    )  # fmt: skip
    assert own.returncode == 0 and "2 passed" in own.stdout, own.stdout + own.stderr


# Rezzo's starters play the example bots in the tournament below, and the random bot in their own test.
@pytest.mark.parametrize("game", ["cata", "cloth", "drop2df", "colorblocks"])
@pytest.mark.parametrize("lang", LANGS)
def test_each_starter_plays_a_real_match_against_an_example_bot(
    starters: Starters, lang: str, game: str, tmp_path: Path
) -> None:
    """`cellarena match` starts the built bot (it reads its seat token from CELLARENA_TOKEN_FD: a match
    reserves its seats, so a bot without the right token would be refused) and plays it to the end."""
    folder = starters.get(lang, game)
    command = tomllib.loads((folder / "bot.toml").read_text())["command"]
    bot = f"{folder.name}={command}"
    other = f"example=python {OPPONENT[game]}"
    proc = subprocess.run(
        [*CLI, "match", game, "--bot", bot, "--bot", other, "--fast", *GameTemplate.of(game).short,
         "--log-dir", str(tmp_path), "--json"],
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


@pytest.mark.parametrize("lang", LANGS)
def test_the_seat_token_handover_is_what_seats_a_kit_bot(
    starters: Starters, lang: str, tmp_path: Path
) -> None:
    """The same bot with CELLARENA_TOKEN_FD taken from its environment has no token, and the match,
    which reserves its seats, refuses it: the handover in the matches above is real."""
    folder = starters.get(lang, "rezzo")
    command = tomllib.loads((folder / "bot.toml").read_text())["command"]
    proc = subprocess.run(
        [*CLI, "match", "rezzo", "--bot", f"kit=env -u CELLARENA_TOKEN_FD {command}",
         "--bot", f"example=python {OPPONENT['rezzo']}", "--fast", "--max-ticks", "20",
         "--log-dir", str(tmp_path), "--json"],
        cwd=folder, capture_output=True, text=True, timeout=300, check=False,
    )  # fmt: skip
    result = json.loads(proc.stdout)
    said = (tmp_path / "kit.log").read_text()
    assert result["forfeits"] == ["kit"] and result["exit_codes"]["kit"] == 1, said
    assert "kit: error: the server sent error bad_hello" in said and "check the bot's token" in said


def test_a_tournament_of_one_starter_per_language_and_the_python_example_bots(
    starters: Starters, tmp_path: Path
) -> None:
    """The issue's "done when": the starters enter by --bots-dir beside the Python example bots, their
    bot.toml's setup builds them first (incrementally), and the tournament ends with standings."""
    folders = [starters.get(lang, "rezzo") for lang in LANGS]
    dirs = [arg for f in folders for arg in ("--bots-dir", str(f))]
    proc = cellarena(
        "tournament", "rezzo", "--bots-dir", str(ROOT / "example_bots"), "--exclude", "js_random", *dirs,
        "--fast", "--max-ticks", "30", "--out", str(tmp_path / "runs"), "--json",
        timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    standings = json.loads(proc.stdout)["standings"]
    assert {s["bot"] for s in standings} == {
        *(f.name for f in folders),
        "builder",
        "raider",
        "random_walker",
        "trained",
    }
    assert all(s["crashes"] == 0 for s in standings), standings
    # Every starter played every example bot, in both seats, and each of its answers could be read.
    played = {s["bot"]: s["matches"] for s in standings}
    assert all(played[f.name] == 2 * (len(standings) - 1) for f in folders), standings


def test_a_starter_that_does_not_build_stops_the_tournament_naming_its_folder(
    starters: Starters, tmp_path: Path
) -> None:
    need_toolchain("java")
    folder = tmp_path / "broken"
    assert cellarena("new-bot", "rezzo", "broken", "--lang", "java", "--dir", str(folder)).returncode == 0
    bot = folder / "src" / "Broken.java"
    bot.write_text(bot.read_text().replace("return moves;", "return moves"))
    proc = cellarena(
        "tournament", "rezzo", "--bots-dir", str(folder), "--bot", f"walker=python {OPPONENT['rezzo']}",
        "--out", str(tmp_path / "runs"),
    )  # fmt: skip
    assert proc.returncode == 2
    said = " ".join(proc.stderr.split())
    assert f"{folder / 'bot.toml'}: setup 'sh build.sh' failed" in said and "Broken.java" in said, said


# ------------------------------------------------------------------ many matches, ladders, TLS
def kit_bot(
    starters: Starters, lang: str, folder: Path, name: str, port: int, *flags: str, token: str | None = None
) -> Process:
    """A built Rezzo starter as its author starts it; a token goes through the environment."""
    env = {"CELLARENA_TOKEN": token} if token is not None else None
    command = [*starters.command(lang, "rezzo"), "--port", str(port), "--name", name, *flags]
    return start(command, folder, name, cwd=starters.get(lang, "rezzo"), env=env)


async def exited(proc: Process, timeout: float) -> int:
    """Wait without blocking trio (a server in this process serves the bot meanwhile)."""
    with trio.fail_after(timeout):
        while proc.proc.poll() is None:
            await trio.sleep(0.05)
    return proc.proc.returncode


@pytest.mark.parametrize("lang", LANGS)
async def test_not_now_refusals_are_retried_with_back_off(
    starters: Starters, lang: str, tmp_path: Path
) -> None:
    starters.get(lang, "rezzo")  # built before the server's clock starts
    server = ScriptedServer(
        [
            refuse(protocol.BUSY, "kit already has a connection in the queue"),
            refuse(protocol.LOCKED_OUT, "too many wrong tokens from 127.0.0.1; refused for another 2 s"),
            match(3),
            refuse(protocol.QUEUE_FULL, "the queue holds 1000 bots; come back in a few seconds"),
            match(3),
        ]
    )
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        bot = kit_bot(starters, lang, tmp_path, "kit", port, "--matches", "2")
        code = await exited(bot, 90)
        nursery.cancel_scope.cancel()
    err = bot.stderr()
    assert code == 0, err
    assert server.failures == [] and len(server.seen) == 5
    assert all(
        hello is not None and hello["name"] == "kit" and hello["game"] == "rezzo" for _, hello in server.seen
    )
    times = [t for t, _ in server.seen]
    assert times[1] - times[0] >= 0.5  # the first failure in a row waits 0.5-1 s
    assert times[2] - times[1] >= 2.0  # the lock-out said 2 s: no sooner
    assert times[4] - times[3] >= 0.5  # a match was played: the count started again
    assert "the server sent error busy" in err and "trying again in" in err
    assert err.count("end after 3 ticks") == 2 and "match 1 of 2 played" in err


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize(
    ("code", "fix"), [(protocol.BAD_HELLO, "check the bot's token"), (protocol.INTERNAL, "")]
)
async def test_an_error_that_waiting_cannot_fix_stops_a_ladder_bot(
    starters: Starters, lang: str, code: str, fix: str, tmp_path: Path
) -> None:
    starters.get(lang, "rezzo")
    server = ScriptedServer([refuse(code, "as the test says")])
    async with trio.open_nursery() as nursery:
        port = await server.start(nursery)
        bot = kit_bot(starters, lang, tmp_path, "kit", port, "--ladder", token="cla_wrong_secret")
        status = await exited(bot, 60)
        nursery.cancel_scope.cancel()
    err = bot.stderr()
    assert status == 1, err
    assert (
        f"the server sent error {code}: as the test says" in err and fix in err and "not trying again" in err
    )
    assert len(server.seen) == 1 and server.seen[0][1] is not None
    assert server.seen[0][1]["token"] == "cla_wrong_secret" and "cla_wrong_secret" not in err


@pytest.mark.parametrize("lang", LANGS)
def test_matches_2_against_cellarena_serve(starters: Starters, lang: str, tmp_path: Path) -> None:
    server = serve(tmp_path)
    try:
        bots = [
            kit_bot(starters, lang, tmp_path, name, server.port, "--matches", "2") for name in ("k1", "k2")
        ]
        codes = [b.wait(120) for b in bots]
    finally:
        server.stop()
    assert codes == [0, 0], [b.stderr() for b in bots]
    for b in bots:
        assert (
            b.stderr().count("end after ") == 2 and b.stderr().count("played; connecting for the next") == 1
        )


def test_one_bot_of_each_kit_keeps_playing_on_a_real_ladder(starters: Starters, tmp_path: Path) -> None:
    """`--ladder --token-file` against `cellarena ladder serve`: one match per connection, and the bot
    queues again after each `end`; the token stays out of every log."""
    tokens = {lang: add_ladder_bot(tmp_path, f"{lang}_kit") for lang in LANGS}
    for lang in LANGS:
        starters.get(lang, "rezzo")
    ladder = ladder_serve(tmp_path)
    bots = {
        lang: kit_bot(starters, lang, tmp_path / "bots", f"{lang}_kit", ladder.port, "--ladder",
                      "--token-file", str(tokens[lang]))
        for lang in LANGS
    }  # fmt: skip
    try:
        wait_for(
            lambda: all(b.stderr().count("end after ") >= 2 for b in bots.values()),
            "two ladder matches of every kit's bot",
            240,
        )
    finally:
        for bot in bots.values():
            bot.stop()  # SIGTERM ends a kit bot mid-wait (it has no handler: the default kills it)
        ladder.stop()
    for lang, bot in bots.items():
        token = tokens[lang].read_text().strip()
        assert "error" not in bot.stderr() and "played; connecting for the next" in bot.stderr(), bot.stderr()
        assert token not in bot.stderr() and token not in ladder.stderr()
    with LadderStore(tmp_path / "ladder.sqlite") as store:
        finished = [m for m in store.matches("rezzo") if m.status == "finished"]
    assert {name for m in finished for name in m.bots} == {f"{lang}_kit" for lang in LANGS}


@pytest.mark.parametrize("lang", ["cpp", "rust"])
def test_kits_without_tls_say_to_use_a_local_tls_proxy(starters: Starters, lang: str) -> None:
    proc = subprocess.run(
        [*starters.command(lang, "rezzo"), "--tls"],
        cwd=starters.get(lang, "rezzo"), capture_output=True, text=True, timeout=30, check=False,
    )  # fmt: skip
    assert proc.returncode == 64 and "local TLS proxy" in proc.stderr and "README" in proc.stderr


async def test_the_java_kit_plays_over_tls_and_checks_the_certificate(
    starters: Starters, tmp_path: Path
) -> None:
    starters.get("java", "rezzo")
    certs = certificates(tmp_path, "127.0.0.1")
    server = serve(tmp_path)
    try:
        proxy = TLSProxy(certs.server, server.port)
        async with trio.open_nursery() as nursery:
            port = await proxy.start(nursery)
            flags = ["--host", "127.0.0.1", "--tls-ca", str(certs.ca_file)]
            bots = [kit_bot(starters, "java", tmp_path, name, port, *flags) for name in ("j1", "j2")]
            codes = [await exited(b, 60) for b in bots]
            # A CA that signed nothing the proxy shows: the handshake is refused, and the bot says why.
            wrong = kit_bot(
                starters, "java", tmp_path, "j3", port, "--ladder", "--tls-ca", str(certs.other_ca_file)
            )
            wrong_code = await exited(wrong, 60)
            nursery.cancel_scope.cancel()
    finally:
        server.stop()
    assert codes == [0, 0], [b.stderr() for b in bots]
    assert proxy.handshakes == 2 and all(b.stderr().count("end after ") == 1 for b in bots)
    err = wrong.stderr()
    assert wrong_code == 1 and f"TLS handshake with 127.0.0.1:{port} failed" in err and "--tls-ca" in err, err
    assert "trying again" not in err


def test_a_rust_bot_cannot_take_the_name_of_a_crate_it_needs(tmp_path: Path) -> None:
    folder = tmp_path / "x"
    proc = cellarena("new-bot", "rezzo", "cellarena", "--lang", "rust", "--dir", str(folder), "--json")
    assert proc.returncode == 2
    error = json.loads(proc.stdout)
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
