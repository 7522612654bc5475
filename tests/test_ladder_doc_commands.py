"""docs/ladder.md's commands (issue 42: every `cellarena` command of the page is run by a test). Each
command of the page's ```sh and ```console blocks is resolved against the real click commands (its
subcommands exist, each option is one of its command's, an option's value is there, its arguments
are as many as the command takes), the synopses with their [optional] parts too. The page's parser
is here; tests/test_ladder_doc_walk.py runs every command as written, or names why it cannot."""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

import click
import pytest
from cellarena_cli import ROOT

from cellarena.arena.cli import main

DOC = ROOT / "docs" / "ladder.md"
BLOCK = re.compile(r"^```(?:sh|console)\n(.*?)^```", re.MULTILINE | re.DOTALL)
HEADING = re.compile(r"^#{2,3} (.+)$", re.MULTILINE)


@dataclass(frozen=True)
class DocCommand:
    line: int
    text: str
    #: Its words after `cellarena`, the brackets of optional parts taken away (for the resolver).
    words: tuple[str, ...]
    #: Its words after `cellarena` as a shell splits them (what tests/test_ladder_doc_walk.py runs).
    written: tuple[str, ...]
    #: The heading of the page's section it is in, and its block's number on the page.
    section: str
    block: int


def doc_commands() -> list[DocCommand]:
    """Every `cellarena` command of the page's shell blocks: continuation lines joined, comments,
    a trailing ``&`` and the brackets of optional parts (``[--grace 15]``) taken away."""
    text = DOC.read_text()
    headings = [(m.start(), m.group(1)) for m in HEADING.finditer(text)]
    found = []
    for number, block in enumerate(BLOCK.finditer(text)):
        first = text.count("\n", 0, block.start(1)) + 1
        section = [title for at, title in headings if at < block.start()][-1]
        joined = re.sub(r"\\\n", " ", block.group(1))
        for offset, line in enumerate(joined.splitlines()):
            written = [w for w in shlex.split(line, comments=True) if w != "&"]
            words = [w for w in (w.strip("[]") for w in written) if w]
            if words[:1] == ["cellarena"]:
                command = DocCommand(
                    first + offset, line.strip(), tuple(words[1:]), tuple(written[1:]), section, number
                )
                found.append(command)
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


@pytest.mark.parametrize("command", doc_commands(), ids=lambda c: f"line{c.line}")
def test_each_command_resolves(command: DocCommand) -> None:
    resolve(command.words)


def test_the_resolver_refuses_what_the_commands_do_not_take() -> None:
    for words, said in [
        (("ladder", "bot", "ad", "x"), "no subcommand 'ad'"),
        (("ladder", "serve", "rezzo", "--tls-certificate", "a.pem"), "no option --tls-certificate"),
        (("ladder", "serve", "rezzo", "--port"), "--port needs a value"),
        (("ladder", "up"), "takes 1 to 1 arguments"),
    ]:
        with pytest.raises(AssertionError, match=re.escape(said)):
            resolve(words)


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
