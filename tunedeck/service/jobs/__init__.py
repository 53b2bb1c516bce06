"""A job's use cases: queuing one, its guards, log, datasets, models and parent job."""
