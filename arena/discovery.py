"""Finding bots in a folder: one bot per entry, a Python file or a folder with a ``bot.toml``.

    example_bots/
      rezzo/                 a folder named after the game holds that game's bots
        builder.py           a Python bot: run as `python builder.py`, named "builder"
        js_random/           any language: bot.toml says how to start it
          bot.toml           command = "node bot.js"   (run inside this folder)

A folder named after the game (and without a ``bot.toml`` of its own) is where that game's bots are,
so ``--bots-dir example_bots`` works for every game. Entries whose names start with ``.`` or ``_`` are
skipped, as are files that are not Python, tests (``test_*.py``, ``*_test.py``, ``conftest.py``) and
Python files without an ``if __name__ == "__main__":`` block (helpers a bot imports: a bot is a program
that starts). Anything else that cannot be a bot is an error naming it: a tournament that silently left
a bot out would be worse than one that does not start.
"""

from __future__ import annotations

import ast
import fnmatch
import shlex
import subprocess
import tomllib
from dataclasses import dataclass
from pathlib import Path

from cellarena.server.bots.launcher import BotSpec

MANIFEST = "bot.toml"
#: Keys a bot.toml may have. ``setup`` runs once before a tournament unless ``creates`` exists.
MANIFEST_KEYS = {"command", "name", "setup", "creates"}


class DiscoveryError(ValueError):
    """A bots folder entry that cannot be a bot; the message names it and says what to do."""


@dataclass(frozen=True)
class FoundBot:
    spec: BotSpec
    #: Where it came from, for messages.
    source: Path
    setup: str | None = None
    creates: str | None = None


def bots_folder(root: Path, game: str) -> Path:
    """The folder to search: ``root/<game>`` when it exists and is not itself a bot, else ``root``."""
    if not root.is_dir():
        raise DiscoveryError(f"--bots-dir {root}: not a folder")
    sub = root / game
    if sub.is_dir() and not (sub / MANIFEST).exists():
        return sub
    return root


def _is_test(name: str) -> bool:
    return name == "conftest.py" or name.startswith("test_") or name.endswith("_test.py")


def excluded(name: str, patterns: tuple[str, ...]) -> bool:
    """Whether an entry (``builder.py``) or bot name (``builder``) matches one of ``--exclude``'s globs."""
    stem = name.removesuffix(".py")
    return any(fnmatch.fnmatchcase(name, p) or fnmatch.fnmatchcase(stem, p) for p in patterns)


def discover(root: Path, game: str, exclude: tuple[str, ...] = ()) -> list[FoundBot]:
    """Every bot under ``root`` for ``game``, sorted by name; raises DiscoveryError naming a bad entry.

    A ``root`` with a ``bot.toml`` of its own is one bot (a folder `cellarena new-bot --lang js` wrote).
    """
    if root.is_dir() and (root / MANIFEST).is_file():
        single = _from_manifest(root)
        return [] if excluded(root.name, exclude) or excluded(single.spec.name, exclude) else [single]
    folder = bots_folder(root, game)
    found: list[FoundBot] = []
    for entry in sorted(folder.iterdir()):
        if entry.name.startswith((".", "_")) or entry.name == "node_modules" or excluded(entry.name, exclude):
            continue
        if entry.is_dir():
            found.append(_from_manifest(entry))
        elif entry.suffix == ".py" and not _is_test(entry.name):
            bot = _from_python(entry)
            if bot is not None:
                found.append(bot)
    leaving = [b for b in found if excluded(b.spec.name, exclude)]
    if not found and not any(excluded(e.name, exclude) for e in folder.iterdir()):
        raise DiscoveryError(
            f"--bots-dir {folder}: no bots found (expected .py files with an "
            f'`if __name__ == "__main__":` block, or folders with a {MANIFEST})'
        )
    found = [b for b in found if b not in leaving]
    check_unique(found)
    return sorted(found, key=lambda b: b.spec.name)


