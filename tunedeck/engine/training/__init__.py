"""The training run: its steps, its trainer and callbacks, its data and the files it writes."""
