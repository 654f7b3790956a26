"""The course's CPU simulator and tracer for numba-cuda kernels: the engine alone.

Holds: `run` (every thread of a launch at once, in warps of 32, stopping at the first fault),
the faults, `recording` and its `Trace`, the trace viewer. May import: nothing of gpucourse
outside itself (`gpucourse.run` plugs it in behind ``numba.cuda``).
"""

from .arithmetic import int16_negation_unwrapped, remainder_sign_of_dividend
from .errors import (BudgetExceeded, DataRace, DivergentBarrier, EndlessLoop, KernelFault, OutOfBounds,
                     TooSlowToSimulate, UninitializedRead, UnknownArray, UnsupportedInKernel, WarpFault)
from .geometry import dim3
from .launch import STEP_BUDGET_ENV, TIME_BUDGET_ENV, run, step_budget
from .runtime import signed_overflows
from .trace import LaunchTrace, Trace, recording
from .transform import has_source
from .viewer import explorer, figure_view, show_trace, trace_viewer

__all__ = ["run", "dim3", "has_source", "recording", "show_trace", "trace_viewer", "figure_view", "explorer", "Trace", "LaunchTrace", "BudgetExceeded",
           "KernelFault", "OutOfBounds", "DataRace", "DivergentBarrier", "UninitializedRead", "WarpFault",
           "UnsupportedInKernel", "UnknownArray", "EndlessLoop", "TooSlowToSimulate", "step_budget", "STEP_BUDGET_ENV",
           "TIME_BUDGET_ENV", "int16_negation_unwrapped", "remainder_sign_of_dividend", "signed_overflows"]
