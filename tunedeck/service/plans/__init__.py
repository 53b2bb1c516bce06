"""Plans and experiments: rental plans, experiment reports' inputs, and experiments' response form."""
