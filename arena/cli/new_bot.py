"""`cellarena new-bot GAME NAME`: a bot folder that runs and tests itself, to start from.

The folder holds the bot, a pytest file that plays it against the SDK's random opponent
(`cellarena.sdk.opponents`, which ships with cellarena, so the test needs no checkout) and a README
with the commands to run it. The templates are package data: ``templates/GAME/`` holds a game's
``game.toml`` (its title, options for a short match) and one bot template per language it is offered
in, ``templates/common/`` what every bot shares (the test, the README, JavaScript's protocol code).
So this module names no game, and a game gets templates by getting a folder. A placeholder is a
word such as ``__BOT_NAME__``, which no language's code here uses. The compiled languages (C++,
Rust, Java) take their library, build files, README and test from the kits of ``cellarena.sdk``
(``kits/<lang>/``), and only their bot from ``templates/GAME/``.
"""

from __future__ import annotations

import importlib.util
import json
import keyword
import re
import sys
import tomllib
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path

import click

#: Language -> (its name for people, the template file of a game's bot, the file written).
LANGUAGES = {
    "python": ("Python", "bot.py.tmpl", "{name}.py"),
    "js": ("JavaScript (Node.js 18 or newer)", "bot.js.tmpl", "bot.js"),
    "cpp": ("C++17 (CMake, msgpack-cxx)", "bot.cpp.tmpl", "bot.cpp"),
    "rust": ("Rust (cargo, rmp-serde)", "bot.rs.tmpl", "src/main.rs"),
    "java": ("Java 17 (msgpack-java)", "Bot.java.tmpl", "src/{cls}.java"),
}
#: Compiled languages: their starter is the kit of `cellarena.sdk`'s ``kits/<lang>/`` (copied into the
#: bot's ``cellarena/`` folder), the files of its ``starter/`` (templates), and the game's bot.
#: Their bot.toml builds them (`setup`) before a tournament; the command they run is built output.
COMPILED = {
    "cpp": "build/{name}",
    "rust": "target/release/{name}",
    "java": "java -jar build/{name}.jar",
}
#: Names a Rust package cannot take: the kit's own crate, and the crates Rust itself ships.
RUST_TAKEN = {"cellarena", "std", "core", "alloc", "test", "proc_macro"}
NAME = re.compile(r"[a-z][a-z0-9_]{0,63}")
#: The folder of templates shared by every game; every other folder is one game's.
COMMON = "common"


class NewBotError(click.BadParameter):
    """A refusal pointed at the argument or option at fault."""


@dataclass(frozen=True)
class Written:
    folder: Path
    files: list[Path]
    commands: list[str]

    def to_json(self) -> dict[str, object]:
        return {
            "folder": str(self.folder),
            "files": [str(f) for f in self.files],
            "commands": self.commands,
        }


def class_name(name: str) -> str:
    """``my_bot`` -> ``MyBot``."""
    return "".join(part[:1].upper() + part[1:] for part in name.split("_") if part) or "Bot"


def check_name(name: str) -> None:
    if not NAME.fullmatch(name) or keyword.iskeyword(name):
        raise NewBotError(
            f"{name!r} cannot name a bot: use 1 to 64 lower-case letters, digits and underscores, starting "
            "with a letter (it becomes a file name and a Python module name), e.g. my_bot",
            param_hint="NAME",
        )


def _templates() -> Traversable:
    return resources.files(__package__).joinpath("templates")


def offered(lang: str) -> list[str]:
    """The games with a ``lang`` template, sorted (each game's folder says what it has)."""
    template = LANGUAGES[lang][1]
    return sorted(
        d.name for d in _templates().iterdir() if d.name != COMMON and d.joinpath(template).is_file()
    )


