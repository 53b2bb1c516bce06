"""Schema-driven fuzzing: every operation of the OpenAPI document, with generated valid and invalid requests.

Each generated request goes to the app in-process (no network) as bob, alice (who owns one
of each object, so id-carrying paths and bodies are exercised with real ids as well as
unknown ones) or an admin. Every response must pass every built-in check: no
5xx, only status codes the document lists for the operation, bodies and headers as
documented, a 405 naming the allowed methods, valid requests accepted and invalid ones refused.

Where a rule of the API has no JSON Schema spelling (a file's rows, keys of a config that
contradict each other), the generator is taught it, as the fuzzer's documentation advises:
`map_case` shapes the valid requests it sends (and keeps sealing off the data alice trains on).
"""

from __future__ import annotations

import json
import zlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import schemathesis
from schemathesis import Case, HookContext
from schemathesis.specs.openapi.schemas import OpenApiSchema

from tests.fixtures.api_objects import CHECKPOINT_FILE, EXPORT_NAME, METRIC_NAME, alice_world
from tests.fixtures.app import API, AppHarness
from tests.fixtures.data import PROMPT_COMPLETION_ROWS, ROWS_BY_FORMAT
from tunedeck.api.schemas.common import nul_path
from tunedeck.config.recipes import list_recipes
from tunedeck.config.training import TrainingConfig, contradictions

pytestmark = pytest.mark.slow

# Who sends the requests: bob gets 404 for alice's ids, alice reaches her objects, root acts as an admin.
USERS = ("bob", "alice", "root")
# A fixed seed and derandomised generation, and no example database (nothing of a run is kept, in the
# checkout or elsewhere): the same requests on every run and in CI.
SEED = 20240611
# Generated requests per operation beyond the coverage phase's systematic ones (boundaries, every
# enum value, each constraint broken in turn), which already send every strategy's valid and invalid
# shapes; the generated ones add variety. With those, under a minute on two cores.
MAX_EXAMPLES = 5
# A real id is sent in about this share of the requests that have a place for it.
REAL_ID_PROBABILITY = 0.6
# Event streams end with their job; one that never ends is cut after this long.
REQUEST_TIMEOUT_S = 5.0
# A user made for the fuzzer, so that an admin's generated changes to users never lock out alice or bob.
SPARE_USER = "carol"

UPLOADS = (f"POST {API}/datasets", f"POST {API}/datasets/{{dataset_id}}/versions")
# Where an operation's body carries config keys ("" is the whole body).
CONFIG_IN_BODY = {
    f"POST {API}/jobs": "config",
    f"POST {API}/jobs/{{job_id}}/clone": "config",
    f"POST {API}/experiments": "reference_config",
    f"POST {API}/config/validate": "",
    f"POST {API}/preflight": "config",
}


def _fuzz_config(values: dict[str, list[str | int]]) -> schemathesis.Config:
    """Generation settings and the dictionaries of real ids, bound to the parameters that name them."""
    bindings = {
        "path.job_id": "jobs",
        "path.dataset_id": "datasets",
        "path.base_model_id": "base_models",
        "path.experiment_id": "experiments",
        "path.plan_id": "plans",
        "path.token_id": "tokens",
        "path.step": "steps",
        "path.path": "files",
        "path.name": "names",
        "query.reference_job_id": "jobs",
        "body.base_model_id": "base_models",
        "body.train_dataset_id": "datasets",
        "body.validation_dataset_id": "datasets",
        "body.experiment_id": "experiments",
    }
    return schemathesis.Config.from_dict(
        {
            "seed": SEED,
            "request-timeout": REQUEST_TIMEOUT_S,
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
            "dictionaries": {name: {"values": entries} for name, entries in values.items()},
            "parameters": {
                # `wait` is how long a request sits waiting for a worker to finish its work item; this run
                # has no worker, so any other value only makes the request sleep that long before its 202.
                "query.wait": 0,
                **{key: {"dictionary": name, "probability": REAL_ID_PROBABILITY} for key, name in bindings.items()},
            },
            "operations": [
                {
                    "include-path": f"{API}/config/recipes/{{name}}",
                    "parameters": {"path.name": {"dictionary": "recipes", "probability": REAL_ID_PROBABILITY}},
                },
                {
                    "include-path-regex": f"^{API}/users/",
                    "parameters": {"path.name": {"dictionary": "users", "probability": REAL_ID_PROBABILITY}},
                },
            ],
        }
    )


