"""The ladder's config file (docs/ladder.md, "One file to run a ladder"): one TOML file naming the
ladder's folder and database (top-level keys), a ``[games.GAME]`` table per `ladder serve GAME`, a
``[web]`` table for `ladder web` and ``[[house]]`` bots.

No key is listed here: a key is a command's own option under its flag's long name without the
leading dashes (``--tls-cert`` is ``tls-cert``; an argument, such as `web`'s GAME..., under its name,
``games``), read from the click commands themselves, so an option a command gains is a key at once.
The file becomes click's ``default_map``: a flag given on the command line still wins over it.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import click

SERVE = "serve"
WEB = "web"
#: What a ``[[house]]`` entry takes, as `ladder house add NAME COMMAND --game GAME` does.
HOUSE_KEYS = ("name", "game", "command")


class ConfigFileError(click.ClickException):
    """A config file the ladder cannot run from: its path, the line when known, the table and key,
    and what to do."""

    exit_code = 2


@dataclass(frozen=True)
class HouseBot:
    """A ``[[house]]`` entry: a house bot to register (`ladder house add`)."""

    name: str
    game: str
    command: str


@dataclass(frozen=True)
class LadderFile:
    """A checked config file: each command's values by its parameters' names, as click's
    ``default_map`` takes them."""

    path: Path
    ladder: dict[str, Any]
    games: dict[str, dict[str, Any]]
    web: dict[str, Any] | None
    house: tuple[HouseBot, ...] = field(default=())

    def default_map(self) -> dict[str, Any]:
        """The ``default_map`` of the `ladder` group: its own options, then `serve GAME`'s and `web`'s."""
        web = {"games": list(self.games), **(self.web or {})}
        return {**self.ladder, SERVE: {g: dict(v) for g, v in self.games.items()}, WEB: web}

    def check_runnable(self) -> None:
        """Refuse a file `ladder up` and `ladder systemd` could run nothing from: no part, or pages of
        no game."""
        if not self.games and self.web is None:
            raise ConfigFileError(f"{self.path}: no [games.GAME] table and no [web]: nothing to run")
        if self.web is not None and not self.default_map()[WEB]["games"]:
            raise ConfigFileError(
                f"{self.path}: [web] games: the pages show no game: add [games.GAME] tables, or "
                "games = [...] in [web]"
            )

    def folder(self) -> Path:
        """The ladder's folder (`--dir`): the file's, or the group's default in the file's folder."""
        return Path(self.ladder["folder"])


def option_keys(command: click.Command) -> dict[str, click.Parameter]:
    """The config keys of ``command``: each option under its first long flag without the dashes, each
    argument under its name; `--config` and hidden options are not keys."""
    keys: dict[str, click.Parameter] = {}
    for param in command.params:
        if isinstance(param, click.Option):
            longs = [opt for opt in param.opts if opt.startswith("--")]
            if longs and param.name != "config" and not param.hidden:
                keys[longs[0][2:]] = param
        elif isinstance(param, click.Argument) and param.name:
            keys[param.name] = param
    return keys


class _Reader:
    """One file's checks, each error naming the file, the line when it can be found, the table and key."""

    def __init__(self, path: Path, text: str) -> None:
        self.path = path
        self.base = path.absolute().parent
        self.lines = text.splitlines()

    def fail(self, table: str | None, key: str | None, message: str, *, nth: int = 0) -> ConfigFileError:
        line = self._line_of(table, key, nth)
        at = f"{self.path}, line {line}" if line else str(self.path)
        where = f"[{table}] " if table else ""
        if key is not None:
            where += f"{key}: "
        elif table is None:
            where = "top level: "
        return ConfigFileError(f"{at}: {where}{message}")

    def _line_of(self, table: str | None, key: str | None, nth: int) -> int | None:
        """The line of ``key`` in ``table`` (its ``nth`` if an array of tables), found by looking."""
        start = 0
        if table is not None:
            parts = r"\s*\.\s*".join(re.escape(p) for p in table.split("."))
            header = re.compile(rf"^\s*\[\[?\s*{parts}\s*\]\]?\s*(#.*)?$")
            found = [i for i, line in enumerate(self.lines) if header.match(line)]
            if len(found) <= nth:
                return None
            start = found[nth]
            if key is None:
                return start + 1
            start += 1
        if key is None:
            return None
        assign = re.compile(rf"""^\s*["']?{re.escape(key)}["']?\s*=""")
        for i in range(start, len(self.lines)):
            if self.lines[i].lstrip().startswith("["):
                return None
            if assign.match(self.lines[i]):
                return i + 1
        return None

    def values(
        self, command: click.Command, label: str, table: str | None, given: dict[str, Any]
    ) -> dict[str, Any]:
        """``given`` (a table of the file) as ``command``'s parameter values, every key known and of
        the option's type, converted as the command would."""
        keys = option_keys(command)
        ctx = click.Context(command, info_name=command.name)
        out: dict[str, Any] = {}
        for key, value in given.items():
            param = keys.get(key)
            if param is None:
                raise self.fail(table, key, _unknown(key, list(keys), label, table is None))
            typed = self._typed(table, key, param, value)
            try:
                param.type_cast_value(ctx, typed)
            except click.BadParameter as exc:
                raise self.fail(table, key, f"{exc.format_message()}") from None
            out[param.name or key] = typed
        return out

    def _typed(self, table: str | None, key: str, param: click.Parameter, value: Any) -> Any:
        """``value`` if it is of ``param``'s TOML type (a relative path made the file's folder's)."""
        many = param.multiple or param.nargs == -1
        if many:
            if not isinstance(value, list):
                raise self.fail(table, key, f"expected an array of {_kind(param)}s, got {_shown(value)}")
            return [self._typed_one(table, key, param, item) for item in value]
        return self._typed_one(table, key, param, value)

    def _typed_one(self, table: str | None, key: str, param: click.Parameter, value: Any) -> Any:
        kind = _kind(param)
        if not isinstance(value, _TYPES[kind]) or (isinstance(value, bool) and kind != "boolean"):
            raise self.fail(
                table, key, f"expected {_article(kind)} {kind} (as for --{key}), got {_shown(value)}"
            )
        if isinstance(param.type, click.Path) and isinstance(value, str) and value:
            return str(self.base / Path(value).expanduser())  # absolute stays absolute
        return str(value) if kind == "string or integer" else value


