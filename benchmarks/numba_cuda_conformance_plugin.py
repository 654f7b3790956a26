"""pytest plugin for `numba_cuda_conformance`: numba-cuda's tests outside numba-cuda's repository.

Gives the fixture numba-cuda's conftest would (``initialize_from_pytest_config``, nothing to set up
here). Without ``NUMBA_ENABLE_CUDASIM=1`` it imports gpucourse before the tests import numba.cuda
(``GPUCOURSE_DEVICE=cpu`` puts the course simulator behind numba.cuda) and changes nothing else: the
tests run as written, as on a student's laptop, taking the branches they take on a GPU
(``config.ENABLE_CUDASIM`` stays False, so ``skip_on_cudasim`` tests run too).
"""

import os
import warnings

import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
    import gpucourse  # noqa: F401 (installs the course simulator behind numba.cuda)


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
