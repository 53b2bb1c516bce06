"""`tunedeck env`: what a run on this machine would record in env.json, for bug reports and reproducibility."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from tunedeck.cli.errors import reported_errors

console = Console()
error_console = Console(stderr=True)


def env(
    config: Path | None = typer.Option(None, "--config", help="Training config whose seed to show."),
    as_json: bool = typer.Option(False, "--json", help="Print as JSON."),
) -> None:
    """Package versions, torch/CUDA/ROCm, driver, GPUs, CPU, memory, OS, seeds, tunedeck version and commit.

    Fails (exit 1) when the machine has an NVIDIA or AMD GPU that the installed torch cannot use, naming the fix.
    """
    from tunedeck.engine.host.environment import capture_environment
    from tunedeck.engine.host.gpu_reach import torch_gpu_problem
    from tunedeck.engine.host.hardware import detect_hardware

    with reported_errors():
        seed = None
        if config is not None:
            from tunedeck.config.loading import load_config_file

            seed = load_config_file(config).seed
        hardware = detect_hardware()
        document = capture_environment(hardware, seed=seed)
        problem = torch_gpu_problem()
    if as_json:
        typer.echo(json.dumps({**document, "gpu_problem": problem}, indent=2, default=str))
    else:
        render(document)
    if problem is not None:
        error_console.print(f"[bold red]error:[/] {escape(problem)}", soft_wrap=True)  # the fix stays one command
        raise typer.Exit(1)


def render(document: dict[str, Any]) -> None:
    """A two-column table of the figures, packages last."""
    hardware = document.get("hardware", {})
    host = document.get("host_details", {})
    torch_info = document.get("torch", {})
    build = document.get("tunedeck", {})
    driver = document.get("driver", {})
    rows: list[tuple[str, Any]] = [
        ("tunedeck", f"{build.get('version')} (commit {build.get('commit') or 'unknown'})"),
        ("python", document.get("python")),
        ("os", host.get("os") or document.get("platform")),
        ("cpu", f"{host.get('cpu')} ({host.get('cpu_cores_logical')} logical cores)"),
        ("memory", _gib(host.get("memory_total_bytes"))),
        ("torch", torch_info.get("version")),
        ("CUDA runtime", torch_info.get("cuda") or "-"),
        ("ROCm (HIP) runtime", torch_info.get("hip") or "-"),
        ("driver", driver.get("driver_version") or "-"),
        ("driver CUDA", driver.get("driver_cuda_version") or "-"),
        ("backend", hardware.get("backend")),
        ("accelerator", f"{hardware.get('device_name')} × {hardware.get('device_count')}"),
        ("compute capability", hardware.get("capability") or "-"),
        ("accelerator memory", _gib(hardware.get("total_memory_bytes"))),
        ("bf16 / fp16", f"{hardware.get('supports_bf16')} / {hardware.get('supports_fp16')}"),
        *_rocm_rows(hardware.get("rocm")),
        ("seeds", json.dumps(document.get("seeds"))),
    ]
    rows += [(name, version or "not installed") for name, version in document.get("packages", {}).items()]
    table = Table("", "", show_header=False, title="tunedeck env")
    for name, value in rows:
        table.add_row(name, str(value))
    console.print(table)


def _rocm_rows(rocm: dict[str, Any] | None) -> list[tuple[str, Any]]:
    """The AMD stack of a ROCm build of torch: system ROCm and HIP, architectures, OS, kernels that ran."""
    if not rocm:
        return []
    kernels = ", ".join(
        f"{name} {'yes' if (rocm.get(name) or {}).get('usable') else 'no'}"
        for name in ("bitsandbytes", "flash_attn", "triton", "fused_adamw")
    )
    return [
        ("ROCm (system)", f"{rocm.get('system_rocm') or 'not found'} (HIP {rocm.get('system_hip') or '-'})"),
        ("torch built for ROCm", rocm.get("torch_rocm") or "-"),
        ("GPU architecture", ", ".join(rocm.get("gfx_archs") or []) or "-"),
        ("ROCm OS", f"{rocm.get('os_name') or rocm.get('os_id') or '-'} (kernel {rocm.get('kernel') or '-'})"),
        ("ROCm kernels that ran", kernels),
    ]


def _gib(value: Any) -> str:
    return f"{value / 2**30:.1f} GiB" if isinstance(value, int | float) else "-"
