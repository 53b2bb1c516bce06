"""Wire shapes of the OpenAI-compatible API, one module per resource (the official client's types)."""
