#!/usr/bin/env python3
"""Resolve every lock against the package registry alone, as a machine without this one's wheel folders would.

Run by `make check-locks` (in CI) with the virtualenv's Python. pip resolves from the registry's
metadata without installing (`--dry-run --report`), with pip's configuration files and local wheel
folders left out, in two passes:
- Linux x86_64 (this machine's platform): every lock together, with its dependencies; each package
  pip would install must be pinned by a lock at the same version (pip itself by the Makefile).
- macOS on Apple silicon: each pin of requirements.lock must have a wheel there (without dependencies:
  pip evaluates markers for the machine it runs on, so another platform's full resolution is out of reach).
It fails on a version the registry does not serve, a pin with a local version label, or an unpinned package.
"""

import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from tunedeck.hostcheck.install_needs import python_range  # noqa: E402
from tunedeck.hostcheck.locks import LOCKS, MAIN_LOCK, lock_pins, lock_problems, normalized_name  # noqa: E402

MAC_PLATFORMS = (
    "macosx_14_0_arm64",
    "macosx_13_0_arm64",
    "macosx_12_0_arm64",
    "macosx_11_0_arm64",
    "macosx_11_0_universal2",
    "macosx_10_9_universal2",
)


def registry_environment() -> dict[str, str]:
    """This environment without pip's configuration files and local wheel folders (a user's index URL stays)."""
    environment = {
        k: v
        for k, v in os.environ.items()
        if k not in ("PIP_FIND_LINKS", "PIP_EXTRA_INDEX_URL", "PIP_NO_INDEX", "PIP_CONSTRAINT")
    }
    environment["PIP_CONFIG_FILE"] = os.devnull
    return environment


def resolve(arguments: list[str]) -> tuple[dict[str, str] | None, str]:
    """What pip would install for `arguments` ({name: version}), or None and pip's error."""
    with tempfile.TemporaryDirectory() as scratch:
        report = Path(scratch) / "report.json"
        command = [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--dry-run",
            "--ignore-installed",
            "--quiet",
            "--report",
            str(report),
            *arguments,
        ]
        done = subprocess.run(
            command, cwd=REPO, env=registry_environment(), capture_output=True, text=True, check=False
        )
        if done.returncode != 0:
            errors = [line for line in done.stderr.splitlines() if line.startswith("ERROR")]
            return None, "\n".join(errors[-6:]) or done.stderr[-2000:]
        installs = json.loads(report.read_text())["install"]
    return {normalized_name(i["metadata"]["name"]): i["metadata"]["version"] for i in installs}, ""


def pip_version() -> str:
    """The pip the Makefile installs into the virtualenv (PIP_VERSION)."""
    found = re.search(r"^PIP_VERSION\s*:?=\s*(\S+)", (REPO / "Makefile").read_text(), flags=re.MULTILINE)
    if found is None:
        raise SystemExit("Makefile: no PIP_VERSION")
    return found.group(1)


def linux_problems() -> list[str]:
    """Every lock resolved together here; anything unpinned or pinned otherwise is a problem."""
    arguments = [part for name in LOCKS for part in ("-r", name)] + [f"pip=={pip_version()}"]
    installs, error = resolve(arguments)
    if installs is None:
        return [f"the locks do not resolve from the registry on this platform:\n{error}"]
    pins = {"pip": pip_version()}
    for name in LOCKS:
        pins.update(lock_pins(REPO / name))
    return [
        f"{package}=={version} is installed but pinned by no lock"
        if package not in pins
        else f"{package}: the locks pin {pins[package]} but {version} resolves"
        for package, version in sorted(installs.items())
        if pins.get(package) != version
    ]


def mac_problems() -> list[str]:
    """Each pin of the main lock must have a wheel for macOS on Apple silicon."""
    with tempfile.TemporaryDirectory() as target:
        platforms = [part for platform in MAC_PLATFORMS for part in ("--platform", platform)]
        lowest = ".".join(map(str, python_range(REPO)[0]))
        arguments = [
            *platforms,
            "--python-version",
            lowest,
            "--implementation",
            "cp",
            "--only-binary=:all:",
            "--no-deps",
            "--target",
            target,
            "-r",
            MAIN_LOCK,
        ]
        installs, error = resolve(arguments)
    return [] if installs is not None else [f"{MAIN_LOCK} does not install on macOS (Apple silicon):\n{error}"]


def main() -> int:
    problems = lock_problems(REPO)
    if not problems:  # a local label would fail the resolutions too, less clearly
        problems = linux_problems() + mac_problems()
    for problem in problems:
        print(f"lock check: {problem}")
    if not problems:
        print(f"lock check: {', '.join(LOCKS)} resolve from the registry (Linux x86_64; macOS for {MAIN_LOCK})")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
