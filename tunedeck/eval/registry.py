"""The metric registry: name → metric function, grouped by evaluation task.

Every metric takes one `MetricInputs` and returns a JSON-ready mapping that is
merged into the evaluation's metrics, so guards and comparisons address custom
metrics exactly like built-in ones. A plugin registers its own metric without
touching tunedeck's code:

    @register_metric("json_depth", task="extraction")
    def json_depth(inputs: MetricInputs) -> dict[str, float]:
        ...

`task="*"` (`ALL_TASKS`) makes a metric run for every task (loss and perplexity
do). The built-in metrics are registered the first time the default registry is
used, by importing `tunedeck.eval.metrics.builtin`, so importing this module
changes nothing.

A job trains and evaluates in a child process, so a registration made in the
server's process never reaches it. Installed plugins are therefore discovered
through the `tunedeck.metrics` entry-point group, loaded (after the built-ins)
the first time a registry that names the group is used, in whichever process
that is. In the plugin's `pyproject.toml`:

    [project.entry-points."tunedeck.metrics"]
    json_depth = "my_plugin.metrics:register"   # register(registry) is called
    # or: json_depth = "my_plugin.metrics"      # importing it runs its @register_metric

An entry point that fails to load raises `MetricPluginError` naming it, its
value and its distribution, every time the registry is used until it is fixed:
a metric that silently went missing would turn a guard on it into a confusing
violation.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import types
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from tunedeck.core.errors import ConfigError, Issue
from tunedeck.eval.metrics.inputs import MetricInputs

ALL_TASKS = "*"
BUILTIN_METRICS_MODULE = "tunedeck.eval.metrics.builtin"
ENTRY_POINT_GROUP = "tunedeck.metrics"

MetricFn = Callable[[MetricInputs], Mapping[str, Any]]


@dataclass(frozen=True)
class MetricSpec:
    """One registered metric: its name, the task it belongs to and the function computing it."""

    name: str
    task: str
    fn: MetricFn

    def __call__(self, inputs: MetricInputs) -> dict[str, Any]:
        """Compute the metric on `inputs`."""
        return dict(self.fn(inputs))

    @property
    def description(self) -> str:
        """First line of the metric function's docstring (empty when it has none)."""
        doc = (self.fn.__doc__ or "").strip()
        return doc.splitlines()[0] if doc else ""


def _registry_error(message: str, name: str, expected: str | None = None) -> ConfigError:
    return ConfigError([Issue(message=message, field=name, expected=expected)], title="metric registry")


class MetricPluginError(ConfigError):
    """A `tunedeck.metrics` entry point could not be loaded or failed while registering its metrics."""

    def __init__(self, entry_point: importlib.metadata.EntryPoint, error: BaseException) -> None:
        dist = getattr(entry_point, "dist", None)
        source = f" from distribution {dist.name!r}" if dist is not None else ""
        issue = Issue(
            message=f"metric plugin {entry_point.name!r} = {entry_point.value!r}{source} failed to load: "
            f"{type(error).__name__}: {error}",
            field=f"entry point {entry_point.group}:{entry_point.name}",
            expected="an importable module, or a callable register(registry)",
        )
        super().__init__([issue], title="metric plugin")
        self.entry_point = entry_point


def _entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    """The installed entry points of `group`, in a stable order (name, then value)."""
    return sorted(importlib.metadata.entry_points(group=group), key=lambda ep: (ep.name, ep.value))


