"""pytest plugin for `numba_cuda_conformance`: numba-cuda's tests outside numba-cuda's repository.

Gives the fixture numba-cuda's conftest would (``initialize_from_pytest_config``, nothing to set up
here). On the course side gpucourse is already imported (`numba_cuda_conformance_site`), and
``config.ENABLE_CUDASIM`` stays False, so the tests take the branches they take on a GPU
(``skip_on_cudasim`` tests run too).
"""

import os
import tempfile
import warnings
from pathlib import Path

import pytest

HANDED_OVER = "GPUCOURSE_CONFORMANCE_HANDED_OVER"  # where a process a test starts notes a kernel handed over
NO_SOURCE = "has no source code"  # the course's warning when it hands a kernel to numba's simulator


@pytest.fixture
def initialize_from_pytest_config():
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A test whose kernel the course simulator handed to numba's simulator (no source: built by exec, or in a
    ``python -c`` the test starts) says so in the report (a junit property), so that the benchmark counts it apart."""
    with tempfile.TemporaryDirectory() as folder, warnings.catch_warnings(record=True) as caught:
        notes = Path(folder) / "handed_over"
        os.environ[HANDED_OVER] = str(notes)
        warnings.simplefilter("always")
        try:
            yield
        finally:
            del os.environ[HANDED_OVER]
        in_a_subprocess = notes.exists()
    if in_a_subprocess or any(NO_SOURCE in str(w.message) for w in caught):
        item.user_properties.append(("ran_on", "numba's simulator"))
