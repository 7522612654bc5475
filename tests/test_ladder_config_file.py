"""The ladder's config file (`arena/ladder/ops/config_file.py`, docs/ladder.md "One file to run a
ladder"): every key it takes, derived from the commands' options, reaches that option's parameter
through `ladder --config FILE`; a flag wins over the file; bad files are refused naming the file,
line, table and key. All in this process: click's own parsing, no server started."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import click
import pytest
from cellarena_cli import ROOT, invoke

from cellarena.arena.cli.ladder import ladder
from cellarena.arena.ladder.ops.config_file import ConfigFileError, option_keys, read_config

GAMES = ("rezzo", "cata")


def _command(table: str) -> click.Command:
    ctx = click.Context(ladder, info_name="ladder")
    if table == "":
        return ladder
    if table == "web":
        command = ladder.get_command(ctx, "web")
    else:
        serve = ladder.get_command(ctx, "serve")
        assert isinstance(serve, click.Group)
        command = serve.get_command(click.Context(serve, parent=ctx), table.removeprefix("games."))
    assert command is not None
    return command


#: (table, key) for every key the file takes: the top level's (the `ladder` group's options), each
#: game's `serve` options, `web`'s. Read from the commands, as the config file reads them.
KEYS = [
    (table, key)
    for table in ("", *(f"games.{g}" for g in GAMES), "web")
    for key in option_keys(_command(table))
]


def parsed(argv: list[str]) -> dict[str, Any]:
    """The parameters the command at the end of ``argv`` (after `ladder`) gets, as click parses them:
    the group's (``argv`` naming no command), or the game's of `serve GAME`, or `web`'s."""
    ctx = ladder.make_context("ladder", list(argv) or ["standings"])
    if not argv or argv[-1].startswith("-") or ctx.args == ["standings"]:
        return dict(ctx.params)
    params = dict(ctx.params)
    rest = [*ctx._protected_args, *ctx.args]
    command: click.Command = ladder
    while rest and isinstance(command, click.Group):
        name, *rest = rest
        sub = command.get_command(ctx, name)
        assert sub is not None, name
        ctx = sub.make_context(name, list(rest), parent=ctx)
        params = dict(ctx.params)
        rest = [*ctx._protected_args, *ctx.args] if isinstance(sub, click.Group) else []
        command = sub
    return params


def argv_for(table: str) -> list[str]:
    if table == "web":
        return ["web"]
    if table.startswith("games."):
        return ["serve", table.removeprefix("games.")]
    return []


def a_value(param: click.Parameter, ctx: click.Context) -> Any:
    """A TOML value for ``param`` that its command takes and that differs from its default."""
    default = param.get_default(ctx)
    kind = param.type
    if isinstance(param, click.Option) and param.is_flag:
        return not bool(default)
    if isinstance(kind, click.Choice):
        return next(c for c in kind.choices if c != default)
    if isinstance(kind, click.types.IntParamType):
        low = getattr(kind, "min", None)
        return next(v for v in ((low or 0) + 1, (low or 0) + 2) if v != default)
    if isinstance(kind, click.types.FloatParamType):
        low = getattr(kind, "min", None) or 0
        return next(v for v in (low + 0.5, low + 1.5) if v != default)
    if param.nargs == -1 or param.multiple:
        many = {"games": ["cata"], "live_ports": ["rezzo=7777", "cata=auto"]}
        return many.get(param.name or "", ["10.0.0.1", "10.0.0.2"])
    if isinstance(kind, click.types.StringParamType | click.Path):
        # Options whose callbacks check what the text names get a value of that kind.
        named = {
            "db": "postgresql://ladder@db.example/ladder",
            "public_host": "ladder.example.org",
            "public_url": "https://ladder.example.org",
        }
        return named.get(param.name or "", "some/where.pem")
    # A type of the command's own (--workers, --cluster, --password-hash).
    for candidate in ("2", "local:2", "auto", "m=19456,t=2,p=1"):
        try:
            if param.type_cast_value(ctx, candidate) != default:
                return candidate
        except click.BadParameter:
            continue
    raise AssertionError(f"no test value for {param.name} ({kind!r}): add one here")


