"""The sizes Architecture IV set (issue 40), checked on the source so that they stay met: no folder of
server/, arena/ or sdk/ holds more than 20 Python modules directly, no class is over 350 lines and no
function over 100. ruff's too-many-branches and too-many-statements rules (PLR0912, PLR0915) hold the
rest, at their default limits (pyproject.toml)."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
LAYERS = ("server", "arena", "sdk")
MAX_MODULES = 20
MAX_CLASS_LINES = 350
MAX_FUNCTION_LINES = 100


def _sources() -> list[Path]:
    return sorted(p for layer in LAYERS for p in (ROOT / layer).rglob("*.py") if "__pycache__" not in p.parts)


def test_no_folder_holds_more_than_20_modules() -> None:
    folders: dict[Path, int] = {}
    for path in _sources():
        folders[path.parent] = folders.get(path.parent, 0) + 1
    crowded = {str(f.relative_to(ROOT)): n for f, n in folders.items() if n > MAX_MODULES}
    assert not crowded, f"split these folders into packages named for what they hold: {crowded}"


def test_no_class_over_350_lines_and_no_function_over_100() -> None:
    too_long = []
    for path in _sources():
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ClassDef):
                limit = MAX_CLASS_LINES
            elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                limit = MAX_FUNCTION_LINES
            else:
                continue
            lines = (node.end_lineno or node.lineno) - node.lineno + 1
            if lines > limit:
                too_long.append(
                    f"{path.relative_to(ROOT)}:{node.lineno}: {node.name} is {lines} lines (at most {limit})"
                )
    assert not too_long, "\n".join(too_long)
