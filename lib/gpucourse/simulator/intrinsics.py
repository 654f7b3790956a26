"""``cuda`` as a simulated kernel sees it: indices, memory, barriers, warps, atomics, fp16, bits.

A rewritten kernel runs with its globals copied and ``numba.cuda`` (and anything
imported from it) replaced by `SIM_CUDA`, whose members act on all the lanes the
runtime currently runs.
"""

from __future__ import annotations

import numpy as np
from numba import cuda as numba_cuda
from numba.core import types as numba_types
from numba.cuda import config as numba_config

from . import fused
from .arithmetic import as_dtype, cast, overflows_recorded
from .bits import BitIntrinsics
from .errors import DivergentBarrier, UnsupportedInKernel, WarpFault, fault
from .extrema import extremum
from .geometry import WARP_SIZE
from .memory import SimArray
from .runtime import RUNTIME as rt, atomic_add, atomic_sub
from .transform import SITES

SHARED_MEMORY_PER_BLOCK = 48 * 1024


def to_dtype(dtype) -> np.dtype:
    if isinstance(dtype, numba_types.Type):
        return np.dtype(as_dtype(dtype))
    return np.dtype(dtype)


def _shape(shape) -> tuple[int, ...]:
    return tuple(int(s) for s in shape) if isinstance(shape, (tuple, list)) else (int(shape),)


def _declared_name(default: str) -> str:
    site = SITES[rt.site]
    return site.target or f"{default}@line{site.line}"


def _lanes_of(value) -> np.ndarray:
    """``value`` as one element per lane of the launch."""
    return np.broadcast_to(np.asarray(value), (rt.geometry.lanes,))


