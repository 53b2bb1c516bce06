"""Planning a GPU rental around the experiment method's phases: pure arithmetic, no database, no torch.

`figures` turns a preflight report (measured on the machine) or model size and token
counts (estimated) into the rates a plan needs; `timeline` lays the phases end to end
and weighs them against 3-, 7- and 30-day rentals; `tracking` projects each phase's end
from the experiment's jobs once the rental has started.
"""
