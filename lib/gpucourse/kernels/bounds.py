"""`launch_bounds(threads, blocks_per_sm)`: the ``@cuda.jit`` keyword that caps a kernel's registers so that
``blocks_per_sm`` blocks of ``threads`` fit on an SM. Under numba's simulator (``NUMBA_ENABLE_CUDASIM=1``), which
compiles nothing and takes no ``launch_bounds``, it is no keyword at all."""

from __future__ import annotations

from numba import config


def launch_bounds(threads: int, blocks_per_sm: int) -> dict:
    """``{"launch_bounds": (threads, blocks_per_sm)}``, or ``{}`` under numba's simulator: ``@cuda.jit(**...)``."""
    return {} if config.ENABLE_CUDASIM else {"launch_bounds": (threads, blocks_per_sm)}
