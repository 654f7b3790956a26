"""A plain-words report of where kernels run and how to fix a broken GPU setup."""

from __future__ import annotations

import os
import platform
import sys
from importlib import metadata

from . import ptx
from .device import DEVICE_ENV, chosen_backend

COLAB_FIXES = """\
Known fixes on Colab (Runtime > Change runtime type > a GPU first):
  * CUDA_ERROR_UNSUPPORTED_PTX_VERSION, or 'PTX was compiled with an unsupported
    toolchain': the compiler is newer than the driver. Link with nvJitLink:
    install the course with the extra that matches the driver (`gpucourse[cu12]`
    for a CUDA 12 driver, as on Colab today), keep NUMBA_CUDA_ENABLE_PYNVJITLINK=1
    (numba-cuda's default), then Runtime > Restart session.
  * 'CUDA driver library cannot be found' or no GPU listed: the runtime has no GPU;
    switch the runtime type, or carry on, the CPU simulator runs every kernel.
  * DeprecationWarning about numba.cuda: the old built-in numba.cuda is in use;
    `pip install "numba-cuda[cu12]==0.30.*"` and restart the session."""


def _version(package: str) -> str:
    try:
        return metadata.version(package)
    except metadata.PackageNotFoundError:
        return "not installed"


def show_device() -> None:
    """One line for a notebook's first cell: where kernels run."""
    backend = chosen_backend()
    hint = "" if backend.on_gpu else " Every kernel also runs here, just slower."
    print(f"gpucourse {_version('gpucourse')}: {backend.describe()}{hint}")


def _one_line(exc: Exception) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"[:240]


def _gpu_lines() -> list[str]:
    from numba import cuda

    lines = []
    try:
        driver = cuda.cudadrv.driver.driver.get_version()
        lines.append(f"CUDA driver supports: {driver[0]}.{driver[1]}")
    except Exception as exc:
        lines.append(f"CUDA driver: not usable ({_one_line(exc)})")
        return lines
    try:
        device = cuda.get_current_device()
        name = device.name.decode() if isinstance(device.name, bytes) else device.name
        cc = device.compute_capability
        lines.append(f"GPU: {name}, compute capability {cc[0]}.{cc[1]}")
    except Exception as exc:
        lines.append(f"GPU: none usable ({_one_line(exc)})")
    return lines


def doctor() -> None:
    """Print the environment report: GPU, driver, CUDA, versions, backend, fixes."""
    backend = chosen_backend()
    lines = [
        "gpucourse environment report",
        f"Backend: {backend.describe()}",
        f"Python {platform.python_version()} on {platform.system()} {platform.machine()}",
        f"gpucourse {_version('gpucourse')}, numba {_version('numba')}, "
        f"numba-cuda {_version('numba-cuda')}, numpy {_version('numpy')}",
        f"{DEVICE_ENV}={os.environ.get(DEVICE_ENV, 'auto')}, "
        f"NUMBA_ENABLE_CUDASIM={os.environ.get('NUMBA_ENABLE_CUDASIM', '0')}, "
        f"NUMBA_CUDA_ENABLE_PYNVJITLINK={os.environ.get('NUMBA_CUDA_ENABLE_PYNVJITLINK', 'default')}",
    ]
    if backend.kind != "numba-simulator":
        lines += _gpu_lines()
        problem = ptx.toolchain_problem()
        lines.append(
            "GPU compiler (NVVM): "
            + (f"missing, kernels are not checked for the GPU ({problem})" if problem else "found")
        )
    if "google.colab" in sys.modules or not backend.on_gpu:
        lines += ["", COLAB_FIXES]
    print("\n".join(lines))
