"""The training-job config contract: the job config keys, defaults, recipes, schema."""
