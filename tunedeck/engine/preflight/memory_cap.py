"""The simulated memory cap (the `TUNEDECK_MEMORY_CAP` setting): a size such as `24GiB`.

The worker and `tunedeck train` write the setting into each run's spec (`RunSpec.memory_cap`);
`tunedeck preflight --memory-cap` defaults to it. A malformed size is reported under the
variable's name, where the run starts.
"""

from __future__ import annotations

import re

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.core.settings import setting_variable

MEMORY_CAP_ENV = setting_variable("memory_cap")
_UNITS = {
    "": 1,
    "b": 1,
    "k": 2**10,
    "kb": 2**10,
    "kib": 2**10,
    "m": 2**20,
    "mb": 2**20,
    "mib": 2**20,
    "g": 2**30,
    "gb": 2**30,
    "gib": 2**30,
    "t": 2**40,
    "tb": 2**40,
    "tib": 2**40,
}


def parse_size(text: str) -> int:
    """`12GiB`, `512M` or a plain byte count, as bytes (binary units); ValueError otherwise."""
    match = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([a-zA-Z]*)\s*", text)
    if not match or match.group(2).lower() not in _UNITS:
        raise ValueError(f"{text!r} is not a size (expected e.g. 24GiB, 512MiB or a byte count)")
    return int(float(match.group(1)) * _UNITS[match.group(2).lower()])


def memory_cap_bytes(setting: str | None) -> int | None:
    """The cap `setting` names, in bytes; None when unset or empty; ConfigError naming the variable when malformed."""
    text = (setting or "").strip()
    if not text:
        return None
    try:
        return parse_size(text)
    except ValueError as error:
        raise ConfigError([Issue(str(error), field=MEMORY_CAP_ENV, expected="a size such as 24GiB")]) from None
