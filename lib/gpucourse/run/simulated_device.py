"""The device, context, streams and events ``numba.cuda`` hands out on the CPU simulator.

They answer the queries tests and students make of a GPU (``cuda.get_current_device()``,
``cuda.current_context()``, ``cuda.gpus``, ``stream.synchronize()``, ``event.elapsed_time``...)
as a GPU of compute capability 7.5 would; an attribute they do not cover raises `NotOnTheSimulator`,
which names it, instead of an AttributeError from inside numba.
"""

from __future__ import annotations

import contextlib
import os
import time
from collections import namedtuple

MemoryInfo = namedtuple("MemoryInfo", "free,total")
COMPUTE_CAPABILITY = (7, 5)  # the limits below hold on every GPU since


class NotOnTheSimulator(NotImplementedError):
    """Host API of numba.cuda that the CPU simulator does not provide."""


def not_simulated(what: str) -> NotOnTheSimulator:
    return NotOnTheSimulator(
        f"{what} is not available on the course's CPU simulator (no GPU here); run this part on a GPU, "
        "or use the host API the simulator covers: devices and contexts, streams, events, to_device, "
        "device_array(_like), pinned and mapped arrays, constant memory"
    )


class _Covered:
    """Raises `not_simulated` for an attribute the class does not define."""

    _what = "this"

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise not_simulated(f"`{self._what}.{name}`")


class SimulatedDevice(_Covered):
    """``cuda.get_current_device()``: the limits of every GPU since compute capability 7.5."""

    _what = "cuda.get_current_device()"
    id = 0
    name = "CPU simulator"
    uuid = "GPU-00000000-0000-0000-0000-000000000000"
    compute_capability = COMPUTE_CAPABILITY
    supports_float16 = True
    supports_bfloat16 = False  # numba asks for compute capability 8.0
    supports_fp8 = False
    MAX_THREADS_PER_BLOCK = 1024
    MAX_BLOCK_DIM_X = 1024
    MAX_BLOCK_DIM_Y = 1024
    MAX_BLOCK_DIM_Z = 64
    MAX_GRID_DIM_X = 2**31 - 1
    MAX_GRID_DIM_Y = 65535
    MAX_GRID_DIM_Z = 65535
    MAX_SHARED_MEMORY_PER_BLOCK = 48 * 1024
    MAX_REGISTERS_PER_BLOCK = 65536
    WARP_SIZE = 32
    MULTIPROCESSOR_COUNT = 1
    TOTAL_CONSTANT_MEMORY = 64 * 1024

    def get_device_identity(self) -> dict:
        return {"pci_domain_id": 0, "pci_bus_id": 0, "pci_device_id": 0}

    def reset(self) -> None:
        pass

    def __repr__(self):
        return "<CUDA device 0 'CPU simulator'>"


DEVICE = SimulatedDevice()


class LaunchesInFlight:
    """Launches a GPU could still be running: a launch returns before its kernel ends, so ``launched`` counts those
    that copy nothing back (numba copies a NumPy argument back at once, which waits for the kernel), and
    ``finished`` how many of them a synchronisation has waited for; the simulator has run them all already."""

    launched = 0
    finished = 0


def launched_asynchronously() -> None:
    LaunchesInFlight.launched += 1


def synchronize() -> None:
    """``cuda.synchronize()``, and what else waits for every launch: a stream's or a context's ``synchronize()``,
    a stream's ``query()`` that answers True, a copy to the host that returns once it is done."""
    LaunchesInFlight.finished = LaunchesInFlight.launched


def answer_once(asked, busy: bool, wait) -> bool:
    """A stream's or an event's ``query()``: False once while ``busy`` (launches in flight: a GPU answers so while
    its kernels run), then True after ``wait()``. A loop ``while not s.query()`` ends; a single False that is
    ignored does not make the work done. ``asked`` keeps, in ``_asked``, whether the last answer was False."""
    if busy and not asked._asked:
        asked._asked = True
        return False
    asked._asked = False
    wait()
    return True


class SimulatedStream(_Covered):
    """A stream: the simulator runs every launch and copy at once; waiting on a stream (its ``synchronize``, a
    ``query`` that answers True, leaving ``auto_synchronize``) lets events recorded before it be timed."""

    _what = "cuda.stream()"
    handle = None

    @contextlib.contextmanager
    def auto_synchronize(self):
        yield self
        synchronize()

    def synchronize(self) -> None:
        synchronize()

    _asked = False  # whether the last query answered False

    def query(self) -> bool:
        """Whether the stream's work is done (`answer_once`)."""
        return answer_once(self, LaunchesInFlight.launched > LaunchesInFlight.finished, synchronize)

    def add_callback(self, callback, arg=None) -> None:
        callback(self, None, arg)

    def __repr__(self):
        return "<CUDA stream on the CPU simulator>"


class SimulatedOverload(_Covered):
    """``kernel.overloads[signature]``, one per signature a kernel was declared or launched with, as numba keeps
    them: on a GPU the compiled kernel (its registers, occupancy, cooperative grid size), which the simulator
    does not have. What numba itself reads of one (when it types calls, or frees the kernel) is here."""

    _what = "kernel.overloads[signature]"
    entry_point = None  # nothing compiled for numba to release
    objectmode = False

    def __init__(self, signature):
        self.signature = signature

    def __repr__(self):
        return "<kernel overload on the CPU simulator (not compiled for a GPU)>"


class EventNotReady(RuntimeError):
    """``elapsed_time`` of an event a GPU may not have reached yet (CUDA_ERROR_NOT_READY)."""


