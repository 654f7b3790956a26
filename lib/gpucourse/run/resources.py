"""What a compiled kernel uses per thread and per block: registers, local memory, shared memory.

Two sources, the same numbers:

- On a GPU whose architecture is the one asked for, numba-cuda's own figures for the compiled overload.
- Anywhere else (a laptop with no GPU, or another architecture than the GPU's), the assembler's report
  (`gpucourse.run.assembler`: nvJitLink, no GPU needed), under the kernel's own ``max_registers``.

Without nvJitLink and no GPU, `kernel_resources` returns None and `resources_problem` says why.
"""

from __future__ import annotations

from .assembler import Resources, assembled, resources_problem

ARCHITECTURES = {"T4": "sm_75", "A100": "sm_80", "H100": "sm_90", "H200": "sm_90"}


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
    spilled = assembled(dispatcher, argtypes, architecture).spilled_bytes if local else 0
    return Resources(kernel.regs_per_thread, kernel.shared_mem_per_block, spilled, architecture, local)


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
    return assembled(dispatcher, argtypes, architecture)