class MetricRegistry:
    """Metrics by name; optionally fills itself on first use from a module of built-ins, then plugins.

    `entry_point_group` names the entry-point group whose plugins are loaded after
    the built-ins (module docstring); None loads none.
    """

    def __init__(self, *, builtins_module: str | None = None, entry_point_group: str | None = None) -> None:
        self._specs: dict[str, MetricSpec] = {}
        self._builtins_module = builtins_module
        self._builtins_loaded = builtins_module is None
        self._entry_point_group = entry_point_group
        self._plugins_loaded = entry_point_group is None
        self._importing_builtins = False
        self._loading_plugins = False
        self._loaded_plugins: set[tuple[str, str]] = set()

    def _ensure_builtins(self) -> None:
        if self._builtins_loaded or self._builtins_module is None:
            return
        # Marked first: the module's decorators call back into `register`.
        self._builtins_loaded = True
        self._importing_builtins = True
        try:
            importlib.import_module(self._builtins_module)
        except BaseException:
            self._builtins_loaded = False
            raise
        finally:
            self._importing_builtins = False

    def _ensure_loaded(self) -> None:
        self._ensure_builtins()
        busy = self._importing_builtins or self._loading_plugins
        if self._plugins_loaded or busy or self._entry_point_group is None:
            return  # busy: a built-in or a plugin being loaded is calling back into `register`
        self._loading_plugins = True
        try:
            for entry_point in _entry_points(self._entry_point_group):
                key = (entry_point.name, entry_point.value)
                # A plugin that loaded before a later one failed is not registered twice on the retry.
                if key in self._loaded_plugins:
                    continue
                self._load_plugin(entry_point)
                self._loaded_plugins.add(key)
            self._plugins_loaded = True
        finally:
            self._loading_plugins = False

    def _load_plugin(self, entry_point: importlib.metadata.EntryPoint) -> None:
        try:
            target = entry_point.load()
            if not isinstance(target, types.ModuleType):
                if not callable(target):
                    raise TypeError(f"{entry_point.value} is neither a module nor callable")
                target(self)
        except Exception as error:
            raise MetricPluginError(entry_point, error) from error

    def register(self, name: str, task: str) -> Callable[[MetricFn], MetricFn]:
        """Decorator adding `fn` as metric `name` of `task`; the function is returned unchanged."""
        if not isinstance(name, str) or not name.strip():
            raise _registry_error("a metric name must be a non-empty string", "name")
        if not isinstance(task, str) or not task.strip():
            raise _registry_error(f"metric {name!r} needs a non-empty task", name, "a task name or '*'")
        # Built-ins and installed plugins load before any other metric so a name clash is reported here.
        self._ensure_loaded()

        def decorator(fn: MetricFn) -> MetricFn:
            existing = self._specs.get(name)
            if existing is not None:
                where = f"{existing.fn.__module__}.{existing.fn.__qualname__}"
                raise _registry_error(f"metric {name!r} is already registered by {where}", name)
            self._specs[name] = MetricSpec(name=name, task=task, fn=fn)
            return fn

        return decorator

    def unregister(self, name: str) -> None:
        """Remove metric `name` (a plugin being unloaded); unknown names raise."""
        self.get(name)
        del self._specs[name]

    def get(self, name: str) -> MetricSpec:
        """The metric registered as `name`; an unknown name raises ConfigError listing known ones."""
        self._ensure_loaded()
        spec = self._specs.get(name)
        if spec is None:
            known = "one of " + ", ".join(sorted(self._specs)) if self._specs else "a registered metric"
            raise _registry_error(f"unknown metric {name!r}", name, known)
        return spec

    def names(self) -> list[str]:
        """Every registered metric name, in registration order."""
        self._ensure_loaded()
        return list(self._specs)

    def for_task(self, task: str) -> list[MetricSpec]:
        """Metrics of `task` plus those of every task, in registration order.

        A task nothing is registered for (a plain "sft" job) gets only the
        every-task metrics, i.e. loss and perplexity.
        """
        self._ensure_loaded()
        return [spec for spec in self._specs.values() if spec.task in (task, ALL_TASKS)]

    def compute(self, inputs: MetricInputs, names: list[str] | None = None) -> dict[str, Any]:
        """Run the metrics of `inputs.task` (or the named ones) and merge their results.

        Two metrics reporting the same top-level key would silently overwrite each
        other in the results, so that raises ConfigError naming both.
        """
        specs = [self.get(name) for name in names] if names is not None else self.for_task(inputs.task)
        merged: dict[str, Any] = {}
        owner: dict[str, str] = {}
        for spec in specs:
            for key, value in spec(inputs).items():
                if key in owner:
                    raise _registry_error(f"metrics {owner[key]!r} and {spec.name!r} both report {key!r}", spec.name)
                owner[key] = spec.name
                merged[key] = value
        return merged


_DEFAULT_REGISTRY = MetricRegistry(builtins_module=BUILTIN_METRICS_MODULE, entry_point_group=ENTRY_POINT_GROUP)


def default_registry() -> MetricRegistry:
    """The process-wide registry the module-level functions use."""
    return _DEFAULT_REGISTRY


def register_metric(name: str, task: str) -> Callable[[MetricFn], MetricFn]:
    """Decorator registering a metric function in the default registry (see the module docstring)."""
    return _DEFAULT_REGISTRY.register(name, task)


def unregister_metric(name: str) -> None:
    """Remove a metric from the default registry."""
    _DEFAULT_REGISTRY.unregister(name)


def get_metric(name: str) -> MetricSpec:
    """The metric registered as `name` in the default registry."""
    return _DEFAULT_REGISTRY.get(name)


def metrics_for_task(task: str) -> list[MetricSpec]:
    """Metrics that run for `task` in the default registry."""
    return _DEFAULT_REGISTRY.for_task(task)


def compute_metrics(inputs: MetricInputs, names: list[str] | None = None) -> dict[str, Any]:
    """Run and merge the metrics of `inputs.task` (or the named ones) from the default registry."""
    return _DEFAULT_REGISTRY.compute(inputs, names)
