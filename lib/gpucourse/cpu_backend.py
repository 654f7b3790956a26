"""Run ``numba.cuda`` kernels on the CPU when there is no GPU.

numba stays in its normal (GPU) mode, so ``@cuda.jit`` gives real dispatchers
that can still be compiled to PTX. `install` reroutes what needs a device:

- a launch ``kernel[grid, block](...)`` (with optional stream and dynamic
  shared memory size) runs the kernel's Python source on numba's simulator
  engine, after checking that it compiles for a real GPU (`gpucourse.ptx`);
- the host API (``cuda.to_device``, ``device_array(_like)``, streams, events,
  ``synchronize``) returns simulator objects backed by host memory.

The engine is numba's simulator for now; the course's own simulator replaces
it behind the same `install`.
"""

from __future__ import annotations

import re
import time
from types import SimpleNamespace

from numba import cuda
from numba.cuda.dispatcher import CUDADispatcher
from numba.cuda.simulator import api as sim_api
from numba.cuda.simulator import kernel as sim_kernel
from numba.cuda.simulator.cudadrv import devicearray as sim_arrays

from . import ptx

class SimulatedEvent:
    """A CUDA event on the simulator: it times the CPU, so its milliseconds say nothing about a GPU."""

    def __init__(self, timing: bool = True):
        self.timing = timing
        self.time = None

    def record(self, stream=0):
        self.time = time.perf_counter()

    def wait(self, stream=0):
        pass

    def synchronize(self):
        pass

    def query(self) -> bool:
        return True

    def elapsed_time(self, later: "SimulatedEvent") -> float:
        """Milliseconds of simulation between the two records (CPU time, not GPU time)."""
        if self.time is None or later.time is None:
            raise RuntimeError("record() both events before asking for the time between them")
        return (later.time - self.time) * 1000.0


def event_elapsed_time(start: SimulatedEvent, stop: SimulatedEvent) -> float:
    return start.elapsed_time(stop)


# What the simulator reports as its device: the limits of every GPU since compute capability 7.5.
SIMULATED_DEVICE = SimpleNamespace(
    name="CPU simulator",
    compute_capability=(7, 5),
    MAX_THREADS_PER_BLOCK=1024,
    MAX_BLOCK_DIM_X=1024,
    MAX_BLOCK_DIM_Y=1024,
    MAX_BLOCK_DIM_Z=64,
    MAX_GRID_DIM_X=2**31 - 1,
    MAX_GRID_DIM_Y=65535,
    MAX_GRID_DIM_Z=65535,
    MAX_SHARED_MEMORY_PER_BLOCK=48 * 1024,
    WARP_SIZE=32,
)


def get_current_device():
    return SIMULATED_DEVICE


def check_launch_limits(grid: tuple, block: tuple) -> None:
    """Refuse, as a GPU would, a launch outside the hardware's limits."""
    d = SIMULATED_DEVICE
    threads = block[0] * block[1] * block[2]
    if threads > d.MAX_THREADS_PER_BLOCK:
        raise ValueError(
            f"a block of {block} is {threads} threads; a GPU runs at most "
            f"{d.MAX_THREADS_PER_BLOCK} threads per block: use smaller blocks and more of them"
        )
    for axis, size, limit in zip("xyz", block, (d.MAX_BLOCK_DIM_X, d.MAX_BLOCK_DIM_Y, d.MAX_BLOCK_DIM_Z)):
        if size > limit:
            raise ValueError(f"blockDim.{axis} = {size} is over the GPU's limit of {limit}")
    for axis, size, limit in zip("xyz", grid, (d.MAX_GRID_DIM_X, d.MAX_GRID_DIM_Y, d.MAX_GRID_DIM_Z)):
        if size > limit:
            raise ValueError(f"gridDim.{axis} = {size} is over the GPU's limit of {limit}")


_SIMULATOR_THREAD = re.compile(r"tid=\[(\d+), (\d+), (\d+)\] ctaid=\[(\d+), (\d+), (\d+)\]:\s*")


def _in_course_terms(exc: Exception) -> Exception:
    """numba's simulator names the failing thread tid/ctaid; say threadIdx/blockIdx."""
    message = str(exc)
    match = _SIMULATOR_THREAD.search(message)
    if not match or len(exc.args) != 1:
        return exc
    t, b = match.groups()[:3], match.groups()[3:]
    where = f"thread threadIdx=({', '.join(t)}) of block blockIdx=({', '.join(b)}): "
    try:
        return type(exc)(_SIMULATOR_THREAD.sub(where, message, count=1))
    except Exception:
        return exc


# Host API functions of numba.cuda that need a device, and their simulator twins.
_HOST_API = {
    "to_device": sim_arrays.to_device,
    "device_array": sim_arrays.device_array,
    "device_array_like": sim_arrays.device_array_like,
    "pinned_array": sim_arrays.pinned_array,
    "pinned_array_like": sim_arrays.pinned_array_like,
    "mapped_array": sim_arrays.mapped_array,
    "pinned": sim_arrays.pinned,
    "stream": sim_api.stream,
    "default_stream": sim_api.stream,
    "event": SimulatedEvent,
    "event_elapsed_time": event_elapsed_time,
    "synchronize": sim_api.synchronize,
    "get_current_device": get_current_device,
}

_installed = False
_original_call = CUDADispatcher.__call__
_simulated_device_functions: dict[int, sim_kernel.FakeCUDAKernel] = {}


def _call(self, *args, **kwargs):
    """A device function called while a simulated kernel runs executes on the simulator."""
    if self.targetoptions.get("device") and sim_kernel._get_kernel_context() is not None:
        key = id(self)
        if key not in _simulated_device_functions:
            _simulated_device_functions[key] = sim_kernel.FakeCUDAKernel(self.py_func, device=True)
        return _simulated_device_functions[key](*args)
    return _original_call(self, *args, **kwargs)


class SimulatedLaunch:
    """``kernel[grid, block, stream, shared_bytes]`` on the CPU simulator."""

    def __init__(self, dispatcher: CUDADispatcher, configuration):
        if not isinstance(configuration, tuple) or not 2 <= len(configuration) <= 4:
            raise ValueError(
                "launch a kernel as kernel[blocks_per_grid, threads_per_block](...), "
                f"optionally with a stream and a shared memory size; got kernel[{configuration!r}]"
            )
        self.dispatcher = dispatcher
        self.configuration = configuration

    def __call__(self, *args):
        engine = sim_kernel.FakeCUDAKernel(self.dispatcher.py_func, device=False)
        engine = engine[self.configuration]
        check_launch_limits(engine.grid_dim, engine.block_dim)
        ptx.check_compiles(self.dispatcher, args)
        try:
            engine(*args)
        except Exception as exc:
            translated = _in_course_terms(exc)
            if translated is exc:
                raise
            raise translated from None


def _launch(self, configuration):
    return SimulatedLaunch(self, configuration)


def _forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
    tpb = tpb or 128
    return SimulatedLaunch(self, ((ntasks + tpb - 1) // tpb, tpb, stream, sharedmem))


def install() -> None:
    """Reroute launches and the host API of ``numba.cuda`` to the CPU simulator."""
    global _installed
    if _installed:
        return
    CUDADispatcher.__getitem__ = _launch
    CUDADispatcher.forall = _forall
    CUDADispatcher.__call__ = _call
    for name, replacement in _HOST_API.items():
        setattr(cuda, name, replacement)
    _installed = True
