"""gpucourse: the support library of the course *GPU kernels for deep learning*.

``import gpucourse`` first, in every notebook: it chooses where kernels run
(a CUDA GPU when one is usable, else the CPU simulator, see `gpucourse.device`).
"""

from .device import select_backend as _select_backend

BACKEND = _select_backend()

from . import feedback as _feedback  # noqa: E402
from .doctor import doctor, show_device  # noqa: E402

_feedback.install()

__version__ = "0.1.0"
__all__ = ["BACKEND", "doctor", "show_device", "__version__"]