def _dataset_file(fields: dict[str, Any]) -> bytes:
    """Rows of the form's `format`, written as its `file_type` (JSON or JSONL) says."""
    rows = ROWS_BY_FORMAT.get(str(fields.get("format")), PROMPT_COMPLETION_ROWS)
    if fields.get("file_type") == "json":
        return json.dumps(rows).encode()
    fields["file_type"] = "jsonl"  # the file goes without a name to tell its type by
    return "".join(json.dumps(row) + "\n" for row in rows).encode()


def _one_source_per_target(fields: dict[str, Any]) -> None:
    """Keep the first pair of each target in the form's `column_map`, and no `label` pair beside a label column."""
    text = fields.get("column_map")
    if not isinstance(text, str):
        return
    seen: set[str] = set() if fields.get("label_column") is None else {"label"}
    pairs = []
    for pair in text.split(","):
        target = pair.partition("=")[0].strip()
        if target not in seen:
            seen.add(target)
            pairs.append(pair)
    if pairs:
        fields["column_map"] = ",".join(pairs)
    else:
        del fields["column_map"]


def _without_contradictions(keys: dict[str, Any]) -> dict[str, Any]:
    """`keys` without those the config's own rules blame for a contradiction, or holding NUL in free-form JSON."""
    keys = {key: value for key, value in keys.items() if nul_path(value) is None}
    while blamed := {field for field, _ in contradictions(TrainingConfig.model_construct(**_as_validated(keys)))}:
        keys = {key: value for key, value in keys.items() if key not in blamed}
    return keys


def _as_validated(keys: dict[str, Any]) -> dict[str, Any]:
    """`keys` with whole-number floats read as integers, as validation reads them (`2.0` processes is 2)."""
    return {
        key: int(value) if isinstance(value, float) and value.is_integer() else value for key, value in keys.items()
    }


PLANS = f"POST {API}/plans"


def _plannable(body: dict[str, Any]) -> None:
    """A plan request with what planning needs beyond its schema (test_api_plans.py): a machine named by type
    (a worker must have reported its hardware), the model size and the training rows for the estimates, no
    preflight item (it must be a finished one), and variants with distinct names."""
    machine = body.get("machine")
    if not isinstance(machine, dict) or machine.get("device_type") is None:
        body["machine"] = {"device_type": "H100"}
    # An explicit null is schema-valid too: it asks for the same figures a missing key does.
    if body.get("model_params") is None:
        body["model_params"] = 7e9
    if body.get("train_rows") is None:
        body["train_rows"] = 100
    body.pop("preflight_id", None)
    variants = [v for v in body.get("variants") or [] if isinstance(v, dict) and isinstance(v.get("name"), str)]
    distinct = list({v["name"]: v for v in variants}.values()) or [{"name": "v"}]
    body["variants"] = distinct


SEAL = f"POST {API}/datasets/{{dataset_id}}/seal"
CLONE = f"POST {API}/jobs/{{job_id}}/clone"
EXPORT = f"POST {API}/jobs/{{job_id}}/exports"
MLX_ONLY = ("dtype", "quantize_bits", "mlx_contents", "unified_memory_gb")


def _kept_trainable(case: Case, trained: str, sealable: str) -> None:
    """Seal a dataset kept for it instead of the one alice's job, preflights and clones train on.

    Sealing is one-way: once a request cancelled alice's job and sealed its data, every later
    valid job, clone or preflight on that data would rightly be refused.
    """
    if case.operation.label == SEAL and case.path_parameters.get("dataset_id") == trained:
        case.path_parameters["dataset_id"] = sealable


