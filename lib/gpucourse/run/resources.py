"""What a compiled kernel uses per thread and per block: registers and shared memory.

`kernel_resources` compiles a kernel to PTX (as `ptx.compile_for_gpu` does, no GPU needed) and
assembles it for a named GPU architecture with NVIDIA's nvJitLink, asking its assembler for a
report (``ptxas -v``): registers per thread, bytes spilled to local memory. Shared memory is
the sum of the PTX's ``.shared`` arrays (numba declares them at module level, where the
assembler's report does not count them). On a GPU, ``kernel.get_regs_per_thread(signature)``
gives the same register count. Without nvJitLink (a CUDA wheel of the cu12 or cu13 extra),
`kernel_resources` returns None and `resources_problem` says why.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from . import ptx as _ptx_check
from .ptx import compile_for_gpu

ARCHITECTURES = {"T4": "sm_75", "A100": "sm_80", "H100": "sm_90"}


@dataclass(frozen=True)
class Resources:
    registers: int  # per thread
    shared_bytes: int  # static shared memory per block
    spilled_bytes: int  # stores to local memory when the registers run out
    architecture: str


def _assembler_report(ptx: str, architecture: str) -> str:
    from cuda.bindings import nvjitlink

    handle = nvjitlink.create(2, [f"-arch={architecture}", "-Xptxas=-v"])
    try:
        data = ptx.encode()
        nvjitlink.add_data(handle, nvjitlink.InputType.PTX, data, len(data), "kernel")
        nvjitlink.complete(handle)
        log = bytearray(nvjitlink.get_info_log_size(handle))
        nvjitlink.get_info_log(handle, log)
    finally:
        nvjitlink.destroy(handle)
    return log.decode(errors="replace")


def resources_problem() -> str | None:
    """None when `kernel_resources` works here, else one line saying why not."""
    try:
        from cuda.bindings import nvjitlink  # noqa: F401
    except Exception as exc:  # ImportError, or a wheel without the library
        return f"register counts need nvJitLink (the course's cu12 or cu13 extra): {type(exc).__name__}: {exc}"
    return None


def parse_report(report: str, ptx: str, architecture: str) -> Resources:
    """`Resources` from the assembler's verbose report and the PTX it assembled."""
    registers = re.search(r"Used (\d+) registers", report)
    spilled = re.search(r"(\d+) bytes spill stores", report)
    if registers is None:
        raise ValueError(f"no register count in the assembler's report:\n{report}")
    shared = sum(int(size) for size in re.findall(r"^\s*(?:\.visible\s+)?\.shared\s.*\[(\d+)\];", ptx, re.M))
    return Resources(int(registers.group(1)), shared, int(spilled.group(1)) if spilled else 0, architecture)


def kernel_resources(dispatcher, argtypes, architecture: str = "sm_75") -> Resources | None:
    """Registers per thread and shared bytes per block of ``dispatcher`` for ``argtypes`` on ``architecture``.

    ``architecture``: ``"sm_75"`` (T4), ``"sm_80"`` (A100), ``"sm_90"`` (H100). None without nvJitLink.
    """
    if resources_problem():
        return None
    key = (dispatcher.py_func, tuple(argtypes))
    compiled = _ptx_check._compiled  # the PTX check's cache: a kernel already launched is not compiled again
    if key not in compiled:
        compiled[key] = compile_for_gpu(dispatcher, argtypes)
    ptx = compiled[key]
    return parse_report(_assembler_report(ptx, architecture), ptx, architecture)
