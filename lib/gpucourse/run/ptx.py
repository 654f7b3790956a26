"""Check that a kernel run on the CPU would also compile for a real GPU.

The simulator executes a kernel's Python source and accepts Python that the
GPU compiler rejects (lists, runtime-sized shared arrays, unsupported calls).
Before a simulated launch, `check_compiles` compiles the kernel to PTX for the
launch's argument types with numba's real compiler (NVVM, no GPU needed), so
such code fails at once, with numba's explanation, on a laptop too.

``GPUCOURSE_PTX_CHECK``: ``auto`` (default) checks when NVVM is installed,
``require`` fails when it is not (the test suite), ``off`` never checks.
"""

from __future__ import annotations

import contextlib
import os
import re
from types import SimpleNamespace

import numba
from numba import cuda

MODE_ENV = "GPUCOURSE_PTX_CHECK"
COMPUTE_CAPABILITY = (7, 5)

_compiled: dict = {}  # (py_func, argument types) -> PTX
_toolchain_error: str | None = None


class KernelCompileError(Exception):
    """A kernel runs on the simulator but the GPU compiler rejects it."""


def mode() -> str:
    value = os.environ.get(MODE_ENV, "auto").strip().lower()
    return value if value in ("auto", "require", "off") else "auto"


def toolchain_problem() -> str | None:
    """None when NVVM is usable, else why not (checked once)."""
    global _toolchain_error
    if _toolchain_error is None:
        try:
            from numba.cuda.cudadrv import nvvm

            nvvm.NVVM()
            _toolchain_error = ""
        except Exception as exc:
            _toolchain_error = f"{type(exc).__name__}: {exc}".strip()
    return _toolchain_error or None


def argument_type(value):
    """The numba type a launch argument has on a real GPU."""
    host = getattr(value, "_ary", None)  # a simulator device array wraps a host array
    return numba.typeof(value if host is None else host)


@contextlib.contextmanager
def target_device():
    """Device functions ask the current device for its compute capability; answer for it."""
    from numba.cuda import dispatcher

    fake = SimpleNamespace(compute_capability=COMPUTE_CAPABILITY)
    original = dispatcher.get_current_device
    dispatcher.get_current_device = lambda: fake
    try:
        yield
    finally:
        dispatcher.get_current_device = original


def compile_for_gpu(dispatcher, argtypes) -> str:
    """PTX of ``dispatcher`` for ``argtypes``; raises numba's error when it does not compile."""
    with target_device():
        ptx, _ = cuda.compile_ptx(dispatcher.py_func, tuple(argtypes), cc=COMPUTE_CAPABILITY)
    return ptx


def _short(message: str, limit: int = 40) -> str:
    lines = [line for line in str(message).splitlines() if line.strip()]
    return "\n".join(lines[:limit])


def check_compiles(dispatcher, args, argtypes: tuple | None = None) -> None:
    """Raise `KernelCompileError` if the kernel would not compile for these arguments (or ``argtypes``)."""
    if mode() == "off":
        return
    problem = toolchain_problem()
    if problem:
        if mode() == "require":
            raise KernelCompileError(
                f"cannot check kernels for the GPU: NVVM is missing ({problem}). "
                "Install the course with its cu12 or cu13 extra, or a CUDA toolkit."
            )
        return
    argtypes = argtypes or tuple(argument_type(a) for a in args)
    key = (dispatcher.py_func, argtypes)
    if key in _compiled:
        return
    try:
        ptx = compile_for_gpu(dispatcher, argtypes)
    except Exception as exc:
        name = dispatcher.py_func.__name__
        raise KernelCompileError(
            f"kernel `{name}` runs on the CPU simulator but would not compile for a real GPU "
            f"(arguments: {', '.join(map(str, argtypes))}).\n{_short(exc)}"
        ) from None
    _compiled[key] = ptx


FLOAT64_OPERATION = re.compile(r"^\s*(?!ld\.|st\.|mov\.)([a-z]+(?:\.[a-z0-9]+)*\.f64)\b", re.M)


def float64_operations(py_func) -> dict[str, int] | None:
    """Float64 arithmetic and conversions in the PTX compiled for ``py_func`` (None: never compiled)."""
    texts = [ptx for (function, _), ptx in _compiled.items() if function is py_func]
    if not texts:
        return None
    counts: dict[str, int] = {}
    for text in texts:
        for operation in FLOAT64_OPERATION.findall(text):
            counts[operation] = counts.get(operation, 0) + 1
    return counts


def unchecked_kernels(namespace: dict) -> list[str]:
    """Names of the kernels and device functions in ``namespace`` never compiled for the GPU.

    The notebook tests call this after a notebook ran: every kernel it defines must have
    been launched (and so compiled) at least once.
    """
    from numba.cuda.dispatcher import CUDADispatcher

    checked = {fn for fn, _ in _compiled}
    missing = []
    for name, value in namespace.items():
        if not isinstance(value, CUDADispatcher):
            continue
        if value.targetoptions.get("device"):
            if not value.overloads:
                missing.append(name)
        elif value.py_func not in checked:
            missing.append(name)
    return sorted(missing)
