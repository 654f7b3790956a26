"""Run ``numba.cuda`` kernels on the CPU when there is no GPU.

numba stays in its normal (GPU) mode, so ``@cuda.jit`` gives real dispatchers
that can still be compiled to PTX. `install` reroutes what needs a device:

- a launch ``kernel[grid, block](...)`` (with optional stream and dynamic
  shared memory size) runs on the course simulator (`gpucourse.simulator`),
  after checking that the kernel compiles for a real GPU (`gpucourse.run.ptx`);
- the host API: ``cuda.to_device``, ``device_array(_like)`` and mapped arrays
  give simulator arrays backed by host memory (allocations remember what was
  written: `gpucourse.run.device_memory`); device and context queries
  (``cuda.get_current_device``, ``current_context``, ``gpus``, and numba's own
  ``devices.get_context``), streams and events answer as a GPU of compute
  capability 7.5 (`gpucourse.run.simulated_device`), and what they do not
  cover raises a message naming it;
- ``inspect_asm`` gives the PTX for the simulated device of the signatures a
  kernel was declared or launched with, and ``overloads`` has one entry for each,
  whose attributes (a compiled kernel's, on a GPU) raise the message;
- a kernel's extensions prepare its arguments as numba does at a launch (one
  may pass them as ``cuda.In``, never copied back);
- signatures given to ``@cuda.jit("void(float32[:])")``, which numba compiles
  at once for the current GPU, are kept for the launch instead (its PTX check
  compiles them; arguments are converted to the signature numba would pick),
  and device functions with signatures compile for the simulated device;
- a kernel without source code (built by ``exec`` from a string), which the
  course simulator cannot rewrite, runs on numba's simulator, with a warning.

On a GPU machine `simulated` does the launch part for a while, copying device
arrays to the host and back; `trace` records the launches inside it.
"""

from __future__ import annotations

import contextlib
import inspect
import warnings
import weakref

import numpy as np
from numba import cuda
from numba.cuda import dispatcher as numba_dispatcher
from numba.cuda.args import ArgHint, In
from numba.cuda.cudadrv import devicearray as numba_arrays, devices as numba_devices
from numba.core import sigutils, types
from numba.cuda.dispatcher import CUDADispatcher, normalize_kernel_dimensions
from numba.cuda.simulator import api as sim_api
from numba.cuda.simulator.cudadrv import devicearray as sim_arrays
from numba.cuda.simulator.kernel import FakeCUDAKernel

from .. import simulator
from ..simulator.arithmetic import as_dtype, cast
from . import assembler, device_memory, ptx, simulated_device
from .linked_code import UnlinkableCode

def auto_device(obj, stream=0, copy=True, user_explicit=False):
    """``cuda.devicearray.auto_device`` on the simulator: a simulator array, refusing what a GPU refuses."""
    if not isinstance(obj, (np.void, sim_arrays.FakeCUDAArray)):
        numba_arrays.sentry_contiguous(np.asarray(obj))
    return sim_arrays.auto_device(obj, stream=stream, copy=copy)


def check_launch_limits(grid: tuple, block: tuple) -> None:
    """Refuse, as a GPU would, a launch outside the hardware's limits."""
    d = simulated_device.DEVICE
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


def check_launch_bounds(dispatcher: CUDADispatcher, block: tuple) -> None:
    """Refuse, as a GPU would, more threads per block than the kernel's ``launch_bounds`` promised."""
    bounds = dispatcher.targetoptions.get("launch_bounds")
    if not bounds:
        return
    most = bounds if isinstance(bounds, int) else bounds[0]
    threads = block[0] * block[1] * block[2]
    if threads > most:
        raise ValueError(
            f"{dispatcher.py_func.__name__} was compiled with launch_bounds={bounds!r}: at most {most} threads per "
            f"block, and this launch has {threads}. A GPU refuses it (CUDA_ERROR_INVALID_VALUE): launch blocks of "
            f"at most {most} threads, or raise the bound"
        )


