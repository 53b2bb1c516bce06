"""Checkpoint stall: training time lost per checkpoint, background upload against save-then-upload.

    python benchmarks/checkpoint_stall.py [--rows 120] [--save-steps 5] [--repeats 3]

Storage: moto's S3 server on loopback, in its own process (as a real S3 endpoint is).
Baseline: a plain Trainer whose `on_save` callback uploads the checkpoint folder
(`S3ArtifactStore.commit_directory`: every file, then the manifest) before training goes on.
Tunedeck: `run_training` writes the checkpoint and its event; a second process plays the
worker: it tails events.jsonl and hands each checkpoint to the worker's
`BackgroundCommitter`, which runs the same `commit_directory` in its own thread.

"Time lost per checkpoint" is the time the training loop spends between leaving a step
and starting the next because of a checkpoint: `Trainer._save_checkpoint` plus the
`on_save` callbacks, measured by wrapping both (the same code path on both sides). The
background side also competes for the CPU while it uploads; the whole training loop time
is recorded beside it so that cost is visible. Target: ≤ 0.2×.
Writes benchmarks/results/checkpoint_stall.json + .png.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import shutil
import socket
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchmarkResult, Comparison, run_alternating, write_result
from benchmarks.lm_setup import (
    as_examples,
    bench_config,
    build_bench_model,
    length_stats,
    lm_benchmark_parser,
    parse_lm_arguments,
    tokenize_file,
    train_plain_hf,
    train_tunedeck,
    write_skewed_rows,
)

BUCKET = "tunedeck-bench"
# Dummy credentials for the local moto server only: boto3 refuses to sign without some.
S3_ENV = {"AWS_ACCESS_KEY_ID": "tunedeck-bench", "AWS_SECRET_ACCESS_KEY": "tunedeck-bench",
          "AWS_DEFAULT_REGION": "us-east-1", "AWS_EC2_METADATA_DISABLED": "true"}


class SaveStallTimer:
    """Times `Trainer._save_checkpoint` plus the `on_save` callbacks, for any Trainer in this process."""

    def __init__(self) -> None:
        self.stalls: list[float] = []
        self._saved: dict[str, Any] = {}

    def __enter__(self) -> SaveStallTimer:
        from transformers import Trainer
        from transformers.trainer_callback import CallbackHandler

        timer = self
        save, on_save = Trainer._save_checkpoint, CallbackHandler.on_save
        self._saved = {"save": save, "on_save": on_save}

        def timed_save(trainer: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return save(trainer, *args, **kwargs)
            finally:
                timer.stalls.append(time.perf_counter() - started)

        def timed_on_save(handler: Any, *args: Any, **kwargs: Any) -> Any:
            started = time.perf_counter()
            try:
                return on_save(handler, *args, **kwargs)
            finally:
                if timer.stalls:
                    timer.stalls[-1] += time.perf_counter() - started

        Trainer._save_checkpoint = timed_save  # type: ignore[method-assign]
        CallbackHandler.on_save = timed_on_save  # type: ignore[method-assign]
        return self

    def __exit__(self, *exc: object) -> None:
        from transformers import Trainer
        from transformers.trainer_callback import CallbackHandler

        Trainer._save_checkpoint = self._saved["save"]  # type: ignore[method-assign]
        CallbackHandler.on_save = self._saved["on_save"]  # type: ignore[method-assign]


def serve_s3(port: int) -> None:
    """The moto S3 server, run in a child process until killed."""
    import logging

    from moto.server import ThreadedMotoServer

    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # one line per request otherwise
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=port, verbose=False)
    server.start()
    while True:
        time.sleep(3600)


def play_worker(events_path: str, endpoint: str, prefix: str, stop: Any, done: Any) -> None:
    """The worker's side: tail events, commit each checkpoint in the background committer."""
    from tunedeck.storage.s3 import S3ArtifactStore
    from tunedeck.worker.background_commits import BackgroundCommitter, PendingCheckpoint

    store = S3ArtifactStore(BUCKET, endpoint_url=endpoint)
    committer = BackgroundCommitter(lambda c: store.commit_directory(c.path, f"{prefix}/checkpoint-{c.step}"))
    offset = 0
    while True:
        finished = stop.is_set()
        path = Path(events_path)
        if path.is_file():
            with path.open(encoding="utf-8") as handle:
                handle.seek(offset)
                for line in iter(handle.readline, ""):
                    if not line.endswith("\n"):
                        break
                    offset += len(line.encode("utf-8"))
                    event = json.loads(line)
                    if event.get("type") == "checkpoint":
                        committer.submit(PendingCheckpoint(int(event["step"]), Path(event["path"]), {}))
        if finished:
            break
        time.sleep(0.1)
    errors = committer.close()
    done.put({"committed": committer.committed, "errors": [str(e) for e in errors]})


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run the benchmark and write its result."""
    parser = lm_benchmark_parser(__doc__.splitlines()[0], rows=120, repeats=3)
    parser.add_argument("--save-steps", type=int, default=5)
    args = parse_lm_arguments(parser, argv)
    os.environ.update(S3_ENV)
    config = bench_config(save_strategy="steps", save_steps=args.save_steps, max_length=128)
    result = BenchmarkResult("checkpoint_stall", __doc__.splitlines()[0],
                             parameters={"rows": args.rows, "layers": args.layers, "width": args.width,
                                         "config": config, "storage": "moto S3 server on loopback"},
                             packages=("torch", "transformers", "boto3", "moto"))
    spawn = multiprocessing.get_context("spawn")
    port = free_port()
    endpoint = f"http://127.0.0.1:{port}"
    server = spawn.Process(target=serve_s3, args=(port,), daemon=True)
    server.start()
    try:
        _wait_for(endpoint)
        import boto3

        boto3.session.Session().client("s3", endpoint_url=endpoint).create_bucket(Bucket=BUCKET)
        from tunedeck.storage.s3 import S3ArtifactStore

        store = S3ArtifactStore(BUCKET, endpoint_url=endpoint)
        extra: dict[str, list[Any]] = {"baseline_loop_s": [], "tunedeck_loop_s": [], "checkpoints": [],
                                       "tunedeck_commit_lag_s": [], "checkpoint_bytes": []}
        with tempfile.TemporaryDirectory() as scratch:
            root = Path(scratch)
            model_dir = build_bench_model(root / "model", layers=args.layers, width=args.width)
            rows = root / "rows.jsonl"
            write_skewed_rows(rows, args.rows, tail_share=0.0)
            examples = as_examples(tokenize_file(model_dir, rows, config["max_length"]))
            tokens = int(length_stats(examples)["tokens"])
            runs = iter(range(1_000_000))

            def baseline() -> float:
                out = root / f"hf-{next(runs)}"
                uploader = _sync_upload_callback(store, f"hf/{out.name}")
                with SaveStallTimer() as timer:
                    timing = train_plain_hf(model_dir, examples, config, out, callbacks=[uploader])
                extra["baseline_loop_s"].append(timing.seconds)
                extra["checkpoint_bytes"].append(_folder_bytes(next(out.glob("checkpoint-*"))))
                shutil.rmtree(out, ignore_errors=True)
                return sum(timer.stalls) / len(timer.stalls)

            def candidate() -> float:
                out = root / f"td-{next(runs)}"
                stop, done = spawn.Event(), spawn.Queue()
                worker = spawn.Process(target=play_worker,
                                       args=(str(out / "events.jsonl"), endpoint, f"td/{out.name}", stop, done))
                worker.start()
                with SaveStallTimer() as timer:
                    timing = train_tunedeck(model_dir, rows, config, out, tokens)
                ended = time.perf_counter()
                stop.set()
                report = done.get(timeout=600)
                worker.join()
                extra["tunedeck_commit_lag_s"].append(time.perf_counter() - ended)
                extra["tunedeck_loop_s"].append(timing.seconds)
                extra["checkpoints"].append(len(timer.stalls))
                if report["errors"] or len(report["committed"]) != len(timer.stalls):
                    raise RuntimeError(f"background commits incomplete: {report}")
                shutil.rmtree(out, ignore_errors=True)
                return sum(timer.stalls) / len(timer.stalls)

            comparison = Comparison("stall_per_checkpoint", "Checkpoint stall: time lost per checkpoint", "s",
                                    "save then upload in the loop", "tunedeck background commit",
                                    higher_is_better=False, target_ratio=0.2)
            run_alternating(comparison, baseline, candidate, args.repeats,
                            on_repetition=lambda i, b, c: print(f"  rep {i + 1}: in-loop {b:.3f} s/ckpt, "
                                                                f"background {c:.3f} s/ckpt, ratio {c / b:.3f}"))
            result.comparisons.append(comparison)
            result.checks["loops_and_commits"] = extra
    finally:
        server.kill()
        server.join()
    write_result(result, args.results_dir)
    return result


def _sync_upload_callback(store: Any, prefix: str) -> Any:
    from transformers import TrainerCallback

    class UploadOnSave(TrainerCallback):  # type: ignore[misc]
        def on_save(self, args: Any, state: Any, control: Any, **kwargs: Any) -> None:
            folder = Path(args.output_dir) / f"checkpoint-{state.global_step}"
            store.commit_directory(folder, f"{prefix}/checkpoint-{state.global_step}")

    return UploadOnSave()


def _folder_bytes(folder: Path) -> int:
    return sum(path.stat().st_size for path in folder.rglob("*") if path.is_file())


def _wait_for(endpoint: str, timeout: float = 60.0) -> None:
    import urllib.request

    deadline = time.monotonic() + timeout
    while True:
        try:
            urllib.request.urlopen(endpoint, timeout=2).close()
            return
        except OSError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


if __name__ == "__main__":
    main()