class SimulatedEvent(_Covered):
    """A CUDA event on the simulator: it times the CPU, so its milliseconds say nothing about a GPU. It is reached
    once every launch before its ``record()`` has finished (`LaunchesInFlight`): the time between two events is
    there to read only after a synchronisation, as on a GPU."""

    _what = "cuda.event()"
    _timing_noted = False

    def __init__(self, timing: bool = True):
        self.timing = timing
        self.time = None
        self.after = 0  # the launches recorded before it

    def record(self, stream=0):
        self.time = time.perf_counter()
        self.after = LaunchesInFlight.launched

    def wait(self, stream=0):
        pass

    def synchronize(self):
        LaunchesInFlight.finished = max(LaunchesInFlight.finished, self.after)

    _asked = False  # whether the last query answered False

    def query(self) -> bool:
        """Whether the event is reached (`answer_once`)."""
        return answer_once(self, not self.reached, self.synchronize)

    @property
    def reached(self) -> bool:
        return self.after <= LaunchesInFlight.finished

    def elapsed_time(self, later: "SimulatedEvent") -> float:
        """Milliseconds of simulation between the two records (CPU time, not GPU time)."""
        if not (self.timing and later.timing):  # on a GPU: CUDA_ERROR_INVALID_HANDLE
            raise RuntimeError("an event made with cuda.event(timing=False) cannot be timed (a GPU answers "
                               "CUDA_ERROR_INVALID_HANDLE): make both with cuda.event()")
        if self.time is None or later.time is None:
            raise RuntimeError("record() both events before asking for the time between them")
        if not (self.reached and later.reached):
            raise EventNotReady(
                "the kernels launched before the later event's record() may still be running: a launch returns "
                "before its kernel ends, and a GPU answers CUDA_ERROR_NOT_READY here. Wait for that event first, "
                "e.g. end.record(); end.synchronize(); then start.elapsed_time(end)")
        if not SimulatedEvent._timing_noted:
            print("Note: these event times measure the CPU simulator, not a GPU; time kernels on a GPU.")
            SimulatedEvent._timing_noted = True
        return (later.time - self.time) * 1000.0


def event_elapsed_time(start: SimulatedEvent, stop: SimulatedEvent) -> float:
    return start.elapsed_time(stop)


def _host_memory() -> int:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return 16 * 2**30


class SimulatedContext(_Covered):
    """``cuda.current_context()``: the one context of the simulated device."""

    _what = "cuda.current_context()"
    id = 0
    device = DEVICE
    compute_capability = COMPUTE_CAPABILITY

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def get_memory_info(self) -> MemoryInfo:
        total = _host_memory()
        return MemoryInfo(total, total)

    def reset(self) -> None:
        pass

    def synchronize(self) -> None:
        synchronize()

    def create_stream(self) -> SimulatedStream:
        return SimulatedStream()

    get_default_stream = get_legacy_default_stream = get_per_thread_default_stream = create_stream

    def create_event(self, timing: bool = True) -> SimulatedEvent:
        return SimulatedEvent(timing)

    @contextlib.contextmanager
    def defer_cleanup(self):
        yield

    def __repr__(self):
        return "<Managed Device 0 (CPU simulator)>"


CONTEXT = SimulatedContext()


class SimulatedDeviceList:
    """``cuda.gpus``: one device, the simulator."""

    def __getitem__(self, number):
        return (CONTEXT,)[number]

    def __len__(self):
        return 1

    def __iter__(self):
        return iter((CONTEXT,))

    @property
    def current(self) -> SimulatedContext:
        return CONTEXT

    def __repr__(self):
        return "<1 simulated CUDA device>"


GPUS = SimulatedDeviceList()


def get_context(devnum: int = 0) -> SimulatedContext:
    """``numba.cuda.cudadrv.devices.get_context``, which numba's own helpers (and tests) call."""
    return GPUS[devnum]


def get_current_device() -> SimulatedDevice:
    return DEVICE


def select_device(number: int = 0) -> SimulatedDevice:
    if number != 0:
        raise ValueError(f"the CPU simulator has one device, number 0; got cuda.select_device({number})")
    return DEVICE


def close() -> None:
    pass


def list_devices() -> SimulatedDeviceList:
    return GPUS


def detect() -> bool:
    print("Found 1 CUDA devices")
    print(f"id 0    {DEVICE.name:>20} {'[SUPPORTED]':>40}")
    print(f"{'Compute Capability':>40}: {DEVICE.compute_capability[0]}.{DEVICE.compute_capability[1]}")
    print("Summary:\n\t1/1 devices are supported")
    return True


def stream() -> SimulatedStream:
    return SimulatedStream()


def defer_cleanup():
    return CONTEXT.defer_cleanup()


def is_float16_supported() -> bool:
    return DEVICE.supports_float16


def is_bfloat16_supported() -> bool:
    return DEVICE.supports_bfloat16


def unsupported(what: str):
    """A stand-in for host API the simulator does not cover: calling it raises `not_simulated`."""

    def refuse(*args, **kwargs):
        raise not_simulated(f"`cuda.{what}`")

    refuse.__name__ = what
    return refuse


# Host API of numba.cuda on the simulator, by name.
HOST_API = {
    "stream": stream, "default_stream": stream, "legacy_default_stream": stream,
    "per_thread_default_stream": stream, "event": SimulatedEvent, "event_elapsed_time": event_elapsed_time,
    "synchronize": synchronize, "get_current_device": get_current_device, "current_context": get_context,
    "gpus": GPUS, "select_device": select_device, "close": close, "list_devices": list_devices, "detect": detect,
    "defer_cleanup": defer_cleanup, "is_float16_supported": is_float16_supported,
    "is_bfloat16_supported": is_bfloat16_supported,
    **{name: unsupported(name) for name in ("external_stream", "open_ipc_array", "mapped", "profiling")},
}
