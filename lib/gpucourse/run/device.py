"""Where kernels run: a real CUDA GPU when one is usable, else the CPU simulator.

The choice is made once, when `gpucourse` is imported:

- ``GPUCOURSE_DEVICE=gpu`` or ``cpu`` forces it; ``auto`` (the default) takes
  the GPU when numba can use one.
- ``NUMBA_ENABLE_CUDASIM=1`` set before numba was imported hands every launch
  to numba's own simulator; gpucourse then leaves numba alone.
- Otherwise, with no usable GPU, `gpucourse.run.cpu_backend` routes launches and
  the host API of ``numba.cuda`` to the CPU simulator, so the same
  ``kernel[grid, block](...)`` code runs unchanged.
"""

from __future__ import annotations

import os
import sys
import warnings
from dataclasses import dataclass

DEVICE_ENV = "GPUCOURSE_DEVICE"
_CHOICES = ("auto", "gpu", "cpu")


@dataclass(frozen=True)
class Backend:
    """The backend chosen at import: ``kind`` is 'gpu', 'simulator' or 'numba-simulator'."""

    kind: str
    reason: str

    @property
    def on_gpu(self) -> bool:
        return self.kind == "gpu"

    def describe(self) -> str:
        where = {
            "gpu": "the GPU",
            "simulator": "the CPU simulator",
            "numba-simulator": "numba's CPU simulator",
        }[self.kind]
        return f"Kernels run on {where} ({self.reason})."


def _numba_simulator_requested() -> bool:
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


def _requested_device() -> str:
    choice = os.environ.get(DEVICE_ENV, "auto").strip().lower() or "auto"
    if choice not in _CHOICES:
        warnings.warn(
            f"{DEVICE_ENV}={choice!r} is not one of {', '.join(_CHOICES)}; using 'auto'.",
            stacklevel=3,
        )
        return "auto"
    return choice


def _gpu_usable() -> tuple[bool, str]:
    """Ask numba whether a CUDA device can be used; never raises."""
    from numba import cuda

    try:
        if cuda.is_available():
            name = cuda.get_current_device().name
            if isinstance(name, bytes):
                name = name.decode()
            return True, f"found {name}"
    except Exception as exc:  # a broken driver is reported, not raised
        return False, f"the CUDA driver failed: {exc}"
    return False, "no usable CUDA GPU found"


def _quiet_numba_performance_warnings() -> None:
    """Tiny teaching grids must not print warnings (nbgrader fails a cell with stderr).

    numba-cuda re-reads its configuration from the environment at a compile after any ``NUMBA_*`` variable
    changed, so the switches are set there too; and its warnings are its own class, not numba's."""
    from numba.core.errors import NumbaPerformanceWarning
    from numba.cuda.core import config
    from numba.cuda.core.errors import NumbaPerformanceWarning as CudaPerformanceWarning

    for name in ("CUDA_LOW_OCCUPANCY_WARNINGS", "CUDA_WARN_ON_IMPLICIT_COPY"):
        os.environ.setdefault(f"NUMBA_{name}", "0")
        setattr(config, name, 0)
    for category in (NumbaPerformanceWarning, CudaPerformanceWarning):
        warnings.filterwarnings("ignore", category=category)


_chosen: Backend | None = None


def chosen_backend() -> Backend:
    """The backend `select_backend` chose."""
    return _chosen


def select_backend() -> Backend:
    """Choose the backend and install it; called once by ``import gpucourse``."""
    global _chosen
    _chosen = _select()
    return _chosen


def _select() -> Backend:
    if _numba_simulator_requested():
        backend = Backend("numba-simulator", "NUMBA_ENABLE_CUDASIM=1 is set")
        if "numba.cuda" in sys.modules:
            from numba.cuda.core import config

            if not config.ENABLE_CUDASIM:
                raise RuntimeError(
                    "NUMBA_ENABLE_CUDASIM=1 was set after numba.cuda was imported, so numba "
                    "ignored it. Restart the kernel and set it (or better, leave it unset and "
                    "let `import gpucourse` choose) before the first import."
                )
        return backend

    if "numba.cuda" in sys.modules:
        from numba.cuda.core import config

        if config.ENABLE_CUDASIM:
            return Backend(
                "numba-simulator",
                "numba.cuda was imported in simulator mode before gpucourse",
            )

    requested = _requested_device()
    _quiet_numba_performance_warnings()
    if requested == "cpu":
        backend = Backend("simulator", f"{DEVICE_ENV}=cpu")
    else:
        usable, why = _gpu_usable()
        if usable:
            return Backend("gpu", why)
        if requested == "gpu":
            raise RuntimeError(
                f"{DEVICE_ENV}=gpu but {why}. Run gpucourse.doctor() for the fixes, "
                f"or unset {DEVICE_ENV} to use the CPU simulator."
            )
        backend = Backend("simulator", why)

    from . import cpu_backend

    cpu_backend.install()
    return backend
