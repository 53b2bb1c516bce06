"""Encrypted checkpoint commit: a local store with client-side encryption against the same store without it.

    python benchmarks/encrypted_commit.py [--total-mib 512] [--files 3] [--repeats 3]

A checkpoint-like folder (`--files` files of random bytes totalling `--total-mib` MiB, one
large "weights" file and smaller optimizer/state files) is committed with
`commit_directory` to a local artifact folder, plainly (baseline) and with a keyring
(AES-256-GCM in 4 MiB chunks, each file sealed on its way in), alternating which runs
first; every repetition commits to a fresh prefix and deletes it afterwards. Both sides
hash every file (the manifest) and fsync what they write. Target: ≤ 1.15×.

Alongside, the raw single-core throughput of AES-256-GCM, sha256 and a file copy on this
CPU are measured, so a missed target can be read against what the cipher costs here.
Writes benchmarks/results/encrypted_commit.json + .png.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.harness import BenchmarkResult, Comparison, Measurement, run_alternating, timed, write_result
from tunedeck.storage.encryption import DEFAULT_CHUNK_SIZE, Keyring
from tunedeck.storage.key_file import generate_key_line
from tunedeck.storage.local import LocalArtifactStore

MIB = 1024 * 1024
TARGET_RATIO = 1.15


def make_checkpoint(folder: Path, total_mib: int, files: int) -> Path:
    """`files` files of random bytes: the first holds half the total, the rest share the other half."""
    folder.mkdir(parents=True)
    total = total_mib * MIB
    sizes = [total] if files == 1 else [total // 2] + [total // 2 // (files - 1)] * (files - 1)
    names = ["model.safetensors", "optimizer.pt", "scheduler_state.bin"] + [f"part-{i}.bin" for i in range(files)]
    for name, size in zip(names, sizes, strict=False):
        with open(folder / name, "wb") as handle:
            for start in range(0, size, 16 * MIB):
                handle.write(os.urandom(min(16 * MIB, size - start)))
    return folder


def commit_seconds(store: LocalArtifactStore, source: Path, prefix: str) -> float:
    """Seconds to commit `source` under `prefix` (removed afterwards, outside the timing).

    Dirty pages the previous commit left are flushed first, outside the timing: otherwise the
    disk's write-back of one arm lands in the other's time, whichever runs second.
    """
    os.sync()
    seconds = timed(lambda: store.commit_directory(source, prefix))
    store.delete_prefix(prefix)
    return seconds


def throughput_mib_s(action: Callable[[], None], data_mib: float, repeats: int = 3) -> float:
    """Best MiB/s of `repeats` runs of `action` over `data_mib` MiB."""
    best = min(timed(action) for _ in range(repeats))
    return data_mib / best


def cpu_throughputs(scratch: Path, sample_mib: int) -> dict[str, float]:
    """Single-core MiB/s of AES-256-GCM (4 MiB chunks), sha256 and a file copy on this machine."""
    from cryptography.hazmat.primitives.ciphers.aead import AESGCM

    chunk = os.urandom(DEFAULT_CHUNK_SIZE)
    count = max(1, sample_mib * MIB // DEFAULT_CHUNK_SIZE)
    cipher = AESGCM(os.urandom(32))
    nonce = os.urandom(12)
    sample = scratch / "sample.bin"
    sample.write_bytes(chunk * count)

    def encrypt() -> None:
        for _ in range(count):
            cipher.encrypt(nonce, chunk, b"")

    def digest() -> None:
        hashed = hashlib.sha256()
        for _ in range(count):
            hashed.update(chunk)

    def copy() -> None:
        shutil.copyfile(sample, scratch / "copy.bin")
        with open(scratch / "copy.bin", "rb") as copied:
            os.fsync(copied.fileno())

    def write() -> None:
        # What any store that changes the bytes must do: write each one from user space into a new file,
        # then make it durable as the store does before renaming it into place.
        with open(scratch / "written.bin", "wb", buffering=0) as sink:
            for _ in range(count):
                sink.write(chunk)
            os.fsync(sink.fileno())

    mib = count * DEFAULT_CHUNK_SIZE / MIB
    return {
        "aes_256_gcm_mib_s": throughput_mib_s(encrypt, mib),
        "sha256_mib_s": throughput_mib_s(digest, mib),
        "file_copy_mib_s": throughput_mib_s(copy, mib),
        "file_write_mib_s": throughput_mib_s(write, mib),
    }


def missed_target_note(ratio: float, throughputs: dict[str, float], spread: tuple[float, float]) -> str:
    """Why the ratio missed the target, from what the cipher, the hash, a copy and a write cost here."""
    # Both sides hash each file once and sync what they wrote. The plain side copies inside the kernel
    # (copy_file_range); the encrypted side reads every byte into user space, seals it and writes it back.
    aes, sha = throughputs["aes_256_gcm_mib_s"], throughputs["sha256_mib_s"]
    copy, write = throughputs["file_copy_mib_s"], throughputs["file_write_mib_s"]
    cipher_floor = 1 + (1 / aes) / (1 / sha + 1 / copy)
    return (
        f"ratio {ratio:.3f}× misses the {TARGET_RATIO}× target (per repetition {spread[0]:.2f}× to "
        f"{spread[1]:.2f}×): one AES-256-GCM pass costs {sha / aes:.2f}× a sha256 pass on this CPU, so the cipher "
        f"alone accounts for about {cipher_floor:.2f}×; the rest is the user-space write path (a write from user "
        f"space, synced, runs at {write:.0f} MiB/s here, the in-kernel copy at {copy:.0f} MiB/s) and this "
        "machine's virtual disk, whose write-back time varies from one commit to the next"
    )


def main(argv: list[str] | None = None) -> BenchmarkResult:
    """Run the benchmark and write its result."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--total-mib", type=int, default=512, help="Size of the checkpoint folder.")
    parser.add_argument("--files", type=int, default=3, help="Files in the checkpoint folder.")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--results-dir", type=Path, default=None)
    args = parser.parse_args(argv)
    result = BenchmarkResult(
        "encrypted_commit",
        __doc__.splitlines()[0],
        parameters={"total_mib": args.total_mib, "files": args.files, "chunk_bytes": DEFAULT_CHUNK_SIZE},
        packages=("cryptography",),
    )
    keyring = Keyring.parse(generate_key_line("bench"), source="benchmark key")
    with tempfile.TemporaryDirectory(prefix="tunedeck-bench-enc-") as folder:
        scratch = Path(folder)
        source = make_checkpoint(scratch / "checkpoint", args.total_mib, args.files)
        plain = LocalArtifactStore(scratch / "plain")
        encrypted = LocalArtifactStore(scratch / "encrypted", keyring=keyring)
        counter = iter(range(1_000_000))
        comparison = Comparison(
            "commit_seconds", f"Commit {args.total_mib} MiB checkpoint, encrypted vs plain", "s",
            "plain local store", "encrypted local store", higher_is_better=False, target_ratio=TARGET_RATIO,
        )  # fmt: skip
        run_alternating(
            comparison,
            lambda: commit_seconds(plain, source, f"bench/step-{next(counter)}"),
            lambda: commit_seconds(encrypted, source, f"bench/step-{next(counter)}"),
            args.repeats,
            on_repetition=lambda i, b, c: print(f"repetition {i + 1}: plain {b:.2f} s, encrypted {c:.2f} s"),
        )  # fmt: skip
        result.comparisons.append(comparison)
        encrypted.commit_directory(source, "bench/check")
        result.checks["encrypted_round_trip_verifies"] = encrypted.verify("bench/check")
        throughputs = cpu_throughputs(scratch, min(256, args.total_mib))
    result.checks["single_core_throughput_mib_s"] = throughputs
    for key, title in (("aes_256_gcm_mib_s", "AES-256-GCM encrypt, one core"), ("sha256_mib_s", "sha256, one core")):
        result.measurements.append(Measurement(key, title, "MiB/s", higher_is_better=True, values=[throughputs[key]]))
    ratio = comparison.median_ratio()
    print(
        f"single core: AES-256-GCM {throughputs['aes_256_gcm_mib_s']:.0f} MiB/s, "
        f"sha256 {throughputs['sha256_mib_s']:.0f} MiB/s, file copy {throughputs['file_copy_mib_s']:.0f} MiB/s, "
        f"file write {throughputs['file_write_mib_s']:.0f} MiB/s"
    )
    if ratio is not None and ratio > TARGET_RATIO:
        ratios = comparison.ratios()
        result.notes.append(missed_target_note(ratio, throughputs, (min(ratios), max(ratios))))
        print(result.notes[-1])
    write_result(result, args.results_dir)
    return result


if __name__ == "__main__":
    main()
