"""The package type-checks with mypy, except for old errors in tests/mypy-baseline.txt, which only shrinks;
the example bots type-check strict, with no baseline.

tests/typecheck.py says how mypy runs and why; `python tests/typecheck.py` runs the same check alone.
"""

from __future__ import annotations

from collections import Counter

import pytest
import typecheck
from typecheck import MypyError, compare


@pytest.fixture(scope="module")
def mypy_errors() -> list[MypyError]:
    return typecheck.run_mypy()


def test_no_new_mypy_errors_and_no_stale_baseline_entries(mypy_errors: list[MypyError]) -> None:
    result = compare(mypy_errors, typecheck.read_baseline())
    if result.new or result.gone:
        pytest.fail(result.report(), pytrace=False)


def test_every_cellarena_import_resolves_to_the_checkout(mypy_errors: list[MypyError]) -> None:
    """An unresolved import would make mypy check less than it seems (the module becomes Any): with
    the package's folder mapping, that means the symlink tree is wrong, not that a stub is missing."""
    missing = [e for e in mypy_errors if e.code in ("import-not-found", "import-untyped")]
    assert not missing, "\n".join(map(str, missing))


def test_the_example_bots_are_strictly_typed() -> None:
    """Each example bot as a bot author would check theirs: strict, against the typed SDK, its
    ``on_tick`` against its game's bot class (tests/test_sdk_types.py shows a wrong one is caught)."""
    bots = typecheck.example_bots()
    assert {p.parent.name for p in bots} >= {"rezzo", "cata", "cloth", "colorblocks", "drop2df"}
    errors = typecheck.check_scripts(bots)
    if errors:
        pytest.fail(typecheck.bot_report(errors), pytrace=False)


NONE_ATTR = 'Item "None" of "X | None" has no attribute "y"'


def _error(path: str, line: int, message: str = NONE_ATTR) -> MypyError:
    return MypyError(path=path, line=line, code="union-attr", message=message)


def test_baseline_keys_ignore_line_numbers() -> None:
    moved = _error("server/a.py", 40, 'Name "x" already defined on line 12')
    assert moved.key == _error("server/a.py", 90, 'Name "x" already defined on line 70').key
    assert "40" not in moved.key and "12" not in moved.key
    assert str(moved).startswith("server/a.py:40: ")  # a failure still says where


def test_a_second_occurrence_of_a_baselined_error_is_new() -> None:
    old = _error("server/a.py", 10)
    baseline = Counter([old.key])
    assert not compare([old], baseline).new
    result = compare([old, _error("server/a.py", 20)], baseline)
    assert [e.line for e in result.new] == [10, 20]  # both listed: which one is new cannot be told
    assert "server/a.py:20:" in result.report()


def test_a_fixed_error_asks_for_the_baseline_to_shrink() -> None:
    result = compare([], Counter([_error("server/a.py", 10).key]))
    assert result.gone.total() == 1 and not result.new
    assert typecheck.UPDATE_COMMAND in result.report()
