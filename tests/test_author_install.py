"""The bot author's one install (docs/sdk.md, section 1; README's first command): the `author` extra,
in default editable mode (the project's build backend, .ci/build_backend.py: a folder of links mypy
reads), setuptools' strict editable mode and a plain install, each giving mypy on a new bot, the
replay player and training; and the plain install working without the source tree.

First, the fast part: the viewer's static files are served when they are symlinks, as an editable
install in strict mode lays them (its `replay view` was a blank page: every asset a 404)."""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
import sysconfig
import tarfile
import tomllib
import urllib.request
import venv
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import trio
from browser import page_of
from cellarena_cli import ROOT, line_within, project_copy
from starlette.routing import Mount
from written_replays import write_replay

from cellarena.server.games import get_engine
from cellarena.server.web.app import STATIC, build_app, static_files


async def _get(app: Any, path: str) -> tuple[int, bytes]:
    """GET ``path`` from ``app`` in this process: the status and the body. (tests/asgi_calls.py answers
    every second receive with a disconnect, which cancels a file response before it starts.)"""
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.4"},
        "http_version": "1.1",
        "method": "GET",
        "scheme": "http",
        "path": path,
        "raw_path": path.encode(),
        "query_string": b"",
        "root_path": "",
        "headers": [(b"host", b"127.0.0.1:8080")],
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8080),
    }
    sent: list[dict[str, Any]] = []

    async def receive() -> dict[str, Any]:
        if not sent:
            return {"type": "http.request", "body": b"", "more_body": False}
        await trio.sleep_forever()
        raise AssertionError("unreachable")

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with trio.fail_after(10):
        await app(scope, receive, send)
    status = next(m["status"] for m in sent if m["type"] == "http.response.start")
    return status, b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")


def _linked_static(tmp_path: Path) -> Path:
    """A static folder whose files are symlinks into another folder, as setuptools' strict mode makes."""
    real = tmp_path / "checkout"
    real.mkdir()
    (real / "player.js").write_text("// the player\n")
    (tmp_path / "secret.txt").write_text("not to be served\n")
    linked = tmp_path / "build" / "static"
    linked.mkdir(parents=True)
    (linked / "player.js").symlink_to(real / "player.js")
    return linked


async def test_a_symlinked_static_file_is_served(tmp_path: Path) -> None:
    app = build_app([Mount("/linked", app=static_files(_linked_static(tmp_path)))])
    assert await _get(app, "/linked/player.js") == (200, b"// the player\n")
    # Following links does not let a request climb out of the folder.
    for path in ("/linked/../secret.txt", "/linked/%2e%2e/%2e%2e/secret.txt", "/linked/..%2f..%2fsecret.txt"):
        status, body = await _get(app, path)
        assert status == 404 and b"not to be served" not in body, path


async def test_the_viewer_assets_are_served_from_the_package() -> None:
    app = build_app([])
    assert await _get(app, "/static/player.js") == (200, (STATIC / "player.js").read_bytes())


# ------------------------------------------------------------- the one install, in each of its modes
# One fresh venv per mode, built once for the module and all three at once: docs/sdk.md's editable
# install (the build backend's default), setuptools' strict editable install, and a plain (wheel)
# install of cellarena. What these tests are about is how cellarena itself is laid out in each mode; its
# dependencies (the `author` extra's web, rl, mypy and pytest, whose list
# `test_the_docs_install_line_is_the_one_the_tests_build` checks) are the suite's own, seen through a
# .pth line, so that pip installs cellarena alone (--no-deps): resolving and copying the extra's
# hundred packages three times took five minutes of one test process.

DOC = ROOT / "docs" / "sdk.md"
#: What docs/sdk.md's section 1 and the README's first command install.
INSTALL = "pip install -e '.[author]'"
#: pip's arguments after `pip install`, per mode; "SRC" stands for the project's folder.
MODES = {
    "editable": ["-e", "SRC[author]"],
    "strict": ["-e", "SRC[author]", "--config-settings", "editable_mode=strict"],
    "wheel": ["SRC[author]"],
}
#: The suite's site-packages: where the fresh venvs find cellarena's dependencies.
SUITE_SITE = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
#: Dependencies' commands, run as modules (--no-deps installs cellarena's scripts only).
MODULE_COMMANDS = ("mypy", "pytest")
WRONG_ANSWER = ("def on_tick(self, view: View) -> list[int]:", "def on_tick(self, view: View) -> list[str]:")


