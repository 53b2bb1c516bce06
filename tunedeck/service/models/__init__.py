"""Models: registered base models' facts and the names models are known by under `/v1`."""
