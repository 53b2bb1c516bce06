"""Models: where they come from (with revisions), how they load with their adapters, and their pins."""