def _python(
    bindir: Path, code: str, env: dict[str, str], cwd: Path, *, check: bool
) -> subprocess.CompletedProcess[str]:
    """``python -c code`` of the fresh venv, its output captured."""
    return subprocess.run(
        [str(bindir / "python"), "-c", code], check=check, capture_output=True, text=True, env=env, cwd=cwd
    )


@dataclass
class Install:
    mode: str
    venv: Path
    src: Path
    env: dict[str, str]

    @property
    def bindir(self) -> Path:
        return self.venv / "bin"

    def run(self, *argv: str, cwd: Path, timeout: float = 300) -> subprocess.CompletedProcess[str]:
        """A command of this venv (``cellarena``, ``mypy``, ``python``), as `. .venv/bin/activate` runs it."""
        command = (
            [str(self.bindir / "python"), "-m", *argv]
            if argv[0] in MODULE_COMMANDS
            else [str(self.bindir / argv[0]), *argv[1:]]
        )
        return subprocess.run(
            command,
            cwd=cwd,
            env=self.env,
            capture_output=True,
            text=True,
            check=False,
            timeout=timeout,
        )


def test_the_docs_install_line_is_the_one_the_tests_build() -> None:
    doc_lines = [line for line in DOC.read_text().splitlines() if "pip install" in line]
    assert any(INSTALL in line for line in doc_lines[:1]), doc_lines[:1]
    readme_first = next(
        line for line in (ROOT / "README.md").read_text().splitlines() if "pip install" in line
    )
    assert INSTALL.replace("pip install", "pip install -q") in readme_first, readme_first
    pip_args = shlex.split(INSTALL.removeprefix("pip install"))
    assert pip_args == [a.replace("SRC", ".") for a in MODES["editable"]]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    # Not the test extra's PostgreSQL, Dask and browsers.
    assert extras["author"] == ["cellarena[web]", "cellarena[rl]", "mypy>=1.10", "pytest>=8"]