# Registers per thread of each kernel, by (argument types, architecture): assembled once, not at every launch.
_registers: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def check_registers(dispatcher: CUDADispatcher, argtypes: tuple, block: tuple) -> None:
    """Refuse, as a GPU would, a block whose threads need more registers than a block may have (the assembler's
    count for the GPU launches are checked for). A block of up to 256 threads always fits: 255 x 256 <= 65,536."""
    threads = block[0] * block[1] * block[2]
    if threads <= 256 or ptx.mode() == "off" or ptx.toolchain_problem() or assembler.resources_problem():
        return
    architecture = assembler.checked_architecture()
    known = _registers.setdefault(dispatcher, {})
    if (argtypes, architecture) not in known:
        try:
            known[argtypes, architecture] = assembler.assembled(dispatcher, argtypes, architecture).registers
        except UnlinkableCode:  # code numba-cuda links that the course cannot compile here: no count to check
            known[argtypes, architecture] = None
    registers = known[argtypes, architecture]
    if registers is None:
        return
    needed = assembler.registers_per_block(registers, threads)
    limit = simulated_device.DEVICE.MAX_REGISTERS_PER_BLOCK
    if needed > limit:
        raise ValueError(
            f"{dispatcher.py_func.__name__} uses {registers} registers per thread ({architecture}): a block of "
            f"{threads} threads takes {needed:,}, more than the {limit:,} a block may have. A GPU refuses this launch "
            f"(CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES): launch fewer threads per block, or let the assembler fit them "
            f"with @cuda.jit(launch_bounds=({threads}, 1)) (it may spill)"
        )


# Host API of numba.cuda that needs a device, and its simulator twins.
_HOST_API = {
    **simulated_device.HOST_API,
    "to_device": device_memory.to_device,
    "device_array": device_memory.device_array,
    "device_array_like": device_memory.device_array_like,
    "pinned_array": sim_arrays.pinned_array,
    "pinned_array_like": sim_arrays.pinned_array_like,
    "mapped_array": device_memory.mapped_array,
    "mapped_array_like": device_memory.device_array_like,
    "managed_array": sim_arrays.managed_array,
    "pinned": sim_arrays.pinned,
}

_installed = False
_original_launch = CUDADispatcher.__getitem__
_original_compile_device = CUDADispatcher.compile_device

# Argument types of the signatures a kernel was declared with, kept by `_declare` until a launch.
_declared: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# Argument types of each kernel's launches, for `_inspect_asm`.
_launched: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
# The lists of `recording_launches` open now: each launch appends (Python function, argument types) to every one.
_recorders: list[list] = []


def _declare(dispatcher: CUDADispatcher, signature):
    """``CUDADispatcher.compile`` on the CPU: keep a declared signature for the launch instead of compiling it."""
    argtypes, _ = sigutils.normalize_signature(signature)
    _declared.setdefault(dispatcher, []).append(tuple(argtypes))
    _keep_overload(dispatcher, tuple(argtypes))


def _keep_overload(dispatcher: CUDADispatcher, argtypes: tuple) -> None:
    """An entry in ``overloads`` for a signature, where numba would keep the kernel compiled for it."""
    dispatcher.overloads.setdefault(argtypes, simulated_device.SimulatedOverload(types.void(*argtypes)))


def _disable_compile(dispatcher: CUDADispatcher, value: bool = True):
    """``disable_compile`` without numba's assertion that some signature is compiled: on the CPU they are declared."""
    dispatcher._can_compile = not value


def _inspect_asm(dispatcher: CUDADispatcher, signature=None):
    """``inspect_asm`` on the CPU: the PTX for the simulated device of one signature, or (without one) of every
    signature the kernel was declared with or launched with, by signature."""
    if signature is not None:
        return ptx.compile_for_gpu(dispatcher, tuple(getattr(signature, "args", signature)))
    signatures = dict.fromkeys([*_declared.get(dispatcher, []), *_launched.get(dispatcher, [])])
    return {argtypes: ptx.compile_for_gpu(dispatcher, argtypes) for argtypes in signatures}


