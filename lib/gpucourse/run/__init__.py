"""Where kernels run: the backend chosen at import (a CUDA GPU, else the course's CPU simulator).

Holds: the choice (`device`), the CPU backend behind ``numba.cuda`` (`cpu_backend`, with `device_memory` and
`simulated_device`), `trace` and `simulated`, the check that every kernel compiles for a real GPU (`ptx`), a
compiled kernel's registers and shared memory (`resources`; the assembler's report in `assembler`), GPU timing
with CUDA events (`timing`: the one timer of the lectures, the tuner, the grading and the benchmarks), the
autotuner and compiled-code findings
(`tuning`, module 7; SASS read with nvdisasm in `sass`), and `doctor`.
May import: `gpucourse.simulator`.
"""

from .device import DEVICE_ENV, Backend, select_backend

BACKEND = select_backend()  # before anything below imports numba.cuda

from . import ptx  # noqa: E402
from .doctor import doctor, show_device  # noqa: E402
from .ptx import (KernelCompileError, compile_for_gpu, float_operations, integer_operations,  # noqa: E402
                  unchecked_kernels)
from .assembler import Resources, launch_assembler, resources_problem  # noqa: E402
from .resources import ARCHITECTURES, kernel_resources  # noqa: E402
from .simulated_device import EventNotReady, NotOnTheSimulator  # noqa: E402
from . import timing  # noqa: E402
from .timing import median_seconds, seconds_per_launch  # noqa: E402
from . import tuning  # noqa: E402


def _cpu_backend():
    """`cpu_backend`, imported on first use: under numba's own simulator it cannot be."""
    if BACKEND.kind == "numba-simulator":
        raise RuntimeError("NUMBA_ENABLE_CUDASIM=1 hands every launch to numba's simulator, which the course cannot "
                           "trace: unset it and restart the kernel.")
    from . import cpu_backend  # noqa: PLC0415

    return cpu_backend


def simulated():
    """``with simulated():`` runs the launches inside on the course simulator, also on a GPU machine."""
    return _cpu_backend().simulated()


def counting_copies():
    """``with counting_copies() as copies:`` counts the copies between host and device made inside it
    (``copies.to_device``, ``copies.to_host``, and their bytes ``copies.bytes_to_device``, ``bytes_to_host``; a
    host array passed to a launch counts one each way), on the CPU
    simulator only: a GPU's copies go through numba's driver, which this does not see."""
    if BACKEND.on_gpu:
        raise RuntimeError("counting_copies counts the copies of the CPU simulator's device arrays; "
                           "it cannot see a GPU's")
    return _cpu_backend().device_memory.counting_copies()


def recording_launches():
    """``with recording_launches() as launches:`` lists the launches made inside it (the kernel's Python function
    and its argument types, each), on the CPU simulator only: a GPU's launches go through numba's driver."""
    if BACKEND.on_gpu:
        raise RuntimeError("recording_launches lists the CPU simulator's launches; it cannot see a GPU's")
    return _cpu_backend().recording_launches()


def trace(lines: bool = False):
    """``with trace() as t:`` records every launch inside, run on the course simulator (also on a GPU machine);
    ``trace(lines=True)``: also which lines of each kernel ran (what the cost model reads)."""
    return _cpu_backend().trace(lines)


__all__ = ["BACKEND", "Backend", "DEVICE_ENV", "doctor", "show_device", "trace", "simulated", "counting_copies",
           "recording_launches", "ptx",
           "KernelCompileError", "compile_for_gpu", "float_operations", "integer_operations", "unchecked_kernels",
           "ARCHITECTURES", "Resources", "kernel_resources", "launch_assembler", "resources_problem", "seconds_per_launch",
           "median_seconds", "timing", "tuning", "EventNotReady", "NotOnTheSimulator"]