@dataclass(frozen=True)
class GameTemplate:
    """A game's ``game.toml``: its name for people, and options that keep a test's match short."""

    title: str
    short: tuple[str, ...]

    @classmethod
    def of(cls, game: str) -> GameTemplate:
        data = tomllib.loads(_templates().joinpath(game, "game.toml").read_text(encoding="utf-8"))
        return cls(str(data.get("title", game)), tuple(str(a) for a in data.get("short", ())))


def check_game(game: str, lang: str) -> None:
    from cellarena.server.games import is_game, registry

    if not is_game(game):
        raise NewBotError(str(registry.unknown_game(game)), param_hint="GAME")
    games = offered(lang)
    if game not in games:
        others = [other for other in LANGUAGES if game in offered(other)]
        raise NewBotError(
            f"there is no {lang} template for {game}: --lang {lang} is offered for {', '.join(games)}. "
            + (f"Use --lang {others[0]} for {game}" if others else f"No template for {game} yet")
            + ", or write the bot from docs/protocol.md",
            param_hint="--lang" if others else "GAME",
        )


def _template(*parts: str) -> str:
    return _templates().joinpath(*parts).read_text(encoding="utf-8")


def _fill(text: str, values: dict[str, str]) -> str:
    for key, value in values.items():
        text = text.replace(f"__{key}__", value)
    left = re.findall(r"__[A-Z_]+__", text)
    assert not left, f"template placeholders left unfilled: {left}"  # a template bug, not user input
    return text


def write_bot(game: str, name: str, lang: str, folder: Path) -> Written:
    """Write the bot folder; NewBotError (naming the option) if it cannot."""
    check_name(name)
    check_game(game, lang)
    if lang == "rust" and name in RUST_TAKEN:
        raise NewBotError(
            f"{name!r} cannot name a Rust bot: its crate would clash with the crate {name} "
            f"(taken: {', '.join(sorted(RUST_TAKEN))}); give another NAME, e.g. my_{name}",
            param_hint="NAME",
        )
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise NewBotError(
            f"{folder} already exists and is not an empty folder; give another NAME or --dir",
            param_hint="--dir",
        )
    opponent = "random" if name != "random" else "random_opponent"
    about = GameTemplate.of(game)
    short = about.short
    language, template, target = LANGUAGES[lang]
    bot_file = target.format(name=name, cls=class_name(name))
    command = f"python {bot_file}" if lang == "python" else f"node {bot_file}"
    if lang in COMPILED:
        command = COMPILED[lang].format(name=name)
    values = {
        "BOT_NAME": name,
        "BOT_CLASS": class_name(name),
        "GAME": game,
        "GAME_TITLE": about.title,
        "LANG_TITLE": language,
        "LANG_FLAG": "" if lang == "python" else f" --lang {lang}",
        "BOT_COMMAND": command,
        "OPPONENT": opponent,
        "SHORT_ARGS": ", ".join(json.dumps(a) for a in short),
        "SHORT_LINE": "".join(f" {a}" for a in short),
        "SHORT_NOTE": (
            f"\n`{' '.join(short)}` keeps the matches short while you work; leave it out for full-length "
            "ones.\n"
            if short
            else ""
        ),
        "BOT_FILE_LINE": (
            f"The bot is `{bot_file}`: change its strategy there."
            if lang == "python"
            else "The bot is `bot.js`, with no dependencies (`msgpack.js` is a small msgpack codec):\n"
            "change its strategy in `chooseMoves`."
        ),
    }
    files: dict[str, str] = {
        "README.md": _fill(_template(COMMON, "README.md.tmpl"), values),
        f"test_{name}.py": _fill(_template(COMMON, "test_bot.py.tmpl"), values),
    }
    if lang == "python":
        files[bot_file] = _fill(_template(game, template), values)
    elif lang in COMPILED:
        files = _compiled_files(lang, values)
        files[bot_file] = _fill(_template(game, template), values)
    else:  # the game's strategy inside the protocol code every JavaScript bot shares
        strategy = _fill(_template(game, template), values)
        files[bot_file] = _fill(_template(COMMON, "connection.js.tmpl"), {**values, "STRATEGY": strategy})
        files["msgpack.js"] = _template(COMMON, "msgpack.js")
        files["bot.toml"] = f'# How cellarena starts this bot (inside this folder).\ncommand = "{command}"\n'
    try:
        folder.mkdir(parents=True, exist_ok=True)
        written = []
        for rel, text in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            written.append(path)
    except OSError as exc:
        raise NewBotError(f"{folder}: cannot write there ({exc.strerror})", param_hint="--dir") from None
    readme = files["README.md"]
    commands = re.findall(r"^(?:python -m pytest|cellarena .*)$", readme, re.MULTILINE)
    if lang in COMPILED:  # every line of the README's shell block: build, the kit's tests, play
        block = re.search(r"```sh\n(.*?)```", readme, re.DOTALL)
        commands = [line for line in (block.group(1) if block else "").splitlines() if line.strip()]
    return Written(folder, written, commands)