def _compile_device(dispatcher: CUDADispatcher, args, return_type=None):
    """``CUDADispatcher.compile_device`` for the simulated device (numba asks the current GPU for its compute capability).

    Without NVVM, which numba's code generation needs, the signature is left uncompiled: the simulator then
    calls the device function with the types it is given (and there is no PTX check either).
    """
    if ptx.toolchain_problem():
        return None
    with ptx.target_device():
        return _original_compile_device(dispatcher, args, return_type)


def _declared_arguments(dispatcher: CUDADispatcher, args) -> tuple[list, tuple | None]:
    """The arguments converted to the declared signature numba would pick, and its types (None: none declared).

    Declared signatures are those `_declare` kept, or on a GPU those numba compiled when the kernel was defined.
    """
    declared = _declared.get(dispatcher) or ([] if dispatcher._can_compile else list(dispatcher.overloads))
    if not declared:
        return list(args), None
    actual = tuple(ptx.argument_type(a) for a in args)
    cases = [types.void(*argtypes) for argtypes in declared]
    chosen = dispatcher.typingctx.resolve_overload(dispatcher.py_func, cases, actual, {})
    if chosen is None and dispatcher._specialized:
        args, chosen = _reinterpreted(args, actual, cases[0])
    if chosen is None:
        signatures = "; ".join(f"({', '.join(map(str, argtypes))})" for argtypes in declared)
        raise TypeError(
            f"No matching definition for argument type(s) {', '.join(map(str, actual))}: kernel "
            f"`{dispatcher.py_func.__name__}` is declared for arguments {signatures}; "
            f"it cannot be launched with ({', '.join(map(str, actual))})"
        )
    for name, a, t in zip(inspect.signature(dispatcher.py_func).parameters, args, chosen.args):
        if isinstance(t, types.Integer) and isinstance(a, (float, np.floating, np.bool_)):  # ctypes' c_int32(2.0)
            raise TypeError(f"kernel `{dispatcher.py_func.__name__}` declares {name} as {t}, and a GPU launch refuses "
                            f"the {type(a).__name__} {a!r} for it (numba passes it to ctypes.c_{t}: 'int expected "
                            f"instead of {type(a).__name__}'): pass a whole number, e.g. int({name})")
    converted = [cast(a, as_dtype(t)) if isinstance(t, (types.Number, types.Boolean)) else a
                 for a, t in zip(args, chosen.args)]
    return converted, tuple(chosen.args)


def _reinterpreted(args, actual: tuple, declared):
    """A kernel declared with one signature (``cuda.jit("void(int32[:])")``) takes its arguments unchecked on
    a GPU: a uint32 array is read as int32. The arguments so read, and the signature, where only the
    signedness of integers differs; else (args, None): the launch is refused, as a float array read as integers
    (what a GPU would do) is almost always a mistake."""
    viewed = []
    for value, have, want in zip(args, actual, declared.args):
        if isinstance(have, types.Array) and isinstance(want, types.Array) and have != want:
            dtype = as_dtype(want.dtype)
            host = getattr(value, "_ary", value)
            integers = host.dtype.kind in "iu" and dtype.kind in "iu"
            if have.ndim != want.ndim or host.dtype.itemsize != dtype.itemsize or not integers:
                return args, None
            value = host.view(dtype) if host is value else sim_arrays.FakeCUDAArray(host.view(dtype))
        viewed.append(value)
    return viewed, declared


def _configuration(configuration) -> tuple:
    """(grid, block, stream, shared_bytes) of ``kernel[...]``, or a message saying how to launch."""
    if not isinstance(configuration, tuple) or not 2 <= len(configuration) <= 4:
        raise ValueError(
            "launch a kernel as kernel[blocks_per_grid, threads_per_block](...), "
            f"optionally with a stream and a shared memory size; got kernel[{configuration!r}]"
        )
    grid, block, stream, shared_bytes = configuration + (0, 0)[: 4 - len(configuration)]
    if stream and not isinstance(stream, simulated_device.SimulatedStream):  # numba's _to_core_stream on a GPU
        raise TypeError(f"Expected a Stream object, ExperimentalStream, GraphBuilder, or 0, got "
                        f"{type(stream).__name__}: launch on a numba stream (cuda.stream(), or "
                        "cuda.external_stream(pointer) for another library's: torch's .cuda_stream, CuPy's .ptr), or 0")
    return grid, block, stream, shared_bytes


