"""Work items as both sides see them: what a request names in storage and the database (jobs' models, exports).

The API uses it to check a request before queuing it; the worker to fetch what the
engine needs. It imports the store and storage layers, never the engine or torch.
"""
