"""A bot program the ladder starts: one description shared by house bots, submitted bots, validation
matches and builds (docs/ladder.md, "How submitted bots are built and run").

A program is a folder as `cellarena new-bot` lays it out: a ``bot.toml`` naming its ``command`` (run
inside the folder) and, for the compiled languages and the TypeScript kit, its ``setup`` (the build,
run once before it plays, and whose output ``creates`` names); or a Python bot's folder without one,
whose program is its one ``.py`` file with a ``__main__`` block. Nothing here runs anything: the build
is `cellarena.server.bots.sandbox`'s, the start the launcher's (`BotProgram.spec`).
"""

from __future__ import annotations

import ast
import shlex
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from cellarena.server.bots.launcher import BotSpec
from cellarena.server.bots.python_view import PythonView

MANIFEST = "bot.toml"
#: Keys a bot.toml may have (as a tournament reads it, `cellarena.arena.discovery`).
MANIFEST_KEYS = frozenset({"command", "name", "setup", "creates"})
#: Where a program may run: the ladder's own machine, one of its local workers, a cluster's worker.
Place = Literal["here", "worker", "cluster"]
PLACES: tuple[Place, ...] = ("here", "worker", "cluster")


class ProgramError(ValueError):
    """A folder that is not a bot program; the message names the file and key at fault and what to do."""


@dataclass(frozen=True)
class BotProgram:
    """A bot program: its folder, name, command, build, language, version and where it may run."""

    folder: Path
    name: str
    #: Its command line, run inside ``folder`` (a bare ``python`` is cellarena's interpreter).
    command: str
    #: bot.toml's ``setup``: how it is built (None: nothing to build, a Python bot).
    build: str | None = None
    #: What the build makes (bot.toml's ``creates``), relative to ``folder``.
    creates: str | None = None
    #: "python", "cpp", "rust", "java", "node", or "other": which toolchain its build needs.
    language: str = "other"
    #: Which version of the bot this is (a submission's archive hash), None for a bot run from a folder.
    version: str | None = None
    place: Place = "here"

    def spec(self, view: PythonView | None = None) -> BotSpec:
        """What the launcher starts (`cellarena.server.bots.launcher.start_bot`); ``view``, the Python
        a submitted program sees under isolation."""
        return BotSpec(self.name, self.command, str(self.folder), view)

    def at(self, folder: Path) -> BotProgram:
        """The same program, found in another folder (a build's copy)."""
        return BotProgram(
            folder, self.name, self.command, self.build, self.creates, self.language, self.version, self.place
        )

    @classmethod
    def from_folder(
        cls, folder: Path, *, name: str | None = None, version: str | None = None, place: Place = "here"
    ) -> BotProgram:
        """The program in ``folder``; `ProgramError` saying what is wrong. ``name`` overrides bot.toml's."""
        folder = folder.resolve()
        if not folder.is_dir():
            raise ProgramError(f"{folder}: not a folder; give the folder `cellarena new-bot` wrote")
        if place not in PLACES:
            raise ProgramError(f"place {place!r}: give one of {', '.join(PLACES)}")
        manifest = folder / MANIFEST
        if not manifest.is_file():
            command = _python_command(folder)
            return cls(folder, name or folder.name, command, language="python", version=version, place=place)
        data = _read_manifest(manifest)
        command = data["command"]
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise ProgramError(f"{manifest}: command: cannot split it ({exc})") from None
        return cls(
            folder,
            name or data.get("name", folder.name),
            command,
            build=data.get("setup"),
            creates=data.get("creates"),
            language=_language(folder, argv),
            version=version,
            place=place,
        )


def _read_manifest(manifest: Path) -> dict[str, str]:
    try:
        data = tomllib.loads(manifest.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProgramError(f"{manifest}: not valid TOML ({exc}); fix it") from None
    unknown = set(data) - MANIFEST_KEYS
    if unknown:
        known = ", ".join(sorted(MANIFEST_KEYS))
        raise ProgramError(f"{manifest}: unknown key(s) {', '.join(sorted(unknown))}; known: {known}")
    for key in MANIFEST_KEYS & set(data):
        if not isinstance(data[key], str) or not data[key].strip():
            raise ProgramError(f"{manifest}: {key} must be a non-empty string, got {data[key]!r}")
    if "command" not in data:
        raise ProgramError(f'{manifest}: missing command, e.g. command = "python my_bot.py"')
    return {key: str(value) for key, value in data.items()}


def _python_command(folder: Path) -> str:
    """A Python bot folder's command: its one ``.py`` file with a ``__main__`` block (not a test)."""
    mains = []
    for path in sorted(folder.glob("*.py")):
        if path.name.startswith("test_") or path.name == "conftest.py":
            continue
        try:
            tree = ast.parse(path.read_bytes(), filename=str(path))
        except SyntaxError as exc:
            raise ProgramError(f"{path}:{exc.lineno}: not valid Python ({exc.msg}); fix it") from None
        if any(isinstance(node, ast.If) and "__main__" in ast.unparse(node.test) for node in tree.body):
            mains.append(path.name)
    if len(mains) != 1:
        found = f"found {', '.join(mains)}" if mains else "found none"
        raise ProgramError(
            f"{folder}: without a {MANIFEST}, a bot folder needs exactly one .py file with an "
            f'`if __name__ == "__main__":` block ({found}); add a {MANIFEST} with command = "python FILE.py"'
        )
    return f"python {shlex.quote(mains[0])}"


def _language(folder: Path, argv: list[str]) -> str:
    """Which toolchain the program's build needs, from its command and build files."""
    if argv and Path(argv[0]).name.startswith("python"):
        return "python"
    if argv and argv[0] == "node":
        return "node"
    if argv and argv[0] == "java":
        return "java"
    if (folder / "Cargo.toml").is_file():
        return "rust"
    if (folder / "CMakeLists.txt").is_file():
        return "cpp"
    return "other"
