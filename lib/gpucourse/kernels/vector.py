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
the rows of matrix m, 16 bytes each; lane l gets word l % 4 of row l // 4 of each),
and `ldmatrix4w_trans(t, (i, j))` the same rows transposed (``.trans``: lane l gets
word l % 4 of row l // 4 of each matrix's transpose), the layout of an mma's B
fragment read from plain rows of B. The simulator gets the words' bits from the
halves with NumPy (`halves_to_word`), and the rows other lanes name for
`ldmatrix4w` by warp shuffles.

Asynchronous copies (sm_80 on): `copy_async16(t, (i, j), a, (r, k), inside)` starts one
16-byte copy of ``a[r, k : k + 8]`` (float16) into ``t[i, j : j + 4]`` (a shared uint32
array) without passing through registers (``cp.async.cg.shared.global``, SASS LDGSTS),
16 zero bytes where ``inside`` is False; `copy_async_commit()` closes the group of
the copies this thread started since the last commit, `copy_async_wait(n)` waits
until at most the ``n`` latest groups are still on their way (``n`` a constant).
A thread sees its own copies after the wait; other threads' after the wait and a
barrier. Compiled for an older GPU they are a synchronous 16-byte load and store
(commit and wait: nothing). On the simulator a copy is done at once: it cannot
catch a missing wait (the GPU's differential test can).

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
from numba.cuda.core import targetconfig

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

    return types.UniTuple(types.uint32, WIDTH)(array, index), _ldmatrix_codegen("")


def _ldmatrix_codegen(transpose: str):
    """The codegen of an ``ldmatrix .x4`` (``transpose``: "" or ".trans") from a 32-bit shared address (PTX ISA,
    "Warp-level matrix load instruction: ldmatrix", 9.7.14.5.15 in version 9.0)."""
    def codegen(context, builder, sig, args):
        generic = builder.bitcast(_vector_pointer(context, builder, *sig.args, *args, _I32, 1), _I32.as_pointer())
        shared = builder.addrspacecast(generic, _I32.as_pointer(3))  # a 32-bit shared address: LLVM folds offsets
        function = ir.FunctionType(ir.LiteralStructType([_I32] * WIDTH), [_I32])
        asm = f"ldmatrix.sync.aligned.m8n8.x4{transpose}.shared.b16 {{$0, $1, $2, $3}}, [$4];"
        words = builder.call(ir.InlineAsm(function, asm, "=r,=r,=r,=r,r", side_effect=True),
                             [builder.ptrtoint(shared, _I32)])
        return context.make_tuple(builder, sig.return_type, [builder.extract_value(words, m) for m in range(WIDTH)])

    return codegen


@intrinsic
def ldmatrix4w_trans(typingctx, array, index):
    """`ldmatrix4w` of the transposed matrices: lane l gets, of each matrix m, the halves in column l // 4 of rows
    2 (l % 4) and 2 (l % 4) + 1 (the low half from the upper row), of the rows lanes 8m to 8m + 7 named
    (``ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16``): an mma's B fragment (b0, b1 or b2, b3) of column l // 4
    from a shared tile of plain rows of B."""
    _check(array, index, "ldmatrix4w_trans", types.uint32, 2)
    if array.ndim != 2:
        raise TypingError(f"ldmatrix4w_trans: a 2-D array of rows, got {array}")
    return types.UniTuple(types.uint32, WIDTH)(array, index), _ldmatrix_codegen(".trans")


def _async_copies() -> bool:
    """Whether numba-cuda compiles for sm_80 or newer (cp.async); unknown: the form every GPU runs."""
    flags = targetconfig.ConfigStack.top_or_none()
    return (getattr(flags, "compute_capability", None) or (0, 0)) >= (8, 0)


def _asm(builder, text: str, operands=(), constraints: str = "") -> None:
    """Inline PTX with no result that the compiler keeps in place: no memory access moves across it."""
    function = ir.FunctionType(ir.VoidType(), [operand.type for operand in operands])
    clobber = ",".join(filter(None, [constraints, "~{memory}"]))
    builder.call(ir.InlineAsm(function, text, clobber, side_effect=True), list(operands))


@intrinsic
def copy_async16(typingctx, shared, index, source, source_index, inside):
    """Start copying ``source[r, k : k + 8]`` (float16, ``source_index = (r, k)``, 16-byte aligned) into
    ``shared[i, j : j + 4]`` (a shared uint32 array, ``index = (i, j)``, ``j`` a multiple of 4); where ``inside``
    is False, 16 zero bytes and nothing read (``source_index`` must still be inside the array)."""
    _check(shared, index, "copy_async16", types.uint32, 2)
    _check(source, source_index, "copy_async16", types.float16, 2)
    if inside != types.boolean:
        raise TypingError(f"copy_async16: inside must be a bool, got {inside}")

    def codegen(context, builder, sig, args):
        shared_type, index_type, source_type, source_index_type, _ = sig.args
        destination = _vector_pointer(context, builder, shared_type, index_type, args[0], args[1], _I32, WIDTH)
        origin = _vector_pointer(context, builder, source_type, source_index_type, args[2], args[3], _I32, WIDTH)
        if not _async_copies():  # before sm_80: a 16-byte load and store (zeros outside), done at once
            with builder.if_else(args[4]) as (copy, fill):
                with copy:
                    builder.store(builder.load(origin, align=16), destination, align=16)
                with fill:
                    builder.store(ir.Constant(destination.type.pointee, None), destination, align=16)
            return context.get_dummy_value()
        # PTX ISA, "Data Movement and Conversion Instructions: cp.async": cp-size 16 (.cg: 16 only, L2 only),
        # src-size bytes read and the rest of the 16 filled with zeros: src-size 0 reads nothing
        to_shared = builder.addrspacecast(destination, destination.type.pointee.as_pointer(3))
        to_global = builder.addrspacecast(origin, origin.type.pointee.as_pointer(1))
        size = builder.select(args[4], ir.Constant(_I32, 16), ir.Constant(_I32, 0))
        _asm(builder, "cp.async.cg.shared.global [$0], [$1], 16, $2;",
             [builder.ptrtoint(to_shared, _I32), builder.ptrtoint(to_global, ir.IntType(64)), size], "r,l,r")
        return context.get_dummy_value()

    return types.void(shared, index, source, source_index, inside), codegen


@intrinsic
def copy_async_commit(typingctx):
    """Close this thread's group of `copy_async16` started since the last commit (``cp.async.commit_group``: PTX
    ISA, "cp.async.commit_group"; an empty group is allowed and completes at once)."""
    def codegen(context, builder, sig, args):
        if _async_copies():
            _asm(builder, "cp.async.commit_group;")
        return context.get_dummy_value()

    return types.void(), codegen


@intrinsic(prefer_literal=True)
def copy_async_wait(typingctx, n):
    """Wait until at most the ``n`` latest of this thread's committed groups are still on their way, every older
    copy done and visible to this thread (``cp.async.wait_group n``: PTX ISA, "cp.async.wait_group"; other threads
    see them after a barrier). ``n``: a constant (a literal or a global), the instruction needs it written out."""
    if not (isinstance(n, types.IntegerLiteral) and n.literal_value >= 0):
        raise TypingError(f"copy_async_wait: n must be a constant integer >= 0 (a literal or a global), got {n}")
    groups = n.literal_value

    def codegen(context, builder, sig, args):
        if _async_copies():
            _asm(builder, f"cp.async.wait_group {groups};")
        return context.get_dummy_value()

    return types.void(n), codegen


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


_NOT_SHARED = "{} reads shared memory only: pass a cuda.shared.array"
_EVERY_LANE = 0xFFFFFFFF


def _ldmatrix4w_simulated(array, index):  # each lane reads its words from the rows the other lanes name
    if not _shared(array):
        raise ValueError(_NOT_SHARED.format("ldmatrix4w"))
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


def _column_halves(top, bottom, shift):
    """The word of the halves ``shift`` bits up in words ``top`` (low half) and ``bottom`` (plain NumPy)."""
    mask = np.uint32(0xFFFF)
    top, bottom, shift = (np.asarray(x, np.uint32) for x in (top, bottom, shift))
    return ((top >> shift) & mask) | (((bottom >> shift) & mask) << np.uint32(16))


@cuda.jit(device=True)
def _transposed_word(x0, x1, x2, x3, row, word, shift):
    """The simulator's ``ldmatrix .trans``: of the 16-byte rows (4 words) lanes ``row`` and ``row + 1`` read, the
    halves at word ``word``, ``shift`` bits up, as one word (row ``row``'s in the low half)."""
    top0, top1 = cuda.shfl_sync(_EVERY_LANE, x0, row), cuda.shfl_sync(_EVERY_LANE, x1, row)
    top2, top3 = cuda.shfl_sync(_EVERY_LANE, x2, row), cuda.shfl_sync(_EVERY_LANE, x3, row)
    low0, low1 = cuda.shfl_sync(_EVERY_LANE, x0, row + 1), cuda.shfl_sync(_EVERY_LANE, x1, row + 1)
    low2, low3 = cuda.shfl_sync(_EVERY_LANE, x2, row + 1), cuda.shfl_sync(_EVERY_LANE, x3, row + 1)
    top = top0 if word == 0 else top1 if word == 1 else top2 if word == 2 else top3
    bottom = low0 if word == 0 else low1 if word == 1 else low2 if word == 2 else low3
    return _column_halves(top, bottom, shift)


def _ldmatrix4w_trans_simulated(array, index):
    """Each lane reads the 16-byte row it names, as the hardware does (a phase of 8 lanes: one matrix, so its bank
    conflicts are counted as the GPU's); the halves then go to the lanes of their columns by shuffles."""
    if not _shared(array):
        raise ValueError(_NOT_SHARED.format("ldmatrix4w_trans"))
    if not _vector_aligned_simulated(array) or index[-1] % WIDTH != 0:
        raise ValueError(_MISALIGNED)
    i, j = index
    x0, x1, x2, x3 = array[i, j], array[i, j + 1], array[i, j + 2], array[i, j + 3]
    lane = cuda.laneid
    row, column = 2 * (lane % 4), lane // 4  # rows 2 (l % 4) and 2 (l % 4) + 1 of each matrix, column l // 4
    word, shift = column // 2, column % 2 * 16
    return (_transposed_word(x0, x1, x2, x3, row, word, shift), _transposed_word(x0, x1, x2, x3, row + 8, word, shift),
            _transposed_word(x0, x1, x2, x3, row + 16, word, shift),
            _transposed_word(x0, x1, x2, x3, row + 24, word, shift))


def _copy_async16_simulated(shared, index, source, source_index, inside):
    """Done at once: the source's 16 bytes (`load4w`: one global read) or zeros, into shared memory (one write)."""
    if not _shared(shared):
        raise ValueError("copy_async16 copies into shared memory only: pass a cuda.shared.array")
    words = (uint32(0), uint32(0), uint32(0), uint32(0))
    if inside:  # src-size 0: nothing read
        words = load4w(source, source_index)
    store4w(shared, index, words)


def _copy_async_commit_simulated():
    pass


def _copy_async_wait_simulated(n):
    pass


vector_aligned.__simulation__ = _vector_aligned_simulated
load4.__simulation__ = _load4_simulated
store4.__simulation__ = _store4_simulated
load4w.__simulation__ = _load4w_simulated
store4w.__simulation__ = _store4_simulated  # the same scalar writes, of words
pack2h.__simulation__ = _pack2h_simulated
transpose2h.__simulation__ = _transpose2h_simulated
ldmatrix4w.__simulation__ = _ldmatrix4w_simulated
ldmatrix4w_trans.__simulation__ = _ldmatrix4w_trans_simulated
copy_async16.__simulation__ = _copy_async16_simulated
copy_async_commit.__simulation__ = _copy_async_commit_simulated  # the copies are done already: nothing to wait for
copy_async_wait.__simulation__ = _copy_async_wait_simulated

__all__ = ["WIDTH", "HALVES", "load4", "store4", "load4w", "store4w", "pack2h",
           "transpose2h", "ldmatrix4w", "ldmatrix4w_trans", "copy_async16", "copy_async_commit", "copy_async_wait",
           "halves_to_word", "vector_aligned"]
