"""Privacy: what a deletion reaches, retention plans, sweeps and their dates."""
