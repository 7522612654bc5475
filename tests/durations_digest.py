"""Where the suite's time goes: pytest's ``--durations=0`` report, cut to a table per file.

tests/suite.py passes ``--durations=0`` to its parallel phase and feeds the output through
`DurationsDigest`, so every CI log ends with the slowest test phases and the slowest files (the sum
of their tests' set-up, call and tear-down: a module fixture's set-up counts in its file's first
test) instead of thousands of lines. Under ``--dist loadfile`` a file runs whole in one process, so
its sum is about the time it holds that process.

    python tests/durations_digest.py OUTPUT.txt [N]

prints the same digest of a saved run's output (the N slowest files; 30 by default).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterable, Iterator
from pathlib import Path

#: One line of pytest's durations report: ``12.34s call     tests/test_x.py::test_y[param]``.
_LINE = re.compile(r"^(\d+(?:\.\d+)?)s (setup|call|teardown)\s+(\S.*)$")
_HIDDEN = re.compile(r"^\(\d+ durations < .* hidden\.")
#: How many of the slowest test phases the digest keeps, and how many files.
SLOWEST_PHASES = 40
SLOWEST_FILES = 30


class DurationsDigest:
    """Passes a pytest run's output through, replacing its durations report by a digest."""

    def __init__(self, phases: int = SLOWEST_PHASES, files: int = SLOWEST_FILES) -> None:
        self.phases = phases
        self.files = files
        self.lines: list[tuple[float, str]] = []
        self.per_file: dict[str, float] = {}
        self._inside = False

    def feed(self, line: str) -> Iterator[str]:
        """The lines to show for one line of pytest's output (which ends with its newline)."""
        if line.startswith("=") and "slowest" in line and "durations" in line:
            self._inside = True
            return
        if self._inside:
            text = line.rstrip("\n")
            match = _LINE.match(text)
            if match:
                self.add(float(match[1]), match[3], text)
                return
            if not text.strip() or _HIDDEN.match(text):
                return
            self._inside = False
            yield from self.table()
        yield line

    def add(self, seconds: float, nodeid: str, text: str) -> None:
        """One test phase of ``seconds`` (``text`` is its line in pytest's report)."""
        self.lines.append((seconds, text))
        path = nodeid.split("::", 1)[0]
        self.per_file[path] = self.per_file.get(path, 0.0) + seconds

    def ranking(self) -> list[tuple[str, float]]:
        """Every file seen, the slowest first, with its seconds."""
        return sorted(self.per_file.items(), key=lambda item: (-item[1], item[0]))

    def table(self) -> Iterator[str]:
        """The digest: the slowest test phases, then the slowest files; nothing when none was seen."""
        if not self.lines:
            return
        slowest = sorted(self.lines, key=lambda item: -item[0])[: self.phases]
        yield f"== slowest {len(slowest)} test phases\n"
        yield from (text + "\n" for _, text in slowest)
        total = sum(self.per_file.values())
        ranking = self.ranking()
        yield f"== slowest {min(self.files, len(ranking))} of {len(ranking)} files ({total:.0f} s in all)\n"
        for path, seconds in ranking[: self.files]:
            yield f"{seconds:8.1f}s {100 * seconds / (total or 1):5.1f}%  {path}\n"
        self.lines.clear()
        self.per_file.clear()


def saved_run(lines: Iterable[str], files: int = SLOWEST_FILES) -> Iterator[str]:
    """The digest of a saved run's output (every durations line in it)."""
    cut = DurationsDigest(files=files)
    for line in lines:
        match = _LINE.match(line.rstrip("\n"))
        if match:
            cut.add(float(match[1]), match[3], line.rstrip("\n"))
    yield from cut.table()


if __name__ == "__main__":
    with Path(sys.argv[1]).open(encoding="utf-8") as output:
        sys.stdout.writelines(saved_run(output, int(sys.argv[2]) if len(sys.argv) > 2 else SLOWEST_FILES))
