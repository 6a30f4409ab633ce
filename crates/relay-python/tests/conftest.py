"""Shared fixtures of the relayc Python tests (helpers and paths are in support.py).

`RELAYC_BIN` names the `relayc` command-line binary (`target/<profile>/relayc`); the tests
that compare with it are skipped when it is unset, except under CI (`CI` set), where a missing
binary is a failure: `run-tests.sh` always sets it.
"""

import os
from pathlib import Path

import pytest


@pytest.fixture(scope="session")
def relayc_bin():
    """The relayc binary from RELAYC_BIN; the test is skipped without it (failed under CI)."""
    value = os.environ.get("RELAYC_BIN")
    if not value:
        if os.environ.get("CI"):
            pytest.fail("CI is set but RELAYC_BIN is not: run-tests.sh sets it to target/debug/relayc")
        pytest.skip("RELAYC_BIN is not set (point it at target/<profile>/relayc to compare with the CLI)")
    path = Path(value)
    if not (path.is_file() and os.access(path, os.X_OK)):
        pytest.fail(f"RELAYC_BIN={value!r} is not an executable file")
    return path
