"""Facts about the machine: accelerators and their features, the environment record, memory fit."""
