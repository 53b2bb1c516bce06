"""The OpenAI-compatible API under `/v1`: files, fine-tuning jobs, models and chat completions.

Code written for a hosted fine-tuning API points the official client at a tunedeck server
(`base_url=http://host:8000/v1`, `api_key=<tunedeck token>`) and runs unchanged. Each
resource maps onto tunedeck's own (a file is a dataset version, a fine-tuning job a job,
a fine-tuned model a job's final model); the rules (ownership, validation, limits) are
tunedeck's, only the wire shapes are the client's.
"""
