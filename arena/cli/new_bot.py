"""`cellarena new-bot GAME NAME`: a bot folder that runs and tests itself, to start from.

The folder holds the bot, a pytest file that plays it against the SDK's random opponent
(`cellarena.sdk.opponents`, which ships with cellarena, so the test needs no checkout) and a README
with the commands to run it. The templates are package data: ``templates/GAME/`` holds a game's
``game.toml`` (its title, options for a short match) and one bot template per language it is offered
in, ``templates/common/`` what every bot shares (the test, the README). So this module names no game,
and a game gets templates by getting a folder. A placeholder is a word such as ``__BOT_NAME__``,
which no language's code uses.

A TypeScript or JavaScript bot is built on the TypeScript kit (``cellarena/sdk/kits/typescript``,
package data too): its folder gets a copy of the kit's sources in ``cellarena/``, the kit's pinned
packages (``package.json`` and ``package-lock.json``, for ``npm ci``) and a ``tsconfig.json``, so it
builds anywhere with Node.js alone, and keeps building when cellarena is upgraded. The compiled
languages (C++, Rust, Java) take their library, build files, README and test from the kits of
``cellarena.sdk`` (``kits/<lang>/``), and only their bot from ``templates/GAME/``.
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
    "js": ("JavaScript (Node.js 18 or newer)", "bot.js.tmpl", "src/bot.js"),
    "ts": ("TypeScript (Node.js 18 or newer)", "bot.ts.tmpl", "src/bot.ts"),
    "cpp": ("C++17 (CMake, msgpack-cxx)", "bot.cpp.tmpl", "bot.cpp"),
    "rust": ("Rust (cargo, rmp-serde)", "bot.rs.tmpl", "src/main.rs"),
    "java": ("Java 17 (msgpack-java)", "Bot.java.tmpl", "src/{cls}.java"),
}
#: Languages whose bots are built on the TypeScript kit, and run by node from its build.
NODE_LANGUAGES = ("js", "ts")
#: How a bot on the kit is built (its test does it before it plays): tsc from its own packages, run by
#: node itself, as are the setup's steps. No npm script runs on the way: npm has been seen to hang
#: after a lifecycle script ends, and a tournament or a test must not.
NODE_BUILD = ("node", "node_modules/typescript/bin/tsc", "-b")
NODE_SETUP = f"npm ci --no-audit --no-fund --ignore-scripts && {' '.join(NODE_BUILD)}"
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


#: ``--template`` values: the plain bot of every game and language, and ``trained``: a bot played by a
#: network that `cellarena train GAME` trains, for the games with a ``templates/GAME/trained/``.
TEMPLATES = ("basic", "trained")
#: The files of a trained template (``templates/GAME/trained/FILE.tmpl``) and what each is written as.
TRAINED_FILES = {
    "bot.py": "bot.py",
    "policy.py": "policy.py",
    "bot.toml": "bot.toml",
    "README.md": "README.md",
    "test_bot.py": "test_{name}.py",
}


def trained_games() -> list[str]:
    """The games with a trained template, sorted."""
    return sorted(d.name for d in _templates().iterdir() if d.joinpath("trained", "bot.py.tmpl").is_file())


def _trained_files(game: str, name: str, lang: str) -> dict[str, str]:
    """The folder of ``--template trained``: the bot, its network (the layout `cellarena train` trains,
    with ``--bot-dir``), its bot.toml, README and test."""
    games = trained_games()
    if game not in games or lang != "python":
        raise NewBotError(
            f"--template trained is offered for {', '.join(games)} in Python (`cellarena train` trains "
            f"those); for {game} in {lang} use --template basic",
            param_hint="--template",
        )
    values = {
        "BOT_NAME": name,
        "SHORT_ARGS": ", ".join(json.dumps(a) for a in GameTemplate.of(game).short),
    }
    return {
        target.format(name=name): _fill(_template(game, "trained", f"{source}.tmpl"), values)
        for source, target in TRAINED_FILES.items()
    }


def _write_files(folder: Path, files: dict[str, str]) -> list[Path]:
    try:
        for rel, text in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise NewBotError(f"{folder}: cannot write there ({exc.strerror})", param_hint="--dir") from None
    return [folder / rel for rel in files]


def _check_folder(folder: Path) -> None:
    if folder.exists() and (not folder.is_dir() or any(folder.iterdir())):
        raise NewBotError(
            f"{folder} already exists and is not an empty folder; give another NAME or --dir",
            param_hint="--dir",
        )


def write_trained_bot(game: str, name: str, lang: str, folder: Path) -> Written:
    """Write the folder of ``--template trained``; NewBotError (naming the option) if it cannot."""
    check_name(name)
    check_game(game, lang)
    files = _trained_files(game, name, lang)
    _check_folder(folder)
    written = _write_files(folder, files)
    commands = re.findall(r"^(?:python -m pytest|cellarena .*)$", files["README.md"], re.MULTILINE)
    return Written(folder, written, commands)


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
    node = lang in NODE_LANGUAGES
    command = "node dist/src/bot.js" if node else f"python {bot_file}"
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
        "SETUP_LINES": "npm ci\n" if node else "",
        "NEEDS": ", Node.js 18 or newer and npm" if node else "",
        "BUILD_ARGS": ", ".join(json.dumps(a) for a in NODE_BUILD) if node else "",
        "BOT_FILE_LINE": (
            f"The bot is `{bot_file}`: change its strategy there."
            if not node
            else f"The bot is `{bot_file}`, on cellarena's TypeScript kit (`cellarena/`, whose README shows "
            "each game's view):\nchange its strategy there. `npm ci` installs the pinned packages, "
            "`npm run build` builds the bot\ninto `dist/` (the test builds it before it plays)."
        ),
    }
    files: dict[str, str] = {
        "README.md": _fill(_template(COMMON, "README.md.tmpl"), values),
        f"test_{name}.py": _fill(_template(COMMON, "test_bot.py.tmpl"), values),
        bot_file: _fill(_template(game, template), values),
    }
    if node:
        files.update(_node_files(name, lang, command))
    elif lang in COMPILED:
        files = _compiled_files(lang, values)
        files[bot_file] = _fill(_template(game, template), values)
    try:
        for rel, text in files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
        written = [folder / rel for rel in files]
    except OSError as exc:
        raise NewBotError(f"{folder}: cannot write there ({exc.strerror})", param_hint="--dir") from None
    readme = files["README.md"]
    commands = re.findall(r"^(?:npm .*|python -m pytest|cellarena .*)$", readme, re.MULTILINE)
    if lang in COMPILED:  # every line of the README's shell block: build, the kit's tests, play
        block = re.search(r"```sh\n(.*?)```", readme, re.DOTALL)
        commands = [line for line in (block.group(1) if block else "").splitlines() if line.strip()]
    return Written(folder, written, commands)


def _kit(lang: str) -> Traversable:
    """The kit of ``lang`` (``typescript`` for js and ts bots) in the installed package."""
    return resources.files("cellarena.sdk").joinpath("kits", lang)


def _kit_sources(root: Traversable, into: str) -> dict[str, str]:
    """The kit's ``.ts`` sources under ``root``, as files of the bot's folder under ``into``."""
    found: dict[str, str] = {}
    for entry in root.iterdir():
        if entry.is_dir():
            found.update(_kit_sources(entry, f"{into}/{entry.name}"))
        elif entry.name.endswith(".ts"):
            found[f"{into}/{entry.name}"] = entry.read_text(encoding="utf-8")
    return found


def _node_files(name: str, lang: str, command: str) -> dict[str, str]:
    """What a bot on the TypeScript kit needs beside its source: the kit, its pinned packages, the build
    and how the arena starts it (``setup``: `npm ci` once, which builds it too)."""
    kit = _kit("typescript")
    package = json.loads(kit.joinpath("package.json").read_text(encoding="utf-8"))
    lock = json.loads(kit.joinpath("package-lock.json").read_text(encoding="utf-8"))
    mine = {
        "name": name,
        "version": "0.1.0",
        "private": True,
        "description": f"A cellarena bot in {LANGUAGES[lang][0].split(' (')[0]}.",
        "scripts": {"build": "tsc -b", "start": command},
        "engines": package["engines"],
        "dependencies": package["dependencies"],
        "devDependencies": package["devDependencies"],
    }
    # The kit's lock pins the very same packages: only the root entry is this bot's.
    lock["name"], lock["version"] = name, "0.1.0"
    root = lock["packages"][""]
    root.update({"name": name, "version": "0.1.0"})
    root.pop("license", None)
    options: dict[str, object] = {
        "target": "ES2022",
        "module": "node16",
        "moduleResolution": "node16",
        "lib": ["ES2022"],
        "types": ["node"],
        "strict": True,
        "noEmitOnError": True,  # a bot that does not type-check is not built, so it is not played
        "skipLibCheck": True,  # @msgpack/msgpack's types name a DOM type that node's lack
        "outDir": "dist",
        "rootDir": ".",
    }
    if lang == "js":
        options.update({"allowJs": True, "checkJs": True})
    tsconfig = {"compilerOptions": options, "include": ["src", "cellarena"]}
    return {
        "package.json": json.dumps(mine, indent=2) + "\n",
        "package-lock.json": json.dumps(lock, indent=2) + "\n",
        "tsconfig.json": json.dumps(tsconfig, indent=2) + "\n",
        ".gitignore": "node_modules/\ndist/\n*.tsbuildinfo\n",
        "bot.toml": (
            "# How cellarena starts this bot (inside this folder). `setup` installs the pinned packages and\n"
            "# builds the bot into dist/, once, before a tournament: when dist/src/bot.js is missing.\n"
            f'command = "{command}"\nsetup = "sh -c \'{NODE_SETUP}\'"\ncreates = "dist/src/bot.js"\n'
        ),
        "cellarena/README.md": kit.joinpath("README.md").read_text(encoding="utf-8"),
        **_kit_sources(kit.joinpath("src"), "cellarena"),
    }


#: What a kit's folder may hold after someone built it in place: never copied into a starter.
_NOT_KIT = {"build", "target", "__pycache__", "Cargo.lock"}


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
    if "Cargo.lock" in files:
        files["Cargo.lock"] = _with_bot_in_lock(files["Cargo.lock"], values["BOT_NAME"])
    files[f"test_{values['BOT_NAME']}.py"] = _fill(
        resources.files("cellarena.sdk").joinpath("kits", "test_bot.py.tmpl").read_text(encoding="utf-8"),
        values,
    )
    return files


def _with_bot_in_lock(lock: str, name: str) -> str:
    """The Rust kit's committed Cargo.lock (the crates of Debian 12's cargo registry, pinned) with the
    bot's own package added where cargo keeps it, in name order: cargo then builds from it as it is,
    without rewriting it."""
    blocks = [block.strip("\n") for block in lock.split("\n[[package]]\n")]
    head, packages = blocks[0], blocks[1:]
    packages.append(f'name = "{name}"\nversion = "0.1.0"\ndependencies = [\n "cellarena",\n]')
    packages.sort(key=lambda block: block.split('"', 2)[1])
    return "\n\n[[package]]\n".join([head, *packages]) + "\n"


@click.command("new-bot")
@click.argument("game")
@click.argument("name")
@click.option(
    "--lang",
    type=click.Choice(sorted(LANGUAGES)),
    default="python",
    show_default=True,
    help=f"The bot's language: python ({', '.join(offered('python'))}), ts or js (Node.js 18+, on "
    f"cellarena's TypeScript kit: {', '.join(offered('ts'))}), or cpp, rust, java on cellarena's kits "
    f"({', '.join(offered('cpp'))}; built by the folder's bot.toml setup).",
)
@click.option(
    "--dir",
    "folder",
    type=click.Path(file_okay=False, path_type=Path),
    default=None,
    help="Where to write the bot's folder (it must not exist, or be empty). [default: ./NAME]",
)
@click.option(
    "--template",
    type=click.Choice(TEMPLATES),
    default="basic",
    show_default=True,
    help=f"basic: a bot with a simple strategy to change. trained ({', '.join(trained_games())}, "
    "Python): a bot played by a small network, which `cellarena train GAME --bot-dir NAME` trains "
    "from an exported dataset (docs/training.md).",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object: the folder, files, commands.")
def new_bot(game: str, name: str, lang: str, folder: Path | None, template: str, as_json: bool) -> None:
    """Write a runnable bot for GAME named NAME: the bot, a test that plays it against cellarena's
    random GAME bot, and a README with the commands to run it.

    Then: cd NAME && python -m pytest (for ts and js, `npm ci` first)
    """
    write = write_trained_bot if template == "trained" else write_bot
    done = write(game, name, lang, folder if folder is not None else Path(name))
    if as_json:
        click.echo(json.dumps({"game": game, "name": name, "lang": lang, **done.to_json()}))
        return
    # Top-level entries only: a bot on the TypeScript kit has a folder of the kit's sources.
    entries = {
        p.relative_to(done.folder).parts[0] + ("/" if p.parent != done.folder else ""): None
        for p in done.files
    }
    click.echo(f"wrote {done.folder}/: " + ", ".join(entries))
    click.echo("next, in that folder:")
    for command in done.commands:
        click.echo(f"  {command}")
    if importlib.util.find_spec("pytest") is None:
        click.echo(
            f"(the test needs pytest, which is not installed here: {sys.executable} -m pip install pytest)"
        )
