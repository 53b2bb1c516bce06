"""Backups of a whole installation: every database row and the store's manifests (and, optionally, artifacts).

`tunedeck.backup.create.create_backup` writes one encrypted tar; `tunedeck.backup.restore.restore_backup`
puts it back onto an empty installation and checks every committed prefix against its manifest.
This package sits above `jobs` and `storage` and below the CLI.
"""
