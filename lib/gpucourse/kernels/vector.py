"""16-byte vector loads and stores of float32 (``ld.v4.f32`` / ``st.v4.f32``) and float16 from Numba.

Numba compiles ``a[i], a[i + 1], a[i + 2], a[i + 3]`` to four 4-byte loads: it cannot
know that ``a[i]`` is 16-byte aligned. `load4(a, (i, j, k))` returns the four
float32 from ``a[i, j, k]`` on as a tuple with one 16-byte load (``ld.global.v4.f32``
from a kernel argument, ``ld.shared.v4.f32`` from a shared array); `store4(a, (i, j),
values)` writes four with one store. The caller guarantees what the hardware
requires: the element is 16-byte aligned (the last index a multiple of 4 in rows
whose length is a multiple of 4, a base address aligned to 16 bytes) and the four
are consecutive in memory (a contiguous last dimension). On the GPU a misaligned
vector access faults; the course simulator checks the same and says so.

For half precision, the word family keeps halves packed two to a uint32 (the first in the low 16 bits,
as in a ``.f16x2`` register) from global memory to the tensor cores, so that no
instruction splits and joins them on the way: `load4w(a, (i, k))` returns the 16
bytes of a float16 array from ``a[i, k]`` on (``k`` a multiple of 8) as four words,
`store4w(t, (i, j), words)` writes four words into a uint32 array (``j`` a multiple
of 4) with one 16-byte store, `pack2h(low, high)` packs two halves into a word
(where a vector load is not allowed), `transpose2h(top, bottom)` turns two words,
the rows of a 2 x 2 matrix of halves, into its columns (``prmt.b32``: one byte
permutation per word), and `ldmatrix4w(t, (i, j))`, called by a whole warp on a
shared uint32 array, loads four 8 x 8 matrices of halves in the layout of an mma's
A fragment (``ldmatrix.sync.aligned.m8n8.x4.shared.b16``: lanes 8m to 8m + 7 give
the rows of matrix m, 16 bytes each; lane l gets word l % 4 of row l // 4 of each).
The simulator gets the words' bits from the halves with NumPy (`halves_to_word`),
and the rows other lanes name for `ldmatrix4w` by warp shuffles.

On the course simulator the functions' ``__simulation__`` (ordinary device code,
scalar accesses) runs in their place, so the accesses are traced as usual.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import cuda, types, uint32
from numba.core import cgutils
from numba.core.errors import TypingError
from numba.core.extending import intrinsic

WIDTH = 4  # float32 per vector: 16 bytes
HALVES = 8  # float16 per vector: 16 bytes
_F32, _I32 = ir.FloatType(), ir.IntType(32)  # float32 lanes; words of two halves


def _check(array, index, name: str, dtype=types.float32, max_ndim: int = 4) -> None:
    if not (isinstance(array, types.Array) and array.dtype == dtype):
        raise TypingError(f"{name}: the array must be of {dtype}, got {array}")
    if not (isinstance(index, types.BaseTuple) and len(index) == array.ndim
            and all(isinstance(i, types.Integer) for i in index)):
        raise TypingError(f"{name}: the index must be a tuple of {array.ndim} integers, got {index}")
    if array.ndim > max_ndim:
        raise TypingError(f"{name}: arrays of 1 to {max_ndim} dimensions, got {array.ndim}")


def _check_values(values, name: str, dtype, count: int) -> None:
    if not (isinstance(values, types.UniTuple) and values.count == count and values.dtype == dtype):
        raise TypingError(f"{name}: values must be a tuple of {count} {dtype}, got {values}")


def _vector_pointer(context, builder, array_type, index_type, array, index, element=_F32, width=WIDTH):
    """``&array[index]`` as a pointer to ``width`` elements, aligned as the caller guarantees."""
    data = context.make_array(array_type)(context, builder, array)
    indices = [context.cast(builder, builder.extract_value(index, d), index_type[d], types.intp)
               for d in range(len(index_type))]
    pointer = cgutils.get_item_pointer(context, builder, array_type, data, indices, wraparound=False)
    return builder.bitcast(pointer, ir.VectorType(element, width).as_pointer())


def _load(element, width: int, align: int):
    """The codegen of a ``width``-element vector load returned as a tuple."""
    def codegen(context, builder, sig, args):
        vector = builder.load(_vector_pointer(context, builder, *sig.args, *args, element, width), align=align)
        lanes = [builder.extract_element(vector, ir.Constant(_I32, e)) for e in range(width)]
        return context.make_tuple(builder, sig.return_type, lanes)
    return codegen


def _store(element, width: int):
    """The codegen of a ``width``-element vector store of a tuple."""
    def codegen(context, builder, sig, args):
        pointer = _vector_pointer(context, builder, sig.args[0], sig.args[1], args[0], args[1], element, width)
        lanes = [builder.extract_value(args[2], e) for e in range(width)]
        vector = ir.Constant(pointer.type.pointee, ir.Undefined)
        for e, lane in enumerate(lanes):
            vector = builder.insert_element(vector, lane, ir.Constant(_I32, e))
        builder.store(vector, pointer, align=16)
        return context.get_dummy_value()
    return codegen


@intrinsic
def load4(typingctx, array, index):
    """``(array[..., k], ..., array[..., k + 3])`` for ``index = (..., k)``, one 16-byte load."""
    _check(array, index, "load4")
    return types.UniTuple(types.float32, WIDTH)(array, index), _load(_F32, WIDTH, 16)


@intrinsic
def store4(typingctx, array, index, values):
    """``array[..., k : k + 4] = values`` for ``index = (..., k)``, one 16-byte store."""
    _check(array, index, "store4")
    _check_values(values, "store4", types.float32, WIDTH)
    return types.void(array, index, values), _store(_F32, WIDTH)


@intrinsic
def load4w(typingctx, array, index):
    """``array[i, k : k + 8]`` of a float16 array (1-D or 2-D) as 4 uint32 words of two halves, one 16-byte load."""
    _check(array, index, "load4w", types.float16, 2)
    return types.UniTuple(types.uint32, WIDTH)(array, index), _load(_I32, WIDTH, 16)


@intrinsic
def store4w(typingctx, array, index, words):
    """``array[..., j : j + 4] = words`` of a uint32 array, one 16-byte store."""
    _check(array, index, "store4w", types.uint32)
    _check_values(words, "store4w", types.uint32, WIDTH)
    return types.void(array, index, words), _store(_I32, WIDTH)


@intrinsic
def pack2h(typingctx, low, high):
    """The uint32 word of two float16: ``low``'s bits in its low 16 bits, ``high``'s in its high 16."""
    if low != types.float16 or high != types.float16:
        raise TypingError(f"pack2h: two float16 values, got {low} and {high}")

    def codegen(context, builder, sig, args):
        low, high = (builder.zext(value, _I32) for value in args)
        return builder.or_(low, builder.shl(high, ir.Constant(_I32, 16)))

    return types.uint32(low, high), codegen


@intrinsic
def transpose2h(typingctx, top, bottom):
    """The words (top's low half, bottom's low half) and (top's high half, bottom's high half) of two uint32 words
    of two halves: a 2 x 2 matrix of halves, its rows in, its columns out; one ``prmt.b32`` per word."""
    if top != types.uint32 or bottom != types.uint32:
        raise TypingError(f"transpose2h: two uint32 words, got {top} and {bottom}")

    def codegen(context, builder, sig, args):
        function = ir.FunctionType(_I32, [_I32, _I32])
        columns = [builder.call(ir.InlineAsm(function, f"prmt.b32 $0, $1, $2, {selector};", "=r,r,r"), args)
                   for selector in ("0x5410", "0x7632")]  # bytes 0, 1 of top and 0, 1 of bottom; then 2, 3 of each
        return context.make_tuple(builder, sig.return_type, columns)

    return types.UniTuple(types.uint32, 2)(top, bottom), codegen


@intrinsic
def ldmatrix4w(typingctx, array, index):
    """Called by all 32 lanes of a warp: lane l gives ``(i, j)``, the start of row l % 8 of matrix l // 8 in a shared
    uint32 array of half pairs (16 bytes: ``j`` a multiple of 4), and gets, of each matrix m, the word
    ``array[i_m, j_m + l % 4]`` where ``(i_m, j_m)`` is what lane 8m + l // 4 gave; one ``ldmatrix`` (sm_75 on)."""
    _check(array, index, "ldmatrix4w", types.uint32, 2)
    if array.ndim != 2:
        raise TypingError(f"ldmatrix4w: a 2-D array of rows, got {array}")

    def codegen(context, builder, sig, args):
        generic = builder.bitcast(_vector_pointer(context, builder, *sig.args, *args, _I32, 1), _I32.as_pointer())
        shared = builder.addrspacecast(generic, _I32.as_pointer(3))  # a 32-bit shared address: LLVM folds offsets
        function = ir.FunctionType(ir.LiteralStructType([_I32] * WIDTH), [_I32])
        asm = "ldmatrix.sync.aligned.m8n8.x4.shared.b16 {$0, $1, $2, $3}, [$4];"
        words = builder.call(ir.InlineAsm(function, asm, "=r,=r,=r,=r,r", side_effect=True),
                             [builder.ptrtoint(shared, _I32)])
        return context.make_tuple(builder, sig.return_type, [builder.extract_value(words, m) for m in range(WIDTH)])

    return types.UniTuple(types.uint32, WIDTH)(array, index), codegen