def _without_hints(dispatcher: CUDADispatcher, arguments) -> list:
    """Arguments as the kernel sees them: the kernel's extensions applied to each (as numba does at a launch,
    where one may wrap it in ``cuda.In``), then ``cuda.In``/``Out``/``InOut`` unwrapped (``In`` is never
    copied back)."""
    if dispatcher.extensions:
        arguments = list(arguments)
        for extension in dispatcher.extensions:
            arguments = [extension.prepare_args(ptx.argument_type(a), a, stream=0, retr=[])[1] for a in arguments]
    return [np.array(a.value) if isinstance(a, In) else a.value if isinstance(a, ArgHint) else a for a in arguments]


def _on_the_host(arguments):
    """Arguments the simulator can run on, and a function that copies results back to GPU arrays."""
    copies, host = [], []
    for value in arguments:
        if hasattr(value, "__cuda_array_interface__") and not hasattr(value, "_ary"):
            device = cuda.as_cuda_array(value)
            value = device.copy_to_host()
            copies.append((device, value))
        host.append(value)

    def copy_back():
        for device, value in copies:
            device.copy_to_device(value)

    return host, copy_back


class SimulatedLaunch:
    """``kernel[grid, block, stream, shared_bytes]`` on the course simulator."""

    def __init__(self, dispatcher: CUDADispatcher, configuration):
        self.dispatcher = dispatcher
        self.grid, self.block, self.stream, self.shared_bytes = _configuration(configuration)

    def __call__(self, *args):
        grid, block = simulator.dim3(self.grid), simulator.dim3(self.block)
        check_launch_limits(grid, block)
        check_launch_bounds(self.dispatcher, block)
        device_memory.count_launch_copies(args)
        waits = _copies_back(args)
        args, declared = _declared_arguments(self.dispatcher, _without_hints(self.dispatcher, args))
        variable_types = ptx.check_compiles(self.dispatcher, args, declared)
        launched = _launched.setdefault(self.dispatcher, [])
        argtypes = declared or tuple(ptx.argument_type(a) for a in args)
        check_registers(self.dispatcher, argtypes, block)
        for recorded in _recorders:
            recorded.append((self.dispatcher.py_func, argtypes))
        if argtypes not in launched:
            launched.append(argtypes)
            if _installed:  # with `simulated` on a GPU machine, the overloads are numba's compiled kernels
                _keep_overload(self.dispatcher, argtypes)
        host, copy_back = _on_the_host(args)
        if simulator.has_source(self.dispatcher.py_func):
            simulator.run(self.dispatcher.py_func, grid, block, host, self.shared_bytes, variable_types,
                          debug=bool(self.dispatcher.targetoptions.get("debug")),
                          inline_types=ptx.inline_variable_types)
        else:
            _on_numbas_simulator(self.dispatcher.py_func, grid, block, host, self.shared_bytes)
        copy_back()
        if waits:
            simulated_device.synchronize()
        else:
            simulated_device.launched_asynchronously()


def _copies_back(arguments) -> bool:
    """Whether numba copies an argument back to the host after the launch (a NumPy array, ``cuda.Out``,
    ``cuda.InOut``), which waits for the kernel to end: such a launch is synchronous on a GPU."""
    return any(isinstance(a, np.ndarray) or (isinstance(a, ArgHint) and not isinstance(a, In)) for a in arguments)


def _on_numbas_simulator(py_func, grid, block, host, shared_bytes) -> None:
    """A kernel without source (built by ``exec`` from a string) on numba's simulator, which runs the Python
    function thread by thread: the course simulator rewrites source, and says what this one misses."""
    warnings.warn(
        f"kernel `{py_func.__name__}` has no source code (built by exec from a string?): it runs on numba's "
        "simulator instead of the course's, without its checks (bounds, races, barriers, uninitialised reads) "
        "and with NumPy's arithmetic types rather than numba's; define it in a notebook cell or a .py file",
        stacklevel=3)
    FakeCUDAKernel(py_func, device=False, fastmath=False)[grid, block, 0, shared_bytes](*host)


