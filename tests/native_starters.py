"""The C++, Rust and Java starters (`cellarena new-bot GAME NAME --lang cpp|rust|java`) for tests:
each written and built once per change of what it is made of, and shared by the test files and by
pytest-xdist's processes.

A compile is the expensive part of these tests (tens of seconds each on a busy machine), so a built
starter is kept in pytest's cache folder (``.pytest_cache/d/cellarena-kits``) with a digest of its
sources: the kit, the game's bot template and game.toml, the shared test template and new_bot.py. A
starter whose digest still matches is used as it is; another is written again and built (the Rust
starters share one cargo target folder, so the crates they use compile once). Each starter is built
under a lock of its own, so two processes never build the same one, and build different ones at
once. Under CI=true a missing toolchain fails, elsewhere it skips.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shlex
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest
from cellarena_cli import ROOT, cellarena

from cellarena.arena.cli.new_bot import COMPILED, LANGUAGES

LANGS = sorted(COMPILED)
#: What each toolchain needs on this machine, and the Debian packages .ci/run installs for it.
TOOLS = {
    "cpp": (["g++", "cmake", "ctest"], "/usr/include/msgpack.hpp"),
    "rust": (["cargo", "rustc"], "/usr/share/cargo/registry"),
    "java": (["javac", "java", "jar"], "/usr/share/java/msgpack-core.jar"),
}
#: The bot names of the starters that are not named `LANG_GAME`: names whose classes share a name
#: with the kit's (Bot, Runner, Cata), which the starters allow by writing the kit's names in full.
CLASHING = {
    ("cpp", "cata"): "bot",
    ("rust", "cata"): "bot",
    ("java", "rezzo"): "runner",
    ("java", "cata"): "cata",
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


def _digest(lang: str, game: str) -> str:
    """A digest of everything a starter is written from."""
    h = hashlib.blake2b(digest_size=16)
    kit = ROOT / "sdk" / "kits" / lang
    template = ROOT / "arena" / "cli" / "templates" / game / LANGUAGES[lang][1]
    files = [
        ROOT / "arena" / "cli" / "new_bot.py",
        ROOT / "sdk" / "kits" / "test_bot.py.tmpl",
        template,
        template.with_name("game.toml"),
        *sorted(p for p in kit.rglob("*") if p.is_file() and not {"build", "target"} & set(p.parts)),
    ]
    for path in files:
        h.update(str(path.relative_to(ROOT)).encode() + b"\0" + path.read_bytes() + b"\0")
    return h.hexdigest()


class Starters:
    """The starters under ``root``, each in a folder `LANG_GAME` (which names the bot where cellarena
    starts it), written and built on first use in a run, or taken from an earlier run's build."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.built: dict[tuple[str, str], Path] = {}

    def get(self, lang: str, game: str) -> Path:
        need_toolchain(lang)
        if (lang, game) in self.built:
            return self.built[(lang, game)]
        folder = self.root / f"{lang}_{game}"
        with (self.root / f"{lang}_{game}.lock").open("w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
            stamp = self.root / f"{lang}_{game}.built"
            digest = _digest(lang, game)
            if not (stamp.is_file() and stamp.read_text() == digest and folder.is_dir()):
                stamp.unlink(missing_ok=True)
                self._build(lang, game, folder)
                stamp.write_text(digest)
        self.built[(lang, game)] = folder
        return folder

    def _build(self, lang: str, game: str, folder: Path) -> None:
        shutil.rmtree(folder, ignore_errors=True)
        name = CLASHING.get((lang, game), folder.name)
        made = cellarena("new-bot", game, name, "--lang", lang, "--dir", str(folder))
        assert made.returncode == 0, made.stderr
        if lang == "rust":  # one target folder for every Rust starter: the crates compile once
            (self.root / "cargo-target").mkdir(exist_ok=True)
            (folder / "target").symlink_to(self.root / "cargo-target")
        setup = tomllib.loads((folder / "bot.toml").read_text())["setup"]
        # The C++ kit's own tests are compiled (and run) with the Rezzo starter only: a compile of
        # them per starter is most of the C++ builds' time (build.sh's CELLARENA_KIT_TESTS).
        env = {**os.environ, "CELLARENA_KIT_TESTS": "ON" if game == "rezzo" else "OFF"}
        build = subprocess.run(
            shlex.split(setup), cwd=folder, capture_output=True, text=True, timeout=900, check=False, env=env
        )
        assert build.returncode == 0, f"{setup}:\n{build.stdout}\n{build.stderr}"

    def command(self, lang: str, game: str) -> list[str]:
        """The built bot's command line, run in its folder."""
        folder = self.get(lang, game)
        return shlex.split(tomllib.loads((folder / "bot.toml").read_text())["command"])


def starters_of(config: pytest.Config) -> Starters:
    """The starters kept in pytest's cache folder of this checkout (the same folder under
    ``-p no:cacheprovider``, as the suite's CPU is measured, which leaves ``config.cache`` out)."""
    cache = getattr(config, "cache", None)
    if cache is None:
        folder = ROOT / ".pytest_cache" / "d" / "cellarena-kits"
        folder.mkdir(parents=True, exist_ok=True)
        return Starters(folder)
    return Starters(Path(cache.mkdir("cellarena-kits")))
