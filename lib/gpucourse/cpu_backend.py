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

import time

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
        ptx.check_compiles(self.dispatcher, args)
        engine = sim_kernel.FakeCUDAKernel(self.dispatcher.py_func, device=False)
        engine[self.configuration](*args)


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