#: What a kit's folder may hold after someone built it in place: never copied into a starter.
_NOT_KIT = {"build", "target", "__pycache__", "Cargo.lock"}


def _kit(lang: str) -> Traversable:
    return resources.files("cellarena.sdk").joinpath("kits", lang)


def _compiled_files(lang: str, values: dict[str, str]) -> dict[str, str]:
    """A compiled language's folder: the kit under ``cellarena/``, its starter's files filled in, the
    README and the test that builds the bot and plays it."""
    files: dict[str, str] = {}

    def copy(node: Traversable, rel: str) -> None:
        for entry in sorted(node.iterdir(), key=lambda e: e.name):
            if entry.name in _NOT_KIT:
                continue
            if entry.is_dir():
                if rel or entry.name != "starter":
                    copy(entry, f"{rel}{entry.name}/")
            elif rel.startswith("@starter/"):
                name = entry.name.removesuffix(".tmpl")
                files[rel.removeprefix("@starter/") + name] = _fill(entry.read_text(encoding="utf-8"), values)
            else:
                files[f"cellarena/{rel}{entry.name}"] = entry.read_text(encoding="utf-8")

    kit = _kit(lang)
    copy(kit, "")
    copy(kit.joinpath("starter"), "@starter/")
    files[f"test_{values['BOT_NAME']}.py"] = _fill(
        resources.files("cellarena.sdk").joinpath("kits", "test_bot.py.tmpl").read_text(encoding="utf-8"),
        values,
    )
    return files


@click.command("new-bot")
@click.argument("game")
@click.argument("name")
@click.option(
    "--lang",
    type=click.Choice(sorted(LANGUAGES)),
    default="python",
    show_default=True,
    help=f"The bot's language: python ({', '.join(offered('python'))}), js (Node.js 18+: "
    f"{', '.join(offered('js'))}), or cpp, rust, java on cellarena's kits ({', '.join(offered('cpp'))}; "
    "built by the folder's bot.toml setup).",
)
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to write the bot's folder (it must not exist, or be empty). [default: ./NAME]",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the folder, files, commands.")
def new_bot(game: str, name: str, lang: str, folder: Path | None, as_json: bool) -> None:
    """Write a runnable bot for GAME named NAME: the bot, a test that plays it against cellarena's
    random GAME bot, and a README with the commands to run it.

    Then: cd NAME && python -m pytest
    """
    done = write_bot(game, name, lang, folder if folder is not None else Path(name))
    if as_json:
        click.echo(json.dumps({"game": game, "name": name, "lang": lang, **done.to_json()}))
        return
    click.echo(f"wrote {done.folder}/: " + ", ".join(p.name for p in done.files))
    click.echo("next, in that folder:")
    for command in done.commands:
        click.echo(f"  {command}")
    if importlib.util.find_spec("pytest") is None:
        click.echo(
            f"(the test needs pytest, which is not installed here: {sys.executable} -m pip install pytest)"
        )
