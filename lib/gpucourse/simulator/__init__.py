"""The course's CPU simulator and tracer for numba-cuda kernels.

`run` executes a kernel for every thread of a launch at once (see `transform`
and `runtime`), deterministically, in warps of 32, and stops at the first
out-of-bounds index, data race, divergent barrier or read of unwritten shared
or local memory. `trace` records what each thread did with memory.
"""

from .errors import (DataRace, DivergentBarrier, KernelFault, OutOfBounds, UninitializedRead,
                     UnsupportedInKernel, WarpFault)
from .launch import run
from .trace import BudgetExceeded, LaunchTrace, Trace, trace
from .viewer import show_trace, trace_viewer


def simulated():
    """``with simulated():`` runs the launches inside on this simulator, also on a GPU machine."""
    from ..cpu_backend import simulated_launches  # noqa: PLC0415 (cpu_backend imports this package)

    return simulated_launches()


__all__ = ["run", "simulated", "trace", "show_trace", "trace_viewer", "Trace", "LaunchTrace", "BudgetExceeded", "KernelFault", "OutOfBounds", "DataRace",
           "DivergentBarrier", "UninitializedRead", "WarpFault", "UnsupportedInKernel"]
