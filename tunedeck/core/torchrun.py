"""The command line that starts a run's processes on one machine under torchrun.

torchrun stops every rank when one dies and starts them all again, up to GROUP_RESTARTS
times: a rank that ran out of memory asks for such a restart with a smaller micro-batch,
and a restart nobody asked for ends at once (`tunedeck.engine.distributed.group_restart`).
"""

from __future__ import annotations

import sys

# Enough restarts to halve a micro-batch of 64 down to 1; an unused allowance costs nothing.
GROUP_RESTARTS = 6


def torchrun_launcher(processes: int) -> list[str]:
    """torchrun for `processes` ranks on this machine; append the module to run and its options."""
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={processes}",
            f"--max-restarts={GROUP_RESTARTS}"]  # fmt: skip
