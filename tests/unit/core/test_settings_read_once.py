"""tunedeck's own `TUNEDECK_*` variables are read from the environment in the settings module only.

Entry points read `Settings` and pass the values down; a variable read anywhere else would be a
setting that leaks past them (one the run spec, the reference of settings and the tests never see).
"""

from __future__ import annotations

import ast
from pathlib import Path

import tunedeck

PACKAGE = Path(tunedeck.__file__).parent
SETTINGS_MODULE = PACKAGE / "core" / "settings.py"
PREFIX = "TUNEDECK_"
_READERS = {"get", "pop", "setdefault", "getenv", "getenvb"}


def _constants(tree: ast.Module) -> dict[str, str]:
    """The module's names bound to a string at its top level (`MIRROR_ENV = "TUNEDECK_..."`)."""
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            found.update({target.id: node.value.value for target in node.targets if isinstance(target, ast.Name)})
    return found


def _text(node: ast.AST | None, constants: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.Name):
        return constants.get(node.id)
    if isinstance(node, ast.JoinedStr) and node.values and isinstance(node.values[0], ast.Constant):
        return str(node.values[0].value)
    return None


def _names_environ(node: ast.AST) -> bool:
    return (isinstance(node, ast.Attribute) and node.attr == "environ") or (
        isinstance(node, ast.Name) and node.id in ("environ", "env")
    )


def environment_reads(source: str) -> list[tuple[int, str]]:
    """(line, variable) of each read of a `TUNEDECK_*` variable in `source`.

    Reads are `os.environ[...]`, `os.environ.get(...)` (and pop, setdefault), `os.getenv(...)`,
    `"..." in os.environ` and a command-line option's `envvar=`.
    """
    tree = ast.parse(source)
    constants = _constants(tree)
    reads: list[tuple[int, str | None]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Subscript) and _names_environ(node.value):
            reads.append((node.lineno, _text(node.slice, constants)))
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute | ast.Name):
            name = node.func.attr if isinstance(node.func, ast.Attribute) else node.func.id
            owner = node.func.value if isinstance(node.func, ast.Attribute) else None
            if name in ("getenv", "getenvb") or (name in _READERS and owner is not None and _names_environ(owner)):
                reads.append((node.lineno, _text(node.args[0] if node.args else None, constants)))
            reads += [(node.lineno, _text(kw.value, constants)) for kw in node.keywords if kw.arg == "envvar"]
        elif isinstance(node, ast.Compare) and any(_names_environ(item) for item in node.comparators):
            reads.append((node.lineno, _text(node.left, constants)))
    return [(line, name) for line, name in reads if name is not None and name.startswith(PREFIX)]


def test_only_the_settings_module_reads_tunedecks_variables() -> None:
    leaks = [
        f"{path.relative_to(PACKAGE.parent)}:{line}: {name}"
        for path in sorted(PACKAGE.rglob("*.py"))
        if path != SETTINGS_MODULE
        for line, name in environment_reads(path.read_text(encoding="utf-8"))
    ]
    assert leaks == [], "read these through tunedeck.core.settings instead:\n" + "\n".join(leaks)


def test_the_check_finds_every_form_of_read() -> None:
    source = '''
import os
MIRROR = "TUNEDECK_DATASET_MIRROR"
a = os.environ.get(MIRROR)
b = os.environ["TUNEDECK_MEMORY_CAP"]
c = os.getenv("TUNEDECK_FAILPOINTS", "")
d = "TUNEDECK_WORKER_DEVICES" in os.environ
e = typer.Option(None, envvar="TUNEDECK_RAY_ADDRESS")
f = os.environ.get("CUDA_VISIBLE_DEVICES")
g = env.get(f"TUNEDECK_{name}")
'''
    assert [name for _, name in environment_reads(source)] == [
        "TUNEDECK_DATASET_MIRROR", "TUNEDECK_MEMORY_CAP", "TUNEDECK_FAILPOINTS", "TUNEDECK_WORKER_DEVICES",
        "TUNEDECK_RAY_ADDRESS", "TUNEDECK_",
    ]  # fmt: skip
    assert sorted(line for line, _ in environment_reads(source)) == [4, 5, 6, 7, 8, 10]
