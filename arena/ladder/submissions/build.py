"""Building a submitted bot: its bot.toml's ``setup`` run confined and offline (docs/ladder.md, "How
submitted bots are built and run"; docs/security.md, "What confines a build").

`build` takes an unpacked bot folder (as `cellarena new-bot` lays it out, any language) and builds it
in place, under `cellarena.server.bots.sandbox`: with Debian's toolchains as the host installed them,
offline (Rust from Debian's crate registry, as the kit's ``.cargo/config.toml`` says). A Python bot
has nothing to build: its files are compiled and each of its imports checked against what the host
offers (the standard library, the bot's own modules and `BuildLimits.python_packages`), so that a bot
that would fail at its first import fails here, with the import named.
"""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

from cellarena.server.bots.program import BotProgram, ProgramError
from cellarena.server.bots.python_view import python_view
from cellarena.server.bots.sandbox import SandboxLimits, SandboxRun, run_sandboxed

#: The Python packages a Python bot may import by default, beyond the standard library.
PYTHON_PACKAGES = ("cellarena.sdk", "numpy", "msgpack")
#: The environment of a build beyond PATH and the locale: the C++ kit's own tests left out (a bot's
#: build compiles the bot alone), cargo told it is offline.
BUILD_ENV = {"CELLARENA_KIT_TESTS": "OFF", "CARGO_NET_OFFLINE": "true", "PYTHONDONTWRITEBYTECODE": "1"}

#: What checks a Python bot in its sandbox: argv[1] is the folder, the rest the packages offered.
_PYTHON_CHECK = r"""
import ast, sys
from pathlib import Path
folder, offered = Path(sys.argv[1]), set(sys.argv[2:]) | set(sys.stdlib_module_names)
local = {p.stem for p in folder.glob("*.py")} | {p.name for p in folder.iterdir() if p.is_dir()}
bad = 0
for path in sorted(folder.rglob("*.py")):
    rel = path.relative_to(folder)
    if path.name.startswith("test_") or path.name.endswith("_test.py") or path.name == "conftest.py":
        continue  # its own tests, which the ladder does not run
    try:
        tree = ast.parse(path.read_bytes(), str(rel))
        compile(tree, str(rel), "exec")
    except SyntaxError as exc:
        print(f"{rel}:{exc.lineno}: not valid Python ({exc.msg})"); bad += 1; continue
    for node in ast.walk(tree):
        names = [a.name for a in node.names] if isinstance(node, ast.Import) else (
            [node.module] if isinstance(node, ast.ImportFrom) and node.level == 0 and node.module else [])
        for name in names:
            top = name.split(".")[0]
            if top not in offered and top not in local:
                print(f"{rel}:{node.lineno}: imports {top}, which this ladder does not offer "
                      f"(offered beyond the standard library: {', '.join(sorted(sys.argv[2:]))})")
                bad += 1
sys.exit(1 if bad else 0)
"""


@dataclass(frozen=True)
class BuildLimits(SandboxLimits):
    """What a build may use and take (`SandboxLimits`), and the Python packages a Python bot may import."""

    python_packages: tuple[str, ...] = PYTHON_PACKAGES


@dataclass(frozen=True)
class BuildResult:
    """A build's outcome: whether the bot can play, its log (size-capped), how long it took, why it
    failed for its owner (None when it succeeded), and the program built (None if the folder is none)."""

    ok: bool
    log: str
    seconds: float
    reason: str | None
    program: BotProgram | None = None


async def build(
    folder: Path,
    limits: BuildLimits | None = None,
    *,
    version: str | None = None,
    hidden: tuple[Path, ...] = (),
    name: str | None = None,
) -> BuildResult:
    """Build the bot in ``folder`` in place, confined and offline; ``hidden`` folders (the ladder's own)
    are out of its sight; ``name``, the ladder's name for it, over its bot.toml's. Never raises for
    what the folder holds: a bad one is a failed build."""
    limits = limits or BuildLimits()
    try:
        program = BotProgram.from_folder(folder, name=name, version=version)
    except ProgramError as exc:
        return BuildResult(False, "", 0.0, str(exc))
    if program.build is not None:
        steps = ["sh", "-c", program.build]
        run = await run_sandboxed(steps, program.folder, limits, env=BUILD_ENV, hidden=hidden)
    elif program.language == "python":
        view = python_view(limits.python_packages)
        check = [view.executable, "-S", "-c", _PYTHON_CHECK, str(program.folder), *view.offered]
        env = {**BUILD_ENV, **dict(view.env)}
        run = await run_sandboxed(check, program.folder, limits, env=env, hidden=hidden, view=view)
        if run.reason is not None and run.returncode == 1:
            return BuildResult(False, run.log, run.seconds, _first_line(run.log), program)
    else:
        run = SandboxRun(0, "", 0.0, None)  # a prebuilt program: its command must be there
    if run.reason is not None:
        return BuildResult(False, run.log, run.seconds, f"the build failed: {run.reason}", program)
    missing = _missing_output(program)
    if missing is not None:
        return BuildResult(False, run.log, run.seconds, missing, program)
    return BuildResult(True, run.log, run.seconds, None, program)


def _first_line(log: str) -> str:
    return next((line for line in log.splitlines() if line.strip()), "the check failed")


def _missing_output(program: BotProgram) -> str | None:
    """What the build should have made and did not: bot.toml's ``creates``, or the command's program
    when it is a path in the folder (``build/my_bot``)."""
    wanted = [program.creates] if program.creates else []
    argv = shlex.split(program.command)
    if argv and "/" in argv[0] and not argv[0].startswith("/"):
        wanted.append(argv[0])
    for rel in wanted:
        path = (program.folder / rel).resolve()
        if not path.is_relative_to(program.folder) or not path.exists():
            return f"the build succeeded but did not make {rel}, which bot.toml's command needs"
    return None
