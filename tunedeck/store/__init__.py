"""The SQL job store and queue: models, migrations, owner-scoped repositories, the claim/lease/fencing queue.

Start from `tunedeck.store.store.JobStore.open(url)`. Nothing is imported here so
that importing a submodule stays cheap.
"""