#: The Python types tomllib gives for each kind of option (a bool is an int to Python: told apart).
_TYPES: dict[str, type | tuple[type, ...]] = {
    "boolean": bool,
    "integer": int,
    "number": (int, float),
    "string": str,
    "string or integer": (str, int),
}


def _kind(param: click.Parameter) -> str:
    """The TOML type of one value of ``param``."""
    kind = param.type
    if (isinstance(param, click.Option) and param.is_flag) or isinstance(kind, click.types.BoolParamType):
        return "boolean"
    if isinstance(kind, click.types.IntParamType):
        return "integer"
    if isinstance(kind, click.types.FloatParamType):
        return "number"
    if isinstance(kind, click.types.StringParamType | click.Path | click.Choice):
        return "string"
    return "string or integer"  # a type of the command's own, such as --workers N|auto


def _article(kind: str) -> str:
    return "an" if kind[0] in "aeiou" else "a"


def _shown(value: Any) -> str:
    names = {bool: "boolean", int: "integer", float: "number", str: "string", list: "array", dict: "table"}
    kind = next((n for t, n in names.items() if type(value) is t), type(value).__name__)
    text = repr(value) if not isinstance(value, dict) else "{...}"
    return f"{_article(kind)} {kind} {text[:60]}"


def _unknown(key: str, known: list[str], label: str, top: bool) -> str:
    hint = ""
    if key.replace("_", "-") in known:
        hint = f" (did you mean {key.replace('_', '-')}? a key is its flag without the dashes)"
    tables = " and the tables [games.GAME], [web], [[house]]" if top else ""
    return f"no such key{hint}; `{label}` takes: {', '.join(sorted(known))}{tables}"


