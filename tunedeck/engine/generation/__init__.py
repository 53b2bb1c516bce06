"""Generating answers with a model, and the evaluation passes built on it."""