def check_unique(found: list[FoundBot]) -> None:
    """DiscoveryError naming both sources when two bots share a name: results are kept by name."""
    names: dict[str, Path] = {}
    for bot in found:
        if bot.spec.name in names:
            raise DiscoveryError(
                f"{bot.source}: bot name {bot.spec.name!r} is already used by {names[bot.spec.name]}; "
                f"rename one (a bot.toml's name, a --bot NAME) or leave one out with --exclude"
            )
        names[bot.spec.name] = bot.source


def _from_python(path: Path) -> FoundBot | None:
    """The bot a Python file starts, or None for a helper module (no ``__main__`` block)."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except SyntaxError as exc:
        raise DiscoveryError(
            f"{path}:{exc.lineno}:{exc.offset}: not valid Python ({exc.msg}); fix it"
        ) from None
    except OSError as exc:
        raise DiscoveryError(f"{path}: cannot be read ({exc.strerror})") from None
    if not any(_is_main_guard(node) for node in tree.body):
        return None
    command = f"python {shlex.quote(str(path.resolve()))}"
    return FoundBot(BotSpec(path.stem, command), path)


def _is_main_guard(node: ast.stmt) -> bool:
    if not isinstance(node, ast.If) or not isinstance(node.test, ast.Compare):
        return False
    sides = [node.test.left, *node.test.comparators]
    return any(isinstance(n, ast.Name) and n.id == "__name__" for n in sides) and any(
        isinstance(n, ast.Constant) and n.value == "__main__" for n in sides
    )


def _from_manifest(folder: Path) -> FoundBot:
    manifest = folder / MANIFEST
    if not manifest.exists():
        raise DiscoveryError(
            f'{folder}: a bot folder needs a {MANIFEST} naming its command, e.g. command = "node bot.js" '
            "(or move the folder out of the bots folder, or name it starting with '_')"
        )
    try:
        data = tomllib.loads(manifest.read_text())
    except tomllib.TOMLDecodeError as exc:
        raise DiscoveryError(f"{manifest}: not valid TOML ({exc})") from None
    unknown = set(data) - MANIFEST_KEYS
    if unknown:
        raise DiscoveryError(
            f"{manifest}: unknown key(s) {', '.join(sorted(unknown))}; "
            f"known: {', '.join(sorted(MANIFEST_KEYS))}"
        )
    for key in MANIFEST_KEYS & set(data):
        if not isinstance(data[key], str) or not data[key].strip():
            raise DiscoveryError(f"{manifest}: {key} must be a non-empty string, got {data[key]!r}")
    if "command" not in data:
        raise DiscoveryError(f'{manifest}: missing command, e.g. command = "node bot.js"')
    name = data.get("name", folder.resolve().name)  # `--bots-dir .` is named after the folder
    try:
        spec = BotSpec.parse(f"{name}={data['command']}")
    except ValueError as exc:
        raise DiscoveryError(f"{manifest}: {exc}") from None
    return FoundBot(
        BotSpec(spec.name, spec.command, str(folder.resolve())),
        folder,
        setup=data.get("setup"),
        creates=data.get("creates"),
    )


def prepare(bots: list[FoundBot], *, timeout: float = 600.0) -> None:
    """Run each bot's ``setup`` (once: skipped when ``creates`` exists); DiscoveryError if one fails."""
    for bot in bots:
        if bot.setup is None or bot.spec.cwd is None:
            continue
        if bot.creates is not None and (Path(bot.spec.cwd) / bot.creates).exists():
            continue
        try:
            proc = subprocess.run(
                shlex.split(bot.setup),
                cwd=bot.spec.cwd,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except (OSError, subprocess.TimeoutExpired) as exc:
            raise DiscoveryError(
                f"{bot.source / MANIFEST}: setup {bot.setup!r} could not run: {exc}"
            ) from None
        if proc.returncode != 0:
            lines = (proc.stderr or proc.stdout).strip().splitlines()
            tail = lines[-3:]
            # A compiler names the file and line at fault in its first error, which a long build's
            # last lines ("1 error", make's summary) do not: show that one too.
            first = next((line for line in lines if "error" in line.lower()), None)
            if first is not None and first not in tail:
                tail = [first.strip(), "...", *tail]
            raise DiscoveryError(
                f"{bot.source / MANIFEST}: setup {bot.setup!r} failed with exit status {proc.returncode}: "
                + " / ".join(tail)
            )
