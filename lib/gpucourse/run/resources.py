"""What a compiled kernel uses per thread and per block: registers, local memory, shared memory.

Two sources, the same numbers:

- On a GPU whose architecture is the one asked for, numba-cuda's own API on the compiled overload
  (``get_regs_per_thread``, ``get_local_mem_per_thread``, ``get_shared_mem_per_block``).
- Anywhere else (a laptop with no GPU, or another architecture than the GPU's), `kernel_resources`
  compiles the kernel to PTX for that architecture's compute capability (`ptx_for`), assembles it with
  NVIDIA's nvJitLink, asking its assembler for a report (``ptxas -v``): registers per thread, the stack
  frame (local memory) and the bytes spilled to it. Shared memory is the sum of the PTX's ``.shared`` arrays (numba
  declares them at module level, where the report does not count them). nvJitLink keeps a cache of
  its own on a machine with a driver, and a cache hit reports nothing of the assembler: the course
  asks it not to cache (``-no-cache``). `parse_report` reads the reports of CUDA 12 and 13.

Without nvJitLink (a CUDA wheel of the cu12 or cu13 extra) and no GPU, `kernel_resources` returns
None and `resources_problem` says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import ptx as _ptx_check
from .ptx import compile_for_gpu

ARCHITECTURES = {"T4": "sm_75", "A100": "sm_80", "H100": "sm_90", "H200": "sm_90"}


@dataclass(frozen=True)
class Resources:
    registers: int  # per thread
    shared_bytes: int  # static shared memory per block
    spilled_bytes: int  # stores to local memory when the registers run out
    architecture: str
    local_bytes: int = 0  # local memory per thread: the stack frame (spills, arrays indexed at run time)


def assemble(ptx: str, architecture: str, max_registers: int | None = None) -> tuple[str, bytes]:
    """nvJitLink's assembler report (``ptxas -v``, never from its cache) and the cubin of ``ptx`` on ``architecture``,
    with at most ``max_registers`` registers per thread when given (what ``@cuda.jit(max_registers=...)`` asks)."""
    from cuda.bindings import nvjitlink

    cap = [f"-maxrregcount={max_registers}"] if max_registers else []
    for options in ([f"-arch={architecture}", "-Xptxas=-v", "-no-cache", *cap],
                    [f"-arch={architecture}", "-Xptxas=-v", *cap]):
        try:
            handle = nvjitlink.create(len(options), options)
        except nvjitlink.nvJitLinkError:  # an nvJitLink older than -no-cache (12.3 and before)
            continue
        try:
            data = ptx.encode()
            nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel")
            nvjitlink.complete(handle)
            log = bytearray(nvjitlink.get_info_log_size(handle))
            nvjitlink.get_info_log(handle, log)
            cubin = bytearray(nvjitlink.get_linked_cubin_size(handle))
            nvjitlink.get_linked_cubin(handle, cubin)
        finally:
            nvjitlink.destroy(handle)
        return log.decode(errors="replace").rstrip("\x00"), bytes(cubin)
    raise RuntimeError(f"nvJitLink refused the options for {architecture}")


def resources_problem() -> str | None:
    """None when `kernel_resources` works here, else one line saying why not."""
    try:
        from cuda.bindings import nvjitlink  # noqa: F401
    except Exception as exc:  # ImportError, or a wheel without the library
        return f"register counts need nvJitLink (the course's cu12 or cu13 extra): {type(exc).__name__}: {exc}"
    return None


def _entry_section(report: str) -> str:
    """The part of the report about the (first) entry function: device functions have their own lines."""
    start = re.search(r"Compiling entry function", report)
    if start is None:
        return report
    end = re.search(r"Compiling entry function", report[start.end():])
    return report[start.start(): start.end() + end.start() if end else len(report)]


def parse_report(report: str, ptx: str, architecture: str) -> Resources:
    """`Resources` from the assembler's verbose report (CUDA 12 or 13) and the PTX it assembled."""
    section = _entry_section(report)
    registers = re.search(r"Used (\d+) registers", section)
    if registers is None:
        raise ValueError("no register count in the assembler's report (was the PTX assembled at all? a cached "
                         f"link reports nothing of the assembler):\n{report}")
    stack = re.search(r"(\d+) bytes stack frame", section)
    spilled = re.search(r"(\d+) bytes spill stores", section)
    shared = sum(int(size) for size in re.findall(r"^\s*(?:\.visible\s+)?\.shared\s.*\[(\d+)\];", ptx, re.M))
    return Resources(int(registers.group(1)), shared, int(spilled.group(1)) if spilled else 0, architecture,
                     int(stack.group(1)) if stack else 0)


