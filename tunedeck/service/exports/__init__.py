"""Exports and model work: queuing work items within the per-user bound, streaming an artifact folder as a zip."""
