"""The typed SDK: a bot's ``on_tick`` is checked against its game, in the checkout and once installed.

The example bots are checked strict by tests/test_types.py (through tests/typecheck.py). Here copies of
them, made wrong on purpose and kept outside the checkout as a bot author's file would be, must fail
that same check at the line at fault. That the built wheel carries ``py.typed``, so that a bot
author's mypy reads the installed SDK's types instead of calling it untyped, is checked on the plain
install of tests/test_author_install.py (its files, and mypy on a wrong bot there).
"""

from __future__ import annotations

import importlib
import re
from dataclasses import dataclass
from pathlib import Path

import pytest
import typecheck
from typecheck import MypyError

from cellarena import sdk
from cellarena.sdk import GameBot, protocol
from cellarena.sdk.games import GAMES
from cellarena.server.games import get_engine

ROOT = Path(__file__).resolve().parent.parent
BOTS = ROOT / "example_bots"


@dataclass(frozen=True)
class Breakage:
    """An edit that makes an example bot answer with the wrong type, and what mypy must say."""

    bot: str  # relative to example_bots/
    old: str  # text replaced, once
    new: str
    at: str  # a text on the line the error must be reported at, after the edit
    code: str
    says: str  # a part of the message


BREAKAGES = [
    # A C.A.T.A. bot returning a str where its annotation says a move: caught at the return.
    Breakage(
        "cata/random_legal.py",
        "return self.rng.choice(moves) if moves else PASS",
        'return "strike 5"',
        'return "strike 5"',
        "return-value",
        'got "str", expected "tuple[int, int]"',
    ),
    # ... and annotated to match: then the override itself is wrong, against CataBot's on_tick.
    Breakage(
        "cata/random_legal.py",
        "def on_tick(self, view: View) -> tuple[int, int]:\n"
        "        moves = view.legal_moves()\n"
        "        return self.rng.choice(moves) if moves else PASS",
        'def on_tick(self, view: View) -> str:\n        return "strike 5"',
        "def on_tick(self, view: View) -> str:",
        "override",
        'Return type "str" of "on_tick" incompatible with return type "tuple[int, int] | Act"',
    ),
    # A Rezzo bot (a plain `Bot` subclass) answering with a list of str.
    Breakage(
        "rezzo/random_walker.py",
        "def on_tick(self, view: View) -> list[int]:",
        "def on_tick(self, view: View) -> list[str]:",
        "def on_tick(self, view: View) -> list[str]:",
        "override",
        'Return type "list[str]" of "on_tick" incompatible with return type "int | Sequence[int]"',
    ),
    # A drop2df bot whose pass is spelt as a word.
    Breakage(
        "drop2df/passer.py",
        "def on_tick(self, view: View) -> None:\n        return None  # pass",
        'def on_tick(self, view: View) -> str:\n        return "pass"',
        "def on_tick(self, view: View) -> str:",
        "override",
        'Return type "str" of "on_tick" incompatible with return type',
    ),
    # A Cloth of Gold bot taking another game's view: the argument is checked too.
    Breakage(
        "cloth/random_placer.py",
        "from cellarena.sdk.games.cloth import ClothBot, View, legal_cells, place",
        "from cellarena.sdk.games.cloth import ClothBot, legal_cells, place\n"
        "from cellarena.sdk.games.drop2df import View",
        "def on_tick(self, view: View)",
        "override",
        'Argument 1 of "on_tick" is incompatible with supertype',
    ),
]


def _line_of(text: str, part: str) -> int:
    lines = [n for n, line in enumerate(text.splitlines(), 1) if part in line]
    assert len(lines) == 1, f"{part!r} is on lines {lines}"
    return lines[0]


def _id(breakage: Breakage) -> str:
    return f"{breakage.bot}:{breakage.code}"


@pytest.fixture(scope="module")
def checked(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, str, list[MypyError]]]:
    """Every broken copy and every unbroken one (the control), outside the checkout, checked in one
    mypy run: a run of its own for each would read the SDK's types afresh each time, some 3 s of CPU
    a run. Each copy has a name of its own (mypy takes a script's name for its module name). By
    breakage id, or by bot for the unbroken copies: (script, its text, its errors)."""
    folder = tmp_path_factory.mktemp("mine")
    copies: dict[str, tuple[Path, str]] = {}
    for i, breakage in enumerate(BREAKAGES):
        source = (BOTS / breakage.bot).read_text()
        assert source.count(breakage.old) == 1, f"{breakage.bot} changed: update this test's edit"
        copies[_id(breakage)] = (
            folder / f"broken{i}_{Path(breakage.bot).name}",
            source.replace(breakage.old, breakage.new),
        )
    for bot in {b.bot for b in BREAKAGES}:
        copies[bot] = (folder / f"unbroken_{Path(bot).name}", (BOTS / bot).read_text())
    for script, text in copies.values():
        script.write_text(text)
    errors = typecheck.check_scripts([script for script, _ in copies.values()])
    return {
        key: (script, text, [e for e in errors if e.path == script.as_posix()])
        for key, (script, text) in copies.items()
    }


