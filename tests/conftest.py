"""Suite-wide fixtures live in tests/fixtures/, one module per area, loaded here."""

pytest_plugins = [
    "tests.fixtures.models",
    "tests.fixtures.data",
    "tests.fixtures.live_server",
    "tests.fixtures.services",
    "tests.fixtures.ray_cluster",
    "tests.fixtures.app",
    "tests.fixtures.trackers",
]
