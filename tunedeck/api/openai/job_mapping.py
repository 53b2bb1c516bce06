"""How an OpenAI fine-tuning job request becomes a tunedeck job config, and a tunedeck job a `FineTuningJob`.

The one place these rules live. The request builds a normal job config, checked by the
normal validator (`validate_config`); its issues are named by the request's fields.

| OpenAI request field                          | tunedeck job config                                             |
|-----------------------------------------------|-----------------------------------------------------------------|
| `model`                                       | the job's base model: a registered base model's name or id      |
| `training_file`, `validation_file`            | the job's training / validation dataset version (a file id)     |
| `method.type` `supervised` (the default)      | `task: sft`                                                     |
| `method.type` `dpo`                           | `task: dpo` (the file holds preference pairs)                   |
| `hyperparameters.n_epochs`                    | `epochs`                                                        |
| `hyperparameters.batch_size` N                | `batch_size: N`, `gradient_accumulation_steps: 1` (N per step)  |
| `hyperparameters.learning_rate_multiplier` m  | `learning_rate`: m × the method's default learning rate         |
| `method.dpo.hyperparameters.beta`             | `beta`                                                          |
| `seed`                                        | `seed`                                                          |
| `suffix`, `metadata`                          | kept beside the job (`fine_tuning_requests`), not in the config |
| `integrations` `[{type: wandb, ...}]`         | `report_to: ["wandb"]`: the operator's W&B destination (1)      |
| (none)                                        | `mixed_precision: auto`: the best precision of the hardware     |
| `config` (tunedeck's, through `extra_body`)   | any other config key (`max_length`, `lora_r`, ...), as given     |

(1) Where W&B runs are written (mode, project, entity, key) is the server's setting, never
a request's: the integration's `project`, `entity`, `name` and `tags` are kept with the
request and answered back in `integrations`, and the run goes to the operator's project.

A key of `config` that a field above sets (`epochs`, `task`, `seed`, ...) is a 400 naming
`config.<key>` and the field to use instead.

Hyperparameters come either at the top level (`hyperparameters`) or in the method
(`method.<type>.hyperparameters`), not both. `auto` (or leaving a value out) takes the
method's default: supervised, tunedeck's config defaults (3 epochs, batch 4 × 4 accumulated
micro-batches, learning rate 5e-5); dpo, the `dpo-lora` recipe's (1 epoch, batch 2 × 8,
learning rate 2e-5, beta 0.1). A job reports its hyperparameters as resolved:
`batch_size` = `batch_size` × `gradient_accumulation_steps` (examples per optimizer step
on one device), `learning_rate_multiplier` = `learning_rate` / the method's default.

| tunedeck state       | OpenAI `status` |
|----------------------|-----------------|
| queued               | queued          |
| running, pausing     | running         |
| paused               | queued: it waits, and goes on only when resumed (tunedeck's own API says paused) |
| succeeded            | succeeded (`fine_tuned_model` is then set) |
| failed               | failed (`error` holds the diagnosis) |
| cancelled            | cancelled       |

Files are validated when uploaded, so a job never reports `validating_files`.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from tunedeck.api.openai.schemas.fine_tuning import AUTO, FineTuningJobCreate, HyperparametersIn, JobErrorOut
from tunedeck.config.loading import validate_config
from tunedeck.config.recipes import get_recipe
from tunedeck.config.training import TrainingConfig
from tunedeck.core.errors import ConfigError, Issue
from tunedeck.core.states import JobState
from tunedeck.store.models import Job

SUPERVISED, DPO = "supervised", "dpo"
TASKS = {SUPERVISED: "sft", DPO: "dpo"}
METHODS = {task: method for method, task in TASKS.items()}
STATUS = {
    JobState.QUEUED: "queued",
    JobState.RUNNING: "running",
    JobState.PAUSING: "running",
    JobState.PAUSED: "queued",
    JobState.SUCCEEDED: "succeeded",
    JobState.FAILED: "failed",
    JobState.CANCELLED: "cancelled",
}
# The config keys an OpenAI hyperparameter sets, and the hyperparameter each key's issues are named by.
_DEFAULTED_KEYS = ("epochs", "batch_size", "gradient_accumulation_steps", "learning_rate", "beta")
_ISSUE_FIELDS = {
    "epochs": "n_epochs",
    "batch_size": "batch_size",
    "gradient_accumulation_steps": "batch_size",
    "learning_rate": "learning_rate_multiplier",
    "beta": "beta",
}
_RECIPES = {DPO: "dpo-lora"}
# What a request states in the job's config though the client cannot name it: the hardware's best precision.
_REQUEST_DEFAULTS = {"mixed_precision": "auto"}
# The request field that sets each config key the mapping writes (a `config` extension may not set them).
_SET_BY = {
    "task": "method.type",
    "epochs": "hyperparameters.n_epochs",
    "batch_size": "hyperparameters.batch_size",
    "gradient_accumulation_steps": "hyperparameters.batch_size",
    "learning_rate": "hyperparameters.learning_rate_multiplier",
    "beta": "method.dpo.hyperparameters.beta",
    "seed": "seed",
    "report_to": "integrations",
    "validation_dataset_id": "validation_file",
}


@cache
def method_defaults(method: str) -> dict[str, Any]:
    """The config values `auto` stands for under `method`: its recipe's, else the config's own defaults."""
    fields = TrainingConfig.model_fields
    defaults = {key: fields[key].default for key in _DEFAULTED_KEYS}
    if method in _RECIPES:
        recipe = get_recipe(_RECIPES[method]).values
        defaults.update({key: recipe[key] for key in _DEFAULTED_KEYS if key in recipe})
    return defaults


@dataclass(frozen=True)
class MappedRequest:
    """A request as tunedeck reads it: the validated config, and what the job reports beside it."""

    config: TrainingConfig
    method: str
    hyperparameters: dict[str, Any]  # as sent (`auto` kept), where they were sent


def _given(body: FineTuningJobCreate) -> tuple[str, HyperparametersIn | None, str]:
    """The method, its hyperparameters as sent and the field they were sent in."""
    method = body.method.type if body.method is not None else SUPERVISED
    in_method = None
    if body.method is not None:
        other = DPO if method == SUPERVISED else SUPERVISED
        if getattr(body.method, other) is not None:
            raise ConfigError(
                [Issue(f"method.type is {method}", field=f"method.{other}", expected=f"method.{method} or nothing")],
                title="invalid method",
            )
        section = getattr(body.method, method)
        in_method = section.hyperparameters if section is not None else None
    if in_method is not None and body.hyperparameters is not None:
        raise ConfigError(
            [Issue("hyperparameters are given twice", field="hyperparameters",
                   expected=f"hyperparameters in method.{method}.hyperparameters or at the top level, not both")],
            title="invalid hyperparameters",
        )  # fmt: skip
    if in_method is not None:
        return method, in_method, f"method.{method}.hyperparameters"
    return method, body.hyperparameters, "hyperparameters"


def map_request(body: FineTuningJobCreate) -> MappedRequest:
    """The tunedeck config `body` asks for, validated; ConfigError naming the request's fields otherwise."""
    method, given, where = _given(body)
    defaults = method_defaults(method)
    extension = dict(body.config or {})
    taken = [key for key in extension if key in _SET_BY]
    if taken:
        raise ConfigError(
            [Issue(f"set by {_SET_BY[key]}", field=f"config.{key}", expected=f"{_SET_BY[key]} instead")
             for key in taken],
            title="config keys the request's fields set",
        )  # fmt: skip
    config: dict[str, Any] = {**_REQUEST_DEFAULTS, **extension, "task": TASKS[method]}
    values = given.model_dump(exclude_none=True) if given is not None else {}
    epochs = values.get("n_epochs", AUTO)
    config["epochs"] = defaults["epochs"] if epochs == AUTO else epochs
    batch = values.get("batch_size", AUTO)
    if batch == AUTO:
        config["batch_size"] = defaults["batch_size"]
        config["gradient_accumulation_steps"] = defaults["gradient_accumulation_steps"]
    else:
        config["batch_size"] = batch
        config["gradient_accumulation_steps"] = 1
    multiplier = values.get("learning_rate_multiplier", AUTO)
    config["learning_rate"] = defaults["learning_rate"] * (1.0 if multiplier == AUTO else multiplier)
    if method == DPO:
        beta = values.get("beta", AUTO)
        config["beta"] = defaults["beta"] if beta == AUTO else beta
    if body.seed is not None:
        config["seed"] = body.seed
    if body.integrations:
        config["report_to"] = sorted({integration.type for integration in body.integrations})
    return MappedRequest(config=_validated(config, where, set(extension)), method=method, hyperparameters=values)


