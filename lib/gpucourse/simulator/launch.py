"""Run one launch ``kernel[grid, block, stream, shared_bytes](*args)`` on the course simulator."""

from __future__ import annotations

import inspect
import linecache
import traceback

import numpy as np

from . import trace as tracing
from .calls import device_function
from .errors import BudgetExceeded, KernelFault, UnsupportedInKernel, fault
from .geometry import Geometry, dim3
from .memory import SimArray
from .runtime import RUNTIME
from .transform import FUNCTION

MAX_THREADS = 1 << 22  # the simulator holds a few int64 values per thread of the launch


def host_array(value):
    """The host array behind a kernel argument, or None when it is not an array."""
    if isinstance(value, np.ndarray):
        return value
    inner = getattr(value, "_ary", None)  # numba simulator device array
    if isinstance(inner, np.ndarray):
        return inner
    return None


def written_mask(value):
    """Where an argument's ``written`` mask (a boolean array of its shape) says some element is still unwritten:
    the mask, flat, for the launch to check reads against and record writes in; else None."""
    written = getattr(value, "written", None)
    if not isinstance(written, np.ndarray) or written.all():
        return None
    return written.reshape(-1) if written.flags.c_contiguous else written.flat


def _wrap_arguments(names, args) -> list:
    """Arrays, also inside tuple arguments, become global SimArrays; two arguments over the same memory share one.

    A device allocation may carry a ``written`` mask (see `written_mask`): reading an element nothing wrote
    is then an uninitialised read, and the launch's writes update the mask.
    """
    seen = {}

    def wrap(name, value):
        if type(value) is tuple:
            return tuple(wrap(f"{name}[{k}]", item) for k, item in enumerate(value))
        array = host_array(value)
        if array is None:
            return value
        key = (array.__array_interface__["data"][0], array.shape, array.strides, array.dtype.str)
        if key in seen:
            seen[key].name += f"/{name}"
        else:
            seen[key] = SimArray(array, name, "global", array.shape, written=written_mask(value))
        return seen[key]

    return [wrap(name, value) for name, value in zip(names, args)]


def unsupported_construct(kernel: str, error: Exception) -> UnsupportedInKernel:
    """The course message for a Python error raised while simulating a statement: the line of the kernel (or
    device function) it came from, and what went wrong there."""
    rewritten = [(frame, line) for frame, line in traceback.walk_tb(error.__traceback__) if FUNCTION in frame.f_globals]
    where = f"kernel `{kernel}`"
    if rewritten:
        frame, line = rewritten[-1]
        function = frame.f_globals[FUNCTION].__name__
        if function != kernel:
            where += f", device function `{function}`"
        where += f", line {line}: {linecache.getline(frame.f_code.co_filename, line).strip()}"
    return fault(UnsupportedInKernel, where,
                 f"the course simulator does not support what this line does ({type(error).__name__}: {error}); "
                 "write it with indexing and arithmetic the simulator supports, or run it on a GPU")


def run(py_func, grid, block, args, shared_bytes: int = 0, variable_types: dict | None = None) -> None:
    """Run ``py_func`` as a kernel over ``grid`` x ``block`` threads; arrays are updated in place.

    ``variable_types`` ({function: {variable name: dtype}}, for the kernel and its device functions) are the
    types numba's compilation gives variables: a value assigned to one is converted to its type, as numba does.
    """
    if RUNTIME.geometry is not None:
        raise RuntimeError("a kernel cannot be launched while another simulated kernel runs")
    function = device_function(py_func)
    names = list(inspect.signature(py_func).parameters)
    if len(args) != len(names):
        raise TypeError(f"{py_func.__name__} takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
    grid, block = dim3(grid), dim3(block)
    lanes = int(np.prod(grid)) * int(np.prod(block))
    if lanes > MAX_THREADS:
        raise ValueError(
            f"{py_func.__name__}[{grid}, {block}] is {lanes:,} threads; the CPU simulator "
            f"runs at most {MAX_THREADS:,} per launch: try a smaller problem on the CPU, or a grid-stride loop "
            "over fewer blocks"
        )
    geometry = Geometry(grid, block)
    wrapped = _wrap_arguments(names, args)
    recorder = tracing.recorder_for(py_func, geometry, wrapped)
    RUNTIME.begin(geometry, py_func.__name__, int(shared_bytes), recorder, variable_types or {})
    try:
        with np.errstate(all="ignore"):
            function(*wrapped)
        if recorder is not None:
            recorder.finish(RUNTIME)
    except (KernelFault, BudgetExceeded):
        raise
    except Exception as error:  # noqa: BLE001 (any other error is Python the simulator cannot run)
        if error is RUNTIME.raised_by_kernel:
            raise
        raise unsupported_construct(py_func.__name__, error) from None
    finally:
        RUNTIME.end()