def _sizes(dimension) -> tuple:
    """A grid's or a block's sizes: ``dimension`` itself (a tuple or list), or the one size it is."""
    return tuple(dimension) if isinstance(dimension, (tuple, list)) else (dimension,)


def check_python_integers(dimensions) -> None:
    """Refuse, as a GPU does, a grid or block size that is a NumPy integer: numba-cuda hands it to cuda.core's
    LaunchConfig, which takes Python ints only."""
    for name, dimension in zip(("grid", "block"), dimensions):
        if any(isinstance(size, np.integer) for size in _sizes(dimension)):
            raise ValueError(
                f"the {name} size {dimension!r} holds a NumPy integer, which a GPU refuses (cuda.core: 'LaunchConfig."
                f"{name} must be an int, or a tuple with up to 3 ints'): convert it with int(), e.g. "
                "kernel[int(blocks), threads]")


def _launch(self, configuration):
    dimensions = configuration[:2] if type(configuration) is tuple else ()
    if len(dimensions) == 2:
        try:  # numba's rule, so the launches a GPU refuses (a float or a string dimension, more than 3) fail here too
            normalize_kernel_dimensions(*dimensions)
        except TypeError as error:
            if not any(isinstance(v, (float, np.floating)) for d in dimensions for v in _sizes(d)):
                raise
            raise TypeError(f"{error}: compute sizes with integer division, such as blocks = (n + threads - 1) // "
                            "threads (n / threads is a float even when it divides)") from None
        check_python_integers(dimensions)
    return SimulatedLaunch(self, configuration)


def _forall(self, ntasks, tpb=0, stream=0, sharedmem=0):
    if ntasks < 0:
        raise ValueError(f"Can't create ForAll with negative task count: {ntasks}")
    if ntasks == 0:  # nothing to launch, as in numba
        return lambda *args: None
    tpb = tpb or 128
    grid = (ntasks + tpb - 1) // tpb
    check_python_integers((grid, tpb))
    return SimulatedLaunch(self, (grid, tpb, stream, sharedmem))


def install() -> None:
    """Reroute launches and the host API of ``numba.cuda`` to the CPU simulator."""
    global _installed
    if _installed:
        return
    CUDADispatcher.__getitem__ = _launch
    CUDADispatcher.forall = _forall
    CUDADispatcher.compile = _declare
    CUDADispatcher.disable_compile = _disable_compile
    CUDADispatcher.compile_device = _compile_device
    CUDADispatcher.inspect_asm = _inspect_asm
    for name, replacement in _HOST_API.items():
        setattr(cuda, name, replacement)
    numba_dispatcher.get_current_device = simulated_device.get_current_device  # `specialize` asks for the CC
    numba_devices.get_context = simulated_device.get_context  # numba's helpers (cc_X_or_above...) ask for it
    numba_arrays.auto_device = auto_device
    _installed = True


@contextlib.contextmanager
def simulated():
    """``with simulated():`` runs the launches inside on the course simulator, also on a GPU machine."""
    if _installed:
        yield
        return
    CUDADispatcher.__getitem__ = _launch
    try:
        yield
    finally:
        CUDADispatcher.__getitem__ = _original_launch


@contextlib.contextmanager
def recording_launches():
    """``with recording_launches() as launches:`` lists the launches made inside it on the simulator, each as (the
    kernel's Python function, its argument types)."""
    launches: list = []
    _recorders.append(launches)
    try:
        yield launches
    finally:
        _recorders.remove(launches)


@contextlib.contextmanager
def trace(lines: bool = False):
    """``with trace() as t:`` records every launch inside on the course simulator (also on a GPU machine);
    ``lines``: also which lines of each kernel ran, for the cost model (`LaunchTrace.lines_not_run`)."""
    with simulated(), simulator.recording(lines) as recorded:
        yield recorded
