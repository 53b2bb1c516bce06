"""The training-job config contract of seed 002: keys, defaults, recipes, schema."""
