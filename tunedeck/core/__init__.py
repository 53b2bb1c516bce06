"""Shared vocabulary of every layer: ids, errors, job states, the events and run-directory contracts."""