@pytest.fixture(scope="module")
def installs(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Install]:
    base = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV", "MYPYPATH")}
    made: dict[str, Install] = {}
    pips: dict[str, subprocess.Popen[str]] = {}
    for mode, args in MODES.items():
        root = tmp_path_factory.mktemp(f"install-{mode}")
        src = project_copy(root / "cellarena")
        # No pip of its own (ensurepip cost seconds of CPU a venv): the suite's pip, seen through the
        # .pth line below, installs into the venv it runs in, as the venv's own would.
        venv.create(root / "venv", with_pip=False)
        site = next((root / "venv" / "lib").glob("python*/site-packages"))
        # Appended after the venv's own site-packages: the fresh install of cellarena comes first, and
        # the suite's own cellarena (a .pth line, read only in a site folder, not in one it adds) is not seen.
        (site / "_suite_dependencies.pth").write_text("\n".join(SUITE_SITE) + "\n")
        env = {**base, "PATH": f"{root / 'venv' / 'bin'}{os.pathsep}{base['PATH']}"}
        made[mode] = Install(mode, root / "venv", src, env)
        argv = [
            str(root / "venv" / "bin" / "python"),
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            *[a.replace("SRC", str(src)) for a in args],
        ]
        pips[mode] = subprocess.Popen(
            argv, cwd=src, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
    try:
        for mode, pip in pips.items():
            out, _ = pip.communicate(timeout=900)
            assert pip.returncode == 0, f"{mode}: {out}"
    finally:
        for pip in pips.values():  # one failed: the others are not left running
            if pip.poll() is None:
                pip.kill()
                pip.wait()
    return made


@pytest.fixture(scope="module")
def replay(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A short Rezzo match's replay (agents walking at random), written by the suite's own install in
    this process: what is tested is each install's player, not a match (three processes to start)."""
    path = tmp_path_factory.mktemp("author-replay") / "short.replay"
    engine = get_engine("rezzo").new({"map": "duel", "max_ticks": 40}, 1)
    rng = np.random.default_rng(1)

    def walk(engine: Any) -> dict[int, Any]:
        return {
            seat: [int(m) for m in rng.integers(0, 6, len(ask["agents"]))]
            for seat, ask in engine.pending().items()
        }

    return write_replay(path, engine, seed=1, names=["a", "b"], choose=walk)


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_mypy_checks_a_new_bot_against_the_sdk(installs: dict[str, Install], mode: str) -> None:
    """`mypy --strict my_bot.py` on a `new-bot` bot checks it against the SDK in every mode: the
    default editable install is a folder of links to the checkout's folders (not setuptools' import
    hook, which mypy does not run), strict mode a folder of links to its files."""
    install = installs[mode]
    home = install.venv.parent / "home"
    home.mkdir(exist_ok=True)
    made = install.run("cellarena", "new-bot", "rezzo", "my_bot", cwd=home)
    assert made.returncode == 0, made.stderr
    bot = home / "my_bot"
    checked = install.run("mypy", "--strict", "my_bot.py", cwd=bot)
    assert checked.returncode == 0 and "Success: no issues found" in checked.stdout, checked.stdout
    # ... and it checked the bot against the SDK's types, not against an Any it could not find.
    source = (bot / "my_bot.py").read_text()
    assert source.count(WRONG_ANSWER[0]) == 1
    (bot / "my_bot.py").write_text(source.replace(*WRONG_ANSWER))
    # The edit keeps the file's size; mypy's cache takes a file of the same size and the same whole
    # second of mtime as unchanged. A reader saves it later than that: so does this test.
    later = (bot / "my_bot.py").stat().st_mtime + 2
    os.utime(bot / "my_bot.py", (later, later))
    wrong = install.run("mypy", "--strict", "my_bot.py", cwd=bot)
    assert wrong.returncode == 1, wrong.stdout
    assert 'Return type "list[str]" of "on_tick" incompatible' in wrong.stdout, wrong.stdout
    assert "import-not-found" not in wrong.stdout and "import-untyped" not in wrong.stdout


@pytest.mark.slow
def test_the_plain_install_ships_py_typed_and_every_kit_file(installs: dict[str, Install]) -> None:
    """PEP 561: without ``py.typed`` in the installed package, mypy calls ``cellarena.sdk`` untyped
    (import-untyped) and checks no bot against it (the test above, in the wheel mode, shows it checks
    one). The language kits ship too (`cellarena new-bot --lang ...` copies them from the installed
    package), dot-folders such as the Rust starter's .cargo/ included, and no npm or tsc output."""
    install = installs["wheel"]
    site = next((install.venv / "lib").glob("python*/site-packages"))
    assert (site / "cellarena" / "sdk" / "py.typed").is_file()
    kits = [
        p.relative_to(install.src).as_posix()
        for p in (install.src / "sdk" / "kits").rglob("*")
        if p.is_file()
    ]
    assert "sdk/kits/rust/starter/.cargo/config.toml" in kits
    assert "sdk/kits/typescript/src/games/rezzo.ts" in kits
    shipped = {p.relative_to(site).as_posix() for p in (site / "cellarena" / "sdk" / "kits").rglob("*")}
    assert not [k for k in kits if "cellarena/" + k not in shipped]
    kit = "cellarena/sdk/kits/typescript/"
    assert not any(n.startswith((kit + "node_modules/", kit + "dist/")) for n in shipped)


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_the_player_shows_a_replay(
    installs: dict[str, Install], replay: Path, browser: Any, mode: str
) -> None:
    """`replay view` of the install serves its assets (strict mode's are symlinks) and Chromium draws
    the replay's first frame with no failed request."""
    install = installs[mode]
    proc = subprocess.Popen(
        [str(install.bindir / "cellarena"), "replay", "view", str(replay), "--port", "0"],
        env=install.env, cwd=install.venv.parent, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        line = line_within(proc.stdout, what="address from `replay view`")
        found = re.search(r"at (http://\S+)", line)
        assert found, f"{line!r}\n{proc.stderr.read() if proc.stderr else ''}"
        base = found.group(1).split("/", 3)[:3]
        with urllib.request.urlopen("/".join([*base, "static/player.js"]), timeout=30) as got:
            assert got.status == 200 and b"cellarenaPlayer" in got.read()
        with page_of(browser) as (page, console):
            failed: list[str] = []
            page.on("requestfailed", lambda r: failed.append(r.url))
            page.on("response", lambda r: failed.append(f"{r.status} {r.url}") if r.status >= 400 else None)
            page.goto(found.group(1))
            page.wait_for_function("document.getElementById('player')?.dataset.shown === '0'", timeout=60_000)
            assert failed == []
            console.assert_clean()
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.mark.slow
@pytest.mark.parametrize("mode", list(MODES))
def test_training_runs(installs: dict[str, Install], mode: str) -> None:
    """The `rl` half of the extra: a PettingZoo Rezzo environment resets and steps, numba compiled."""
    code = (
        "import numba, gymnasium; from cellarena.server.env.games.rezzo import RezzoParallelEnv;"
        "env = RezzoParallelEnv(); obs, _ = env.reset(seed=1);"
        "acts = {a: env.action_space(a).sample() for a in env.agents}; env.step(acts); print(len(obs))"
    )
    stepped = installs[mode].run("python", "-c", code, cwd=installs[mode].venv.parent)
    assert stepped.returncode == 0 and int(stepped.stdout) >= 2, stepped.stdout + stepped.stderr


@pytest.mark.slow
def test_the_plain_install_works_without_the_source_tree(installs: dict[str, Install]) -> None:
    """Editable installs hide packaging mistakes (a module or a map file left out of the wheel): the
    plain install runs from elsewhere, and is the installed package, not the checkout."""
    install = installs["wheel"]
    env, env_dir, bindir = install.env, install.venv, install.bindir
    tmp_path = install.venv.parent
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
    # The test `new-bot` wrote runs (pytest: the author extra's, here the suite's, see SUITE_SITE).
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


@pytest.mark.slow
def test_the_default_editable_install_sees_a_new_module(installs: dict[str, Install]) -> None:
    """Its links are folders: a module added to the checkout after the install imports at once, as with
    setuptools' import hook (strict mode would need the install run again), and nothing else runs."""
    install = installs["editable"]
    (install.src / "sdk" / "added_later.py").write_text("WHERE = 'the checkout'\n")
    code = (
        "import cellarena.sdk.added_later as m, sys;"
        "print(m.WHERE); print([f for f in sys.meta_path if 'editable' in repr(f)])"
    )
    got = install.run("python", "-c", code, cwd=install.venv.parent)
    assert got.returncode == 0, got.stdout + got.stderr
    assert got.stdout.splitlines() == ["the checkout", "[]"], got.stdout  # and no import hook installed


@pytest.mark.slow
def test_an_sdist_carries_the_build_backend(installs: dict[str, Install], tmp_path: Path) -> None:
    """pyproject.toml names .ci/build_backend.py, which no package holds: the sdist adds it, or no wheel
    would build from the sdist."""
    src = installs["editable"].src
    code = f"import build_backend; print(build_backend.build_sdist({str(tmp_path)!r}))"
    made = subprocess.run(
        [sys.executable, "-c", code], cwd=src, env={**os.environ, "PYTHONPATH": str(src / ".ci")},
        capture_output=True, text=True, check=False, timeout=300,
    )  # fmt: skip
    assert made.returncode == 0, made.stderr
    with tarfile.open(tmp_path / made.stdout.split()[-1]) as sdist:
        backend = sdist.extractfile("cellarena-0.1.0/.ci/build_backend.py")
        assert backend is not None and backend.read() == (src / ".ci" / "build_backend.py").read_bytes()
