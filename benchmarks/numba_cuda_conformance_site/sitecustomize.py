"""`numba_cuda_conformance`, course side: every Python process imports gpucourse first, as a student's notebook does.

On the PYTHONPATH of the course side only, so that the pytest process and the ``python -c`` processes
some tests start (``test_print`` runs its kernels in one and reads their output) all run on the course
backend (``GPUCOURSE_DEVICE=cpu``); nothing else changes.
"""

import gpucourse  # noqa: F401 (installs the course simulator behind numba.cuda)
