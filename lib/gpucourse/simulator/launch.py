"""Run one launch ``kernel[grid, block, stream, shared_bytes](*args)`` on the course simulator."""

from __future__ import annotations

import contextlib
import functools
import inspect
import linecache
import math
import os
import traceback

import numpy as np

from . import trace as tracing
from .arithmetic import strong
from .calls import device_function, of_its_file, own_line_functions
from .errors import BudgetExceeded, EndlessLoop, KernelFault, TooSlowToSimulate, UnsupportedInKernel, fault
from .geometry import Geometry, dim3
from .memory import SimArray
from .runtime import RUNTIME
from .transform import FUNCTION

MAX_THREADS = 1 << 22  # the simulator holds a few int64 values per thread of the launch
STEP_BUDGET_ENV = "GPUCOURSE_STEP_BUDGET"
# Loop iterations a launch may run (every lane at once counts one): far over any course kernel's few thousand,
# reached by an endless loop in well under a minute.
_step_budget = int(os.environ.get(STEP_BUDGET_ENV) or 1_000_000)
TIME_BUDGET_ENV = "GPUCOURSE_TIME_BUDGET"  # seconds a launch's loops may run (default 600): a GPU-sized problem


@contextlib.contextmanager
def step_budget(steps: int):
    """``with step_budget(steps):`` launches inside stop with `EndlessLoop` after ``steps`` loop iterations
    (default 1,000,000, or the environment's GPUCOURSE_STEP_BUDGET)."""
    global _step_budget
    saved, _step_budget = _step_budget, int(steps)
    try:
        yield
    finally:
        _step_budget = saved


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


def _same_memory(a: np.ndarray, b: np.ndarray) -> bool:
    """Whether two arrays are the same elements of the same memory."""
    return (a.__array_interface__["data"][0], a.shape, a.strides, a.dtype.str) == (
        b.__array_interface__["data"][0], b.shape, b.strides, b.dtype.str)


def _wrap_arguments(names, args) -> list:
    """Arrays, also inside tuple arguments, become global SimArrays; two arguments over the same memory share one.

    A device allocation may carry a ``written`` mask (see `written_mask`): reading an element nothing wrote
    is then an uninitialised read, and the launch's writes update the mask.
    """
    seen = []  # (host array, its SimArray)

    def wrap(name, value):
        if type(value) is tuple:
            return tuple(wrap(f"{name}[{k}]", item) for k, item in enumerate(value))
        array = host_array(value)
        if array is None:  # a float argument is a float64 computed at run time, not a Python constant (`strong`)
            return strong(value) if type(value) is float else value
        for other, wrapped in seen:  # the memory test first: an array's address takes microseconds to ask
            if (not array.size or np.may_share_memory(array, other)) and _same_memory(array, other):
                wrapped.name += f"/{name}"
                return wrapped
        wrapped = SimArray(array, name, "global", array.shape, written=written_mask(value))
        seen.append((array, wrapped))
        return wrapped

    return [wrap(name, value) for name, value in zip(names, args)]


def _innermost(error: Exception):
    """(function, file, line) of the kernel or device function line ``error`` was raised at, or None."""
    rewritten = [(frame, line) for frame, line in traceback.walk_tb(error.__traceback__) if FUNCTION in frame.f_globals]
    if not rewritten:
        return None
    frame, line = rewritten[-1]
    return frame.f_globals[FUNCTION].__name__, frame.f_code.co_filename, line


def _where(kernel: str, error: Exception) -> str:
    """``kernel `k`, device function `f`, line N: source`` of the line ``error`` was raised at."""
    where = f"kernel `{kernel}`"
    located = _innermost(error)
    if located:
        function, filename, line = located
        if function != kernel:
            where += f", device function `{function}`"
        where += f", line {line}: {linecache.getline(filename, line).strip()}"
    return where


def unsupported_construct(kernel: str, error: Exception) -> UnsupportedInKernel:
    """The course message for a Python error raised while simulating a statement: the line of the kernel (or
    device function) it came from, and what went wrong there."""
    return fault(UnsupportedInKernel, _where(kernel, error),
                 f"the course simulator does not support what this line does ({type(error).__name__}: {error}); "
                 "write it with indexing and arithmetic the simulator supports, or run it on a GPU")


def endless_loop(kernel: str, error: EndlessLoop, budget: int) -> EndlessLoop:
    return fault(EndlessLoop, _where(kernel, error),
                 f"the launch did not finish: an endless loop? It ran {budget:,} loop iterations (the simulator's "
                 "step budget); check that every thread's loop condition becomes false")


def too_slow(kernel: str, error: TooSlowToSimulate, seconds: float, lanes: int) -> TooSlowToSimulate:
    return fault(TooSlowToSimulate, _where(kernel, error),
                 f"the launch of {lanes:,} threads still ran after {seconds:g} s (the simulator's time budget): "
                 "a problem this size takes a CPU thousands of times longer than a GPU; simulate a smaller "
                 f"problem, or allow more time with {TIME_BUDGET_ENV}=<seconds>")


