"""tunedeck: a self-hostable platform for fine-tuning language models."""

__version__ = "0.1.0"
