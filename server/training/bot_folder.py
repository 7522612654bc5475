"""A bot folder's Python files, loaded into the trainer's process: its ``policy.py`` (the network and
its inputs) and its ``bot.py`` (the bot the evaluation plays), as `cellarena new-bot --template
trained` lays them out. Bot folders are not packages, and two of them hold files of the same names;
so each file is a module of a name of its own, and loading one leaves nothing behind.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from cellarena.server.training.imitation import ImitationError

#: What the trainer uses of a bot folder's policy.py: the network (``Policy``: ``save``, ``load``,
#: ``logits``, ``params``), a seat's inputs (``observe``), the legal moves (``legal``), the network's
#: input from the stored inputs (``one_hot``) and the number of moves (``MOVES``).
POLICY_NAMES = ("Policy", "observe", "legal", "one_hot", "MOVES")


def _unique_name(path: Path) -> str:
    """A module name no other file takes: the file's resolved path made an identifier."""
    return "cellarena_bot_file_" + re.sub(r"\W", "_", str(path.resolve()))


@contextmanager
def _as_if_run(folder: Path, plain: dict[str, ModuleType]) -> Iterator[None]:
    """While a bot file runs its imports: its folder first on sys.path and ``plain`` (the folder's
    files already loaded, by their plain names) in sys.modules, as running the file would have them;
    afterwards sys.path as it was and no module of the folder left under any name but its own."""
    path, before = list(sys.path), set(sys.modules)
    saved = {name: sys.modules.get(name) for name in plain}
    sys.path.insert(0, str(folder))
    sys.modules.update(plain)
    try:
        yield
    finally:
        sys.path[:] = path
        for name, module in saved.items():
            if module is None:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        for name in set(sys.modules) - before:  # a sibling the file imported by its plain name
            file = getattr(sys.modules[name], "__file__", None)
            if file and Path(file).resolve().parent == folder:
                del sys.modules[name]


def load_module(path: Path, plain: dict[str, ModuleType] | None = None) -> ModuleType:
    """The Python file ``path`` (bot folders are not packages) as a module of a name of its own, so
    that two bot folders' ``policy.py`` never meet; loaded once per process. Its imports see its folder
    as running it would (``bot.py``'s ``from policy import ...`` gets ``plain["policy"]``), and
    nothing of that outlives the loading: sys.path and the plain names are put back."""
    name = _unique_name(path)
    known = sys.modules.get(name)
    if known is not None:
        return known
    if not path.is_file():
        raise ImitationError(
            f"{path}: not found; give a bot folder laid out to be trained (`cellarena new-bot GAME NAME "
            "--template trained` writes one)"
        )
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module  # dataclasses and pickling look a module up by its name
    try:
        with _as_if_run(path.parent.resolve(), plain or {}):
            spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise ImitationError(f"{path}: cannot be loaded ({type(exc).__name__}: {exc})") from None
    return module


def policy_module(bot_dir: Path, game: str) -> ModuleType:
    """The bot folder's ``policy.py``, checked for what the training uses."""
    start = f"`cellarena new-bot {game} NAME --template trained` writes one"
    if not (bot_dir / "policy.py").is_file():
        raise ImitationError(
            f"--bot-dir {bot_dir}: no policy.py in it; give a bot folder laid out to be trained ({start})"
        )
    module = load_module(bot_dir / "policy.py")
    missing = [n for n in POLICY_NAMES if not hasattr(module, n)]
    if missing:
        raise ImitationError(
            f"{bot_dir / 'policy.py'}: lacks {', '.join(missing)}; start from the policy.py {start}"
        )
    return module
