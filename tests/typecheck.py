"""mypy over the cellarena package, held to a committed baseline that only shrinks.

The package installs through setuptools' package-dir mapping (server/ -> cellarena.server, ...) and an
editable install whose import hook mypy cannot follow, and no mypy_path makes the folder `server` be
the module `cellarena.server`. So this builds a throwaway tree `cellarena/{server,sdk,arena}` of
symlinks to the checkout, outside it, and runs `mypy -p cellarena` there: every `cellarena.*` import
resolves to the source being checked, whatever is installed.

Errors are compared to tests/mypy-baseline.txt by file, error code and message, never by line, so an
unrelated edit above an old error does not churn the baseline. New errors fail (new code is typed);
baseline entries that no longer occur fail too, until the baseline is shrunk with `--update`.

The example bots are checked too, as a bot author's own bot would be: each file a script (they are no
package, and two games each have a `planner.py`), strict, with `cellarena` resolving to the same tree,
and no baseline: an example bot is typed, and its ``on_tick`` fits its game's bot class
(`check_scripts`; tests/test_sdk_types.py runs it on bots made wrong on purpose).

Every run shares one warm cache, one per checkout and taken in turn by pytest-xdist's processes:
the package's run writes it, and each run over scripts reads a copy of it (`_check_batch` says why).

    python tests/typecheck.py            # report new and fixed errors, exit 1 if there are any
    python tests/typecheck.py --update   # drop the baseline entries that no longer occur
    python tests/typecheck.py --reset    # rewrite the baseline from scratch (a mypy upgrade that
                                         # rewords its messages); the diff is there for review
"""

from __future__ import annotations

import argparse
import fcntl
import getpass
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import tomllib
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BASELINE = ROOT / "tests" / "mypy-baseline.txt"
PYPROJECT = ROOT / "pyproject.toml"
#: The folders that make up the distribution; example_bots and tests are not part of it.
PACKAGES = ("server", "sdk", "arena")
EXAMPLE_BOTS = ROOT / "example_bots"
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
    path: str  # relative to the checkout, e.g. server/play/match.py
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
    stable between runs so the cache stays warm. pytest-xdist's processes share it (`_locked`): a
    cold run over the package and its dependencies (numpy, numba, the standard library) is some 40 s
    of CPU, a warm one a few."""
    tag = hashlib.sha256(f"{getpass.getuser()}:{ROOT}".encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"cellarena-mypy-{tag}"


@contextmanager
def _locked(work: Path) -> Iterator[None]:
    """The work folder to this process alone: two mypy runs must not write one cache, nor two
    processes build one tree."""
    work.mkdir(parents=True, exist_ok=True)
    with (work / "lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # released when the file closes
        yield


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


def _mypy(targets: list[str], tree: Path, cache: Path, config: Path) -> list[MypyError]:
    """Run mypy in the symlink tree on ``targets`` (``-p cellarena``, or script paths) and parse its
    errors; paths in them are relative to the checkout when they are in it."""
    command = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(config),
        "--cache-dir",
        str(cache),
        "--no-pretty",
        "--no-color-output",
        "--no-error-summary",
        "--show-error-codes",
        *targets,
    ]
    proc = subprocess.run(command, cwd=tree, capture_output=True, text=True, check=False)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"mypy failed to run (exit {proc.returncode}):\n{proc.stdout}{proc.stderr}")
    errors = []
    for line in proc.stdout.splitlines():
        match = _ERROR.match(line)
        if match is None:
            continue  # notes, which belong to the error above them
        errors.append(
            MypyError(
                path=_checkout_path(match["path"], tree),
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


def _checkout_path(reported: str, tree: Path) -> str:
    """cellarena/server/match.py is the checkout's server/play/match.py; a script is named relative to the
    checkout when it is in it, else as given."""
    path = Path(reported)
    if not path.is_absolute():
        parts = path.parts
        return Path(*parts[1:]).as_posix() if parts[0] == "cellarena" else path.as_posix()
    try:
        return path.relative_to(ROOT).as_posix()
    except ValueError:
        return path.as_posix()


def run_mypy() -> list[MypyError]:
    """The package's errors (to compare with the baseline)."""
    work = work_dir()
    with _locked(work):
        return _mypy(["-p", "cellarena"], build_tree(work), work / "cache", PYPROJECT)


