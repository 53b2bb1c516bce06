"""The ROCm support table shipped with tunedeck (`rocm_support.json`) and the questions asked of it.

The table says which ROCm releases each torch release is built for, and which GPU
architectures and operating systems each ROCm release supports. It is data, kept in one
file with its sources, so a new torch or ROCm release is one edit there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import cache
from importlib.resources import files
from typing import Any


@dataclass(frozen=True)
class RocmSupport:
    """The support table: torch release → ROCm builds; ROCm release → architectures and operating systems."""

    torch_builds: dict[str, tuple[str, ...]]
    gfx: dict[str, tuple[str, ...]]
    os: dict[str, dict[str, tuple[str, ...]]]
    sources: tuple[str, ...]
    reviewed: str

    def rocm_builds_of(self, torch_release: str) -> tuple[str, ...] | None:
        """The ROCm releases torch `torch_release` ("2.13") is published for; None when the table lacks it."""
        return self.torch_builds.get(torch_release)

    def archs_of(self, rocm: str) -> tuple[str, ...] | None:
        """The gfx architectures ROCm `rocm` ("7.1") supports; None when the table lacks that release."""
        return self.gfx.get(rocm)

    def os_supported(self, rocm: str, os_id: str | None, os_version: str | None) -> bool:
        """Whether ROCm `rocm` supports this distribution and version (a listed "9" covers "9.4")."""
        listed = self.os.get(rocm, {}).get((os_id or "").lower(), ())
        have = (os_version or "").split(".")
        return any(have[: len(entry.split("."))] == entry.split(".") for entry in listed)

    def os_summary(self, rocm: str) -> str:
        """The operating systems of ROCm `rocm`, as "ubuntu 24.04/22.04, rhel 9.6/9.4"."""
        return ", ".join(f"{name} {'/'.join(versions)}" for name, versions in self.os.get(rocm, {}).items())


@cache
def rocm_support() -> RocmSupport:
    """The table shipped in the package (read once)."""
    text = files("tunedeck.hostcheck").joinpath("rocm_support.json").read_text(encoding="utf-8")
    raw: dict[str, Any] = json.loads(text)
    return RocmSupport(
        torch_builds={release: tuple(entry["rocm"]) for release, entry in raw["torch"].items()},
        gfx={release: tuple(entry["gfx"]) for release, entry in raw["rocm"].items()},
        os={
            release: {name: tuple(versions) for name, versions in entry["os"].items()}
            for release, entry in raw["rocm"].items()
        },
        sources=tuple(raw["sources"]),
        reviewed=str(raw["reviewed"]),
    )


def hsa_version_of(arch: str) -> str | None:
    """The HSA_OVERRIDE_GFX_VERSION value that presents a GPU as `arch`: "10.3.0" for gfx1030, "9.0.10" for gfx90a."""
    digits = arch.removeprefix("gfx")
    if len(digits) < 3 or not arch.startswith("gfx"):
        return None
    try:
        return f"{int(digits[:-2])}.{int(digits[-2], 16)}.{int(digits[-1], 16)}"
    except ValueError:
        return None


def arch_of_hsa_version(version: str) -> str | None:
    """The architecture an HSA_OVERRIDE_GFX_VERSION value stands for: gfx1030 for "10.3.0"; None when malformed."""
    parts = version.strip().split(".")
    if len(parts) != 3 or not all(part.isdigit() for part in parts):
        return None
    major, minor, stepping = (int(part) for part in parts)
    if minor > 15 or stepping > 15:
        return None
    return f"gfx{major}{minor:x}{stepping:x}"


def sibling_arch(arch: str, supported: tuple[str, ...]) -> str | None:
    """A supported architecture of the same generation (gfx1030 for gfx1031), the one an override could borrow.

    Only Radeon generations (gfx10xx, gfx11xx, gfx12xx) share instruction sets within a family
    closely enough for this to be worth trying; None for others.
    """
    if not arch.startswith(("gfx10", "gfx11", "gfx12")) or len(arch) != 7:
        return None
    return next((candidate for candidate in supported if candidate[:-1] == arch[:-1] and candidate != arch), None)
