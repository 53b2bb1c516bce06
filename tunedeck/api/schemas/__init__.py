"""Pydantic v2 request and response models, one module per resource."""
