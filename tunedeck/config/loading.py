"""Loading configs from dicts and files, with errors that name the field and the fix."""

from __future__ import annotations

import difflib
import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue
from tunedeck.core.json_numbers import whole_numbers_as_ints

_CONTRADICTION = re.compile(r"\[(\w+)\] ([^;\[]+)")


def validate_config(data: Any, source: str | None = None) -> TrainingConfig:
    """Validate a config mapping; raise ConfigError listing every problem by field."""
    if not isinstance(data, dict):
        raise ConfigError(
            [Issue("the config must be a JSON object", file=source, expected="object", found=type(data).__name__)]
        )
    issues = unknown_key_issues(data, source)
    known = {k: whole_numbers_as_ints(v) for k, v in data.items() if k in TrainingConfig.model_fields}
    try:
        # Strict, as JSON reads: `0` is not `false`, `"3"` is not `3` (the config's JSON Schema says so too).
        config = TrainingConfig.model_validate(known, strict=True)
    except ValidationError as error:
        issues.extend(_issues_from_validation(error, source))
        raise ConfigError(issues) from None
    if issues:
        raise ConfigError(issues)
    return config


def unknown_key_issues(data: dict[str, Any], source: str | None = None) -> list[Issue]:
    """One issue per unknown key, naming the closest valid key when there is one."""
    valid = list(TrainingConfig.model_fields)
    issues = []
    for key in data:
        if key in TrainingConfig.model_fields:
            continue
        close = difflib.get_close_matches(str(key), valid, n=1, cutoff=0.6)
        hint = f'; did you mean "{close[0]}"?' if close else ""
        issues.append(
            Issue(f'unknown key "{key}"{hint}', field=str(key), file=source, expected="one of the job config keys")
        )
    return issues


def _issues_from_validation(error: ValidationError, source: str | None) -> list[Issue]:
    issues = []
    for item in error.errors(include_url=False):
        location = ".".join(str(part) for part in item["loc"])
        if not location:  # a model-level check: contradictions carry their own field names
            text = str(item.get("ctx", {}).get("error", item["msg"]))
            for name, message in _CONTRADICTION.findall(text):
                issues.append(Issue(message.strip(), field=name, file=source))
            continue
        found = item.get("input")
        issues.append(
            Issue(
                _expected_message(item),
                field=location,
                file=source,
                found=json.dumps(found) if _is_jsonable(found) else repr(found),
            )
        )
    return issues


def _expected_message(item: Any) -> str:
    ctx = item.get("ctx") or {}
    kind = item["type"]
    bounds = {
        "greater_than": "greater than {gt}",
        "greater_than_equal": "at least {ge}",
        "less_than": "less than {lt}",
        "less_than_equal": "at most {le}",
    }
    if kind in bounds:
        field = item["loc"][0] if item["loc"] else ""
        lo, hi = _range_of(str(field))
        return f"out of range: expected {bounds[kind].format(**ctx)} (valid range {lo} to {hi})"
    if kind == "literal_error":
        return f"expected one of {ctx.get('expected')}"
    if kind == "value_error" and "error" in ctx:
        return str(ctx["error"])  # a field validator's own sentence, without pydantic's "Value error, "
    return str(item["msg"])


def _range_of(field: str) -> tuple[str, str]:
    info = TrainingConfig.model_fields.get(field)
    lo, hi = "-inf", "+inf"
    if info is None:
        return lo, hi
    for meta in info.metadata:
        for attr, side in (("ge", "lo"), ("gt", "lo"), ("le", "hi"), ("lt", "hi")):
            value = getattr(meta, attr, None)
            if value is None:
                continue
            text = f"{value}" + (" (exclusive)" if attr in ("gt", "lt") else "")
            if side == "lo":
                lo = text
            else:
                hi = text
    return lo, hi


def _is_jsonable(value: Any) -> bool:
    try:
        json.dumps(value)
    except (TypeError, ValueError):
        return False
    return True


@dataclass(frozen=True)
class ConfigCheck:
    """A validated config and the warnings about it (choices that run, but maybe not as meant)."""

    config: TrainingConfig
    warnings: list[Issue] = field(default_factory=list)


def check_config(data: Any, source: str | None = None, *, train_examples: int | None = None) -> ConfigCheck:
    """Validate `data` as `validate_config` does, and list the warnings about the result.

    With `train_examples` (the training set's row count) the warnings cover the schedule too.
    """
    from tunedeck.config.config_warnings import config_warnings

    config = validate_config(data, source)
    return ConfigCheck(config, config_warnings(config, source, train_examples=train_examples))


def load_config_file(path: Path | str) -> TrainingConfig:
    """Read and validate a JSON config file; errors name the file."""
    return validate_config(_read_json_file(path), str(path))


def check_config_file(path: Path | str, *, train_examples: int | None = None) -> ConfigCheck:
    """Read and validate a JSON config file, with the warnings about it; errors name the file."""
    return check_config(_read_json_file(path), str(path), train_examples=train_examples)


def _read_json_file(path: Path | str) -> Any:
    file = Path(path)
    source = str(file)
    try:
        text = file.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ConfigError([Issue("config file not found", file=source)]) from None
    except UnicodeDecodeError as error:
        raise ConfigError([Issue(f"not UTF-8 text ({error.reason})", file=source)]) from None
    try:
        return json.loads(text)
    except json.JSONDecodeError as error:
        raise ConfigError(
            [Issue(f"invalid JSON: {error.msg}", file=source, line=error.lineno, expected="a JSON object")]
        ) from None


def apply_overrides(config: TrainingConfig, overrides: dict[str, Any]) -> TrainingConfig:
    """A new config with `overrides` on top of `config`, validated as a whole."""
    merged = {**config.model_dump(exclude_unset=True), **overrides}
    return validate_config(merged)


def config_schema() -> dict[str, Any]:
    """The JSON Schema of TrainingConfig (used by the API and the dashboard form)."""
    schema = TrainingConfig.model_json_schema()
    schema["$id"] = "https://tunedeck.local/schemas/training-config.json"
    schema["title"] = "TrainingConfig"
    return schema
