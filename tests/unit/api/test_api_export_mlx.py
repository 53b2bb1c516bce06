"""The export route's MLX fields: `mlx` is a format, a bad dtype is a 422 naming the field, and MLX-only
fields are refused for the other formats (checked before the job is even looked up)."""

from __future__ import annotations

from typing import Any

from tests.fixtures.app import API, AppHarness
from tunedeck.api.schemas.exports import ExportIn
from tunedeck.core.mlx_export import MlxExportOptions
from tunedeck.service.jobs.job_models import EXPORT_NAME, export_name_for


def _post(api: AppHarness, body: dict[str, object]) -> tuple[int, Any]:
    answer = api.client.post(f"{API}/jobs/no-such-job/exports", headers=api.auth("alice"), json=body)
    return answer.status_code, answer.json()


def test_mlx_is_an_accepted_format_and_a_bad_dtype_is_a_422_naming_the_field(api: AppHarness) -> None:
    status, _ = _post(api, {"format": "mlx", "dtype": "bfloat16", "mlx_contents": "adapter"})
    assert status == 404  # valid: the request went on to look for the job
    status, _ = _post(api, {"format": "mlx", "quantize_bits": 4, "unified_memory_gb": 16})
    assert status == 404

    status, answer = _post(api, {"format": "mlx", "dtype": "float64"})
    assert status == 422
    (issue,) = answer["issues"]
    assert issue["field"] == "dtype" and issue["found"] == "float64" and "float16" in issue["message"]

    status, answer = _post(api, {"format": "mlx", "quantize_bits": 3})
    assert status == 422 and [i["field"] for i in answer["issues"]] == ["quantize_bits"]


def test_mlx_only_fields_are_refused_for_other_formats_and_adapter_layouts_are_not_quantised(api: AppHarness) -> None:
    status, answer = _post(api, {"format": "merged", "dtype": "float16"})
    assert status == 422 and "dtype applies to the mlx format only" in str(answer)
    status, answer = _post(api, {"format": "mlx", "mlx_contents": "adapter", "quantize_bits": 8})
    assert status == 422 and "quantize_bits" in str(answer)
    status, answer = _post(api, {"format": "mlx", "unified_memory_gb": 0})
    assert status == 422 and answer["issues"][0]["field"] == "unified_memory_gb"


def test_each_mlx_choice_is_its_own_export_name() -> None:
    names = {
        export_name_for("mlx", "final", ExportIn(format="mlx").mlx_options()),
        export_name_for("mlx", "final", ExportIn(format="mlx", dtype="bfloat16").mlx_options()),
        export_name_for("mlx", "step-4", ExportIn(format="mlx", quantize_bits=4).mlx_options()),
        export_name_for("mlx", "final", MlxExportOptions(contents="adapter", dtype="float32")),
    }
    assert names == {"mlx-float16-final", "mlx-bfloat16-final", "mlx-4bit-step-4", "mlx-adapter-float32-final"}
    assert all(EXPORT_NAME.match(name) for name in names)
    assert export_name_for("merged", "final") == "merged-final" and ExportIn(format="merged").mlx_options() is None
    for bad in ("mlx-final", "mlx-adapter-4bit-final", "mlx-float64-final"):
        assert not EXPORT_NAME.match(bad)