def toml_of(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(toml_of(v) for v in value) + "]"
    if isinstance(value, str):
        return f'"{value}"'
    return repr(value)


def test_the_keys_are_the_options_flags_without_their_dashes() -> None:
    served = dict(KEYS)
    assert {"dir", "db"} <= {k for t, k in KEYS if t == ""}
    assert {"port", "tls-cert", "workers", "house-after", "pause-after", "challenges-rated", "verbose"} <= {
        k for t, k in KEYS if t == "games.rezzo"
    }
    assert {"signup", "allowed-host", "games", "live-port"} <= {k for t, k in KEYS if t == "web"}
    assert "config" not in served.values() and "help" not in served.values()


@pytest.mark.parametrize(("table", "key"), KEYS, ids=[f"{t or 'top'}:{k}" for t, k in KEYS])
def test_each_key_reaches_its_options_parameter(
    table: str, key: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CELLARENA_LADDER_DB", raising=False)
    command = _command(table)
    param = option_keys(command)[key]
    if isinstance(param, click.Option) and isinstance(param.envvar, str):  # it wins over the file
        monkeypatch.delenv(param.envvar, raising=False)
    ctx = click.Context(command)
    value = a_value(param, ctx)
    header = f"[{table}]\n" if table else ""
    if table == "web":
        header = "[games.rezzo]\n" + header  # web serves the file's games
    path = tmp_path / "ladder.toml"
    path.write_text(f"{header}{key} = {toml_of(value)}\n")
    if isinstance(param.type, click.Path) and param.type.file_okay:  # one that must exist does
        (tmp_path / "some").mkdir()
        (tmp_path / value).touch()
    without = parsed(argv_for(table) + (["rezzo"] if table == "web" else []))
    got = parsed(["--config", str(path), *argv_for(table)])
    if isinstance(param.type, click.Path):
        value = str(tmp_path / value)  # a relative path is the file's folder's
    assert got[param.name or key] == param.type_cast_value(ctx, value)
    assert got[param.name or key] != without.get(param.name or key)


def test_a_flag_wins_over_the_file(tmp_path: Path) -> None:
    path = tmp_path / "ladder.toml"
    path.write_text('dir = "from-file"\n[games.rezzo]\nport = 7790\nhost = "0.0.0.0"\n[web]\nport = 8090\n')
    from_file = parsed(["--config", str(path), "serve", "rezzo"])
    assert (from_file["port"], from_file["host"]) == (7790, "0.0.0.0")
    flags = parsed(["--config", str(path), "serve", "rezzo", "--port", "7791"])
    assert (flags["port"], flags["host"]) == (7791, "0.0.0.0")
    assert parsed(["--config", str(path), "--dir", "elsewhere"])["folder"] == Path("elsewhere")
    assert parsed(["--config", str(path)])["folder"] == tmp_path / "from-file"
    assert parsed(["--config", str(path), "web", "--port", "1"])["port"] == 1
    assert parsed(["--config", str(path), "web"])["games"] == ("rezzo",)  # the file's games
    bare = tmp_path / "bare.toml"
    bare.write_text("[games.cata]\n")
    assert parsed(["--config", str(bare)])["folder"] == tmp_path / "ladder"  # beside the file, wherever run


BAD = {
    "syntax": (
        '[games.rezzo]\nport = 7777\nhost = "0.0.0.0\n',
        r"ladder\.toml: not valid TOML: .*line 3.*fix that line",
    ),
    "unknown key": (
        "[games.rezzo]\nport = 7777\ntls_cert = 'x.pem'\n",
        r"ladder\.toml, line 3: \[games\.rezzo\] tls_cert: no such key \(did you mean tls-cert\?.*"
        r"`ladder serve rezzo` takes: .*house-after, .*tls-cert",
    ),
    "wrong type": (
        '[web]\nsignup = "open"\nport = "8080"\n',
        r"ladder\.toml, line 3: \[web\] port: expected an integer \(as for --port\), got a string '8080'",
    ),
    "out of range": (
        "[games.cata]\n\nworkers = 'two'\n",
        r"ladder\.toml, line 3: \[games\.cata\] workers: .*two",
    ),
    "unknown game": (
        "[games.rezzo]\nport = 1\n[games.chess]\nport = 2\n",
        r"ladder\.toml, line 3: \[games\.chess\] no game 'chess'; the games are: .*cata.*rezzo",
    ),
    "unknown top-level key": (
        'folder = "x"\n',
        r"ladder\.toml, line 1: folder: no such key; `cellarena ladder` takes: db, dir and the tables",
    ),
    "house bot of a game not served": (
        '[games.rezzo]\n[[house]]\nname = "b"\ngame = "cata"\ncommand = "python b.py"\n',
        r"ladder\.toml, line 4: \[house\] game: 'cata' is not served by this file: add a \[games\.cata\]",
    ),
    "house bot without a command": (
        '[games.rezzo]\n[[house]]\nname = "a"\ngame = "rezzo"\ncommand = "x"\n[[house]]\nname = "b"\n'
        'game = "rezzo"\n',
        r"ladder\.toml, line 6: \[house\] give command \(entry 2\)",
    ),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_bad_file_is_refused_naming_where_and_what_to_do(case: str, tmp_path: Path) -> None:
    text, expected = BAD[case]
    path = tmp_path / "ladder.toml"
    path.write_text(text)
    with pytest.raises(ConfigFileError) as raised:
        read_config(path, ladder)
    assert re.search(expected, raised.value.format_message()), raised.value.format_message()
    code, output = invoke("ladder", "--config", str(path), "standings", "rezzo")
    assert code == 2 and "ladder.toml" in output and "Traceback" not in output


def test_a_missing_file_says_so(tmp_path: Path) -> None:
    code, output = invoke("ladder", "--config", str(tmp_path / "nope.toml"), "standings", "rezzo")
    assert code == 2 and "nope.toml" in output and "cannot read the config file" in output


def doc_example() -> str:
    doc = (ROOT / "docs" / "ladder.md").read_text()
    section = doc[doc.index("## One file to run a ladder") :]
    found = re.search(r"```toml\n(.*?)```", section, re.S)
    assert found, "docs/ladder.md's 'One file to run a ladder' has a ```toml example"
    return found.group(1)


def test_the_docs_example_config_reads_as_it_says(tmp_path: Path) -> None:
    path = tmp_path / "ladder.toml"
    path.write_text(doc_example())
    read = read_config(path, ladder)
    assert list(read.games) == ["rezzo", "cata"]
    assert read.ladder["folder"] == "/srv/ladder"
    assert read.games["rezzo"]["tls_cert"] == "/etc/cellarena/fullchain.pem"
    assert read.web is not None and read.web["signup"] == "open"
    assert [b.name for b in read.house] == ["builder"]


def test_the_docs_error_example_is_what_the_ladder_says(tmp_path: Path) -> None:
    doc = (ROOT / "docs" / "ladder.md").read_text()
    said = re.search(r"^\s*(Error: ladder\.toml, line .*)$", doc, re.M)
    assert said is not None
    path = tmp_path / "ladder.toml"
    path.write_text(doc_example().replace("port = 7777", 'port = "7777"', 1))
    code, output = invoke("ladder", "--config", str(path), "bot", "list")
    assert code == 2 and output.strip().replace(str(path), "ladder.toml") == said.group(1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", "no [games.GAME] table and no [web]: nothing to run"),
        ("[web]\nport = 8080\n", "[web] games: the pages show no game: add [games.GAME] tables"),
    ],
)
@pytest.mark.parametrize("command", ["up", "systemd"])
def test_a_file_with_nothing_to_run_is_refused_before_anything_starts(
    command: str, text: str, expected: str, tmp_path: Path
) -> None:
    path = tmp_path / "ladder.toml"
    path.write_text(text)
    code, output = invoke("ladder", command, str(path))
    assert code == 2 and expected in output, output
    assert list(tmp_path.iterdir()) == [path]  # no folder made, no unit written
