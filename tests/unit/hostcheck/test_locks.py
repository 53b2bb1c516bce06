"""The locks install from the package registry: exact versions, no local labels, comments that agree."""

from __future__ import annotations

from pathlib import Path

from tests.unit.hostcheck.machines import REPO
from tunedeck.hostcheck.locks import CUDA_LOCK, LOCKS, MAIN_LOCK, lock_pins, lock_problems


def test_the_repositorys_locks_hold_no_local_label_and_the_cuda_lock_quotes_the_main_lock() -> None:
    assert lock_problems(REPO) == []
    assert lock_pins(REPO / MAIN_LOCK)["torch"] == "2.13.0"
    assert "bitsandbytes" in lock_pins(REPO / CUDA_LOCK)


def _repo(tmp_path: Path, main: str, cuda: str) -> Path:
    for name in LOCKS:
        (tmp_path / name).write_text("")
    (tmp_path / MAIN_LOCK).write_text(main)
    (tmp_path / CUDA_LOCK).write_text(cuda)
    return tmp_path


def test_a_local_version_label_is_a_problem_naming_the_pin_to_use(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "numpy==2.4.6\ntorch==2.13.0+cpu\n", "# requirements.lock pins torch==2.13.0+cpu.\n")
    assert lock_problems(repo) == [
        "requirements.lock: torch==2.13.0+cpu has a local version label that no package registry serves; "
        "pin torch==2.13.0"
    ]


def test_a_cuda_lock_comment_that_misquotes_torch_is_a_problem(tmp_path: Path) -> None:
    repo = _repo(tmp_path, "torch==2.13.0\n", "# requirements.lock pins torch==2.12.1; on a CUDA machine...\n")
    assert lock_problems(repo) == [
        "requirements-cuda.lock's comment says torch==2.12.1; requirements.lock pins torch==2.13.0"
    ]


def test_pins_are_read_with_extras_markers_and_odd_spellings() -> None:
    pins = lock_pins(REPO / "requirements-mlx.lock")
    assert pins["mlx"] == "0.32.4" and pins["mlx-lm"] == "0.32.2"
    assert lock_pins(REPO / "requirements-ray.lock")["ray"] == "2.60.0"  # ray[train,default]==2.60.0


def test_a_line_that_is_not_one_exact_pin_is_a_problem(tmp_path: Path) -> None:
    main = "torch==2.13.0\nyarl==1.25.1msgpack==1.2.4\nnumpy>=2\nray[train]==2.60.0 ; sys_platform == 'linux'\n"
    repo = _repo(tmp_path, main, "# requirements.lock pins torch==2.13.0\n")
    assert lock_problems(repo) == [
        "requirements.lock:2: 'yarl==1.25.1msgpack==1.2.4' is not one exact pin (name==version)",
        "requirements.lock:3: 'numpy>=2' is not one exact pin (name==version)",
    ]
