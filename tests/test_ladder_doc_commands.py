"""docs/ladder.md's commands (issue 42: every `cellarena` command of the page is run by a test). Each
command of the page's ```sh and ```console blocks is resolved against the real click commands (its
subcommands exist, each option is one of its command's, an option's value is there, its arguments
are as many as the command takes), and its command path is one that `RUN_BY` names a test file
for, which runs that path for real. The page's start (a file and `ladder up`) is run here as written,
`up` itself with `--check`: tests/test_ladder_up_e2e.py runs a real one from a file with the same tables."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass
from pathlib import Path

import click
import pytest
from cellarena_cli import ROOT, invoke

from cellarena.arena.cli import main
from cellarena.arena.ladder.store.ladder_store import LadderStore

DOC = ROOT / "docs" / "ladder.md"
BLOCK = re.compile(r"^```(?:sh|console)\n(.*?)^```", re.MULTILINE | re.DOTALL)

#: Each command path of the page, and the test file that runs it end to end (the backups' blocks,
#: pg_dump and pg_restore too, as written: tests/test_ladder_backup.py).
RUN_BY = {
    ("ladder", "bot", "add"): "test_ladder_cli.py",
    ("ladder", "bot", "list"): "test_ladder_cli.py",
    ("ladder", "bot", "rotate"): "test_ladder_cli.py",
    ("ladder", "bot", "revoke"): "test_ladder_cli.py",
    ("ladder", "house", "add"): "test_ladder_house_cli.py",
    ("ladder", "house", "list"): "test_ladder_house_cli.py",
    ("ladder", "house", "remove"): "test_ladder_house_cli.py",
    ("ladder", "serve"): "test_ladder_cli.py",
    ("ladder", "web"): "test_ladder_tls_parts.py",
    ("ladder", "up"): "test_ladder_up.py",
    ("ladder", "systemd"): "test_ladder_systemd.py",
    ("ladder", "replay"): "test_ladder_debug.py",
    ("ladder", "backup"): "test_ladder_backup.py",
    ("ladder", "restore"): "test_ladder_backup.py",
    ("ladder", "standings"): "test_ladder_backup.py",
    ("ladder", "pause"): "test_ladder_community.py",
    ("ladder", "resume"): "test_ladder_community.py",
    ("ladder", "ban"): "test_ladder_community.py",
    ("ladder", "unban"): "test_ladder_community.py",
    ("ladder", "audit"): "test_ladder_community.py",
    ("ladder", "register"): "test_web_ladder_connect.py",
    ("ladder", "submit"): "test_ladder_submitted_e2e.py",
    ("ladder", "rebuild"): "test_ladder_submitted_rebuild.py",
    ("new-bot",): "test_new_bot.py",
    ("bench", "ladder"): "test_ladder_bench.py",
}


@dataclass(frozen=True)
class DocCommand:
    line: int
    text: str
    words: tuple[str, ...]


def doc_commands() -> list[DocCommand]:
    """Every `cellarena` command of the page's shell blocks: continuation lines joined, comments,
    a trailing ``&`` and the brackets of optional parts (``[--grace 15]``) taken away."""
    text = DOC.read_text()
    found = []
    for block in BLOCK.finditer(text):
        first = text.count("\n", 0, block.start(1)) + 1
        joined = re.sub(r"\\\n", " ", block.group(1))
        for offset, line in enumerate(joined.splitlines()):
            words = [w.strip("[]") for w in shlex.split(line, comments=True)]
            words = [w for w in words if w not in ("", "&")]
            if words[:1] == ["cellarena"]:
                found.append(DocCommand(first + offset, line.strip(), tuple(words[1:])))
    return found


def resolve(words: tuple[str, ...]) -> tuple[str, ...]:
    """The command path ``words`` names; an AssertionError if a command, an option, an option's
    value or an argument is not as the commands take them."""
    command: click.Command = main
    ctx = click.Context(main, info_name="cellarena")
    path: list[str] = []
    rest = list(words)
    while isinstance(command, click.Group):
        rest = _options(command, rest, stop_at_argument=True)
        assert rest, f"`{' '.join(path)}` needs a subcommand"
        found = command.get_command(ctx, rest[0])
        assert found is not None, f"`{' '.join(path)}` has no subcommand {rest[0]!r}"
        path.append(rest.pop(0))
        command = found
    arguments = _options(command, rest, stop_at_argument=False)
    takes = [p for p in command.params if isinstance(p, click.Argument)]
    most = None if any(p.nargs == -1 for p in takes) else sum(p.nargs for p in takes)
    least = sum(max(p.nargs, 1) for p in takes if p.required)
    assert least <= len(arguments) and (most is None or len(arguments) <= most), (
        f"`{' '.join(path)}` takes {least} to {most} arguments, not {arguments}"
    )
    return tuple(path)


def _options(command: click.Command, words: list[str], *, stop_at_argument: bool) -> list[str]:
    """The words left once ``command``'s options (and their values) are taken; a group's stop at its
    first argument (its subcommand)."""
    options = {
        name: p for p in command.params if isinstance(p, click.Option) for name in p.opts + p.secondary_opts
    }
    left: list[str] = []
    while words:
        word = words.pop(0)
        if not word.startswith("-") or word == "-":
            left.append(word)
            if stop_at_argument:
                return [*left, *words]
            continue
        name, _, inline = word.partition("=")
        assert name in options, f"{command.name} has no option {name}; it has {sorted(options)}"
        option = options[name]
        if not (option.is_flag or option.count) and not inline:
            assert words, f"{command.name} {name} needs a value"
            words.pop(0)
    return left


def test_the_page_has_the_commands_a_host_runs() -> None:
    paths = {resolve(c.words) for c in doc_commands()}
    assert {("ladder", "up"), ("ladder", "systemd"), ("ladder", "backup"), ("ladder", "restore")} <= paths


def run_by(path: tuple[str, ...]) -> tuple[str, ...] | None:
    """The key of `RUN_BY` for ``path``: the longest that begins it (`ladder serve rezzo` is `ladder
    serve`'s, whose games are subcommands)."""
    keys = [k for k in RUN_BY if path[: len(k)] == k]
    return max(keys, key=len) if keys else None


@pytest.mark.parametrize("command", doc_commands(), ids=lambda c: f"line{c.line}")
def test_each_command_resolves_and_a_test_runs_its_path(command: DocCommand) -> None:
    path = resolve(command.words)
    key = run_by(path)
    assert key is not None, (
        f"docs/ladder.md line {command.line}: no test named for `cellarena {' '.join(path)}`"
    )
    runner = (ROOT / "tests" / RUN_BY[key]).read_text()
    for word in key[1:] or key:
        assert f'"{word}"' in runner, f"{RUN_BY[key]} never runs `{' '.join(key)}`"


def test_the_resolver_refuses_what_the_commands_do_not_take() -> None:
    for words, said in [
        (("ladder", "bot", "ad", "x"), "no subcommand 'ad'"),
        (("ladder", "serve", "rezzo", "--tls-certificate", "a.pem"), "no option --tls-certificate"),
        (("ladder", "serve", "rezzo", "--port"), "--port needs a value"),
        (("ladder", "up"), "takes 1 to 1 arguments"),
    ]:
        with pytest.raises(AssertionError, match=re.escape(said)):
            resolve(words)


def test_the_pages_start_runs_as_written(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = DOC.read_text()
    start = text.split("\n## Start to finish\n", 1)[1].split("\nWithout a file", 1)[0]
    config = re.search(r"^```toml\n(.*?)^```", start, re.MULTILINE | re.DOTALL)
    assert config is not None
    (tmp_path / "ladder.toml").write_text(config.group(1))
    monkeypatch.chdir(tmp_path)
    (block,) = BLOCK.findall(start)
    *checked, served = [shlex.split(line, comments=True)[1:] for line in block.splitlines()]
    assert served == ["ladder", "up", "ladder.toml"]  # run for real by test_ladder_up_e2e.py
    for words in checked:
        code, output = invoke(*words)
        assert code == 0, f"{words}: {output}"
    with LadderStore(tmp_path / "ladder" / "ladder.sqlite", create=False) as store:
        bots = {b.name: (b.kind, b.house_command) for b in store.list_bots("rezzo")}
    assert bots == {"builder": ("house", "python example_bots/rezzo/builder.py"), "alice": ("outside", None)}


def test_the_postgresql_dump_and_restore_are_in_the_blocks_the_backup_test_runs() -> None:
    """tests/test_ladder_backup.py runs the four ```sh blocks of "Backups" as written (placeholders
    for paths and databases aside); pg_dump and pg_restore are in them, not only in the prose."""
    section = DOC.read_text().split("\n### Backups\n", 1)[1].split("\n### ", 1)[0]
    blocks = BLOCK.findall(section)
    assert len(blocks) == 4
    programs = {shlex.split(line)[0] for block in blocks for line in block.splitlines() if line.strip()}
    assert {"pg_dump", "pg_restore", "cellarena"} <= programs, programs
    runner = (ROOT / "tests" / "test_ladder_backup.py").read_text()
    assert all(f"run_block({name}, names, path)" in runner for name in ("backup", "restore", "plain_pg"))