def map_valid_case(context: HookContext, case: Case) -> Case:
    """Keep each valid request to the API's rules that JSON Schema cannot state.

    They are: the rows of an uploaded file (refusals tested in test_api_datasets.py and
    test_api_input_limits.py), a column mapping naming a target twice (test_api_datasets.py),
    config keys that contradict each other (tests/unit/config/test_training.py),
    the body's and the config's validation dataset naming the same one (test_api_jobs.py),
    and no NUL in free-form JSON (test_api_input_limits.py), and a clone's config naming a device
    count other than the devices its job reserved (test_api_jobs.py), and what a rental plan needs
    beyond its schema (test_api_plans.py), and an export's MLX options only with the mlx format,
    quantisation only for a merged MLX export (test_api_export_mlx.py).
    """
    if case.meta is None or not case.meta.generation.mode.is_positive or not isinstance(case.body, dict):
        return case
    label = case.operation.label
    if label == PLANS:
        _plannable(case.body)
    if label in UPLOADS and "file" in case.body:
        case.body["file"] = _dataset_file(case.body)
    if label in UPLOADS:
        _one_source_per_target(case.body)
    if label == EXPORT:
        if case.body.get("format") != "mlx":
            for name in MLX_ONLY:
                case.body.pop(name, None)
        elif case.body.get("mlx_contents") == "adapter":
            case.body.pop("quantize_bits", None)
    where = CONFIG_IN_BODY.get(label)
    if where == "":
        case.body = _without_contradictions(case.body)
    elif where is not None and isinstance(case.body.get(where), dict):
        keys = dict(case.body[where])
        if case.body.get("validation_dataset_id") not in (None, keys.get("validation_dataset_id")):
            keys.pop("validation_dataset_id", None)
        if label == CLONE:
            keys.pop("devices", None)  # a clone reserves the devices its job reserved
        case.body[where] = _without_contradictions(keys)
    return case


@pytest.fixture
def fuzzed_api(api: AppHarness, tmp_path: Path, request: pytest.FixtureRequest) -> Iterator[OpenApiSchema]:
    """The app's own OpenAPI document, loaded for fuzzing, with alice's objects and a spare user in place."""
    # The fuzzer names the test node after each operation through `Node._nodeid`, which this pytest
    # keeps elsewhere; giving it the attribute lets it run (reports name the operation in the subtest).
    request.node._nodeid = request.node.nodeid
    world = alice_world(api, tmp_path)
    dataset = api.client.get(f"{API}/datasets/{world['dataset_id']}", headers=api.auth("alice")).json()
    spare = api.store.users.create_user(SPARE_USER, admin=False)
    # Tokens the fuzzer may revoke: never the ones it signs in with.
    revocable = [api.store.users.issue_token(api.users[user], "fuzz")[1].id for user in ("alice", "bob")]
    values: dict[str, list[str | int]] = {
        "jobs": [world["job_id"]],
        "datasets": [world["dataset_id"], dataset["latest"]["id"]],
        "base_models": [world["base_model_id"]],
        "experiments": [world["experiment_id"]],
        "plans": [world["plan_id"]],
        "tokens": revocable,
        "steps": [int(world["step"])],
        "files": [CHECKPOINT_FILE],
        "names": [METRIC_NAME, EXPORT_NAME],
        "recipes": [recipe.name for recipe in list_recipes()],
        "users": [spare.name],
    }
    schema = schemathesis.openapi.from_asgi("/openapi.json", api.client.app, config=_fuzz_config(values))
    sealable = api.dataset("alice", name="sealable")["id"]

    def map_case(context: HookContext, case: Case) -> Case:  # the hook is found by this name
        _kept_trainable(case, world["dataset_id"], sealable)
        return map_valid_case(context, case)

    schema.hook(map_case)
    yield schema


def _user_for(case: Case) -> str:
    """Who sends `case`: picked by its content, so a case replayed while it is shrunk goes to the same user."""
    content = repr((case.operation.label, case.path_parameters, case.query, case.body)).encode()
    return USERS[zlib.crc32(content) % len(USERS)]


fuzzed = schemathesis.pytest.from_fixture("fuzzed_api")


@fuzzed.exclude(method="DELETE").parametrize()
def test_api_answers_every_request_as_documented(case: Case, api: AppHarness) -> None:
    case.call_and_validate(headers=api.auth(_user_for(case)))


# Deletions on a world of their own: run among the others, one that removes alice's job or dataset
# would leave every later operation only unknown ids to answer.
@fuzzed.include(method="DELETE").parametrize()
def test_api_answers_every_deletion_as_documented(case: Case, api: AppHarness) -> None:
    case.call_and_validate(headers=api.auth(_user_for(case)))
