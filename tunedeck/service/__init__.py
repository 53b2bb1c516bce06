"""Use cases: what the API, the OpenAI-compatible API, the dashboard and the CLI ask of the store and storage.

One sub-package per family (jobs, datasets, models, exports and model work, users, privacy, plans
and experiments). Every front end calls these; none imports another's routes. The worker uses
them too, to fetch what a work item names. They import the store and storage layers, never
the web layers, the worker, the engine or torch.
"""
