"""The distribution installs and works without the source tree: editable installs hide packaging
mistakes (a module or a map file left out of the wheel), so this builds a plain install in a fresh venv."""

from __future__ import annotations

import json
import os
import subprocess
import venv
from pathlib import Path

import pytest
from cellarena_cli import project_copy


def _python(
    bindir: Path, code: str, env: dict[str, str], cwd: Path, *, check: bool
) -> subprocess.CompletedProcess[str]:
    """``python -c code`` of the fresh venv, its output captured."""
    return subprocess.run(
        [str(bindir / "python"), "-c", code], check=check, capture_output=True, text=True, env=env, cwd=cwd
    )


@pytest.mark.slow
def test_plain_install_into_fresh_venv(tmp_path: Path) -> None:
    src = project_copy(tmp_path / "src")
    env_dir = tmp_path / "venv"
    venv.create(env_dir, with_pip=True)
    bindir = env_dir / ("Scripts" if os.name == "nt" else "bin")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    subprocess.run(
        [str(bindir / "python"), "-m", "pip", "install", "-q", str(src)],
        check=True,
        env=env,
        cwd=tmp_path,
        timeout=600,
    )
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()

    def run(*args: str) -> str:
        return subprocess.run(
            [str(bindir / "cellarena"), *args],
            check=True,
            capture_output=True,
            text=True,
            env=env,
            cwd=elsewhere,
            timeout=120,
        ).stdout

    assert run("--version").strip().startswith("cellarena, version ")
    report = json.loads(run("sim", "rezzo", "--map", "duel", "--ticks", "20", "--json"))
    assert report["ticks"] == 20
    assert report["map"]
    # Nothing bare such as `server` or `sdk` was installed at the top level.
    probe = "import importlib.util as u; print([m for m in ('server', 'sdk', 'arena') if u.find_spec(m)])"
    bare = _python(bindir, probe, env, elsewhere, check=True).stdout.strip()
    assert bare == "[]"
    # The installed package is the one that ran, not the source tree.
    where = _python(
        bindir,
        "import cellarena.server.games.rezzo.engine as e; print(e.__file__)",
        env,
        elsewhere,
        check=True,
    ).stdout
    assert where.strip().startswith(str(env_dir))
    # Every registered game, engine and SDK module alike, shipped: a new game folder missing from
    # pyproject.toml's package list would only show up here.
    every_game = (
        "from cellarena.server.games import game_names, get_engine; from cellarena.sdk.games import adapter;"
        "from cellarena.server.cli.game_cli import game_cli;"
        "[(get_engine(g).new({}), game_cli(g), adapter(g)) for g in game_names()]; print(game_names())"
    )
    games = _python(bindir, every_game, env, elsewhere, check=False)
    assert games.returncode == 0, games.stderr
    assert games.stdout.strip() == "['cata', 'cloth', 'colorblocks', 'drop2df', 'rezzo']"
    # The ladder ships too, and its default SQLite store needs no PostgreSQL driver.
    ladder = (
        "import sys; from cellarena.arena.ladder.store.ladder_store import LadderStore;"
        "s = LadderStore('ladder.db'); s.add_bot('a', 'rezzo');"
        "print(len(s.list_bots()), 'psycopg' in sys.modules)"
    )
    store = _python(bindir, ladder, env, elsewhere, check=False)
    assert store.returncode == 0, store.stderr
    assert store.stdout.split() == ["1", "False"]
    # `cellarena new-bot` ships its templates, and the test it writes passes with the random opponent
    # the SDK ships: a bot author needs no checkout.
    run("new-bot", "rezzo", "probe")
    subprocess.run(
        [str(bindir / "python"), "-m", "pip", "install", "-q", "pytest"], check=True, env=env, timeout=600
    )
    probe = subprocess.run(
        [str(bindir / "python"), "-m", "pytest", "-q", "-p", "no:cacheprovider"],
        check=False,
        capture_output=True,
        text=True,
        env=env,
        cwd=elsewhere / "probe",
        timeout=600,
    )
    assert probe.returncode == 0 and "2 passed" in probe.stdout, probe.stdout + probe.stderr
    # The TypeScript kit ships too: `new-bot --lang ts` copies it from the installed package (its
    # folders are built and played in tests/test_new_bot_node.py and tests/test_ts_kit.py).
    run("new-bot", "cata", "tsprobe", "--lang", "ts")
    kit = elsewhere / "tsprobe" / "cellarena"
    assert all((kit / f).is_file() for f in ("index.ts", "games/cata.ts", "README.md"))
    lock = json.loads((elsewhere / "tsprobe" / "package-lock.json").read_text())
    assert lock["packages"]["node_modules/typescript"]["version"] == "5.9.3"