def read_config(path: Path, ladder: click.Group) -> LadderFile:
    """Read and check the config file at ``path`` against the `ladder` group's commands."""
    try:
        text = path.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigFileError(
            f"{path}: cannot read the config file ({exc}): give a readable TOML file"
        ) from None
    reader = _Reader(path, text)
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigFileError(f"{path}: not valid TOML: {exc}: fix that line") from None
    ctx = click.Context(ladder, info_name="ladder")
    serve = ladder.get_command(ctx, SERVE)
    web = ladder.get_command(ctx, WEB)
    assert isinstance(serve, click.Group) and web is not None  # the ladder group has both
    top = {k: v for k, v in data.items() if k not in ("games", "web", "house")}
    for key, value in top.items():
        if isinstance(value, dict):
            raise reader.fail(key, None, "no such table; the tables are [games.GAME], [web], [[house]]")
    games = _games(reader, data.get("games", {}), serve, ctx)
    web_table = data.get("web")
    if web_table is not None and not isinstance(web_table, dict):
        raise reader.fail(None, "web", "expected a table: [web] and `ladder web`'s options under it")
    return LadderFile(
        path=path,
        ladder={**_relative_defaults(reader, ladder), **reader.values(ladder, "cellarena ladder", None, top)},
        games=games,
        web=None if web_table is None else reader.values(web, "ladder web", "web", web_table),
        house=_house(reader, data.get("house", []), games),
    )


def _relative_defaults(reader: _Reader, ladder: click.Group) -> dict[str, str]:
    """The group's path options left out of the file whose default is relative (``--dir ladder``):
    the file's folder's, as a relative path in the file is, wherever the command runs."""
    return {
        param.name: str(reader.base / param.default)
        for param in ladder.params
        if param.name
        and isinstance(param.type, click.Path)
        and isinstance(param.default, str | Path)
        and not Path(param.default).is_absolute()
    }


def _games(reader: _Reader, tables: Any, serve: click.Group, ctx: click.Context) -> dict[str, dict[str, Any]]:
    if not isinstance(tables, dict):
        raise reader.fail(None, "games", "expected tables: one [games.GAME] per game served")
    known = serve.list_commands(ctx)
    out = {}
    for game, table in tables.items():
        command = serve.get_command(click.Context(serve, parent=ctx, info_name=SERVE), game)
        if command is None:
            raise reader.fail(f"games.{game}", None, f"no game {game!r}; the games are: {', '.join(known)}")
        if not isinstance(table, dict):
            raise reader.fail(
                None, "games", f"games.{game}: expected a table of `ladder serve {game}`'s options"
            )
        out[game] = reader.values(command, f"ladder serve {game}", f"games.{game}", table)
    return out


def _house(reader: _Reader, entries: Any, games: dict[str, Any]) -> tuple[HouseBot, ...]:
    if not isinstance(entries, list) or not all(isinstance(e, dict) for e in entries):
        raise reader.fail(None, "house", "expected [[house]] tables, each with name, game and command")
    bots = []
    for nth, entry in enumerate(entries):
        for key, value in entry.items():
            if key not in HOUSE_KEYS:
                raise reader.fail(
                    "house", key, f"no such key; [[house]] takes: {', '.join(HOUSE_KEYS)}", nth=nth
                )
            if not isinstance(value, str) or not value.strip():
                raise reader.fail("house", key, f"expected a string, got {_shown(value)}", nth=nth)
        missing = [k for k in HOUSE_KEYS if k not in entry]
        if missing:
            raise reader.fail("house", None, f"give {' and '.join(missing)} (entry {nth + 1})", nth=nth)
        if entry["game"] not in games:
            raise reader.fail(
                "house",
                "game",
                f"{entry['game']!r} is not served by this file: add a [games.{entry['game']}] table "
                f"(it serves: {', '.join(games) or 'no game'})",
                nth=nth,
            )
        bots.append(HouseBot(entry["name"], entry["game"], entry["command"]))
    return tuple(bots)
