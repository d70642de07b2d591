# SPDX-License-Identifier: Apache-2.0
# Fixtures of the Python module's tests: a discovered registry and a host backend per test.
# Run by CTest (tests/python/CMakeLists.txt) with PYTHONPATH=<build>/python.
import os
import subprocess
import sys
import textwrap

import pytest

import gpuplug


@pytest.fixture(scope="session")
def registry():
    r = gpuplug.PluginRegistry()
    r.discover()
    return r


@pytest.fixture
def gpu(registry):
    with registry.create("host!") as g:
        yield g


def run_python(code, timeout=120):
    """Runs code in a fresh interpreter (so a crash fails the test, not pytest) and returns it
    completed; its stdout and stderr are in the assertion message of a caller that checks."""
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True,
                          text=True, timeout=timeout, env=dict(os.environ))
