"""gpucourse: the support library of the course *GPU kernels for deep learning*.

``import gpucourse`` first, in every notebook: it chooses where kernels run (a CUDA GPU when
one is usable, else the CPU simulator, see `gpucourse.run`). Its wings: `run`, `simulator`,
`kernels`, `grading`, `figures`, `course` (the README's maintainer path has the table).
"""

from .run import BACKEND, doctor, show_device, simulated, trace  # first: picks the backend
from .course import inline_figures as _inline_figures  # noqa: E402
from .course import show_recorded, show_source  # noqa: E402
from .grading import feedback as _feedback  # noqa: E402

_feedback.install()
_inline_figures.install()

__version__ = "0.1.0"
__all__ = ["BACKEND", "doctor", "show_device", "trace", "simulated", "show_source", "show_recorded", "__version__"]
