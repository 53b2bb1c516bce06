"""Data preparation speed, as ratios: our batched path vs a per-example loop, cached vs uncached.

    python benchmarks/data_prep.py [--rows 20000] [--repeats 5]

1. validate + template + tokenize + mask, rows/s:
   ours      `load_dataset` (streaming validation) then `tokenize_rows` (batched fast tokenizer);
   baseline  a per-example loop: parse a line, check it with the same row checker, tokenize its
             prompt and completion with one tokenizer call each, build the labels.
2. preparation from the cache vs without it: `prepare_dataset` hitting a warm cache vs
   `prepare_dataset` with no cache (tokenizing everything). A cache hit maps the arrays and
   builds rows on access, so the ratio is also given with every row built as a Python list
   (what one pass over the data costs), which is the fairer comparison.

Targets: ratio 1 ≥ 5, ratio 2 ≥ 10. Results (machine, versions, every repetition, medians) go
to benchmarks/results/data_prep.json. Everything is built locally: a tiny BPE tokenizer
trained on the built-in corpus, and synthetic prompt/completion rows.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import random
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from importlib import metadata
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tunedeck.core.errors import DataError
from tunedeck.data.cache import prepare_dataset
from tunedeck.data.formats import normalise
from tunedeck.data.loading import load_dataset
from tunedeck.data.tokenize import IGNORE_INDEX, tokenize_rows
from tunedeck.engine.tiny_corpus import builtin_corpus
from tunedeck.engine.tiny_models import build_tokenizer

RESULTS = Path(__file__).resolve().parent / "results" / "data_prep.json"
MAX_LENGTH = 256


def write_rows(path: Path, count: int, seed: int = 0) -> None:
    """Synthetic prompt/completion rows made of corpus sentences."""
    rng = random.Random(seed)
    sentences = builtin_corpus()
    with path.open("w", encoding="utf-8") as handle:
        for i in range(count):
            prompt = f"Question {i}: " + " ".join(rng.sample(sentences, 2)) + "\nAnswer:"
            completion = " " + rng.choice(sentences)
            handle.write(json.dumps({"prompt": prompt, "completion": completion}) + "\n")


def per_example_loop(path: Path, tokenizer: Any) -> int:
    """The baseline: one row at a time, one tokenizer call per text."""
    eos = tokenizer.eos_token_id
    bos = [tokenizer.bos_token_id]
    rows = 0
    with path.open(encoding="utf-8") as handle:
        for line in handle:
            row, issues = normalise(json.loads(line), "prompt_completion")
            if row is None or issues:
                raise DataError(issues)
            prompt = bos + tokenizer(row["prompt"], add_special_tokens=False)["input_ids"]
            answer = tokenizer(row["completion"], add_special_tokens=False)["input_ids"] + [eos]
            ids = (prompt + answer)[:MAX_LENGTH]
            labels = ([IGNORE_INDEX] * len(prompt) + answer)[:MAX_LENGTH]
            labels[0] = IGNORE_INDEX
            rows += len(ids) > 0
    return rows


def batched_path(path: Path, tokenizer: Any) -> int:
    """Ours: streaming validation, then batched templating, tokenization and masking."""
    loaded = load_dataset(path)
    return len(tokenize_rows(loaded.rows, loaded.kind, tokenizer, max_length=MAX_LENGTH))


def materialized(prepared: Any) -> int:
    """Build every row of ids and labels as Python lists, as one pass of training would."""
    ids, labels = prepared.tokenized.input_ids, prepared.tokenized.labels
    rows = ids.to_lists() if hasattr(ids, "to_lists") else list(ids)
    rows_labels = labels.to_lists() if hasattr(labels, "to_lists") else list(labels)
    return len(rows) + len(rows_labels)


def timed(action: Callable[[], Any]) -> float:
    start = time.perf_counter()
    action()
    return time.perf_counter() - start


def versions() -> dict[str, str]:
    found = {}
    for name in ("tokenizers", "transformers", "numpy", "pyarrow"):
        try:
            found[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            found[name] = "absent"
    return found


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=20_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    tokenizer = build_tokenizer(builtin_corpus(), "llama")
    with tempfile.TemporaryDirectory() as scratch:
        data = Path(scratch) / "rows.jsonl"
        write_rows(data, args.rows)
        loaded = load_dataset(data)
        cache_dir = Path(scratch) / "cache"
        common = {"max_length": MAX_LENGTH, "dataset_hash": loaded.manifest.sha256}
        prepare_dataset(loaded.rows, loaded.kind, tokenizer, cache_dir=cache_dir, **common)  # warm the cache
        batched_path(data, tokenizer)  # warm-up: imports, template compilation
        repetitions = []
        for _ in range(args.repeats):
            loop_s = timed(lambda: per_example_loop(data, tokenizer))
            ours_s = timed(lambda: batched_path(data, tokenizer))
            uncached_s = timed(lambda: prepare_dataset(loaded.rows, loaded.kind, tokenizer, **common))
            cached_s = timed(lambda: prepare_dataset(loaded.rows, loaded.kind, tokenizer,
                                                     cache_dir=cache_dir, **common))
            built_s = timed(lambda: materialized(prepare_dataset(loaded.rows, loaded.kind, tokenizer,
                                                                 cache_dir=cache_dir, **common)))
            repetitions.append({
                "per_example_loop_rows_per_s": args.rows / loop_s,
                "batched_rows_per_s": args.rows / ours_s,
                "batched_vs_loop": loop_s / ours_s,
                "uncached_rows_per_s": args.rows / uncached_s,
                "cached_rows_per_s": args.rows / cached_s,
                "cached_vs_uncached": uncached_s / cached_s,
                "cached_with_rows_built_rows_per_s": args.rows / built_s,
                "cached_with_rows_built_vs_uncached": uncached_s / built_s,
            })
    result = {
        "benchmark": "data_prep",
        "rows": args.rows,
        "max_length": MAX_LENGTH,
        "machine": {"platform": platform.platform(), "python": platform.python_version(),
                    "cpus": os.cpu_count(), "processor": platform.processor()},
        "versions": versions(),
        "repetitions": repetitions,
        "median_batched_vs_loop": statistics.median(r["batched_vs_loop"] for r in repetitions),
        "median_cached_vs_uncached": statistics.median(r["cached_vs_uncached"] for r in repetitions),
        "median_cached_with_rows_built_vs_uncached": statistics.median(
            r["cached_with_rows_built_vs_uncached"] for r in repetitions),
        "targets": {"batched_vs_loop": 5.0, "cached_vs_uncached": 10.0},
    }
    RESULTS.parent.mkdir(parents=True, exist_ok=True)
    staging = RESULTS.with_suffix(".json.tmp")
    staging.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    os.replace(staging, RESULTS)
    last = repetitions[-1]
    print(f"validate+template+tokenize+mask: batched {last['batched_rows_per_s']:,.0f} rows/s, "
          f"per-example loop {last['per_example_loop_rows_per_s']:,.0f} rows/s, "
          f"median ratio {result['median_batched_vs_loop']:.1f}x (target 5x)")
    print(f"preparation: cached {last['cached_rows_per_s']:,.0f} rows/s, "
          f"uncached {last['uncached_rows_per_s']:,.0f} rows/s, "
          f"median ratio {result['median_cached_vs_uncached']:.1f}x (target 10x); "
          f"with every row built as a list {result['median_cached_with_rows_built_vs_uncached']:.1f}x")
    print(f"wrote {RESULTS}")


if __name__ == "__main__":
    main()
