"""Workers: claim a job, run the engine in a child process, ingest its events, commit its checkpoints."""
