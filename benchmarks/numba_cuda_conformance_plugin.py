"""pytest plugin for `numba_cuda_conformance`: numba-cuda's tests outside numba-cuda's repository.

Gives the fixture numba-cuda's conftest would (``initialize_from_pytest_config``, nothing to set up
here). On the course side gpucourse is already imported (`numba_cuda_conformance_site`), and
``config.ENABLE_CUDASIM`` stays False, so the tests take the branches they take on a GPU
(``skip_on_cudasim`` tests run too).
"""

import warnings

import pytest


@pytest.fixture
def initialize_from_pytest_config():
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    """A test whose kernel the course simulator handed to numba's simulator (no source: built by exec) says so
    in the report (a junit property), so that the benchmark counts it apart."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield
    if any("has no source code" in str(w.message) for w in caught):
        item.user_properties.append(("ran_on", "numba's simulator"))
