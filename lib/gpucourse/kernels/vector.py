"""16-byte vector loads and stores of float32: ``ld.v4.f32`` / ``st.v4.f32`` from Numba.

Numba compiles ``a[i], a[i + 1], a[i + 2], a[i + 3]`` to four 4-byte loads: it cannot
know that ``a[i]`` is 16-byte aligned. `load4(a, (i, j, k))` returns the four
float32 from ``a[i, j, k]`` on as a tuple with one 16-byte load (``ld.global.v4.f32``
from a kernel argument, ``ld.shared.v4.f32`` from a shared array); `store4(a, (i, j),
values)` writes four with one store. The caller guarantees what the hardware
requires: the element is 16-byte aligned (the last index a multiple of 4 in rows
whose length is a multiple of 4, a base address aligned to 16 bytes) and the four
are consecutive in memory (a contiguous last dimension). On the GPU a misaligned
vector access faults; the course simulator checks the same and says so.

On the course simulator the functions' ``__simulation__`` (ordinary device code,
four scalar accesses) runs in their place, so the accesses are traced as usual.
"""

from __future__ import annotations

from llvmlite import ir
from numba import types
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.core.extending import intrinsic

WIDTH = 4  # float32 per vector: 16 bytes


def _check(array, index, name: str) -> None:
    if not (isinstance(array, types.Array) and array.dtype == types.float32):
        raise TypingError(f"{name}: the array must be of float32, got {array}")
    if not (isinstance(index, types.BaseTuple) and len(index) == array.ndim
            and all(isinstance(i, types.Integer) for i in index)):
        raise TypingError(f"{name}: the index must be a tuple of {array.ndim} integers, got {index}")
    if array.ndim > 4:
        raise TypingError(f"{name}: arrays of 1 to 4 dimensions, got {array.ndim}")


def _vector_pointer(context, builder, array_type, index_type, array, index):
    """``&array[index]`` as a pointer to 4 float32, aligned as the caller guarantees."""
    data = context.make_array(array_type)(context, builder, array)
    indices = [context.cast(builder, builder.extract_value(index, d), index_type[d], types.intp)
               for d in range(len(index_type))]
    pointer = cgutils.get_item_pointer(context, builder, array_type, data, indices, wraparound=False)
    return builder.bitcast(pointer, ir.VectorType(ir.FloatType(), WIDTH).as_pointer())


@intrinsic
def load4(typingctx, array, index):
    """``(array[..., k], ..., array[..., k + 3])`` for ``index = (..., k)``, one 16-byte load."""
    _check(array, index, "load4")

    def codegen(context, builder, sig, args):
        vector = builder.load(_vector_pointer(context, builder, *sig.args, *args), align=16)
        lanes = [builder.extract_element(vector, ir.Constant(ir.IntType(32), e)) for e in range(WIDTH)]
        return context.make_tuple(builder, sig.return_type, lanes)

    return types.UniTuple(types.float32, WIDTH)(array, index), codegen


@intrinsic
def store4(typingctx, array, index, values):
    """``array[..., k : k + 4] = values`` for ``index = (..., k)``, one 16-byte store."""
    _check(array, index, "store4")
    if not (isinstance(values, types.UniTuple) and values.count == WIDTH and values.dtype == types.float32):
        raise TypingError(f"store4: values must be a tuple of 4 float32, got {values}")

    def codegen(context, builder, sig, args):
        vector = ir.Constant(ir.VectorType(ir.FloatType(), WIDTH), ir.Undefined)
        for e in range(WIDTH):
            vector = builder.insert_element(vector, builder.extract_value(args[2], e), ir.Constant(ir.IntType(32), e))
        builder.store(vector, _vector_pointer(context, builder, sig.args[0], sig.args[1], args[0], args[1]), align=16)
        return context.get_dummy_value()

    return types.void(array, index, values), codegen


@intrinsic
def vector_aligned(typingctx, array):
    """True when every row of ``array`` may be read with `load4`: a data address that is a multiple of 16 bytes,
    a contiguous last dimension and every other stride a multiple of 16 bytes."""
    if not (isinstance(array, types.Array) and array.dtype == types.float32):
        raise TypingError(f"vector_aligned: the array must be of float32, got {array}")

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0])
        i64 = ir.IntType(64)
        ok = builder.icmp_unsigned("==", builder.and_(builder.ptrtoint(data.data, i64), ir.Constant(i64, 15)),
                                   ir.Constant(i64, 0))
        strides = cgutils.unpack_tuple(builder, data.strides, sig.args[0].ndim)
        for d, stride in enumerate(strides):
            last = d == len(strides) - 1
            wanted = builder.icmp_signed("==", stride, ir.Constant(stride.type, 4)) if last else \
                builder.icmp_signed("==", builder.srem(stride, ir.Constant(stride.type, 16)),
                                    ir.Constant(stride.type, 0))
            ok = builder.and_(ok, wanted)
        return ok

    return types.boolean(array), codegen


def _vector_aligned_simulated(array):
    return array.byte_offset % 16 == 0 and (array.ndim == 1 or array.shape[-1] % WIDTH == 0)


_MISALIGNED = ("a 16-byte vector access is misaligned: the array must start 16-byte aligned, and the last index "
              "and the row length must be multiples of 4")


def _load4_simulated(array, index):  # device code for the simulator: literal subscripts, traced as usual
    if not _vector_aligned_simulated(array) or index[-1] % WIDTH != 0:  # only the lanes that get here
        raise ValueError(_MISALIGNED)
    if len(index) == 1:
        (k,) = index
        return array[k], array[k + 1], array[k + 2], array[k + 3]
    if len(index) == 2:
        i, k = index
        return array[i, k], array[i, k + 1], array[i, k + 2], array[i, k + 3]
    if len(index) == 3:
        i, j, k = index
        return array[i, j, k], array[i, j, k + 1], array[i, j, k + 2], array[i, j, k + 3]
    i, j, l, k = index
    return array[i, j, l, k], array[i, j, l, k + 1], array[i, j, l, k + 2], array[i, j, l, k + 3]


def _store4_simulated(array, index, values):
    if not _vector_aligned_simulated(array) or index[-1] % WIDTH != 0:
        raise ValueError(_MISALIGNED)
    x0, x1, x2, x3 = values
    if len(index) == 1:
        (k,) = index
        array[k], array[k + 1], array[k + 2], array[k + 3] = x0, x1, x2, x3
    elif len(index) == 2:
        i, k = index
        array[i, k], array[i, k + 1], array[i, k + 2], array[i, k + 3] = x0, x1, x2, x3
    elif len(index) == 3:
        i, j, k = index
        array[i, j, k], array[i, j, k + 1], array[i, j, k + 2], array[i, j, k + 3] = x0, x1, x2, x3
    else:
        i, j, l, k = index
        array[i, j, l, k], array[i, j, l, k + 1], array[i, j, l, k + 2], array[i, j, l, k + 3] = x0, x1, x2, x3


vector_aligned.__simulation__ = _vector_aligned_simulated
load4.__simulation__ = _load4_simulated
store4.__simulation__ = _store4_simulated

__all__ = ["WIDTH", "load4", "store4", "vector_aligned"]
