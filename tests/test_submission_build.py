"""Building a submitted bot, confined and offline (arena/ladder/submissions/build.py, server/bots/sandbox.py):
a Python bot and a C++ one build; a build that forks without end, writes until its disk is full,
loops forever or reaches for the network is stopped, and says why; nothing it started is left.

Each build is a bubblewrap process of a moment (the looping one waits out a 2 s limit); the folders
are written once per module. Under CI=true a missing bubblewrap or g++ is a failure.
"""

from __future__ import annotations

import os
import shutil
import textwrap
from pathlib import Path

import pytest
import trio
from game_servers import processes_in

from cellarena.arena.cli.new_bot import write_bot
from cellarena.arena.ladder.submissions.build import BuildLimits, BuildResult, build
from cellarena.server.bots.program import BotProgram, ProgramError

#: Small limits, so that each hostile build is stopped within moments.
LIMITS = BuildLimits(seconds=2.0, processes=32, file_mb=8, disk_mb=24, tmp_mb=4)
HOSTILE = {
    "fork_bomb": "sh -c 'f() { f & f & wait; }; f'",
    "big_file": "sh -c 'cat /dev/zero > big'",
    "many_files": "sh -c 'i=0; while true; do i=$((i+1)); head -c 4000000 /dev/zero > f$i || exit 1; done'",
    "full_tmp": "sh -c 'cat /dev/zero > /tmp/big'",
    "loop": "sh -c 'while true; do :; done'",
    "network": "python3 -c \"import urllib.request; urllib.request.urlopen('http://deb.debian.org/')\"",
    "peek": "cat {secret}",
}


def _need(tool: str) -> None:
    if shutil.which(tool) is None:
        why = f"{tool} is not installed (.ci/run installs it)"
        if os.environ.get("CI") == "true":
            pytest.fail(why + "; CI must have it", pytrace=False)
        pytest.skip(why)


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    _need("bwrap")
    base = tmp_path_factory.mktemp("builds")
    write_bot("rezzo", "pybot", "python", base / "pybot")
    (base / "secret").mkdir()
    (base / "secret" / "db").write_text("the ladder's own")
    for name, setup in HOSTILE.items():
        folder = base / name
        folder.mkdir()
        (folder / "bot.py").write_text('if __name__ == "__main__":\n    pass\n')
        line = setup.replace("{secret}", str(base / "secret" / "db")).replace('"', '\\"')
        (folder / "bot.toml").write_text(f'command = "python bot.py"\nsetup = "{line}"\n')
    return base


def _build(folder: Path, **kw: object) -> BuildResult:
    return trio.run(lambda: build(folder, LIMITS, **kw))  # type: ignore[arg-type]


def test_a_python_bot_builds_and_an_import_the_host_does_not_offer_is_named(root: Path) -> None:
    built = _build(root / "pybot")
    assert built.ok and built.reason is None, built.log
    assert built.program is not None and built.program.language == "python"
    assert built.program.command == "python pybot.py"
    other = root / "pybot_pandas"
    shutil.copytree(root / "pybot", other)
    (other / "helper.py").write_text("import json\nimport pandas\n")
    failed = _build(other)
    assert not failed.ok
    assert failed.reason == (
        "helper.py:2: imports pandas, which this ladder does not offer "
        "(offered beyond the standard library: cellarena, msgpack, numpy)"
    )


def test_a_cpp_bot_builds_offline_with_the_hosts_toolchain(root: Path) -> None:
    _need("g++")
    folder = root / "cppbot"
    folder.mkdir()
    (folder / "bot.cpp").write_text('#include <cstdio>\nint main() { std::puts("hello"); }\n')
    (folder / "bot.toml").write_text(
        'command = "build/cppbot"\nsetup = "sh -c \'mkdir -p build && g++ -O1 -o build/cppbot bot.cpp\'"\n'
    )
    built = _build(folder)
    assert built.ok, f"{built.reason}\n{built.log}"
    assert built.program is not None and built.program.language == "other"
    assert (folder / "build" / "cppbot").is_file()
    # A build that does not make what bot.toml's command runs is a failed one.
    (folder / "bot.toml").write_text('command = "build/other"\nsetup = "true"\n')
    assert _build(folder).reason == (
        "the build succeeded but did not make build/other, which bot.toml's command needs"
    )


@pytest.mark.parametrize(
    ("name", "reason"),
    [
        ("fork_bomb", "the build failed: process limit exceeded (32 processes)"),
        ("big_file", "the build failed: file size limit exceeded (8 MiB per file)"),
        ("many_files", "the build failed: disk limit exceeded (24 MiB in the build's folder)"),
        ("full_tmp", "the build failed: disk limit exceeded (its /tmp holds 4 MiB)"),
        ("loop", "the build failed: time limit exceeded (2 s of wall time)"),
        (
            "network",
            "the build failed: it tried to reach the network: builds run offline "
            "(Debian's toolchains and crates only)",
        ),
    ],
)
def test_a_hostile_build_is_stopped_and_says_why(root: Path, name: str, reason: str) -> None:
    folder = root / name
    result = _build(folder)
    assert not result.ok
    assert result.reason == reason, result.log[-2000:]
    assert processes_in(folder) == []
    if name == "loop":
        assert 2.0 <= result.seconds < 10.0


def test_a_build_sees_nothing_of_the_folders_the_host_hides(root: Path) -> None:
    result = _build(root / "peek", hidden=(root / "secret",))
    assert not result.ok and "No such file or directory" in result.log
    assert "the ladder's own" not in result.log


def test_a_folder_that_is_no_bot_program_is_a_failed_build_naming_the_file(root: Path) -> None:
    folder = root / "bad_toml"
    folder.mkdir()
    (folder / "bot.toml").write_text('command = "python bot.py"\nbuild = "make"\n')
    result = _build(folder)
    assert not result.ok and result.program is None
    assert (
        result.reason == f"{folder / 'bot.toml'}: unknown key(s) build; known: command, creates, name, setup"
    )
    (folder / "bot.toml").unlink()
    with pytest.raises(ProgramError, match=r"exactly one \.py file with an `if __name__"):
        BotProgram.from_folder(folder)
    (folder / "a.py").write_text(textwrap.dedent('if __name__ == "__main__":\n    pass\n'))
    assert BotProgram.from_folder(folder).command == "python a.py"