# -- memory --------------------------------------------------------------------------------------
class Shared:
    @staticmethod
    def array(shape, dtype, alignment=None):  # alignment changes addresses, never values
        dtype, shape = to_dtype(dtype), _shape(shape)
        dynamic = shape in ((0,), ())
        key = ("dynamic", dtype) if dynamic else ("static", rt.site)
        array = rt.shared.get(key)
        if array is None:
            if dynamic:
                if rt.shared_bytes < dtype.itemsize:
                    raise fault(UnsupportedInKernel, rt.where(rt.site),
                                "a dynamic shared array (size 0) needs the launch to give its size in bytes: "
                                "kernel[blocks, threads, 0, nbytes](...)")
                shape = (rt.shared_bytes // dtype.itemsize,)
            used = sum(a.size * a.dtype.itemsize for k, a in rt.shared.items() if k[0] == "static")
            if used + int(np.prod(shape)) * dtype.itemsize + (0 if dynamic else rt.shared_bytes) > SHARED_MEMORY_PER_BLOCK:
                raise fault(UnsupportedInKernel, rt.where(rt.site),
                            f"shared memory over {SHARED_MEMORY_PER_BLOCK} bytes per block: make the arrays smaller")
            data = np.zeros((rt.geometry.blocks,) + shape, dtype)
            array = SimArray(data, _declared_name("shared"), "shared", shape, initialised=False,
                             block_phases=_block_phases)
            rt.shared[key] = array
        return array


def _block_phases() -> np.ndarray:
    return rt.block_phase


class Local:
    @staticmethod
    def array(shape, dtype, alignment=None):
        dtype, shape = to_dtype(dtype), _shape(shape)
        data = np.zeros((rt.geometry.lanes,) + shape, dtype)
        return SimArray(data, _declared_name("local"), "local", shape, initialised=False)


class Const:
    @staticmethod
    def array_like(ary):
        key = ("const", rt.site)
        array = rt.shared.get(key)
        if array is None:
            data = np.array(ary)
            array = rt.shared[key] = SimArray(data, _declared_name("const"), "const", data.shape, readonly=True)
        return array


# -- barriers --------------------------------------------------------------------------------------
def _barrier(what: str) -> np.ndarray:
    """Check that every live thread of each block that reaches the barrier is here; returns those blocks."""
    g = rt.geometry
    lanes = rt.active_lanes()
    stuck = rt.nobody if rt.awaited_at_syncwarp is rt.nobody else rt.awaited_at_syncwarp & rt.mask
    if stuck is not rt.nobody and stuck.any():
        lane = int(np.flatnonzero(stuck)[0])
        raise fault(WarpFault, rt.where(rt.site),
                    f"{g.thread_name(lane)} reaches {what} while other lanes of its warp wait for it at "
                    f"cuda.syncwarp() ({rt.where(rt.syncwarp_site)}): on a GPU both wait for ever; let every lane "
                    "of the mask reach the cuda.syncwarp()")
    arrived = np.bincount(g.block_of[lanes], minlength=g.blocks)
    exited = np.flatnonzero(rt.exited)
    live = g.threads_per_block - np.bincount(g.block_of[exited], minlength=g.blocks)
    short = (arrived > 0) & (arrived < live)
    if short.any():
        block = int(np.flatnonzero(short)[0])
        in_block = (g.block_of == block) & ~rt.exited
        here = int(np.flatnonzero(in_block & rt.mask)[0])
        missing = int(np.flatnonzero(in_block & ~rt.mask)[0])
        raise fault(
            DivergentBarrier, rt.where(rt.site),
            f"{what} reached by {arrived[block]} of the {live[block]} running threads of block "
            f"{g.block_name(block)}: thread {g.thread_coordinates(here)} waits at it, thread "
            f"{g.thread_coordinates(missing)} never gets there. A barrier inside a branch or loop that not every "
            "thread of the block takes hangs or corrupts memory on a GPU; move it where all threads reach it.",
        )
    reached = arrived > 0
    rt.block_phase = rt.block_phase + reached  # a new array: `Runtime.who` keeps the phases of the old one
    return reached


def syncthreads():
    _barrier("cuda.syncthreads()")


def _block_reduce(predicate, reduce):
    g = rt.geometry
    lanes = rt.active_lanes()
    values = _lanes_of(predicate).astype(bool)[lanes]
    counts = np.bincount(g.block_of[lanes], weights=values, minlength=g.blocks).astype(np.int64)
    return reduce(counts, g)[g.block_of]


def syncthreads_count(predicate):
    _barrier("cuda.syncthreads_count()")
    return _block_reduce(predicate, lambda counts, g: counts).astype(np.int32)


def syncthreads_and(predicate):
    arrived = np.bincount(rt.geometry.block_of[rt.active_lanes()], minlength=rt.geometry.blocks)
    _barrier("cuda.syncthreads_and()")
    return _block_reduce(predicate, lambda counts, g: (counts == arrived)).astype(np.int32)


def syncthreads_or(predicate):
    _barrier("cuda.syncthreads_or()")
    return _block_reduce(predicate, lambda counts, g: counts > 0).astype(np.int32)


# -- warps -----------------------------------------------------------------------------------------
def _check_warp_mask(mask, what: str) -> np.ndarray:
    """The lanes that execute a ``*_sync`` call must be exactly the ones its mask names (``cuda.syncwarp``:
    see `syncwarp`); returns the lanes the mask names."""
    g = rt.geometry
    named = ((_lanes_of(mask).astype(np.int64) >> g.laneid) & 1).astype(bool)
    active = rt.mask
    outside = active & ~named
    if outside.any():
        lane = int(np.flatnonzero(outside)[0])
        raise fault(WarpFault, rt.where(rt.site),
                    f"{g.thread_name(lane)} executes {what}, but the mask leaves out its lane {g.laneid[lane]}")
    warps_here = np.zeros(g.warps, bool)
    warps_here[g.warp_of[rt.active_lanes()]] = True
    absent = named & ~active & warps_here[g.warp_of]
    if what == "cuda.syncwarp()":
        absent &= rt.exited
    if absent.any():
        lane = int(np.flatnonzero(absent)[0])
        state = "has returned" if rt.exited[lane] else "is not executing this call (it took another branch)"
        raise fault(WarpFault, rt.where(rt.site),
                    f"{what} names lane {g.laneid[lane]} in its mask, but {g.thread_name(lane)} {state}; "
                    "every lane in the mask must take part: keep every lane in the call (a lane with nothing to "
                    "combine takes part with its operation's identity: float32(0) for a sum, -math.inf for a max), "
                    "or name only the lanes that take part")
    return named


def _shuffle(what: str, mask, value, source):
    """Each active lane gets ``value`` from lane ``source`` of its warp (its own when out of 0..31)."""
    g = rt.geometry
    _check_warp_mask(mask, what)
    source = _lanes_of(source).astype(np.int64)
    in_warp = (source >= 0) & (source < WARP_SIZE)
    source_lane = g.warp_first_lane + np.where(in_warp, source, g.laneid)
    lanes = rt.active_lanes()
    missing = in_warp[lanes] & (source[lanes] >= g.warp_size_of[lanes])
    inactive = ~missing & ~rt.mask[np.minimum(source_lane[lanes], g.lanes - 1)]
    if missing.any() or inactive.any():
        k = int(np.flatnonzero(missing | inactive)[0])
        lane = int(lanes[k])
        why = (f"the warp has only {g.warp_size_of[lane]} threads" if missing[k]
               else "that lane is not executing this call")
        raise fault(WarpFault, rt.where(rt.site),
                    f"{g.thread_name(lane)} reads lane {source[lane]} of its warp in {what}, but {why} "
                    "(the value would be undefined on a GPU)")
    if (overflows := overflows_recorded()) is not None:
        overflows.exchanged(lanes, source_lane[lanes])
    if not isinstance(value, np.ndarray):
        value = _lanes_of(value)
    return value[source_lane]


def _five_bits(lane_or_offset):
    """PTX's ``shfl.sync`` reads the low 5 bits of its lane or offset (``bval[4:0] = b[4:0]``): a delta of 33
    is 1, of -1 is 31."""
    return _lanes_of(lane_or_offset).astype(np.int64) & (WARP_SIZE - 1)


def shfl_sync(mask, value, src_lane):
    return _shuffle("cuda.shfl_sync()", mask, value, _five_bits(src_lane))


def shfl_up_sync(mask, value, delta):
    return _shuffle("cuda.shfl_up_sync()", mask, value, rt.geometry.laneid - _five_bits(delta))


def shfl_down_sync(mask, value, delta):
    return _shuffle("cuda.shfl_down_sync()", mask, value, rt.geometry.laneid + _five_bits(delta))


def shfl_xor_sync(mask, value, lane_mask):
    return _shuffle("cuda.shfl_xor_sync()", mask, value, rt.geometry.laneid ^ _five_bits(lane_mask))


def _per_warp_bits(bits: np.ndarray) -> np.ndarray:
    g = rt.geometry
    lanes = rt.active_lanes()
    if (overflows := overflows_recorded()) is not None:
        overflows.voted(lanes, g.warp_of)
    weights = (bits[lanes].astype(np.int64) << g.laneid[lanes]).astype(np.float64)
    per_warp = np.bincount(g.warp_of[lanes], weights=weights, minlength=g.warps).astype(np.int64)
    return per_warp[g.warp_of].astype(np.uint32)


def ballot_sync(mask, predicate):
    """The lanes whose predicate holds, one bit each, as numba-cuda types it: int32 (lane 31's bit is the sign)."""
    _check_warp_mask(mask, "cuda.ballot_sync()")
    return _per_warp_bits(_lanes_of(predicate).astype(bool)).view(np.int32)


def activemask():
    return _per_warp_bits(rt.mask)


def lanemask_lt():
    """The bits of the lanes below this one (uint32)."""
    return ((np.uint32(1) << rt.geometry.laneid.astype(np.uint32)) - np.uint32(1)).astype(np.uint32)


def all_sync(mask, predicate):
    """Whether the predicate holds on every lane of the mask, as numba-cuda types it: a boolean (so is
    `any_sync`'s and `eq_sync`'s)."""
    _check_warp_mask(mask, "cuda.all_sync()")
    return _per_warp_bits(_lanes_of(predicate).astype(bool)) == _per_warp_bits(rt.mask)


def any_sync(mask, predicate):
    _check_warp_mask(mask, "cuda.any_sync()")
    return _per_warp_bits(_lanes_of(predicate).astype(bool)) != 0


def eq_sync(mask, predicate):
    _check_warp_mask(mask, "cuda.eq_sync()")
    bits = _per_warp_bits(_lanes_of(predicate).astype(bool))
    return (bits == 0) | (bits == _per_warp_bits(rt.mask))


def syncwarp(mask=0xFFFFFFFF):
    """On a GPU since Volta the lanes at ``cuda.syncwarp()`` wait for the other lanes of the mask to reach a
    ``syncwarp`` of their own or to return; the simulator lets them go on and remembers the lanes they wait
    for (`Runtime.awaited_at_syncwarp`), which must not reach a block barrier first (a hang on a GPU)."""
    g = rt.geometry
    named = _check_warp_mask(mask, "cuda.syncwarp()")
    warps_here = np.zeros(g.warps, bool)
    warps_here[g.warp_of[rt.active_lanes()]] = True
    awaited = (rt.awaited_at_syncwarp & ~rt.mask) | (named & ~rt.mask & ~rt.exited & warps_here[g.warp_of])
    rt.awaited_at_syncwarp = awaited if awaited.any() else rt.nobody  # nobody: barriers skip the check
    if awaited.any():
        rt.syncwarp_site = rt.site
    rt.warp_phase = rt.warp_phase + warps_here  # a new array: `Runtime.who` keeps the phases of the old one


# -- atomics ---------------------------------------------------------------------------------------
def _atomic(operation):
    def apply(ary, idx, val):
        return rt.atomic(operation, ary, idx, val, rt.site)

    return apply


def _replaced(old, value):
    """``value`` in place of ``old``, with ``old``'s shape and dtype."""
    new = np.empty_like(old)
    new[...] = value
    return new


def _atomic_extremum(larger: bool, nan_loses: bool):
    """numba-cuda's atomic max/min (``nan_loses``: nanmax/nanmin): ``val`` replaces ``old`` only where it is
    strictly larger (smaller), so equal values (+0.0 and -0.0) keep ``old``. max/min leave ``old`` as it is
    when either is a NaN; nanmax/nanmin skip a NaN ``val`` and replace a NaN ``old`` (numba-cuda's CAS loops
    in ``cudadrv/nvvm.py``)."""
    def update(old, val):
        beaten = (old < val) if larger else (old > val)
        if nan_loses and np.asarray(old).dtype.kind == "f":
            beaten = (beaten | np.isnan(old)) & ~np.isnan(val)
        return np.where(beaten, val, old).astype(np.asarray(old).dtype)

    return update


class Atomic:
    add = staticmethod(_atomic(atomic_add))
    sub = staticmethod(_atomic(atomic_sub))
    max = staticmethod(_atomic(_atomic_extremum(larger=True, nan_loses=False)))
    min = staticmethod(_atomic(_atomic_extremum(larger=False, nan_loses=False)))
    nanmax = staticmethod(_atomic(_atomic_extremum(larger=True, nan_loses=True)))
    nanmin = staticmethod(_atomic(_atomic_extremum(larger=False, nan_loses=True)))
    exch = staticmethod(_atomic(_replaced))
    and_ = staticmethod(_atomic(np.bitwise_and))
    or_ = staticmethod(_atomic(np.bitwise_or))
    xor = staticmethod(_atomic(np.bitwise_xor))
    inc = staticmethod(_atomic(lambda old, v: np.where(old >= v, 0, old + 1).astype(np.asarray(old).dtype)))
    dec = staticmethod(_atomic(
        lambda old, v: np.where((old == 0) | (old > v), v, old - 1).astype(np.asarray(old).dtype)))

    @staticmethod
    def cas(ary, idx, old, val):
        return rt.atomic(lambda current, expected, new: np.where(current == expected, new, current),
                         ary, idx, val, rt.site, compare=old)

    @staticmethod
    def compare_and_swap(ary, old, val):
        """``cas`` on the first element of a 1-D array."""
        return Atomic.cas(ary, 0, old, val)


setattr(Atomic, "and", Atomic.and_)
setattr(Atomic, "or", Atomic.or_)


# -- half precision --------------------------------------------------------------------------------
def _half(function):
    def apply(*args):
        return np.asarray(function(*[np.asarray(a, np.float16) for a in args])).astype(np.float16)

    return apply


class FP16:
    hadd = staticmethod(_half(np.add))
    hsub = staticmethod(_half(np.subtract))
    hmul = staticmethod(_half(np.multiply))
    hdiv = staticmethod(_half(np.divide))
    hneg = staticmethod(_half(np.negative))
    habs = staticmethod(_half(np.abs))
    hfma = staticmethod(_half(fused.fma))
    hmax = staticmethod(_half(lambda a, b: extremum(a, b, larger=True)))  # __hmax: a NaN loses, -0.0 < +0.0
    hmin = staticmethod(_half(lambda a, b: extremum(a, b, larger=False)))
    hsqrt = staticmethod(_half(np.sqrt))
    hrsqrt = staticmethod(_half(lambda a: 1 / np.sqrt(a)))
    hrcp = staticmethod(_half(lambda a: 1 / a))
    hexp = staticmethod(_half(np.exp))
    hexp2 = staticmethod(_half(np.exp2))
    hexp10 = staticmethod(_half(lambda a: np.power(np.float16(10), a)))
    hlog = staticmethod(_half(np.log))
    hlog2 = staticmethod(_half(np.log2))
    hlog10 = staticmethod(_half(np.log10))
    hsin = staticmethod(_half(np.sin))
    hcos = staticmethod(_half(np.cos))
    hfloor = staticmethod(_half(np.floor))
    hceil = staticmethod(_half(np.ceil))
    htrunc = staticmethod(_half(np.trunc))
    hrint = staticmethod(_half(np.rint))

    @staticmethod
    def _compare(function):
        return staticmethod(lambda a, b: function(np.asarray(a, np.float16), np.asarray(b, np.float16)))


for _name, _function in dict(heq=np.equal, hne=np.not_equal, hge=np.greater_equal, hgt=np.greater,
                             hle=np.less_equal, hlt=np.less).items():
    setattr(FP16, _name, FP16._compare(_function))


# -- vector types ----------------------------------------------------------------------------------
class Vector:
    """A value of a CUDA vector type (``cuda.float32x4(...)``): ``.x``, ``.y``... a value per lane or a number."""

    def __init__(self, vector_type, components: list):
        self.type = vector_type
        self.__dict__.update(zip(vector_type.attr_names, components))


def _vector_constructor(vector_type):
    dtype = as_dtype(vector_type.base_type)

    def construct(*args):
        """Components from numbers and from the components of smaller vectors, in order (``float32x3(v2, z)``)."""
        parts = [c for a in args for c in ((getattr(a, n) for n in a.type.attr_names) if type(a) is Vector else (a,))]
        if len(parts) != vector_type.num_elements:
            raise TypeError(f"{vector_type} takes {vector_type.num_elements} components, given {len(parts)}")
        return Vector(vector_type, [cast(p, dtype) for p in parts])

    return construct


def _vector_constructors() -> dict:
    """{id of ``cuda.float32x4`` and every other vector type object: its constructor} (none under numba's
    simulator, where numba.cuda is numba's and this module is only imported)."""
    if numba_config.ENABLE_CUDASIM:
        return {}
    from numba.cuda import vector_types  # noqa: PLC0415

    return {id(t.user_facing_object): _vector_constructor(t) for t in vector_types.vector_types.values()}


VECTOR_TYPES = _vector_constructors()


# -- the namespace ---------------------------------------------------------------------------------
class _Dim3:
    """``cuda.threadIdx`` and friends: ``.x``, ``.y``, ``.z`` of the current launch."""

    def __init__(self, name: str):
        self.name = name

    x = property(lambda self: getattr(rt.geometry, self.name).x)
    y = property(lambda self: getattr(rt.geometry, self.name).y)
    z = property(lambda self: getattr(rt.geometry, self.name).z)


class SimCuda(BitIntrinsics):
    """What ``cuda`` means inside a simulated kernel."""

    shared = Shared
    local = Local
    const = Const
    atomic = Atomic
    fp16 = FP16
    warpsize = WARP_SIZE

    threadIdx = _Dim3("threadIdx")
    blockIdx = _Dim3("blockIdx")
    blockDim = _Dim3("blockDim")
    gridDim = _Dim3("gridDim")
    laneid = property(lambda self: rt.geometry.laneid)

    syncthreads = staticmethod(syncthreads)
    syncthreads_count = staticmethod(syncthreads_count)
    syncthreads_and = staticmethod(syncthreads_and)
    syncthreads_or = staticmethod(syncthreads_or)
    syncwarp = staticmethod(syncwarp)
    shfl_sync = staticmethod(shfl_sync)
    shfl_up_sync = staticmethod(shfl_up_sync)
    shfl_down_sync = staticmethod(shfl_down_sync)
    shfl_xor_sync = staticmethod(shfl_xor_sync)
    ballot_sync = staticmethod(ballot_sync)
    activemask = staticmethod(activemask)
    lanemask_lt = staticmethod(lanemask_lt)
    all_sync = staticmethod(all_sync)
    any_sync = staticmethod(any_sync)
    eq_sync = staticmethod(eq_sync)
    threadfence = threadfence_block = threadfence_system = staticmethod(lambda: None)

    @staticmethod
    def grid(ndim):
        index = rt.geometry.grid_index
        return index[0] if ndim == 1 else index[:ndim]

    @staticmethod
    def gridsize(ndim):
        g = rt.geometry
        sizes = tuple(b * t for b, t in zip(g.grid, g.block))
        return sizes[0] if ndim == 1 else sizes[:ndim]

    @staticmethod
    def selp(condition, a, b):
        return np.where(condition, a, b) if isinstance(condition, np.ndarray) else (a if condition else b)

    @staticmethod
    def fma(a, b, c):
        return fused.fma(a, b, c)

    @staticmethod
    def cbrt(x):
        return np.cbrt(x)

    def __getattr__(self, name):
        value = getattr(numba_cuda, name, None)
        if isinstance(value, numba_types.Number):  # cuda.float32(x), cuda.bfloat16(x): casts, as numba's types
            return value
        if id(value) in VECTOR_TYPES:  # cuda.float32x4, cuda.float4
            return VECTOR_TYPES[id(value)]
        raise AttributeError(f"cuda.{name} is not supported by the course simulator")


SIM_CUDA = SimCuda()

# Objects a kernel may have imported from numba.cuda, and what replaces them.
_REPLACED_NAMES = [n for n in dir(SimCuda) if not n.startswith("_") and n != "laneid" and hasattr(numba_cuda, n)]


def _replacements() -> dict[int, object]:
    table = {id(numba_cuda): SIM_CUDA, **VECTOR_TYPES}
    for name in _REPLACED_NAMES:
        original = getattr(numba_cuda, name)
        if not isinstance(original, (int, float, str)):
            table[id(original)] = getattr(SIM_CUDA, name)
    return table


REPLACEMENTS = _replacements()


__all__ = ["SIM_CUDA", "REPLACEMENTS", "to_dtype"]
