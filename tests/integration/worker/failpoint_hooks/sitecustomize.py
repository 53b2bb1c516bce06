"""Test-only kill point inside the trainer's checkpoint save, armed by `TUNEDECK_FAILPOINTS`.

The engine's own failpoints sit after a save completes; the crash test also needs a
process killed while a checkpoint is half written (weights on disk, optimizer state
not yet). The save is transformers' code, so this file, put on PYTHONPATH for the
worker and its engine child, wraps `Trainer._save_optimizer_and_scheduler` when
`transformers.trainer` is imported. Nothing is imported or changed unless the point is armed.
"""

from __future__ import annotations

import os
import sys

POINT = "engine_mid_checkpoint_save"


def _arm() -> None:
    import importlib.abc
    import importlib.machinery
    from types import ModuleType
    from typing import Any

    class _WrapTrainerOnImport(importlib.abc.MetaPathFinder):
        def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
            if name != "transformers.trainer":
                return None
            spec = importlib.machinery.PathFinder.find_spec(name, path)
            if spec is None or spec.loader is None:
                return spec
            loader = spec.loader
            original_exec = loader.exec_module

            def exec_module(module: ModuleType) -> None:
                original_exec(module)
                _wrap(module)

            loader.exec_module = exec_module  # type: ignore[method-assign]
            return spec

    sys.meta_path.insert(0, _WrapTrainerOnImport())


def _wrap(module: object) -> None:
    trainer_class = module.Trainer  # type: ignore[attr-defined]
    save = trainer_class._save_optimizer_and_scheduler

    def _save_optimizer_and_scheduler(self: object, output_dir: str) -> None:
        from tunedeck.core.failpoints import failpoint

        # The model weights of this checkpoint are written; its optimizer and trainer state are not.
        failpoint(POINT, kill_parent=True)
        save(self, output_dir)

    trainer_class._save_optimizer_and_scheduler = _save_optimizer_and_scheduler


if POINT in os.environ.get("TUNEDECK_FAILPOINTS", ""):
    _arm()
