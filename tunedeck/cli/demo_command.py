"""`tunedeck demo` (what `make run` starts): the server with its worker, and a demo job training on CPU.

The demo goes through the public REST API exactly as a person would: it uploads a
dataset, registers a locally built tiny model and creates a job, then leaves the
server running so the dashboard shows the job training live.
"""

from __future__ import annotations

import json
import threading
import time
from pathlib import Path
from typing import Any

import typer
from rich.console import Console

from tunedeck.cli.errors import reported_errors
from tunedeck.core.settings import Settings

console = Console()

DEMO_JOB = "demo: LoRA on a tiny Llama"
# The shipped instruction-tuning recipe, scaled to a CPU and a tiny model.
DEMO_CONFIG: dict[str, Any] = {
    "epochs": 3,
    "batch_size": 4,
    "gradient_accumulation_steps": 1,
    "learning_rate": 2e-3,
    "warmup_ratio": 0.1,
    "max_length": 96,
    "mixed_precision": "auto",
    "gradient_checkpointing": False,
    "lr_scheduler": "cosine",
    "use_peft": True,
    "peft_method": "lora",
    "lora_r": 8,
    "lora_alpha": 16,
    "lora_dropout": 0.0,
    "save_strategy": "steps",
    "save_steps": 10,
    "eval_strategy": "steps",
    "eval_steps": 10,
    "logging_steps": 1,
}


def demo_rows(count: int, offset: int = 0) -> list[dict[str, Any]]:
    """Arithmetic conversations: easy enough for a tiny model to learn visibly in a minute."""
    rows = []
    for i in range(offset, offset + count):
        a, b = i % 13 + 1, (i * 7) % 11 + 1
        rows.append(
            {
                "messages": [
                    {"role": "system", "content": "You answer arithmetic questions in one sentence."},
                    {"role": "user", "content": f"What is {a} plus {b}?"},
                    {"role": "assistant", "content": f"{a} plus {b} is {a + b}."},
                ]
            }
        )
    return rows


def demo(
    port: int | None = typer.Option(None, "--port", help="[default: TUNEDECK_PORT or 8000]"),
    no_job: bool = typer.Option(False, "--no-job", help="Start the server without creating the demo job."),
) -> None:
    """Start the server with an embedded worker and queue a demo job that trains a tiny model on CPU."""
    import uvicorn

    from tunedeck.api.app import create_app
    from tunedeck.cli.serve_command import check_listen_address, server_config, start_embedded_workers
    from tunedeck.service.users.bootstrap import prepare_database
    from tunedeck.store.store import JobStore

    with reported_errors():
        settings = Settings()
        settings = settings.model_copy(update={"port": port or settings.port})
        # The demo prints a login token to the terminal: it never listens beyond loopback.
        check_listen_address(settings.host, allow_remote=False, users_before_start=0)
        settings.data_dir.mkdir(parents=True, exist_ok=True)
        prepare_database(settings)
        with JobStore.open(settings.resolved_database_url(), migrate=False) as store:
            admin = _demo_admin(store)
            token, _ = store.users.issue_token(admin, f"demo-{int(time.time())}")
        model_dir = _tiny_model(settings.data_dir / "models" / "tiny-llama")
        data_files = _demo_files(settings.data_dir / "demo")
        app = create_app(settings)
        embedded = start_embedded_workers(settings, 1)
    base_url = f"http://{settings.host}:{settings.port}"
    if not no_job:
        threading.Thread(
            target=_create_demo_job, args=(base_url, token, model_dir, data_files), daemon=True
        ).start()
    console.print(f"[bold]tunedeck[/bold] demo on {base_url}  (dashboard: {base_url}/ , API docs: {base_url}/docs)")
    console.print(f"log in with this token (shown once): [bold green]{token}[/bold green]", highlight=False,
                  soft_wrap=True)
    try:
        uvicorn.Server(server_config(app, settings, host=settings.host, port=settings.port, log_level="warning")).run()
    finally:
        embedded.stop()


def _demo_admin(store: Any) -> Any:
    from tunedeck.core.errors import NotFoundError

    try:
        return store.users.get_user_by_name("admin")
    except NotFoundError:
        return store.users.create_user("admin", admin=True)


def _tiny_model(path: Path) -> Path:
    if (path / "config.json").is_file():
        return path
    from tunedeck.demo.tiny_models import create_tiny_model

    console.print("building a tiny Llama for the demo (a few seconds)...")
    return create_tiny_model("llama", path).path


def _demo_files(folder: Path) -> tuple[Path, Path]:
    """The demo job's chat files; beside them, preference pairs for trying dpo on its output (README)."""
    from tunedeck.demo.preference_pairs import preference_pairs

    folder.mkdir(parents=True, exist_ok=True)
    files = (folder / "arithmetic-train.jsonl", folder / "arithmetic-validation.jsonl")
    written = {
        **dict(zip(files, (demo_rows(96), demo_rows(16, offset=200)), strict=True)),
        folder / "preferences-train.jsonl": preference_pairs(64, seed=1, conversational=True),
        folder / "preferences-validation.jsonl": preference_pairs(32, seed=2, conversational=True),
    }
    for path, rows in written.items():
        path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return files


def _create_demo_job(base_url: str, token: str, model_dir: Path, data_files: tuple[Path, Path]) -> None:
    """Upload, register and submit through the API once the server answers."""
    import httpx

    headers = {"Authorization": f"Bearer {token}"}
    with httpx.Client(base_url=f"{base_url}/api/v1", headers=headers, timeout=180) as client:
        for _ in range(200):
            try:
                if client.get("/health").status_code == 200:
                    break
            except httpx.TransportError:
                pass
            time.sleep(0.2)
        existing = client.get("/jobs", params={"name": DEMO_JOB}).json().get("items", [])
        if existing:
            console.print(f"demo job already exists: {base_url}/jobs/{existing[0]['id']}")
            return
        dataset_ids = []
        for path in data_files:
            with open(path, "rb") as handle:
                # The server's worker ingests the upload; `wait` answers once it has.
                response = client.post(
                    "/datasets",
                    params={"wait": 120},
                    files={"file": (path.name, handle, "application/jsonl")},
                    data={"name": f"{path.stem}-{int(time.time())}"},
                )
            response.raise_for_status()
            if response.status_code != 200:
                console.print(f"[red]demo: {path.name} was not ingested within 120 s[/red]: {response.text[:300]}")
                return
            dataset_ids.append(response.json()["result"]["dataset_id"])
        model = client.post("/base-models", json={"name": "tiny-llama", "local_path": str(model_dir.resolve())})
        model.raise_for_status()
        job = client.post(
            "/jobs",
            json={
                "name": DEMO_JOB,
                "base_model_id": model.json()["id"],
                "train_dataset_id": dataset_ids[0],
                "validation_dataset_id": dataset_ids[1],
                "config": DEMO_CONFIG,
            },
        )
        job.raise_for_status()
        console.print(f"demo job queued: {base_url}/jobs/{job.json()['id']}")
