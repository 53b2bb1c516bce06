"""No function in the package runs over 80 lines: a longer one is split into named steps.

A function's length is its last line minus its `def` line, plus one (decorators left out);
methods and nested functions are measured on their own. Database migrations are left out:
each is a frozen record of one schema change, never edited once released.
"""

from __future__ import annotations

import ast
from pathlib import Path

import tunedeck

PACKAGE = Path(tunedeck.__file__).resolve().parent
MAX_LINES = 80
EXCLUDED = ("store/migrations/",)

# Functions allowed over the limit, each with why (none today). An entry for a function that is no
# longer too long fails below, so the list only ever holds what is still long.
ALLOWED: dict[str, str] = {}


def function_lengths(source: str) -> dict[str, int]:
    """Each function's qualified name (`Class.method`, `outer.inner`) and its length in lines."""
    lengths: dict[str, int] = {}

    def visit(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = prefix + child.name
                assert child.end_lineno is not None
                lengths[name] = child.end_lineno - child.lineno + 1
                visit(child, name + ".")
            elif isinstance(child, ast.ClassDef):
                visit(child, prefix + child.name + ".")
            else:
                visit(child, prefix)

    visit(ast.parse(source), "")
    return lengths


def package_lengths() -> dict[str, int]:
    """`module path::qualified name` -> length, for every function of the package but the migrations'."""
    found: dict[str, int] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).as_posix()
        if relative.startswith(EXCLUDED):
            continue
        for name, length in function_lengths(path.read_text(encoding="utf-8")).items():
            found[f"{relative}::{name}"] = length
    return found


def test_no_function_is_over_80_lines() -> None:
    too_long = {
        name: length for name, length in package_lengths().items() if length > MAX_LINES and name not in ALLOWED
    }
    listed = "\n".join(f"  {name}: {length} lines" for name, length in sorted(too_long.items()))
    assert not too_long, f"split these into named steps (at most {MAX_LINES} lines each):\n{listed}"


def test_every_allowed_function_is_still_too_long() -> None:
    lengths = package_lengths()
    stale = [name for name in ALLOWED if lengths.get(name, 0) <= MAX_LINES]
    assert not stale, f"remove these from ALLOWED (gone, or now at most {MAX_LINES} lines): {stale}"


def test_the_measure_counts_methods_and_nested_functions_without_decorators() -> None:
    body = "".join(f"    x{index} = {index}\n" for index in range(MAX_LINES))
    source = (
        "class Run:\n"
        "    @property\n"
        "    def short(self) -> int:\n"
        "        return 1\n"
        "\n"
        "def outer() -> None:\n"
        "    def inner() -> None:\n"
        "        pass\n"
        f"{body}"
    )
    lengths = function_lengths(source)
    assert lengths["Run.short"] == 2
    assert lengths["outer.inner"] == 2
    assert lengths["outer"] == MAX_LINES + 3
