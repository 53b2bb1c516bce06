"""Artifact storage: the `ArtifactStore` protocol (base), a local folder and S3 backends, encryption at rest.

Import `tunedeck.storage.base` for the protocol and key layout,
`tunedeck.storage.factory.open_store_from_settings` to open the configured store (or
`open_store` for a given URL), `tunedeck.storage.encryption` for the object format and
keyring, and `tunedeck.storage.key_rotation` to rotate keys; this package module imports
nothing so that the engine can use `base` without loading boto3.
"""