def _gpu_architecture() -> str | None:
    """``"sm_XY"`` of the GPU that runs kernels, or None on the simulator."""
    from .device import chosen_backend

    if not chosen_backend().on_gpu:
        return None
    from numba import cuda

    major, minor = cuda.get_current_device().compute_capability
    return f"sm_{major}{minor}"


def _from_overload(dispatcher, argtypes, architecture: str) -> Resources:
    """numba-cuda's own figures for the overload it compiled for this GPU; spills from the assembler's report.

    A kernel without local memory spills nothing, so its report is not needed.
    """
    kernel = dispatcher.compile(tuple(argtypes))  # the overload (its get_*_per_* methods want a Signature)
    local = kernel.local_mem_per_thread
    spilled = _assembled(dispatcher, argtypes, architecture).spilled_bytes if local else 0
    return Resources(kernel.regs_per_thread, kernel.shared_mem_per_block, spilled, architecture, local)


_own: dict = {}  # (py_func, argument types, launch bounds, compute capability) -> PTX


def compute_capability(architecture: str) -> tuple[int, int]:
    """``(9, 0)`` for ``"sm_90"``."""
    digits = architecture.removeprefix("sm_")
    return int(digits[:-1]), int(digits[-1])


def ptx_for(dispatcher, argtypes, architecture: str) -> str:
    """The PTX that `kernel_resources` assembles for ``architecture``: compiled for its compute capability."""
    bounds = dispatcher.targetoptions.get("launch_bounds")
    cc = compute_capability(architecture)
    key = (dispatcher.py_func, tuple(argtypes))
    compiled = _ptx_check._compiled  # the PTX check's cache: a kernel already launched is not compiled again
    if bounds is not None or cc != _ptx_check.COMPUTE_CAPABILITY:
        # its own PTX: .maxntid and .minnctapersm decide how many registers the assembler may use, and code may
        # depend on the compute capability (`kernels.precision.mma_m16n8k16`: one instruction from sm_80 on)
        key, compiled = (*key, bounds, cc), _own
    if key not in compiled or (bounds is None and ".maxntid" in compiled[key]):  # another jit of it had bounds
        compiled[key] = compile_for_gpu(dispatcher, argtypes, cc)
    return compiled[key]


def _assembled(dispatcher, argtypes, architecture: str) -> Resources:
    ptx = ptx_for(dispatcher, argtypes, architecture)
    return parse_report(assemble(ptx, architecture, max_registers(dispatcher))[0], ptx, architecture)


def max_registers(dispatcher) -> int | None:
    """The cap on registers per thread the kernel was compiled with (``@cuda.jit(max_registers=...)``), or None."""
    return dispatcher.targetoptions.get("max_registers") or None


def kernel_resources(dispatcher, argtypes, architecture: str = "sm_75") -> Resources | None:
    """Registers and local memory per thread, shared bytes per block of ``dispatcher`` for ``argtypes``.

    ``architecture``: ``"sm_75"`` (T4), ``"sm_80"`` (A100), ``"sm_90"`` (H100, H200). On a GPU of that
    architecture, numba-cuda's figures; else the assembler's, under the kernel's own ``max_registers``.
    None without nvJitLink.
    """
    if resources_problem():
        return None
    if architecture == _gpu_architecture():
        return _from_overload(dispatcher, argtypes, architecture)
    return _assembled(dispatcher, argtypes, architecture)
