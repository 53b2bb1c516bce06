"""Dataset versions: where they live in storage, queuing an upload's ingestion, previews, resolving references."""