def example_bots() -> list[Path]:
    """Every Python example bot, and the files of the bot folders beside them (a trained bot's bot.py,
    policy.py and train.py: bench train runs the last); the JavaScript one has .js files only."""
    return sorted([*EXAMPLE_BOTS.glob("*/*.py"), *EXAMPLE_BOTS.glob("*/*/*.py")])


def check_scripts(scripts: list[Path]) -> list[MypyError]:
    """Strict mypy errors in bot scripts, as a bot author would check them: ``cellarena`` is the
    checkout (typed, with py.typed), and the SDK's rule that no function returns Any holds for bots
    too. Scripts with the same file name go to separate runs: mypy takes each script's name for its
    module name, and two modules may not share one."""
    runs: list[list[Path]] = []
    for script in scripts:
        name = script.name
        batch = next((r for r in runs if all(s.name != name for s in r)), None)
        if batch is None:
            batch = []
            runs.append(batch)
        batch.append(script.resolve())
    # Only the scripts' own errors: the package's are held to the baseline by `run_mypy`, and a bot
    # author's mypy reports none for an installed package either.
    mine = {_checkout_path(str(script.resolve()), ROOT) for script in scripts}
    return [error for batch in runs for error in _check_batch(batch) if error.path in mine]


def _check_batch(scripts: list[Path]) -> list[MypyError]:
    """One mypy run over scripts of distinct names, in a copy of the package's warm cache: mypy reads
    the package, numpy and the standard library from it instead of analysing them again (some 10 s
    of CPU a run). The copy is thrown away after the run: mypy's cache is by module name, and would
    replay a script's errors under the path it had then when a file of the same name and content is
    checked elsewhere. The options are the package's, so that its cache entries stay valid, with the
    SDK's strict return rule for the scripts and whatever they import from beside them."""
    work = work_dir()
    scratch = Path(tempfile.mkdtemp(prefix="cellarena-mypy-scripts-"))
    try:
        with _locked(work):
            tree = build_tree(work)
            if not (work / "cache").is_dir():  # warm it first: the scripts import the package
                _mypy(["-p", "cellarena"], tree, work / "cache", PYPROJECT)
            shutil.copytree(work / "cache", scratch / "cache")
        modules = {p.stem for script in scripts for p in script.parent.glob("*.py")}
        config = scratch / "mypy.toml"
        config.write_text(_config_text({"module": sorted(modules), "warn_return_any": True}))
        return _mypy([str(s) for s in scripts], tree, scratch / "cache", config)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def _config_text(override: dict[str, object]) -> str:
    """pyproject.toml's mypy settings with one more per-module override, as a TOML file of its own."""
    settings = dict(tomllib.loads(PYPROJECT.read_text())["tool"]["mypy"])
    overrides = [*settings.pop("overrides", []), override]
    lines = ["[tool.mypy]", *(f"{key} = {_toml(value)}" for key, value in settings.items())]
    for section in overrides:
        lines += [
            "",
            "[[tool.mypy.overrides]]",
            *(f"{key} = {_toml(value)}" for key, value in section.items()),
        ]
    return "\n".join(lines) + "\n"


def _toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    return json.dumps(value)  # a str or a number: JSON's spelling is TOML's


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
    bot_errors = check_scripts(example_bots())
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
    failed = False
    if result.new or result.gone:
        print(result.report())
        failed = True
    if bot_errors:
        print(bot_report(bot_errors))
        failed = True
    if failed:
        return 1
    print(
        f"mypy: no new errors; {baseline.total()} old ones left in {BASELINE.relative_to(ROOT)}; "
        "the example bots are clean"
    )
    return 0


def bot_report(errors: list[MypyError]) -> str:
    listed = "\n".join(f"  {e}" for e in sorted(errors, key=lambda e: (e.path, e.line)))
    return (
        f"{len(errors)} mypy error(s) in example_bots/ (checked strict, with no baseline): type the bot, "
        f"and subclass its game's bot class (docs/sdk.md, Types).\n{listed}"
    )


if __name__ == "__main__":
    sys.exit(main())
