"""`scripts/check_host.py`: print what the machine is, the variant chosen and every problem; write the install plan.

Exit 0 when the install can go on (warnings printed), 1 when a blocking problem stops it
before any download. With `--plan FILE`, the plan is written as shell assignments that
`make install` reads: TORCH_VARIANT, TORCH_INDEX_URL and LOCK_ARGS.
"""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

from tunedeck.hostcheck.assess import InstallPlan, Wanted, assess
from tunedeck.hostcheck.commands import run_tool
from tunedeck.hostcheck.host import HostFacts, environment_choice, gather_host_facts
from tunedeck.hostcheck.install_needs import python_range, torch_needs


def main(argv: list[str] | None = None, repo: Path | None = None) -> int:
    """Check this machine for an install of the repository at `repo`; the exit status says whether to go on."""
    parser = argparse.ArgumentParser(description="Check this machine before tunedeck is installed.")
    parser.add_argument("--venv", type=Path, default=Path(".venv"), help="where the virtualenv will be")
    parser.add_argument("--plan", type=Path, help="write the install plan here (shell assignments)")
    args = parser.parse_args(argv)
    root = repo or Path(__file__).resolve().parents[2]
    try:
        needs, versions = torch_needs(root), python_range(root)
    except (OSError, ValueError) as error:  # the repository's own files disagree: say which, no traceback
        print(f"host check: {error}")
        return 1
    wanted = Wanted(needs, versions, environment_choice("TORCH_VARIANT"), environment_choice("TORCH_INDEX_URL"))
    facts = gather_host_facts(run_tool, args.venv)
    plan = assess(facts, wanted)
    print(render_report(facts, plan, needs.version))
    if plan.blocked:
        return 1
    if args.plan is not None:
        write_plan(plan, args.plan)
    return 0


def render_report(facts: HostFacts, plan: InstallPlan, torch_version: str) -> str:
    """The report as people read it: the machine, the variant and why, then each problem with its fix."""
    libc = f", {facts.libc[0]} {facts.libc[1]}" if facts.libc else ""
    lines = [
        "tunedeck host check",
        f"  system   {facts.os_name}, {facts.machine}{libc}",
        f"  python   {'.'.join(map(str, facts.python))} ({facts.python_executable})",
        f"  disk     {facts.free_disk_bytes / 1e9:.1f} GB free at {facts.disk_path}",
    ]
    lines += [f"  gpu {index}    {gpu.describe()}" for index, gpu in enumerate(facts.gpus)] or ["  gpu      none"]
    if facts.system_rocm:
        lines.append(f"  rocm     {facts.system_rocm}")
    lines.append(f"torch {torch_version}, variant {plan.variant}: {plan.reason}")
    lines += [f"  note: {note}" for note in plan.notes]
    for problem in plan.problems:
        lines.append(f"{'BLOCKING' if problem.blocking else 'warning'}: {problem.what}")
        lines.append(f"  fix: {problem.fix}")
    if plan.blocked:
        lines.append("Nothing was installed: fix the blocking problems above, then run the command again.")
    return "\n".join(lines)


def write_plan(plan: InstallPlan, path: Path) -> None:
    """The plan as shell assignments (quoted) for `make install` to source."""
    path.parent.mkdir(parents=True, exist_ok=True)
    values = {
        "TORCH_VARIANT": plan.variant,
        "TORCH_INDEX_URL": plan.torch_index_url or "",
        "LOCK_ARGS": " ".join(plan.lock_args),
    }
    path.write_text("".join(f"{name}={shlex.quote(value)}\n" for name, value in values.items()), encoding="utf-8")