def kernel_exception(error: BaseException, lane: int, geometry: Geometry) -> BaseException:
    """An exception a kernel raised, with numba's message: ``In function 'f', file F, line N, tid=[z, y, x]
    ctaid=[z, y, x]: message`` (the thread that raised; numba lists coordinates z first)."""
    located = _innermost(error)
    where = "" if located is None else "In function %r, file %s, line %s, " % (
        located[0], os.path.abspath(located[1]), located[2])
    t, b = geometry.threadIdx, geometry.blockIdx
    tid = [int(t.z[lane]), int(t.y[lane]), int(t.x[lane])]
    ctaid = [int(b.z[lane]), int(b.y[lane]), int(b.x[lane])]
    prefix = f"{where}tid={tid} ctaid={ctaid}"
    arguments = (f"{prefix}: {error.args[0]}",) + error.args[1:] if error.args else (prefix,)
    try:
        return type(error)(*arguments)
    except TypeError:  # an exception class with other arguments keeps its own
        return error


@functools.lru_cache(maxsize=256)
def _parameters(py_func) -> list:
    return list(inspect.signature(py_func).parameters)


@functools.lru_cache(maxsize=8)
def _cached_geometry(grid, block) -> Geometry:
    return Geometry(grid, block)


def _geometry(grid, block) -> Geometry:
    """The lanes of a launch; the last few shapes up to 2^18 threads are kept (a Geometry is never changed)."""
    small = math.prod(grid) * math.prod(block) <= 1 << 18
    return _cached_geometry(grid, block) if small else Geometry(grid, block)


def run(py_func, grid, block, args, shared_bytes: int = 0, variable_types: dict | None = None,
        debug: bool = False, inline_types=None) -> None:
    """Run ``py_func`` as a kernel over ``grid`` x ``block`` threads; arrays are updated in place.

    ``variable_types`` ({function: {variable name: dtype}}, for the kernel and its device functions) are the
    types numba's compilation gives variables: a value assigned to one is converted to its type, as numba does.
    ``debug`` is ``cuda.jit(debug=True)``'s: a division by zero raises ZeroDivisionError. ``inline_types(py_func,
    argtypes)`` gives those of an ``inline="always"`` device function, which numba types only in its callers.
    """
    if RUNTIME.geometry is not None:
        raise RuntimeError("a kernel cannot be launched while another simulated kernel runs")
    function = device_function(py_func)
    names = _parameters(py_func)
    if len(args) != len(names):
        raise TypeError(f"{py_func.__name__} takes {len(names)} arguments ({', '.join(names)}), got {len(args)}")
    grid, block = dim3(grid), dim3(block)
    lanes = math.prod(grid) * math.prod(block)
    if lanes > MAX_THREADS:
        raise ValueError(
            f"{py_func.__name__}[{grid}, {block}] is {lanes:,} threads; the CPU simulator "
            f"runs at most {MAX_THREADS:,} per launch: try a smaller problem on the CPU, or a grid-stride loop "
            "over fewer blocks"
        )
    geometry = _geometry(grid, block)
    wrapped = _wrap_arguments(names, args)
    recorder = tracing.recorder_for(py_func, geometry, wrapped)
    same_file = of_its_file(py_func) if recorder is not None else []
    if recorder is not None:
        recorder.own_line_functions = own_line_functions(same_file)
    budget, seconds = _step_budget, float(os.environ.get(TIME_BUDGET_ENV) or 600)
    RUNTIME.begin(geometry, py_func.__name__, int(shared_bytes), recorder, variable_types or {}, debug, budget,
                  seconds, inline_types)
    try:
        own_lines = _runnable(f.py_func for f in same_file)  # their lines, called or not (`trace.lines_run`)
        with np.errstate(all="ignore"), tracing.lines_run(recorder, own_lines):
            function(*wrapped)
        if recorder is not None:
            recorder.finish(RUNTIME)
    except EndlessLoop as error:
        raise endless_loop(py_func.__name__, error, budget) from None
    except TooSlowToSimulate as error:
        raise too_slow(py_func.__name__, error, seconds, lanes) from None
    except (KernelFault, BudgetExceeded):
        raise
    except Exception as error:  # noqa: BLE001 (any other error is Python the simulator cannot run)
        if error is RUNTIME.raised_by_kernel:
            raise kernel_exception(error, RUNTIME.raising_lane, geometry) from None
        raise unsupported_construct(py_func.__name__, error) from None
    finally:
        RUNTIME.end()


def _runnable(functions) -> list:
    """The rewritten ``functions`` (device functions' Python functions), for `trace.lines_run`; one the rewrite
    refuses is left out (a launch that never calls it runs)."""
    found = []
    for function in functions:
        try:
            found.append(device_function(function))
        except Exception:  # noqa: BLE001, S112 - refused when called, if it ever is
            continue
    return found