@pytest.mark.parametrize("breakage", BREAKAGES, ids=_id)
def test_a_bot_answering_the_wrong_type_fails_the_typed_sdk_check(
    breakage: Breakage, checked: dict[str, tuple[Path, str, list[MypyError]]]
) -> None:
    script, broken, errors = checked[_id(breakage)]
    at = _line_of(broken, breakage.at)
    expected = [e for e in errors if e.line == at and e.code == breakage.code and breakage.says in e.message]
    assert expected, f"no [{breakage.code}] error at line {at}; mypy said:\n" + "\n".join(map(str, errors))
    assert all(e.path == script.as_posix() for e in errors)


@pytest.mark.parametrize("bot", sorted({b.bot for b in BREAKAGES}))
def test_the_same_bots_unbroken_pass_the_check_outside_the_checkout(
    bot: str, checked: dict[str, tuple[Path, str, list[MypyError]]]
) -> None:
    """The control for the test above: the copy's errors come from the edit, not from where it lives."""
    assert checked[bot][2] == []


def test_mypy_errors_name_scripts_outside_the_checkout_by_their_path(tmp_path: Path) -> None:
    script = tmp_path / "bot.py"
    script.write_text("def f(x):\n    return x\n")
    errors = typecheck.check_scripts([script])
    assert [(e.path, e.line, e.code) for e in errors] == [(script.as_posix(), 1, "no-untyped-def")]
    assert isinstance(errors[0], MypyError)


def _documented_bots() -> list[tuple[str, str]]:
    """(doc, code) of every Python block in docs/sdk.md and docs/games/*.md that defines a bot."""
    found = []
    for doc in [ROOT / "docs" / "sdk.md", *sorted((ROOT / "docs" / "games").glob("*.md"))]:
        for block in re.findall(r"```python\n(.*?)```", doc.read_text(), re.S):
            if "Bot)" in block:
                found.append((doc.name, block))
    return found


def test_the_documented_bots_are_typed_for_their_game(tmp_path: Path) -> None:
    """A reader copies these: they subclass their game's bot class (the tutorial's `Bot` is Rezzo's)
    and pass the same strict check as the example bots."""
    documented = _documented_bots()
    assert {doc for doc, _ in documented} >= {"sdk.md", "cata.md", "cloth.md", "colorblocks.md"}
    scripts = []
    for doc, code in documented:
        script = tmp_path / doc.replace(".md", "_bot.py")
        script.write_text(code)
        scripts.append(script)
        assert not re.search(r"^\s+game\s*=", code, re.M), f"{doc}: subclass the game's class, not Bot"
    errors = typecheck.check_scripts(scripts)
    assert not errors, "\n".join(map(str, errors))


@pytest.mark.parametrize("game", GAMES)
def test_each_game_module_has_one_bot_class_for_its_game(game: str) -> None:
    module = importlib.import_module(f"cellarena.sdk.games.{game}")
    classes = [
        value
        for value in vars(module).values()
        if isinstance(value, type) and issubclass(value, GameBot) and value.__module__ == module.__name__
    ]
    assert len(classes) == 1, classes
    (bot_class,) = classes
    assert bot_class.game == game and bot_class.__name__.lower() == f"{game}bot"
    assert isinstance(module.View, type) and module.Answer is not None
    # Its default on_tick idles, in that game's shape, with no `game` to set.
    engine = get_engine(game).new({}, 0)
    request = next(iter(engine.pending().values()))
    message = dict(protocol.tick(engine.tick, 100, request))
    answer = bot_class().on_tick(module.make_view(message))
    assert module.encode_answer(answer, message) == module.noop_answer(message)


def test_bot_is_rezzos_bot_class() -> None:
    """The tutorial's ``class MyBot(Bot)`` stays a Rezzo bot."""
    assert sdk.Bot is sdk.RezzoBot and sdk.Bot.game == "rezzo" and issubclass(sdk.Bot, sdk.GameBot)