def _validated(config: dict[str, Any], where: str, extension: set[str]) -> TrainingConfig:
    try:
        return validate_config(config)
    except ConfigError as error:
        issues = [_renamed(issue, where, extension) for issue in error.issues]
        raise ConfigError(issues, title=error.title) from None


def _renamed(issue: Issue, where: str, extension: set[str]) -> Issue:
    """An issue of the config named by the request field that set the key (`config.<key>` for the extension)."""
    key = issue.field or ""
    root = key.split(".", 1)[0].split("[", 1)[0]
    field: str | None
    if root in extension or root not in _SET_BY:
        field = f"config.{key}" if key else "config"
    elif key in _ISSUE_FIELDS:
        field = f"{where}.{_ISSUE_FIELDS[key]}"
    elif key == "task":
        field = "method.type"
    else:
        field = _SET_BY[root]
    found = issue.found
    if key == "learning_rate" and found is not None:
        found = f"a learning rate of {found}"
    return Issue(issue.message, field=field, expected=issue.expected, found=found)


def resolved_hyperparameters(config: dict[str, Any], *, with_method_keys: bool = False) -> dict[str, Any]:
    """The hyperparameters a job trains with, in the client's terms (the module docstring says how).

    `with_method_keys` adds those only a method reports (dpo's `beta`): the job's top-level
    `hyperparameters` are supervised fine-tuning's three.
    """
    method = METHODS.get(str(config.get("task", "sft")), SUPERVISED)
    defaults = method_defaults(method)
    resolved = {
        "n_epochs": int(config.get("epochs", defaults["epochs"])),
        "batch_size": int(config.get("batch_size", defaults["batch_size"]))
        * int(config.get("gradient_accumulation_steps", defaults["gradient_accumulation_steps"])),
        "learning_rate_multiplier": float(config.get("learning_rate", defaults["learning_rate"]))
        / float(defaults["learning_rate"]),
    }
    if method == DPO and with_method_keys:
        resolved["beta"] = float(config.get("beta", defaults["beta"]))
    return resolved


def method_out(config: dict[str, Any]) -> dict[str, Any]:
    """The job's method with its resolved hyperparameters (a task other than sft or dpo reports supervised)."""
    method = METHODS.get(str(config.get("task", "sft")), SUPERVISED)
    return {"type": method, method: {"hyperparameters": resolved_hyperparameters(config, with_method_keys=True)}}


def job_status(job: Job) -> str:
    """The client's status of a tunedeck job (the module docstring's table)."""
    return STATUS[JobState(job.state)]


def job_error(job: Job) -> JobErrorOut | None:
    """Why a failed job failed: the diagnosis's kind as `code`, the job's error as `message`."""
    if JobState(job.state) is not JobState.FAILED:
        return None
    diagnosis = job.diagnosis or {}
    message = job.error_message or str(diagnosis.get("message") or "") or "the job failed"
    return JobErrorOut(code=str(diagnosis.get("kind") or "job_failed"), message=message, param=None)
