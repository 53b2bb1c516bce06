"""The engine: everything that loads a model, on a worker, in a process of its own.

- `training/`: the training run (`TrainingRun`: setup, baseline, train, evaluate, save), its
  trainer and callbacks, its data and batches, and the run directory it writes.
- `speedups/`: paths that change speed or memory, never results (chunked loss, host-side token
  counting, packed attention).
- `models/`: where a model comes from (hub or folder, pinned revision), loading it with its
  adapter, and the pin an export carries.
- `host/`: facts about the machine (accelerators, features, environment record, memory fit).
- `generation/`: answering prompts, and the evaluation passes built on it.
- `preflight/`: the checks before training; `export/`: adapters, merged models and bundles.
- The modules at this level are the processes a worker starts (`python -m tunedeck.engine.<name>`):
  `child` (a training attempt), `fork_server`, `generation_server`, `ingestion`, `inspection`,
  and `json_process`, the protocol the one-shot ones share.
"""