@intrinsic
def vector_aligned(typingctx, array):
    """True when every row of ``array`` may be read with `load4` (float32) or `load4w` (float16): a data address
    that is a multiple of 16 bytes, a contiguous last dimension and every other stride a multiple of 16 bytes."""
    if not (isinstance(array, types.Array) and array.dtype in (types.float32, types.float16)):
        raise TypingError(f"vector_aligned: the array must be of float32 or float16, got {array}")
    itemsize = 4 if array.dtype == types.float32 else 2

    def codegen(context, builder, sig, args):
        data = context.make_array(sig.args[0])(context, builder, args[0])
        i64 = ir.IntType(64)
        ok = builder.icmp_unsigned("==", builder.and_(builder.ptrtoint(data.data, i64), ir.Constant(i64, 15)),
                                   ir.Constant(i64, 0))
        strides = cgutils.unpack_tuple(builder, data.strides, sig.args[0].ndim)
        for d, stride in enumerate(strides):
            last = d == len(strides) - 1
            wanted = builder.icmp_signed("==", stride, ir.Constant(stride.type, itemsize)) if last else \
                builder.icmp_signed("==", builder.srem(stride, ir.Constant(stride.type, 16)),
                                    ir.Constant(stride.type, 0))
            ok = builder.and_(ok, wanted)
        return ok

    return types.boolean(array), codegen


