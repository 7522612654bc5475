"""mypy over the cellarena package, held to a committed baseline that only shrinks.

The package installs through setuptools' package-dir mapping (server/ -> cellarena.server, ...) and an
editable install whose import hook mypy cannot follow, and no mypy_path makes the folder `server` be
the module `cellarena.server`. So this builds a throwaway tree `cellarena/{server,sdk,arena}` of
symlinks to the checkout, outside it, and runs `mypy -p cellarena` there: every `cellarena.*` import
resolves to the source being checked, whatever is installed.

Errors are compared to tests/mypy-baseline.txt by file, error code and message, never by line, so an
unrelated edit above an old error does not churn the baseline. New errors fail (new code is typed);
baseline entries that no longer occur fail too, until the baseline is shrunk with `--update`.

    python tests/typecheck.py            # report new and fixed errors, exit 1 if there are any
    python tests/typecheck.py --update   # drop the baseline entries that no longer occur
    python tests/typecheck.py --reset    # rewrite the baseline from scratch (a mypy upgrade that
                                         # rewords its messages); the diff is there for review
"""

from __future__ import annotations

import argparse
import getpass
import hashlib
import os
import re
import subprocess
import sys
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tests" / "mypy-baseline.txt"
#: The folders that make up the distribution; example_bots and tests are not part of it.
PACKAGES = ("server", "sdk", "arena")
UPDATE_COMMAND = "python tests/typecheck.py --update"
BASELINE_HEADER = (
    "# mypy errors tolerated in old code: file: [code] message, one line per occurrence.\n"
    f"# It only shrinks: fix an error, then run `{UPDATE_COMMAND}`. New code gets no entries.\n"
)

_ERROR = re.compile(r"^(?P<path>[^:\n]+):(?P<line>\d+): error: (?P<message>.*?)  \[(?P<code>[a-z0-9-]+)\]$")
#: Messages that quote another line ("already defined on line 12") would churn with unrelated edits.
_LINE_REFERENCE = re.compile(r"\bline \d+\b")


@dataclass(frozen=True)
class MypyError:
    path: str  # relative to the checkout, e.g. server/match.py
    line: int
    code: str
    message: str

    @property
    def key(self) -> str:
        """The baseline's form of the error: no line number, so moving code does not change it."""
        return f"{self.path}: [{self.code}] {_LINE_REFERENCE.sub('line N', self.message)}"

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: [{self.code}] {self.message}"


def work_dir() -> Path:
    """Where the symlink tree and mypy's cache live: outside the checkout, one per checkout, and
    stable between runs so the cache stays warm."""
    tag = hashlib.sha256(f"{getpass.getuser()}:{ROOT}".encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"cellarena-mypy-{tag}"


def build_tree(work: Path) -> Path:
    """cellarena/{server,sdk,arena} -> the checkout's folders. The top package gets an empty
    __init__.py: as a namespace package, mypy would take rezzo's data folder `maps/` for the module
    `maps.py` beside it."""
    tree = work / "tree"
    top = tree / "cellarena"
    top.mkdir(parents=True, exist_ok=True)
    (top / "__init__.py").touch()
    for name in PACKAGES:
        link = top / name
        if link.is_symlink() and Path(os.readlink(link)) == ROOT / name:
            continue
        if link.is_symlink() or link.exists():
            link.unlink()
        link.symlink_to(ROOT / name, target_is_directory=True)
    return tree


def run_mypy() -> list[MypyError]:
    work = work_dir()
    tree = build_tree(work)
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(ROOT / "pyproject.toml"),
        "--cache-dir",
        str(work / "cache"),
        "--no-pretty",
        "--no-color-output",
        "--no-error-summary",
        "--show-error-codes",
        "-p",
        "cellarena",
    ]
    proc = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"mypy failed to run (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    errors = []
    for line in proc.stdout.splitlines():
        match = _ERROR.match(line)
        if match is None:
            continue  # notes, which belong to the error above them
        parts = Path(match["path"]).parts  # cellarena/server/match.py is the checkout's server/match.py
        errors.append(
            MypyError(
                path=Path(*parts[1:]).as_posix() if parts[0] == "cellarena" else match["path"],
                line=int(match["line"]),
                code=match["code"],
                message=match["message"],
            )
        )
    if proc.returncode == 1 and not errors:
        raise RuntimeError(
            "mypy exited 1 but printed no error this script understands (is mypy installed? "
            f"`pip install -e '.[test]'`):\n{proc.stdout}{proc.stderr}"
        )
    return errors


def read_baseline() -> Counter[str]:
    if not BASELINE.exists():
        return Counter()
    lines = BASELINE.read_text().splitlines()
    return Counter(line for line in lines if line and not line.startswith("#"))


def write_baseline(keys: Counter[str]) -> None:
    BASELINE.write_text(BASELINE_HEADER + "".join(f"{key}\n" for key in sorted(keys.elements())))


@dataclass
class Comparison:
    new: list[MypyError]  # every occurrence of a key found more often than the baseline allows
    gone: Counter[str]  # baseline entries that no longer occur

    def report(self) -> str:
        parts = []
        if self.new:
            listed = "\n".join(f"  {e}" for e in sorted(self.new, key=lambda e: (e.path, e.line)))
            parts.append(
                f"{len(self.new)} mypy error(s) not in tests/mypy-baseline.txt. Type the new code: the "
                f"baseline holds only old code's errors.\n{listed}"
            )
        if self.gone:
            listed = "\n".join(f"  {key}" for key in sorted(self.gone.elements()))
            parts.append(
                f"{self.gone.total()} baseline entries no longer occur (fixed, or moved to another file). "
                f"Shrink the baseline with `{UPDATE_COMMAND}`:\n{listed}"
            )
        return "\n\n".join(parts)


def compare(errors: list[MypyError], baseline: Counter[str]) -> Comparison:
    found = Counter(e.key for e in errors)
    over = {key for key, count in found.items() if count > baseline[key]}
    return Comparison(new=[e for e in errors if e.key in over], gone=baseline - found)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], epilog="The module's docstring says more."
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--update", action="store_true", help="drop the baseline entries that no longer occur")
    mode.add_argument("--reset", action="store_true", help="write every current error to the baseline")
    args = parser.parse_args(argv)
    errors = run_mypy()
    if args.reset:
        write_baseline(Counter(e.key for e in errors))
        print(f"wrote {len(errors)} entries to {BASELINE.relative_to(ROOT)}")
        return 0
    baseline = read_baseline()
    result = compare(errors, baseline)
    if args.update and result.gone:
        baseline -= result.gone
        write_baseline(baseline)
        print(f"dropped {result.gone.total()} entries from {BASELINE.relative_to(ROOT)}")
        result.gone = Counter()
    if result.new or result.gone:
        print(result.report())
        return 1
    print(f"mypy: no new errors; {baseline.total()} old ones left in {BASELINE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
