"""pytest plugin for `numba_cuda_conformance`: numba-cuda's tests outside numba-cuda's repository.

Gives the fixture numba-cuda's conftest would (``initialize_from_pytest_config``, nothing to set up
here). Without ``NUMBA_ENABLE_CUDASIM=1`` it loads before the tests import numba.cuda and imports
gpucourse (``GPUCOURSE_DEVICE=cpu`` puts the course simulator behind numba.cuda); numba's test
helpers (``numba.cuda.testing``: ``skip_on_cudasim``, ``skip_unless_cudasim``, the compute
capability checks) are then told that a simulator runs the tests, so that they skip and run what
they would on numba's simulator, and so are test modules that read the config themselves, while
``cuda.jit`` stays numba's real one.
"""

import os
import warnings

import pytest

if os.environ.get("NUMBA_ENABLE_CUDASIM") != "1":
    import gpucourse  # noqa: F401 (installs the course simulator behind numba.cuda)
    from numba.cuda import config, testing

    class SimulatorConfig:
        """numba's config as its test helpers read it: a simulator runs the tests."""

        ENABLE_CUDASIM = True

        def __getattr__(self, name):
            return getattr(config, name)

        def __setattr__(self, name, value):
            setattr(config, name, value)

    testing.config = SimulatorConfig()


@pytest.hookimpl(hookwrapper=True)
def pytest_collection(session):
    """While the test modules are imported (the session's collection), ``from numba.cuda(.core) import config`` gives
    the simulator's config too: module-level choices (``if config.ENABLE_CUDASIM: tpb = 4``) are made as on
    numba's simulator (numba's own modules imported it before, with gpucourse)."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        yield
        return
    import numba.cuda.core  # noqa: PLC0415

    numba.cuda.config = numba.cuda.core.config = testing.config
    try:
        yield
    finally:
        numba.cuda.config = numba.cuda.core.config = config


def pytest_collection_modifyitems(items):
    """Test modules that read numba's config themselves (``if config.ENABLE_CUDASIM:`` in a test, or
    ``from numba.cuda.core.config import ENABLE_CUDASIM``) read it too."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return
    for module in {item.module for item in items if getattr(item, "module", None) is not None}:
        if getattr(module, "config", None) is config:
            module.config = testing.config
        if "ENABLE_CUDASIM" in vars(module) and not module.ENABLE_CUDASIM:
            module.ENABLE_CUDASIM = True


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
