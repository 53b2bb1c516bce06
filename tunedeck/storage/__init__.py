"""Artifact storage: the `ArtifactStore` protocol (base), a local folder and S3 backends, `open_store`.

Import `tunedeck.storage.base` for the protocol and key layout and
`tunedeck.storage.factory.open_store` to open a store; this package module
imports nothing so that the engine can use `base` without loading boto3.
"""
