"""The metric registry: built-ins by task, custom metrics plugged in from outside."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest

from tunedeck.core.errors import ConfigError
from tunedeck.eval.metrics import MetricInputError, MetricInputs
from tunedeck.eval.registry import (
    ALL_TASKS,
    MetricRegistry,
    compute_metrics,
    get_metric,
    metrics_for_task,
    register_metric,
    unregister_metric,
)

CUSTOM_NAME = "test_only_answer_length"


def test_builtins_are_grouped_by_task_and_loss_runs_for_every_task() -> None:
    assert [spec.name for spec in metrics_for_task("classification")] == ["loss", "classification"]
    assert [spec.name for spec in metrics_for_task("extraction")] == ["loss", "extraction"]
    assert [spec.name for spec in metrics_for_task("generation")] == ["loss", "generation"]
    # A plain causal-LM job has no task-specific metric: loss and perplexity only.
    assert [spec.name for spec in metrics_for_task("sft")] == ["loss"]
    assert get_metric("loss").task == ALL_TASKS
    assert get_metric("classification").description.startswith("Accuracy, macro-F1")


def test_compute_merges_loss_and_task_metrics_into_one_mapping() -> None:
    inputs = MetricInputs(
        task="extraction",
        mean_loss=1.0,
        predictions=['{"name": "Ada"}', "oops"],
        references=[{"name": "Ada"}, {"name": "Bob"}],
        required_fields=["name"],
    )
    metrics = compute_metrics(inputs)

    assert metrics["eval_loss"] == 1.0
    assert metrics["json_valid_rate"] == 0.5
    assert metrics["fields"]["name"]["exact_match"] == 0.5
    assert "examples" not in metrics


def test_a_missing_loss_is_reported_not_skipped() -> None:
    with pytest.raises(MetricInputError, match="computed no loss"):
        compute_metrics(MetricInputs(task="generation", predictions=["a"], references=["a"]))
    assert compute_metrics(
        MetricInputs(task="generation", predictions=["a"], references=["a"]), names=["generation"]
    ) == {"num_examples": 1, "exact_match": 1.0, "token_f1": 1.0}


@pytest.fixture
def custom_metric() -> Iterator[str]:
    # Registered the way a plugin would, from outside the package, then removed so tests stay independent.
    @register_metric(CUSTOM_NAME, task="generation")
    def answer_length(inputs: MetricInputs) -> dict[str, Any]:
        """Mean length of the generated answers, in characters."""
        return {"mean_answer_chars": sum(len(text) for text in inputs.predictions) / len(inputs.predictions)}

    yield CUSTOM_NAME
    unregister_metric(CUSTOM_NAME)


def test_a_custom_metric_plugs_in_without_editing_tunedeck(custom_metric: str) -> None:
    assert custom_metric in [spec.name for spec in metrics_for_task("generation")]
    assert custom_metric not in [spec.name for spec in metrics_for_task("classification")]

    metrics = compute_metrics(
        MetricInputs(task="generation", mean_loss=0.0, predictions=["abcd", "ab"], references=["x", "y"])
    )
    assert metrics["mean_answer_chars"] == 3.0
    assert metrics["eval_perplexity"] == 1.0
    assert get_metric(custom_metric).description == "Mean length of the generated answers, in characters."


def test_a_taken_name_is_refused_and_names_the_owner() -> None:
    with pytest.raises(ConfigError, match=r"'classification' is already registered by tunedeck\.eval"):

        @register_metric("classification", task="classification")
        def shadow(inputs: MetricInputs) -> dict[str, Any]:
            return {}


def test_an_unknown_metric_lists_the_known_ones() -> None:
    with pytest.raises(ConfigError, match=r"unknown metric 'bleu'.*one of .*classification"):
        get_metric("bleu")


def test_a_separate_registry_starts_empty_and_refuses_colliding_keys() -> None:
    registry = MetricRegistry()

    @registry.register("first", task="t")
    def first(inputs: MetricInputs) -> dict[str, Any]:
        return {"score": 1}

    @registry.register("second", task=ALL_TASKS)
    def second(inputs: MetricInputs) -> dict[str, Any]:
        return {"score": 2}

    assert registry.names() == ["first", "second"]
    with pytest.raises(ConfigError, match="'first' and 'second' both report 'score'"):
        registry.compute(MetricInputs(task="t"))
    registry.unregister("first")
    assert registry.compute(MetricInputs(task="t")) == {"score": 2}
    with pytest.raises(ConfigError, match="unknown metric 'first'"):
        registry.unregister("first")


@pytest.mark.parametrize(("name", "task"), [("", "t"), ("ok", ""), ("  ", "t")])
def test_blank_names_and_tasks_are_refused(name: str, task: str) -> None:
    with pytest.raises(ConfigError):
        MetricRegistry().register(name, task)


def test_importing_registers_nothing_and_metrics_never_import_torch() -> None:
    # A fresh interpreter: this test process may already hold these modules.
    script = (
        "import sys\n"
        "import tunedeck.eval.registry, tunedeck.eval.guards, tunedeck.eval.metrics\n"
        "assert 'tunedeck.eval.metrics.builtin' not in sys.modules, 'built-ins loaded at import'\n"
        "from tunedeck.eval.registry import compute_metrics\n"
        "from tunedeck.eval.metrics import MetricInputs\n"
        "compute_metrics(MetricInputs(task='classification', mean_loss=1.0, predictions=['a'],"
        " references=['a'], labels=['a']))\n"
        "assert 'tunedeck.eval.metrics.builtin' in sys.modules\n"
        "assert 'torch' not in sys.modules, 'torch imported'\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
