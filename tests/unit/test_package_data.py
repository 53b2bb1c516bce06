"""Every file the package needs besides its Python modules is listed as package data, so a wheel carries it.

An unlisted file works from a source checkout and is missing once installed: the `/docs` page's
vendored Swagger UI, the charts' vendored uPlot, a template or a migration would then answer 404 or fail to load.
"""

from __future__ import annotations

import fnmatch
import tomllib
from pathlib import Path

import tunedeck

PACKAGE = Path(tunedeck.__file__).resolve().parent
PYPROJECT = PACKAGE.parent / "pyproject.toml"


def test_every_non_python_file_of_the_package_is_package_data() -> None:
    globs = tomllib.loads(PYPROJECT.read_text(encoding="utf-8"))["tool"]["setuptools"]["package-data"]["tunedeck"]
    data_files = [
        path.relative_to(PACKAGE).as_posix()
        for path in PACKAGE.rglob("*")
        if path.is_file() and path.suffix not in (".py", ".pyc") and "__pycache__" not in path.parts
    ]
    # setuptools matches a glob's `*` within one folder, as fnmatch does once `/` must match literally.
    unlisted = [
        name
        for name in data_files
        if not any(fnmatch.fnmatch(name, g) and name.count("/") == g.count("/") for g in globs)
    ]
    assert "web/static/vendor/swagger-ui/swagger-ui-bundle.js" in data_files
    for name in ("uPlot.iife.min.js", "uPlot.min.css", "LICENSE", "VERSION"):
        assert f"web/static/vendor/uplot/{name}" in data_files
    assert not unlisted, f"add these to [tool.setuptools.package-data] in pyproject.toml: {unlisted}"
