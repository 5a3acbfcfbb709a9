"""The test session's cache: every database, index and converted model the tests build goes to
one folder of this checkout (``.cache/tests``, or ``$BOLTZOO_TEST_CACHE``), never into the
user's ``~/.cache/boltzoo``, and is built once for the whole suite (Ray workers inherit it)."""

import os
from pathlib import Path


def pytest_configure(config):
    default = Path(__file__).parent / ".cache" / "tests"
    os.environ["BOLTZOO_CACHE"] = os.environ.get("BOLTZOO_TEST_CACHE", str(default))
