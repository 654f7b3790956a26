"""`numba_cuda_conformance`, course side: every Python process imports gpucourse first, as a student's notebook does.

On the PYTHONPATH of the course side only, so that the pytest process and the ``python -c`` processes
some tests start (``test_print`` runs its kernels in one and reads their output) all run on the course
backend (``GPUCOURSE_DEVICE=cpu``); nothing else changes. A process a test started notes in the file
`numba_cuda_conformance_plugin` names when the course hands one of its kernels to numba's simulator
(a kernel in a ``python -c`` string has no source file to rewrite), so that the benchmark counts it apart.
"""

import os
import warnings

import gpucourse  # noqa: F401 (installs the course simulator behind numba.cuda)

_notes = os.environ.get("GPUCOURSE_CONFORMANCE_HANDED_OVER")  # the plugin's HANDED_OVER
if _notes:
    _show = warnings.showwarning

    def _noting_showwarning(message, category, filename, lineno, file=None, line=None):
        if "has no source code" in str(message):
            with open(_notes, "a") as notes:
                notes.write(f"{message}\n")
        _show(message, category, filename, lineno, file, line)

    warnings.showwarning = _noting_showwarning
