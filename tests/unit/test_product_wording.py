"""Text the package shows or ships (messages, help, OpenAPI descriptions, pages, scripts) says what a thing is.

It never names the documents the product was specified in ("a seed 002 key", "the checks the
brief asks for"): a user has none of them. The rule is said instead ("a job config key", "the
checks before training"). Third-party files (`web/static/vendor`) are not ours to reword.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

import tunedeck

PACKAGE = Path(tunedeck.__file__).resolve().parent
TEXT_SUFFIXES = {".py", ".html", ".js", ".css", ".json", ".mako", ".md", ".txt", ".toml", ".yaml", ".yml"}
SKIPPED = ("web/static/vendor/",)
# A random seed is a real setting ("seed", "seed 42"); a numbered seed is a specification document.
INTERNAL_NAMES = re.compile(
    r"\bseeds?[\s_#-]*0\d{2}\b"
    r"|\bseeds?\s+(?:documents?|docs?|files?|specs?|items?)\b"
    r"|\bthe\s+seeds?\s+(?:asks?|says|requires|wants|lists|names)\b"
    r"|\bbriefs?\b"
    r"|\bissue\s*#\s*\d+"
    r"|\bARCHITECTURE\.md\b|\bshared folder\b|\.\./shared/",
    re.IGNORECASE,
)
# Files outside the repository (the architecture guide, the shared folder): a user's clone has none of them.
OUTSIDE_FILES = re.compile(r"\bARCHITECTURE\.md\b|\bshared folder\b|\.\./shared/", re.IGNORECASE)


def _text_files() -> list[Path]:
    return sorted(
        path
        for path in PACKAGE.rglob("*")
        if path.is_file()
        and path.suffix in TEXT_SUFFIXES
        and "__pycache__" not in path.parts
        and not path.relative_to(PACKAGE).as_posix().startswith(SKIPPED)
    )


def internal_names(text: str) -> list[str]:
    """Each line of `text` that names an internal document, as `line N: …`."""
    return [
        f"line {number}: {line.strip()[:160]}"
        for number, line in enumerate(text.splitlines(), start=1)
        if INTERNAL_NAMES.search(line)
    ]


@pytest.mark.parametrize(
    "text",
    [
        "the checks seed 003 asks for",
        "a seed 002 key",
        "as the brief says",
        "see issue #12",
        "the seed document",
        "See `ARCHITECTURE.md` in the shared folder",
        "the state machine of ARCHITECTURE.md",
    ],
)
def test_the_scan_finds_internal_document_names(text: str) -> None:
    assert internal_names(text)


@pytest.mark.parametrize("text", ["seed: 42", "the random seed of the split", "seed 7 reproduces it"])
def test_the_scan_leaves_the_seed_setting_alone(text: str) -> None:
    assert not internal_names(text)


def test_no_package_text_names_an_internal_document() -> None:
    files = _text_files()
    assert len(files) > 100  # the package's own sources were found
    found = {
        path.relative_to(PACKAGE).as_posix(): hits
        for path in files
        if (hits := internal_names(path.read_text(encoding="utf-8", errors="replace")))
    }
    assert not found, f"say what the thing is instead of naming a document: {found}"


def test_the_readme_cites_no_file_outside_the_repository() -> None:
    readme = (PACKAGE.parent / "README.md").read_text(encoding="utf-8")
    cited = [line for line in readme.splitlines() if OUTSIDE_FILES.search(line)]
    assert not cited, f"the README cites files a user's clone does not have: {cited}"
