"""pytest plugin for `numba_cuda_conformance`: numba-cuda's tests on the course simulator.

Loaded with ``-p`` before the tests import numba.cuda: imports gpucourse (``GPUCOURSE_DEVICE=cpu``
puts the course simulator behind numba.cuda), then tells numba's test helpers that a simulator
runs them, so that they skip and run what they would on numba's simulator.
"""

import gpucourse  # noqa: F401 (installs the course simulator behind numba.cuda)
from numba.cuda import config

config.ENABLE_CUDASIM = True
