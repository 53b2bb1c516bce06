"""Custom metrics from installed plugins: the `tunedeck.metrics` entry-point group.

A fake distribution (a `.dist-info` folder with `entry_points.txt`) on `sys.path`
stands for a `pip install`ed plugin, so nothing is installed into the environment.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tunedeck.eval.metrics import MetricInputs
from tunedeck.eval.registry import ENTRY_POINT_GROUP, MetricPluginError, MetricRegistry

REGISTER_MODULE = """
def register(registry):
    \"\"\"Called with the registry that discovered this plugin.\"\"\"

    @registry.register("test_plugin_word_count", task="generation")
    def word_count(inputs):
        \"\"\"Mean number of words per prediction.\"\"\"
        return {"mean_words": sum(len(str(p).split()) for p in inputs.predictions) / len(inputs.predictions)}
"""
# The decorator form registers in the default registry on import: used only in a child process,
# so the default registry of the test process never holds a fake metric.
DECORATOR_MODULE = (
    REGISTER_MODULE
    + """

from tunedeck.eval.registry import register_metric


@register_metric("test_plugin_shout_rate", task="generation")
def shout_rate(inputs):
    \"\"\"Share of predictions written in capitals.\"\"\"
    return {"shout_rate": sum(str(p).isupper() for p in inputs.predictions) / len(inputs.predictions)}
"""
)


def fake_distribution(root: Path, entry_points: dict[str, str], *, module: str = REGISTER_MODULE) -> Path:
    """A plugin 'installed' under `root`: its module and a dist-info declaring `entry_points`."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "fake_metric_plugin.py").write_text(textwrap.dedent(module), encoding="utf-8")
    info = root / "fake_metric_plugin-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-metric-plugin\nVersion: 0.1\n")
    lines = [f"[{ENTRY_POINT_GROUP}]", *(f"{name} = {value}" for name, value in entry_points.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
    return root


@pytest.fixture
def unload_plugin_module() -> object:
    """Forget the fake plugin module after a test, so another test imports its own copy."""
    yield
    sys.modules.pop("fake_metric_plugin", None)


def test_a_registry_loads_plugins_from_entry_points_on_first_use(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unload_plugin_module: object
) -> None:
    monkeypatch.syspath_prepend(str(fake_distribution(tmp_path, {"words": "fake_metric_plugin:register"})))
    registry = MetricRegistry(entry_point_group=ENTRY_POINT_GROUP)
    assert "fake_metric_plugin" not in sys.modules  # constructing a registry loads nothing
    assert registry.names() == ["test_plugin_word_count"]
    inputs = MetricInputs(task="generation", predictions=["a b c", "d"], references=["x", "y"])
    assert registry.compute(inputs) == {"mean_words": 2.0}
    assert registry.get("test_plugin_word_count").description == "Mean number of words per prediction."
    # A registry without the group ignores installed plugins.
    assert MetricRegistry().names() == []


def test_a_plugin_that_fails_to_load_is_named_in_the_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unload_plugin_module: object
) -> None:
    points = {"words": "fake_metric_plugin:register", "broken": "fake_metric_plugin:no_such_function"}
    monkeypatch.syspath_prepend(str(fake_distribution(tmp_path, points)))
    registry = MetricRegistry(entry_point_group=ENTRY_POINT_GROUP)
    with pytest.raises(MetricPluginError) as raised:
        registry.names()
    issue = raised.value.issues[0]
    assert issue.field == f"entry point {ENTRY_POINT_GROUP}:broken"
    assert "'fake_metric_plugin:no_such_function'" in issue.message
    assert "fake-metric-plugin" in issue.message and "AttributeError" in issue.message
    # Still refused on the next use (nothing silently missing), and the good plugin is not registered twice.
    with pytest.raises(MetricPluginError):
        registry.get("test_plugin_word_count")


def test_a_plugin_whose_register_raises_is_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, unload_plugin_module: object
) -> None:
    module = "def register(registry):\n    raise RuntimeError('needs a GPU metric library')\n"
    monkeypatch.syspath_prepend(str(fake_distribution(tmp_path, {"gpu": "fake_metric_plugin:register"}, module=module)))
    with pytest.raises(MetricPluginError, match=r"'gpu'.*RuntimeError: needs a GPU metric library"):
        MetricRegistry(entry_point_group=ENTRY_POINT_GROUP).for_task("generation")


def test_a_fresh_process_finds_installed_plugins_in_the_default_registry(tmp_path: Path) -> None:
    # The reason for entry points: a job evaluates in a child process, which no in-process
    # registration reaches; an installed plugin is found there as in any other process.
    points = {"shout": "fake_metric_plugin", "words": "fake_metric_plugin:register"}
    root = fake_distribution(tmp_path / "site", points, module=DECORATOR_MODULE)
    script = (
        "import json\n"
        "from tunedeck.eval.metrics import MetricInputs\n"
        "from tunedeck.eval.registry import compute_metrics, metrics_for_task\n"
        "names = [spec.name for spec in metrics_for_task('generation')]\n"
        "inputs = MetricInputs(task='generation', mean_loss=0.5, predictions=['HI', 'no'], references=['HI', 'yes'])\n"
        "print(json.dumps({'names': names, 'metrics': compute_metrics(inputs)}))\n"
    )
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(root), *sys.path])}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout.splitlines()[-1])
    assert found["names"][:2] == ["loss", "generation"]  # built-ins first
    assert set(found["names"][2:]) == {"test_plugin_shout_rate", "test_plugin_word_count"}
    assert found["metrics"]["shout_rate"] == 0.5 and found["metrics"]["mean_words"] == 1.0
