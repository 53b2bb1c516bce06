"""Two finished LoRA jobs that the browser tests look at without changing them: trained once per test process.

Training is what the browser files spend most of their time on, and most of them only read a finished
job's pages (its charts, log, checkpoints, playground, a comparison of two jobs). They share these two
runs through the session fixture `finished_runs` (tests/e2e/conftest.py), built the first time a test
asks for it on that process's `live_server`. A test that needs a job in some other state, or that
changes a job (cancels, resumes, deletes it), trains its own.

The one change the readers make is an export, which adds to a job's list of exports: the test that
expects an empty list exports from `second`, the other export test from `first`.
"""

from __future__ import annotations

from dataclasses import dataclass

from tests.e2e.dashboard_inputs import Inputs, chat_rows, create_job, register_inputs, tiny_run, wait_terminal
from tests.fixtures.live_server import LiveServer

TRAIN_ROWS = 12  # batch 2, two epochs: 12 steps, so a chart has 12 points
BASE_MODEL_NAME = "finished-llama"  # names no other file registers on the session server
DATASET_NAME = "finished-train"
JOB_PREFIX = "finished run"
# A checkpoint every 6 steps (2 in all); the two runs differ in their learning rate alone.
RUN = tiny_run(epochs=2, gradient_accumulation_steps=1, save_steps=6)
LEARNING_RATES = (0.001, 0.0003)
JOB_S = 420  # two short CPU runs one after the other on the server's one worker, on a loaded machine


@dataclass(frozen=True)
class FinishedRun:
    """A succeeded job: its id, name and learning rate."""

    job_id: str
    name: str
    learning_rate: float


@dataclass(frozen=True)
class FinishedRuns:
    """The two succeeded runs, in the order of LEARNING_RATES, and the base model and dataset they trained on."""

    first: FinishedRun
    second: FinishedRun
    inputs: Inputs

    @property
    def ids(self) -> list[str]:
        """Both job ids, first then second."""
        return [self.first.job_id, self.second.job_id]

    @property
    def names(self) -> list[str]:
        """Both job names, first then second."""
        return [self.first.name, self.second.name]


def train_finished_runs(server: LiveServer) -> FinishedRuns:
    """Register the tiny model and a chat dataset, train the two runs to success, and return them."""
    server.release_training()  # whatever an earlier test held, these runs train freely
    rows = chat_rows(TRAIN_ROWS, lambda i: (f"What is {i} plus {i}?", f"It is {2 * i}."))
    inputs = register_inputs(server, BASE_MODEL_NAME, DATASET_NAME, rows)
    runs = []
    for rate in LEARNING_RATES:
        name = f"{JOB_PREFIX} lr {rate}"
        runs.append(FinishedRun(create_job(server, inputs, name, {**RUN, "learning_rate": rate}), name, rate))
    for run in runs:
        job = wait_terminal(server, run.job_id, timeout_s=JOB_S)
        assert job["state"] == "succeeded", job
    first, second = runs
    return FinishedRuns(first=first, second=second, inputs=inputs)
