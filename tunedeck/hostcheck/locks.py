"""The lock files and the rules they keep: every version exact, none with a local label, comments that agree.

A local version label (`torch==2.13.0+cpu`) names a build only some wheel folders hold: the
package registry serves `2.13.0` and no `+cpu`, so such a pin fails on every machine but the
one it was written on. `==2.13.0` still accepts a `+cpu` wheel where one is at hand.
"""

from __future__ import annotations

import re
from pathlib import Path

MAIN_LOCK = "requirements.lock"
CUDA_LOCK = "requirements-cuda.lock"
LOCKS = (MAIN_LOCK, CUDA_LOCK, "requirements-ray.lock", "requirements-trackers.lock", "requirements-mlx.lock")
_PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;#]+)")
_VERSION = re.compile(r"^[0-9][0-9A-Za-z.!+]*$")  # a PEP 440 version, local labels included (refused apart)
_TORCH_IN_COMMENT = re.compile(r"#.*\btorch==(\S+?)[;,.]?(\s|$)")


def lock_pins(lock: Path) -> dict[str, str]:
    """`name == version` of every pinned line of a lock file (names normalized, extras and markers dropped)."""
    pins: dict[str, str] = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        found = _PIN.match(line)
        if found:
            pins[normalized_name(found.group(1))] = found.group(3)
    return pins


def normalized_name(name: str) -> str:
    """A project name as the package index compares it: lower case, runs of `-_.` as one `-`."""
    return re.sub(r"[-_.]+", "-", name).lower()


def unpinned_lines(lock: Path) -> list[str]:
    """Lines of a lock that are neither comments nor one exact pin (`name==version`, extras and a marker allowed)."""
    bad = []
    for number, line in enumerate(lock.read_text(encoding="utf-8").splitlines(), start=1):
        text = line.split("#", 1)[0].strip()
        found = _PIN.match(text)
        if text and (
            found is None or not _VERSION.match(found.group(3)) or text[found.end() :].strip()[:1] not in ("", ";")
        ):
            bad.append(f"{lock.name}:{number}: {line.strip()!r} is not one exact pin (name==version)")
    return bad


def lock_problems(repo: Path) -> list[str]:
    """What is wrong with the repository's locks: lines that are not one exact pin, local version labels, and a
    CUDA lock whose comment misquotes torch."""
    problems = [line for name in LOCKS for line in unpinned_lines(repo / name)]
    problems += [
        f"{name}: {package}=={version} has a local version label that no package registry serves; pin "
        f"{package}=={version.split('+')[0]}"
        for name in LOCKS
        for package, version in lock_pins(repo / name).items()
        if "+" in version
    ]
    torch = lock_pins(repo / MAIN_LOCK).get("torch")
    for quoted in _TORCH_IN_COMMENT.findall((repo / CUDA_LOCK).read_text(encoding="utf-8")):
        if quoted[0] != torch:
            problems.append(f"{CUDA_LOCK}'s comment says torch=={quoted[0]}; {MAIN_LOCK} pins torch=={torch}")
    return problems
