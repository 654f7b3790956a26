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


def pytest_collection_modifyitems(items):
    """Test modules that read numba's config themselves (``if config.ENABLE_CUDASIM:`` in a test) read it too."""
    if os.environ.get("NUMBA_ENABLE_CUDASIM") == "1":
        return
    for module in {item.module for item in items if getattr(item, "module", None) is not None}:
        if getattr(module, "config", None) is config:
            module.config = testing.config


@pytest.fixture
def initialize_from_pytest_config():
    yield
