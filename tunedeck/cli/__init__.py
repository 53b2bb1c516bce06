"""Typer command-line interface: thin commands over the library layers."""
