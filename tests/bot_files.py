"""The bots tests play with: the example bots, as modules to drive in-process or as the command that
runs one, and tests/bots/raw_bot.py, a protocol-level bot that misbehaves on request."""

from __future__ import annotations

import importlib.util
import shlex
import sys
from pathlib import Path
from types import ModuleType

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE_BOTS = ROOT / "example_bots"
RAW_BOT_FILE = ROOT / "tests" / "bots" / "raw_bot.py"
#: `--bot NAME="{RAW_BOT} MODE"` runs it; MODE says how it behaves (see the file).
RAW_BOT = f"python {shlex.quote(str(RAW_BOT_FILE))}"


def example_bot(game: str, name: str) -> str:
    """The command that runs example_bots/GAME/NAME.py, as a user gives it to `--bot`."""
    return f"python {shlex.quote(str(EXAMPLE_BOTS / game / f'{name}.py'))}"


def load_example_bot(game: str, name: str) -> ModuleType:
    """example_bots/GAME/NAME.py as a module, under a name of its own: two games' bots may share a
    file name (random_legal.py), so the bot folders are never put on sys.path."""
    module_name = f"example_bot_{game}_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, EXAMPLE_BOTS / game / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # dataclasses and pickle look a class's module up here
    spec.loader.exec_module(module)
    return module
