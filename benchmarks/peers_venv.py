"""LLaMA-Factory's own virtual environment for the peers benchmark, created on demand.

    python benchmarks/peers_venv.py            # create it (or say it is there)

LLaMA-Factory pins older transformers, peft and trl than tunedeck, so it cannot share
tunedeck's environment. The recipe, in order:

1. `python3 -m venv benchmarks/.peers/llamafactory-venv` (an ignored path);
2. `pip install torch==<the version tunedeck's environment has>`, the CPU build;
3. `pip install -c constraints.txt llamafactory==LLAMAFACTORY_VERSION`, the constraints
   holding torch at that version so pip never swaps in another (a CUDA) build;
4. `pip uninstall -y torchvision`: the torchvision that matches that torch is built against
   the CUDA torch and its operators fail to register on the CPU one ("operator
   torchvision::nms does not exist"); transformers imports torchvision whenever it is
   installed, so LLaMA-Factory would not import at all. Text training never uses it;
5. delete torchaudio's compiled libraries (`torchaudio/lib/*.so`): the registry's torchaudio
   is a CUDA build too (it needs libc10_cuda.so), and LLaMA-Factory imports torchaudio at
   module level (its multimodal plugin); without those files torchaudio imports as its pure
   Python part, which is all a text run touches;
6. `import llamafactory.train.tuner`, the check that the environment works.

A stamp file marks a finished install; a failed one leaves its log and no stamp, and the
benchmark runs its other arms and says why LLaMA-Factory's were skipped.
"""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PEERS_DIR = ROOT / "benchmarks" / ".peers"
VENV = PEERS_DIR / "llamafactory-venv"
LLAMAFACTORY_VERSION = "0.9.5"
STAMP = VENV / ".installed"
LOG = PEERS_DIR / "llamafactory-install.log"
# Step 5 (see above), run by the environment's Python; find_spec locates torchaudio without importing it.
DROP_TORCHAUDIO_LIBRARIES = (
    "import importlib.util, pathlib; "
    "folder = pathlib.Path(importlib.util.find_spec('torchaudio').origin).parent / 'lib'; "
    "[library.unlink() for library in folder.glob('*.so')]"
)


def venv_python(venv: Path = VENV) -> Path:
    """The environment's interpreter."""
    return venv / "bin" / "python"


def torch_version() -> str:
    """The torch release of this (tunedeck's) environment, without its local build tag."""
    return metadata.version("torch").split("+", 1)[0]


def install_steps(venv: Path, torch: str, constraints: Path) -> list[list[str]]:
    """The commands that build the environment (see the module docstring)."""
    pip = [str(venv_python(venv)), "-m", "pip", "install", "-q"]
    return [
        ["python3", "-m", "venv", str(venv)],
        [*pip, f"torch=={torch}"],
        [*pip, "-c", str(constraints), f"llamafactory=={LLAMAFACTORY_VERSION}"],
        [str(venv_python(venv)), "-m", "pip", "uninstall", "-y", "-q", "torchvision"],
        [str(venv_python(venv)), "-c", DROP_TORCHAUDIO_LIBRARIES],
        [str(venv_python(venv)), "-c", "import llamafactory.train.tuner"],
    ]


def llamafactory_status(venv: Path = VENV) -> str | None:
    """None when the environment is ready, else why it is not."""
    if not venv_python(venv).exists():
        return f"no LLaMA-Factory environment at {venv} (create it with: python benchmarks/peers_venv.py)"
    if not (venv / ".installed").exists():
        return f"the LLaMA-Factory environment at {venv} did not finish installing (see {LOG})"
    return None


def ensure_llamafactory(venv: Path = VENV) -> str | None:
    """Create the environment when missing; None when ready, else why it is not (the log says more)."""
    if llamafactory_status(venv) is None:
        return None
    PEERS_DIR.mkdir(parents=True, exist_ok=True)
    constraints = PEERS_DIR / "constraints.txt"
    constraints.write_text(f"torch=={torch_version()}\n", encoding="utf-8")
    with LOG.open("w", encoding="utf-8") as log:
        for step in install_steps(venv, torch_version(), constraints):
            print("  $ " + " ".join(step), flush=True)
            log.write("$ " + " ".join(step) + "\n")
            log.flush()
            code = subprocess.call(step, stdout=log, stderr=subprocess.STDOUT)
            if code != 0:
                return f"LLaMA-Factory's environment failed at `{' '.join(step)}` (exit {code}; see {LOG})"
    (venv / ".installed").write_text(LLAMAFACTORY_VERSION + "\n", encoding="utf-8")
    return None


if __name__ == "__main__":
    problem = ensure_llamafactory()
    print(problem or f"LLaMA-Factory {LLAMAFACTORY_VERSION} ready in {VENV}")
    sys.exit(1 if problem else 0)
