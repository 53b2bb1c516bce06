"""The REST API: FastAPI routers over the job store and artifact storage (never the engine).

Build it with `tunedeck.api.app.create_app(settings)`; nothing here runs at import time.
"""
