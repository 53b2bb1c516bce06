"""How tunedeck's modules import each other: no import cycles, and no private name taken from another module.

A cycle counts the imports that run when a module is imported: those at module level, in any
`if`/`try` there, except the ones under `if TYPE_CHECKING:` (never run) and those inside
functions (run when called). An import moved into a function to hide a cycle still makes the
modules depend on each other, so a second check counts those too: a function may import
lazily to spare a heavy library, which is never one of tunedeck's modules. A private name (one
underscore) is its module's own: a helper another module needs is made public where it lives,
so that check counts every import, wherever it is.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import tunedeck

PACKAGE_ROOT = Path(tunedeck.__file__).parent


@dataclass(frozen=True)
class ImportedName:
    """One `from module import name` (name None for `import module`) at `line` of `importer`."""

    importer: str
    module: str
    name: str | None
    line: int


def module_files(root: Path) -> dict[str, Path]:
    """Every module under the package folder `root`, by dotted name (a package by its `__init__.py`)."""
    modules: dict[str, Path] = {}
    for path in sorted(root.rglob("*.py")):
        parts = [root.name, *path.relative_to(root).with_suffix("").parts]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _imported(node: ast.Import | ast.ImportFrom, importer: str, is_package: bool) -> Iterator[ImportedName]:
    if isinstance(node, ast.Import):
        for alias in node.names:
            yield ImportedName(importer, alias.name, None, node.lineno)
        return
    module = node.module or ""
    if node.level:  # relative: counted from the importer's package
        package = importer.split(".") if is_package else importer.split(".")[:-1]
        base = package[: len(package) - (node.level - 1)]
        module = ".".join([*base, *([node.module] if node.module else [])])
    for alias in node.names:
        yield ImportedName(importer, module, alias.name, node.lineno)


def runtime_imports(tree: ast.Module, importer: str, is_package: bool, *, in_functions: bool) -> Iterator[ImportedName]:
    """The imports that can run: those at import time, and with `in_functions` those in functions too.

    Imports under `if TYPE_CHECKING:` never run; its `else` does.
    """
    pending: list[ast.AST] = list(tree.body)
    while pending:
        node = pending.pop(0)
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from _imported(node, importer, is_package)
        elif isinstance(node, ast.If) and _is_type_checking(node.test):
            pending.extend(node.orelse)
        elif in_functions or not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            pending.extend(ast.iter_child_nodes(node))


def every_import(tree: ast.Module, importer: str, is_package: bool) -> Iterator[ImportedName]:
    """Every import statement of the module, wherever it is."""
    for node in ast.walk(tree):
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield from _imported(node, importer, is_package)


def _parsed(modules: dict[str, Path]) -> Iterator[tuple[str, ast.Module, bool]]:
    for name, path in modules.items():
        yield name, ast.parse(path.read_text(encoding="utf-8"), filename=str(path)), path.name == "__init__.py"


def import_graph(root: Path, *, in_functions: bool = False) -> dict[str, set[str]]:
    """Each module of the package at `root` and the package's modules it imports when imported.

    With `in_functions`, also those its functions import when they run.
    """
    modules = module_files(root)
    graph: dict[str, set[str]] = {}
    for name, tree, is_package in _parsed(modules):
        targets: set[str] = set()
        for imported in runtime_imports(tree, name, is_package, in_functions=in_functions):
            submodule = f"{imported.module}.{imported.name}"
            if imported.name is not None and submodule in modules:
                targets.add(submodule)
            elif imported.module in modules:
                targets.add(imported.module)
        graph[name] = targets - {name}
    return graph


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of `graph` as the modules along it (the first repeated at the end), or None."""
    done: set[str] = set()
    for start in sorted(graph):
        if start in done:
            continue
        path: list[str] = [start]
        on_path = {start}
        branches = [iter(sorted(graph[start]))]
        while branches:
            following = next(branches[-1], None)
            if following is None:
                branches.pop()
                done.add(path[-1])
                on_path.discard(path.pop())
            elif following in on_path:
                return [*path[path.index(following) :], following]
            elif following not in done and following in graph:
                path.append(following)
                on_path.add(following)
                branches.append(iter(sorted(graph[following])))
    return None


def private_imports(root: Path) -> list[ImportedName]:
    """Every import under `root` of another of the package's modules' private names (`_name`, not `__name__`)."""
    package = root.name
    found: list[ImportedName] = []
    for name, tree, is_package in _parsed(module_files(root)):
        for imported in every_import(tree, name, is_package):
            inside = imported.module == package or imported.module.startswith(package + ".")
            private = imported.name is not None and imported.name.startswith("_") and not imported.name.startswith("__")
            if inside and private:
                found.append(imported)
    return found


def test_tunedeck_modules_import_each_other_without_a_cycle() -> None:
    cycle = find_cycle(import_graph(PACKAGE_ROOT))
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_imports_inside_functions_close_no_cycle_either() -> None:
    cycle = find_cycle(import_graph(PACKAGE_ROOT, in_functions=True))
    assert cycle is None, "import cycle through an import inside a function: " + " -> ".join(cycle or [])


def test_no_tunedeck_module_imports_a_private_name_of_another() -> None:
    found = [f"{i.importer}:{i.line} imports {i.name} from {i.module}" for i in private_imports(PACKAGE_ROOT)]
    assert found == [], "private names imported across modules:\n" + "\n".join(found)


def _package(root: Path, files: dict[str, str]) -> Path:
    package = root / "planted"
    for name, text in {"__init__.py": "", **files}.items():
        (package / name).parent.mkdir(parents=True, exist_ok=True)
        (package / name).write_text(text, encoding="utf-8")
    return package


def test_the_checks_find_a_planted_cycle_and_private_import(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "a.py": "from planted.b import shared\n",
            "b.py": "try:\n    from planted.sub import c\nexcept ImportError:\n    c = None\nshared = 1\n",
            "sub/__init__.py": "",
            "sub/c.py": "from .. import a\nfrom planted.a import _helper\n",
        },
    )
    assert find_cycle(import_graph(package)) == ["planted.a", "planted.b", "planted.sub.c", "planted.a"]
    assert [(i.importer, i.module, i.name) for i in private_imports(package)] == [
        ("planted.sub.c", "planted.a", "_helper")
    ]


def test_type_only_and_in_function_imports_make_no_cycle(tmp_path: Path) -> None:
    package = _package(
        tmp_path,
        {
            "a.py": "from planted import b\n",
            "b.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from planted.a import Thing\n"
            "def later():\n    from planted import a\n    from planted.a import __name__ as name\n    return a, name\n",
        },
    )
    assert import_graph(package) == {"planted": set(), "planted.a": {"planted.b"}, "planted.b": set()}
    assert find_cycle(import_graph(package)) is None
    assert find_cycle(import_graph(package, in_functions=True)) == ["planted.a", "planted.b", "planted.a"]
    assert private_imports(package) == []