def _vector_aligned_simulated(array):
    strides = array.byte_strides
    rows = array.ndim == 1 or (strides[-1] == array.dtype.itemsize and strides[-2] % 16 == 0)
    return array.byte_offset % 16 == 0 and rows and (array.ndim < 3 or strides[-3] % 16 == 0) \
        and (array.ndim < 4 or strides[-4] % 16 == 0)


_MISALIGNED = ("a 16-byte vector access is misaligned: the array must start 16-byte aligned, and the last index "
              "and the row length must be multiples of 4")
_MISALIGNED_HALVES = ("a vector access of float16 is misaligned: the array must start 16-byte aligned, its rows "
                      "a multiple of 16 bytes long, and the last index a multiple of 8 (16 bytes) or of 2 (4 bytes)")


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


def halves_to_word(low, high):
    """The uint32 words of float16 lane values ``low`` and ``high``, bit for bit (plain NumPy, which the simulator
    calls as it is from the word family's stand-ins)."""
    low, high = (np.asarray(h, np.float16).view(np.uint16).astype(np.uint32) for h in (low, high))
    return low | (high << np.uint32(16))


def _pack2h_simulated(low, high):
    return halves_to_word(low, high)


def _load4w_simulated(array, index):
    if not _vector_aligned_simulated(array) or index[-1] % HALVES != 0:
        raise ValueError(_MISALIGNED_HALVES)
    if len(index) == 1:
        (k,) = index
        x0, x1, x2, x3, x4, x5, x6, x7 = (array[k], array[k + 1], array[k + 2], array[k + 3],
                                          array[k + 4], array[k + 5], array[k + 6], array[k + 7])
    else:
        i, k = index
        x0, x1, x2, x3, x4, x5, x6, x7 = (array[i, k], array[i, k + 1], array[i, k + 2], array[i, k + 3],
                                          array[i, k + 4], array[i, k + 5], array[i, k + 6], array[i, k + 7])
    return halves_to_word(x0, x1), halves_to_word(x2, x3), halves_to_word(x4, x5), halves_to_word(x6, x7)


def _transpose2h_simulated(top, bottom):
    return (uint32((top & uint32(0xFFFF)) | (bottom << uint32(16))),
            uint32((top >> uint32(16)) | (bottom & uint32(0xFFFF0000))))


def _shared(array) -> bool:
    """Whether a simulated array lives in shared memory (plain Python, which the simulator calls as it is)."""
    return getattr(getattr(array, "base", array), "space", None) == "shared"


_NOT_SHARED = "ldmatrix4w reads shared memory only: pass a cuda.shared.array"
_EVERY_LANE = 0xFFFFFFFF


def _ldmatrix4w_simulated(array, index):  # each lane reads its words from the rows the other lanes name
    if not _shared(array):
        raise ValueError(_NOT_SHARED)
    if not _vector_aligned_simulated(array) or index[-1] % WIDTH != 0:
        raise ValueError(_MISALIGNED)
    i, j = index
    lane = cuda.laneid
    source, word = lane // 4, lane % 4
    i0, j0 = cuda.shfl_sync(_EVERY_LANE, i, source), cuda.shfl_sync(_EVERY_LANE, j, source)
    i1, j1 = cuda.shfl_sync(_EVERY_LANE, i, source + 8), cuda.shfl_sync(_EVERY_LANE, j, source + 8)
    i2, j2 = cuda.shfl_sync(_EVERY_LANE, i, source + 16), cuda.shfl_sync(_EVERY_LANE, j, source + 16)
    i3, j3 = cuda.shfl_sync(_EVERY_LANE, i, source + 24), cuda.shfl_sync(_EVERY_LANE, j, source + 24)
    return array[i0, j0 + word], array[i1, j1 + word], array[i2, j2 + word], array[i3, j3 + word]


vector_aligned.__simulation__ = _vector_aligned_simulated
load4.__simulation__ = _load4_simulated
store4.__simulation__ = _store4_simulated
load4w.__simulation__ = _load4w_simulated
store4w.__simulation__ = _store4_simulated  # the same scalar writes, of words
pack2h.__simulation__ = _pack2h_simulated
transpose2h.__simulation__ = _transpose2h_simulated
ldmatrix4w.__simulation__ = _ldmatrix4w_simulated

__all__ = ["WIDTH", "HALVES", "load4", "store4", "load4w", "store4w", "pack2h",
           "transpose2h", "ldmatrix4w", "halves_to_word", "vector_aligned"]
