"""With --json, every command's errors are one JSON object on stdout (error, code, the option at
fault) and a non-zero exit; without it, the usual text on stderr."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from cellarena_cli import cellarena, run_here

#: The one case run as a process, as a user runs it: `main` reads sys.argv, prints the JSON and exits
#: by sys.exit. The rest run in this process (`run_here`: a process costs a second of imports).
AS_A_PROCESS = "results"


@pytest.mark.parametrize(
    ("args", "code", "option", "words"),
    [
        (["match", "rezzo", "--bot", "solo"], "bad_parameter", "--bot", "is not NAME=COMMAND"),
        (["tournament", "rezzo", "--bogus"], "no_such_option", "--bogus", "No such option"),
        (["tournament", "rezzo", "--bot", "a=x", "--bot", "a=y"], "bad_parameter", "--bot/--bots-dir",
         "'a' is already used"),
        (["results", "{tmp}"], "bad_parameter", "RUNS_DIR", "no results here"),
        (["sim", "rezzo", "--ticks", "-5"], "bad_parameter", "--ticks", ""),
        (["ladder", "bot", "list", "--db", "{tmp}/nope/none/x.sqlite"], None, None, ""),
    ],
)  # fmt: skip
def test_errors_with_json_are_json_on_stdout(
    tmp_path: Path, args: list[str], code: str | None, option: str | None, words: str
) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in args]
    run = cellarena if argv[0] == AS_A_PROCESS else run_here
    proc = run(*argv, "--json")
    assert proc.returncode != 0
    error = json.loads(proc.stdout)
    assert set(error) >= {"error", "code", "exit_code"} and error["exit_code"] == proc.returncode
    assert words in error["error"]
    if code is not None:
        assert error["code"] == code
    if option is not None:
        assert error["option"] == option
    assert proc.stderr == ""
    text = run_here(*argv)
    assert text.returncode == proc.returncode and text.stdout == "" and "Error" in text.stderr
