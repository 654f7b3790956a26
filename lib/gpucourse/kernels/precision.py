"""Precision: number formats bit by bit, fp16 storage with fp32 accumulation, and tensor cores from Numba.

Formats (pure NumPy): `bits`, `ulp` and `round_to` for ``"fp32"``, ``"fp16"``,
``"bf16"`` and, as an aside, the 8-bit ``"fp8_e4m3"`` (no infinities: it
overflows to NaN, as ``ml_dtypes.float8_e4m3fn``) and ``"fp8_e5m2"``.

Kernels (A, B float16 2-D arrays, C float32):

1. `gemm_fp16_fp32acc`: module 3's shared-memory tiling with fp16 tiles (half
   the bytes) and a float32 accumulator.
2. `gemm_tensor_core`: a block of 4 warps computes a 32 x 32 tile of C, each
   warp a 16 x 16 part of it with two `mma_m16n8k8` per step of 8 along K.
   `gemm_tensor_core_tiled` is the same idea sized for speed: a block of 8
   warps computes 128 x 128 of C in steps of 32 along K, each warp 64 x 32 of
   it, 16 `mma_m16n8k16` per step of 16, its accumulators in registers, its
   halves kept in pairs as uint32 words from global memory to the mma (16
   bytes per load, `vector.load4w`, where the rows allow it; A's fragments by
   `vector.ldmatrix4w`), double-buffered: the next step's loads are in flight
   during the mma. `gemm_tensor_core_async`, the top rung, fills the same tiles
   with cp.async (`vector.copy_async16`: global to shared memory without
   registers) into 2 stages and reads B's fragments from plain rows of B with
   ``ldmatrix .trans`` (`vector.ldmatrix4w_trans`).
3. `sum_fp16` / `sum_fp16_fp32acc`: one thread adds up a vector, in fp16
   (a sum of ones stops at 2048) or in fp32.
4. `map_fp16` / `map_fp32`: ``y = 2x + 1``, memory-bound, computed in fp32
   and stored in the array's own format.

The tensor-core wrapper `mma_m16n8k8(a_frag, b_frag, c_frag)` is called by all
32 lanes of a warp and returns ``d_frag = A @ B + C`` for a 16 x 8 x 8 product:
``a_frag`` is a tuple of 4 float16 (the two ``.f16x2`` registers of A),
``b_frag`` a tuple of 2 float16 (B's one register), ``c_frag`` and the result
tuples of 4 float32; A and B may also come as the registers themselves, tuples
of uint32 words of two halves, the first in the low 16 bits (2 words and 1).
Which lane holds which elements is the PTX ISA's layout (`fragment_layout`).
On a GPU it is inline PTX (``mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32``,
compute capability 7.5 or newer); on the course simulator `emulate_mma_m16n8k8` computes it.
`mma_m16n8k16` is the 16 x 8 x 16 product, the native fp16 shape since sm_80
(8 halves of A, 4 of B, 4 floats of C: ``fragment_layout("m16n8k16")``); a
kernel compiled for an older GPU (a T4) gets two m16n8k8 in its place. The
emulation is a **model**, not the hardware: exact fp16 products added to C one
after the other in k order, each addition rounded to nearest fp32. Tensor cores
add otherwise (Fasi, Higham, Mikaitis and Pranesh, "Numerical behavior of NVIDIA
tensor cores", PeerJ Comput. Sci. 2021): they align all the terms on the largest
exponent, truncate the bits below fp32's precision, add in fixed point and
truncate the sum, so a GPU's D differs from the model in the last bits (on an
H100, 64 of a tile's 128 elements). `mma_error_bound` bounds both against the
exact result.
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np
from llvmlite import ir
from numba import cuda, float32, types, uint32, uint64
float16 = types.float16
from numba.core.errors import TypingError
from numba.core.extending import intrinsic
from numba.cuda.core import targetconfig

from .bounds import launch_bounds
from .vector import (HALVES, WIDTH, copy_async16, copy_async_commit, copy_async_wait, ldmatrix4w, ldmatrix4w_trans,
                     load4w, pack2h, store4w, transpose2h, vector_aligned)

# -- formats ---------------------------------------------------------------------------------------


class Format(NamedTuple):
    exponent_bits: int
    mantissa_bits: int
    has_infinity: bool = True

    @property
    def bias(self) -> int:
        return (1 << (self.exponent_bits - 1)) - 1

    @property
    def min_exponent(self) -> int:
        """The exponent of the smallest normal number."""
        return 1 - self.bias

    @property
    def max_finite(self) -> float:
        if self.has_infinity:  # the all-ones exponent is for infinities and NaN
            return math.ldexp(2 - 2.0 ** -self.mantissa_bits, self.bias)
        return math.ldexp(2 - 2.0 ** (1 - self.mantissa_bits), self.bias + 1)  # E4M3: only S.1111.111 is NaN


FORMATS = {
    "fp32": Format(8, 23),
    "fp16": Format(5, 10),
    "bf16": Format(8, 7),
    "fp8_e4m3": Format(4, 3, has_infinity=False),
    "fp8_e5m2": Format(5, 2),
}


def _format(fmt: str) -> Format:
    if fmt not in FORMATS:
        raise ValueError(f"unknown format {fmt!r}: use one of {', '.join(FORMATS)}")
    return FORMATS[fmt]


def _exponent_of(magnitude: np.ndarray, f: Format) -> np.ndarray:
    """The exponent of the binade of each magnitude, never below the smallest normal's (subnormals)."""
    _, e = np.frexp(magnitude)  # magnitude = m * 2**e with 0.5 <= m < 1 (frexp(0) gives e = 0)
    return np.where(magnitude == 0, f.min_exponent, np.maximum(e.astype(np.int64) - 1, f.min_exponent))


def round_to(x, fmt: str) -> np.ndarray:
    """``x`` rounded to the nearest value of ``fmt`` (ties to even), as float64; overflow gives inf (NaN in E4M3)."""
    f = _format(fmt)
    x = np.asarray(x, np.float64)
    magnitude = np.abs(x)
    spacing = np.ldexp(1.0, _exponent_of(np.where(np.isfinite(magnitude), magnitude, 1.0), f) - f.mantissa_bits)
    with np.errstate(invalid="ignore"):
        rounded = np.round(x / spacing) * spacing  # np.round: half to even; x / spacing is exact
        overflow = np.abs(rounded) > f.max_finite
    rounded = np.where(overflow, np.copysign(np.inf if f.has_infinity else np.nan, x), rounded)
    return np.where(np.isfinite(x), rounded, x if f.has_infinity else np.copysign(np.nan, x))


def ulp(x, fmt: str) -> np.ndarray:
    """The spacing of ``fmt``'s values at ``x`` (after rounding ``x`` to ``fmt``): 2**(exponent - mantissa bits)."""
    f = _format(fmt)
    stored = np.abs(round_to(x, fmt))
    finite = np.where(np.isfinite(stored), stored, f.max_finite)
    return np.where(np.isnan(stored), np.nan, np.ldexp(1.0, _exponent_of(finite, f) - f.mantissa_bits))


class Bits(NamedTuple):
    """A value's fields in a format, as bit strings, and the value the format stores."""

    sign: str
    exponent: str
    mantissa: str
    value: float

    def __str__(self) -> str:
        return f"{self.sign} {self.exponent} {self.mantissa}"


def bits(x: float, fmt: str) -> Bits:
    """Sign, exponent and mantissa bits of ``x`` rounded to ``fmt`` (NaN: the quiet NaN with the top mantissa bit)."""
    f = _format(fmt)
    stored = float(round_to(x, fmt))
    sign = "1" if math.copysign(1.0, stored) < 0 else "0"
    top = (1 << f.exponent_bits) - 1
    if math.isnan(stored):
        field, mantissa = top, (1 << f.mantissa_bits) - 1 if not f.has_infinity else 1 << (f.mantissa_bits - 1)
    elif math.isinf(stored):
        field, mantissa = top, 0
    else:
        magnitude = abs(stored)
        exponent = int(_exponent_of(np.float64(magnitude), f))
        normal = magnitude >= math.ldexp(1.0, f.min_exponent)
        field = exponent + f.bias if normal else 0
        fraction = magnitude / math.ldexp(1.0, exponent) - (1 if normal else 0)
        mantissa = int(round(fraction * (1 << f.mantissa_bits)))
    return Bits(sign, format(field, f"0{f.exponent_bits}b"), format(mantissa, f"0{f.mantissa_bits}b"), stored)


# -- the tensor-core wrappers ----------------------------------------------------------------------

WARP = 32
MMA_M, MMA_N, MMA_K = 16, 8, 8
MMA_K16 = 16
MMA_PTX = "mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32"
MMA_K16_PTX = "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32"
MMA_SHAPES = {"m16n8k8": MMA_K, "m16n8k16": MMA_K16}  # the K of each shape; M = 16 and N = 8 for both


def _depth(shape: str) -> int:
    if shape not in MMA_SHAPES:
        raise ValueError(f"unknown mma shape {shape!r}: use one of {', '.join(MMA_SHAPES)}")
    return MMA_SHAPES[shape]


def fragment_layout(shape: str = "m16n8k8") -> dict[str, np.ndarray]:
    """{"a", "b", "c"}: for each lane (axis 0) and each element of its fragment (axis 1), the (row, column)
    of A (16 x K), B (K x 8) or C and D (16 x 8) it holds (axis 2), as the PTX ISA gives them for ``shape``
    (``"m16n8k8"``: 4, 2 and 4 elements; ``"m16n8k16"``: 8, 4 and 4)."""
    depth = _depth(shape)
    lane = np.arange(WARP)
    group, thread = lane // 4, lane % 4  # groupID and threadID_in_group
    a = np.empty((WARP, depth // 2, 2), np.int64)
    for i in range(depth // 2):  # a0, a1: row group; a2, a3: row group + 8; (k16) a4 to a7: the same, 8 columns on
        a[:, i, 0] = group + 8 * (i // 2 % 2)
        a[:, i, 1] = 2 * thread + i % 2 + 8 * (i // 4)
    b = np.empty((WARP, depth // 4, 2), np.int64)
    for i in range(depth // 4):  # b0, b1: rows 2t and 2t + 1 of column group; (k16) b2, b3: 8 rows on
        b[:, i, 0] = 2 * thread + i % 2 + 8 * (i // 2)
        b[:, i, 1] = group
    return {"a": a, "b": b, "c": a[:, :4].copy()}  # C and D (16 x 8): the places of a0 to a3


_LAYOUTS = {shape: fragment_layout(shape) for shape in MMA_SHAPES}


def _places(operand: str, shape: str) -> tuple[np.ndarray, tuple[int, int]]:
    """`fragment_layout`'s places of ``operand`` and the shape of its matrix."""
    depth = _depth(shape)
    return _LAYOUTS[shape][operand], {"a": (MMA_M, depth), "b": (depth, MMA_N), "c": (MMA_M, MMA_N)}[operand]


def matrix_of(fragments: np.ndarray, operand: str, shape: str = "m16n8k8") -> np.ndarray:
    """The matrix (..., rows, columns) that fragments (..., 32, elements) of ``operand`` ("a", "b" or "c") hold."""
    layout, size = _places(operand, shape)
    matrix = np.empty(fragments.shape[:-2] + size, fragments.dtype)
    matrix[..., layout[..., 0], layout[..., 1]] = fragments
    return matrix


def fragments_of(matrix: np.ndarray, operand: str, shape: str = "m16n8k8") -> np.ndarray:
    """The fragments (..., 32, elements) each lane holds of ``matrix`` (..., rows, columns) as ``operand``."""
    layout, _ = _places(operand, shape)
    return matrix[..., layout[..., 0], layout[..., 1]]


def _halves(fragments) -> np.ndarray:
    """Fragments of float16, or of integer words holding two halves each (the first in the low bits), as halves."""
    fragments = np.asarray(fragments)
    if fragments.dtype.kind in "iu":  # the words' bits, whatever integer type holds them
        return np.ascontiguousarray(fragments.astype(np.uint32)).view(np.float16)
    return fragments.astype(np.float16)


def _emulate(a_frag, b_frag, c_frag, shape: str) -> np.ndarray:
    A = matrix_of(_halves(a_frag), "a", shape).astype(np.float32)
    B = matrix_of(_halves(b_frag), "b", shape).astype(np.float32)
    D = matrix_of(np.asarray(c_frag, np.float32), "c", shape)
    for k in range(MMA_SHAPES[shape]):
        D = D + A[..., :, k, None] * B[..., None, k, :]  # the product is exact in fp32; the sum rounds once
    return fragments_of(D, "c", shape)


def emulate_mma_m16n8k8(a_frag: np.ndarray, b_frag: np.ndarray, c_frag: np.ndarray) -> np.ndarray:
    """D fragments for warps of fragments (warps, 32, 4 | 2 | 4) by the course's model of a tensor core (exact
    fp16 products, fp32 sums in k order, each rounded to nearest): within `mma_error_bound` of the hardware's.
    A and B may be integer words of two halves each (warps, 32, 2 | 1): their bits are the halves."""
    return _emulate(a_frag, b_frag, c_frag, "m16n8k8")


def emulate_mma_m16n8k16(a_frag: np.ndarray, b_frag: np.ndarray, c_frag: np.ndarray) -> np.ndarray:
    """`emulate_mma_m16n8k8` for the 16 x 8 x 16 product: fragments (warps, 32, 8 | 4 | 4), 16 sums in k order."""
    return _emulate(a_frag, b_frag, c_frag, "m16n8k16")


MMA_GROUP = 4  # the fewest products a tensor core adds at once (V100, T4: Fasi et al. 2021; 8 on an A100)


def mma_error_bound(K: int, magnitude):
    """A bound on ``|D - exact|`` for ``D = A @ B + C`` made of chained `mma_m16n8k8` or `mma_m16n8k16` over
    ``K``, with ``magnitude = |A| @ |B| + |C|`` (float64), on any tensor core and on the course's model.

    A tensor core adds ``g`` exact products at a time to the running sum (Fasi et al. 2021: ``g = 4`` on a V100
    and a T4, 8 on an A100): the ``g + 1`` terms are aligned on the largest, the bits below fp32's 24 truncated,
    the terms added in fixed point and the sum truncated to fp32. Each of the ``g`` smaller terms loses less
    than ``2**-23`` of the largest, truncating the sum less than ``2**-23`` of it, and both are at most
    ``magnitude``: ``(g + 1) * 2**-23`` per group of ``g``, so at most ``5 * 2**-23`` per 4 of K for any
    ``g >= 4`` (9 per 8 when ``g = 8``, 17 per 16 when ``g = 16``). Products past K are zeros and lose nothing.
    The model (each addition rounded to nearest, ``2**-24`` of a partial sum) loses less.
    """
    return math.ceil(K / MMA_GROUP) * (MMA_GROUP + 1) * 2.0 ** -23 * magnitude


def _check_fragments(name: str, a_frag, b_frag, c_frag, depth: int):
    """The intrinsic's signature, or a TypingError naming the wrong fragment. A and B come as halves or as uint32
    words of two halves each (the first in the low bits, as in the ``.f16x2`` register)."""
    for operand, value, count in (("a_frag", a_frag, depth // 2), ("b_frag", b_frag, depth // 4)):
        if not (isinstance(value, types.UniTuple) and (value.count, value.dtype) in
                ((count, types.float16), (count // 2, types.uint32))):
            raise TypingError(f"{name}: {operand} must be a tuple of {count} float16 values (or of {count // 2} "
                              f"uint32 words of two), got {value}")
    if not (isinstance(c_frag, types.UniTuple) and c_frag.count == 4 and c_frag.dtype == types.float32):
        raise TypingError(f"{name}: c_frag must be a tuple of 4 float32 values, got {c_frag}")
    return types.UniTuple(types.float32, 4)(a_frag, b_frag, c_frag)


def _mma_asm(builder, ptx: str, a_registers: list, b_registers: list, c_values: list) -> list:
    """One ``mma.sync`` of inline PTX: the 4 float32 of D."""
    f32, i32 = ir.FloatType(), ir.IntType(32)
    operands = [*a_registers, *b_registers, *c_values]
    sizes = (4, len(a_registers), len(b_registers), 4)  # D, A, B, C
    first = np.cumsum((0,) + sizes[:-1])
    groups = ", ".join("{" + ",".join(f"${i}" for i in range(start, start + size)) + "}"
                       for start, size in zip(first, sizes))
    function = ir.FunctionType(ir.LiteralStructType([f32] * 4), [i32] * (len(operands) - 4) + [f32] * 4)
    constraints = ",".join(["=f"] * 4 + ["r"] * (len(operands) - 4) + ["f"] * 4)
    d = builder.call(ir.InlineAsm(function, f"{ptx} {groups};", constraints, side_effect=True), operands)
    return [builder.extract_value(d, i) for i in range(4)]


def _mma_codegen(depth: int):
    """The codegen of a 16 x 8 x ``depth`` mma on fragments of tuples (numba-cuda keeps a float16 in an i16)."""
    def codegen(context, builder, sig, args):
        a, b, c = args
        i32, pair = ir.IntType(32), ir.VectorType(ir.IntType(16), 2)

        def registers(fragment, fragment_type, count):  # .f16x2 registers: two halves, the first in the low bits
            if fragment_type.dtype == types.uint32:  # packed already
                return [builder.extract_value(fragment, r) for r in range(count)]
            words = []
            for r in range(count):
                register = ir.Constant(pair, ir.Undefined)
                for slot in range(2):
                    register = builder.insert_element(register, builder.extract_value(fragment, 2 * r + slot),
                                                      ir.Constant(i32, slot))
                words.append(builder.bitcast(register, i32))
            return words

        a_registers = registers(a, sig.args[0], depth // 4)
        b_registers = registers(b, sig.args[1], depth // 8)
        d = [builder.extract_value(c, i) for i in range(4)]
        flags = targetconfig.ConfigStack.top_or_none()  # what numba-cuda compiles for (its tanh asks the same)
        cc = getattr(flags, "compute_capability", None) or (0, 0)  # unknown: the form every GPU runs
        if depth == MMA_K or cc >= (8, 0):
            d = _mma_asm(builder, MMA_PTX if depth == MMA_K else MMA_K16_PTX, a_registers, b_registers, d)
        else:  # before sm_80 no m16n8k16: two m16n8k8, k 0-7 (a0 to a3, b0, b1) then k 8-15 (a4 to a7, b2, b3)
            d = _mma_asm(builder, MMA_PTX, a_registers[:2], b_registers[:1], d)
            d = _mma_asm(builder, MMA_PTX, a_registers[2:], b_registers[1:], d)
        return context.make_tuple(builder, sig.return_type, d)

    return codegen


@intrinsic
def mma_m16n8k8(typingctx, a_frag, b_frag, c_frag):
    """``D = A @ B + C`` on the tensor cores of a warp; see the module's docstring for the fragments."""
    return _check_fragments("mma_m16n8k8", a_frag, b_frag, c_frag, MMA_K), _mma_codegen(MMA_K)


@intrinsic
def mma_m16n8k16(typingctx, a_frag, b_frag, c_frag):
    """``D = A @ B + C`` for A 16 x 16 and B 16 x 8: 8 halves of A, 4 of B, 4 floats of C (`fragment_layout`); one
    instruction from sm_80 on, two chained m16n8k8 where numba-cuda compiles for an older GPU."""
    return _check_fragments("mma_m16n8k16", a_frag, b_frag, c_frag, MMA_K16), _mma_codegen(MMA_K16)


mma_m16n8k8.__warp_emulation__ = emulate_mma_m16n8k8  # what the course simulator runs in its place
mma_m16n8k16.__warp_emulation__ = emulate_mma_m16n8k16


# -- kernels ---------------------------------------------------------------------------------------

TILE = 16
WARPS_M, WARPS_N = 2, 2  # gemm_tensor_core: a block of 2 x 2 warps
WARP_TILE_M, WARP_TILE_N = MMA_M, 2 * MMA_N  # each warp: 16 x 16 of C, two mma per step
BLOCK_M, BLOCK_N = WARPS_M * WARP_TILE_M, WARPS_N * WARP_TILE_N  # 32 x 32
THREADS = WARP * WARPS_M * WARPS_N


@cuda.jit
def gemm_fp16_fp32acc(C, A, B):
    tile_a = cuda.shared.array((TILE, TILE), float16)  # fp16 tiles: half the bytes of module 3's
    tile_b = cuda.shared.array((TILE, TILE), float16)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    M, N, K = C.shape[0], C.shape[1], A.shape[1]
    acc = float32(0)
    for start in range(0, K, TILE):
        k = start + tx
        tile_a[ty, tx] = A[row, k] if row < M and k < K else float16(0)
        k = start + ty
        tile_b[ty, tx] = B[k, col] if k < K and col < N else float16(0)
        cuda.syncthreads()
        for j in range(TILE):
            acc += float32(tile_a[ty, j]) * float32(tile_b[j, tx])  # exact product, fp32 sum
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


@cuda.jit
def gemm_tensor_core(C, A, B):
    tile_a = cuda.shared.array((BLOCK_M, MMA_K), float16)
    tile_b = cuda.shared.array((MMA_K, BLOCK_N), float16)
    thread = cuda.threadIdx.x
    lane, warp = thread % WARP, thread // WARP
    group, pair = lane // 4, 2 * (lane % 4)  # the PTX layout: rows group and group + 8, columns pair, pair + 1
    wm, wn = (warp // WARPS_N) * WARP_TILE_M, (warp % WARPS_N) * WARP_TILE_N
    M, N, K = C.shape[0], C.shape[1], A.shape[1]
    row0, col0 = cuda.blockIdx.y * BLOCK_M, cuda.blockIdx.x * BLOCK_N
    zero = float32(0)
    left = (zero, zero, zero, zero)  # D of columns wn .. wn + 7
    right = (zero, zero, zero, zero)  # and of wn + 8 .. wn + 15
    for start in range(0, K, MMA_K):
        for e in range(thread, BLOCK_M * MMA_K, THREADS):  # 2 elements of each tile per thread
            r, k = e // MMA_K, e % MMA_K
            inside = row0 + r < M and start + k < K
            tile_a[r, k] = A[row0 + r, start + k] if inside else float16(0)
            k, c = e // BLOCK_N, e % BLOCK_N
            inside = start + k < K and col0 + c < N
            tile_b[k, c] = B[start + k, col0 + c] if inside else float16(0)
        cuda.syncthreads()
        a = (tile_a[wm + group, pair], tile_a[wm + group, pair + 1],
             tile_a[wm + group + 8, pair], tile_a[wm + group + 8, pair + 1])
        b = (tile_b[pair, wn + group], tile_b[pair + 1, wn + group])
        left = mma_m16n8k8(a, b, left)
        b = (tile_b[pair, wn + 8 + group], tile_b[pair + 1, wn + 8 + group])
        right = mma_m16n8k8(a, b, right)
        cuda.syncthreads()
    for half in range(2):
        d = left if half == 0 else right
        for i in range(4):
            r = row0 + wm + group + 8 * (i // 2)
            c = col0 + wn + 8 * half + pair + i % 2
            if r < M and c < N:
                C[r, c] = d[i]


@cuda.jit
def sum_fp16(out, x):
    if cuda.grid(1) == 0:
        total = float16(0)
        for i in range(x.shape[0]):
            total = total + x[i]  # an fp16 addition: rounded to fp16 each time
        out[0] = total


@cuda.jit
def sum_fp16_fp32acc(out, x):
    if cuda.grid(1) == 0:
        total = float32(0)
        for i in range(x.shape[0]):
            total += float32(x[i])
        out[0] = total


@cuda.jit
def map_fp16(out, x):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        out[i] = float16(float32(x[i]) * float32(2) + float32(1))


@cuda.jit
def map_fp32(out, x):
    start, stride = cuda.grid(1), cuda.gridsize(1)
    for i in range(start, x.shape[0], stride):
        out[i] = x[i] * float32(2) + float32(1)


TC_BM, TC_BN, TC_BK = 128, 128, 32  # gemm_tensor_core_tiled: the block's tile of C, and its step along K
TC_WARPS_M, TC_WARPS_N = 2, 4  # 8 warps, each 64 x 32 of C
TC_MMA_M, TC_MMA_N = TC_BM // TC_WARPS_M // MMA_M, TC_BN // TC_WARPS_N // MMA_N  # 4 x 4 mma tiles per warp
TC_THREADS = WARP * TC_WARPS_M * TC_WARPS_N
TC_PAIRS = TC_BK // 2  # words of two halves along K per step: A's tile rows, B's tile columns
TC_PITCH_A = TC_PAIRS + 4  # A's tile rows: 20 words (80 bytes), so a warp's fragment words fall in 32 banks
TC_PITCH_B = TC_BN + 8  # B's tile rows: 136 words, so the 4 rows of k pairs a warp's fragment reads start 8 banks apart
TC_VECTORS = TC_BM * TC_BK // HALVES // TC_THREADS  # 16-byte chunks per thread and tile: 2 (A and B alike)
TC_PASS = TC_THREADS * HALVES // TC_BK  # rows of A's tile that one pass of 16-byte chunks fills: 64
TC_CHUNKS_B = TC_BN // HALVES  # 16-byte chunks in a row of B's tile: 16
TC_ROWS_A, TC_ROWS_B = 2 * TC_BM, 2 * TC_PAIRS  # the shared tiles hold two copies each (double buffering)
TC_BOUNDS = launch_bounds(TC_THREADS, 2)  # <= 128 registers


@cuda.jit(device=True)
def _fetch_halves(staged, v, X, row, col, rows, cols):
    """``staged[v]`` = ``X[row, col : col + 8]`` as 4 words, zeros past ``rows`` and ``cols``: one half per load,
    packed in pairs (`vector.pack2h`), for rows that a 16-byte load may not read."""
    for w in range(WIDTH):
        c = col + uint64(2 * w)
        low = X[row, c] if row < rows and c < cols else float16(0)
        high = X[row, c + uint64(1)] if row < rows and c + uint64(1) < cols else float16(0)
        staged[v, w] = pack2h(low, high)


@cuda.jit(device=True)
def _fetch_chunks(next_a, next_b, A, B, start, row_a, col_b, k_a, k_b, vectors):
    """Into registers, as words of two halves: this thread's 16-byte chunks of the step at ``start`` along K, rows
    ``row_a`` and ``row_a + 64`` of A (halves ``k_a`` on) and rows ``k_b`` and ``k_b + 1`` of B (columns ``col_b``
    on); one 16-byte load each where ``vectors`` (K and N multiples of 8: a chunk is all inside or all outside,
    and row ``k_b + 1`` is inside where the even ``k_b`` is), else one half per load."""
    M, K, N = uint64(A.shape[0]), uint64(A.shape[1]), uint64(B.shape[1])
    k = start + k_b
    if vectors:
        zero = uint32(0)
        for v in range(TC_VECTORS):
            words = (zero, zero, zero, zero)
            if row_a + uint64(v * TC_PASS) < M and start + k_a < K:
                words = load4w(A, (row_a + uint64(v * TC_PASS), start + k_a))
            for w in range(WIDTH):
                next_a[v, w] = words[w]
        top, bottom = (zero, zero, zero, zero), (zero, zero, zero, zero)
        if k < K and col_b < N:
            top, bottom = load4w(B, (k, col_b)), load4w(B, (k + uint64(1), col_b))
        for w in range(WIDTH):
            next_b[0, w], next_b[1, w] = top[w], bottom[w]
    else:
        for v in range(TC_VECTORS):
            _fetch_halves(next_a, v, A, row_a + uint64(v * TC_PASS), start + k_a, M, K)
            _fetch_halves(next_b, v, B, k + uint64(v), col_b, K, N)


@cuda.jit(device=True)
def _stash_chunks(tile_a, tile_b, next_a, next_b, buffer, row_a, col_b, k_a, k_b):
    """The fetched chunks into ``buffer`` (0 or 1) of the shared tiles, 16 bytes per store: A's words as they came,
    B's two rows turned into words of k pairs by `vector.transpose2h` (a word of row k, B[k, n] and B[k, n + 1],
    and the word below it give the words of columns n and n + 1; 8 PRMT); the 8 threads of a store's phase share
    a row of B's tile: a 2-way bank conflict."""
    for v in range(TC_VECTORS):
        r = buffer * uint64(TC_BM) + row_a + uint64(v * TC_PASS)
        store4w(tile_a, (r, k_a // uint64(2)), (next_a[v, 0], next_a[v, 1], next_a[v, 2], next_a[v, 3]))
    pair = buffer * uint64(TC_PAIRS) + k_b // uint64(2)
    for half in range(2):  # columns col_b + 4 half to col_b + 4 half + 3
        c0, c1 = transpose2h(next_b[0, 2 * half], next_b[1, 2 * half])
        c2, c3 = transpose2h(next_b[0, 2 * half + 1], next_b[1, 2 * half + 1])
        store4w(tile_b, (pair, col_b + uint64(WIDTH * half)), (c0, c1, c2, c3))


@cuda.jit(device=True)
def _warp_places(C, A, B):
    """What the tiled tensor-core GEMMs' threads share: this thread's number, lane, the PTX layout's groupID
    and threadID_in_group, the row and word it names for ldmatrix (lane l: row l % 8 of matrix l // 8, matrices
    1 and 3 8 rows on, 2 and 3 4 words on), its warp's place in the block's tile of C, the block's place in C,
    and whether every chunk may be copied in 16 bytes (K and N multiples of 8, 16-byte aligned rows)."""
    thread = uint64(cuda.threadIdx.x)
    lane, warp = thread % uint64(WARP), thread // uint64(WARP)
    row_m, word_m = lane % uint64(8) + lane // uint64(8) % uint64(2) * uint64(8), lane // uint64(16) * uint64(4)
    wm = warp // uint64(TC_WARPS_N) * uint64(TC_MMA_M * MMA_M)
    wn = warp % uint64(TC_WARPS_N) * uint64(TC_MMA_N * MMA_N)
    row0, col0 = uint64(cuda.blockIdx.y) * uint64(TC_BM), uint64(cuda.blockIdx.x) * uint64(TC_BN)
    K, N = uint64(A.shape[1]), uint64(C.shape[1])
    vectors = K % uint64(HALVES) == uint64(0) and N % uint64(HALVES) == uint64(0) \
        and vector_aligned(A) and vector_aligned(B)
    return (thread, lane, lane // uint64(4), lane % uint64(4), row_m, word_m, wm, wn, row0, col0, vectors)


@cuda.jit(device=True)
def _zero(acc):
    for i in range(TC_MMA_M):
        for j in range(TC_MMA_N):
            for e in range(4):
                acc[i, j, e] = float32(0)


# inline="always" only where a helper holds an intrinsic whose code depends on the GPU (`mma_m16n8k16` here,
# `vector.copy_async16` in `_copy_step`): compiled as a device function of its own, it finds no compute capability
# in numba's flags and takes the pre-sm_80 form (sm_90 SASS: 32 HMMA per step instead of 16, LDG + STS instead of
# LDGSTS). The other helpers are plain device functions, which NVVM inlines to the same SASS; numba's inlining
# copies a helper's IR into every call and made each of these GEMMs take about 4 s to compile instead of 1 to 2.
@cuda.jit(device=True, inline="always")
def _multiply(acc, tile_a, row, word, b_frags):
    """A warp's 16 `mma_m16n8k16` of a step of 16 along K: its 4 fragments of A, each 4 matrices of 8 x 8 halves
    in rows of 16 bytes, one `vector.ldmatrix4w` from ``tile_a[row + 16 i, word]`` (``row``, ``word``: this
    lane's), times its 4 fragments of B, ``b_frags``, added to ``acc``."""
    for i in range(TC_MMA_M):
        a = ldmatrix4w(tile_a, (row + uint64(i * MMA_M), word))  # a0 a1, a2 a3 (8 rows on), a4 to a7 (8 k on)
        for j in range(TC_MMA_N):
            d = mma_m16n8k16(a, (b_frags[j, 0], b_frags[j, 1]), (acc[i, j, 0], acc[i, j, 1], acc[i, j, 2], acc[i, j, 3]))
            for e in range(4):
                acc[i, j, e] = d[e]


@cuda.jit(device=True)
def _store_tile(C, acc, row0, col0, wm, wn, group, quad):
    """The warp's accumulators into C, as the PTX layout places D (c0, c1 in row group, c2, c3 8 rows on)."""
    M, N = uint64(C.shape[0]), uint64(C.shape[1])
    for i in range(TC_MMA_M):
        for j in range(TC_MMA_N):
            for e in range(4):
                r = row0 + wm + uint64(i * MMA_M + 8 * (e // 2)) + group
                c = col0 + wn + uint64(j * MMA_N + e % 2) + uint64(2) * quad
                if r < M and c < N:
                    C[r, c] = acc[i, j, e]


@cuda.jit(**TC_BOUNDS)
def gemm_tensor_core_tiled(C, A, B):
    """C = A @ B: a block of 8 warps computes 128 x 128 of C in steps of 32 along K, 16 `mma_m16n8k16` per warp
    and step of 16, double-buffered: while the warps multiply one copy of the tiles, each thread's loads of the
    next step are on their way to registers; it stores them into the other copy afterwards; one barrier per step.

    The halves travel in pairs, as uint32 words, from global memory to the tensor cores: 16 bytes (4 words) per
    load where every row of A and B is 16-byte aligned and K and N are multiples of 8 (so a chunk is all inside
    or all outside the matrix), otherwise one half per load, packed (`vector.pack2h`; double-buffered too; a warp's
    load then touches 8 rows of A or 2 of B, whose other halves the next loads find in L1). A's tile holds A's
    words as they are (``tile_a[m, k // 2]``: A[m, k], A[m, k + 1]), rows of 80 bytes; a warp reads an A fragment
    (4 words per lane: 4 matrices of 8 x 8 halves) with one `vector.ldmatrix4w`. B's holds words of k pairs
    (``tile_b[k // 2, n]``: B[k, n], B[k + 1, n]), built from two rows of B by one byte permutation per word: each
    is one fragment register (b0, b1 or b2, b3 of the PTX layout), one 4-byte shared load. The mma takes the
    words as they are. All indices are unsigned (no sign tests, see fusion.make_micro_tile). Shared memory: 2
    copies of A's tile (128 x 20 words) and of B's (16 x 136 words): 37 KiB (static limit 48). Launch bounds
    (256, 2): at most 128 registers, 2 blocks per SM.

    sm_90 SASS (nvJitLink 13.5, nvdisasm 13.1; counted, not timed; benchmarks/README.md, "Compiled code of the top
    rungs"): 127 registers, no local memory; on the 16-byte path a step of 32 along K is about 238 instructions
    (331 with float16 staging and 32-bit A fragment loads): 4 LDG.128 issued before the mma loop, its 2 passes of
    16 HMMA.16816, 4 LDSM.16.M88.4 and 8 LDS.32 in 46 instructions (were 24 LDS.32 in 56), then 8 PRMT (B's k
    pairs; were 59 PRMT and 16 SHF splitting and joining halves), 4 STS.128 (were 2 STS.128 and 16 STS.U16) and
    one BAR.
    """
    tile_a = cuda.shared.array((TC_ROWS_A, TC_PITCH_A), uint32, alignment=16)  # [buffer * 128 + m, k // 2]
    tile_b = cuda.shared.array((TC_ROWS_B, TC_PITCH_B), uint32, alignment=16)  # [buffer * 16 + k // 2, n]
    acc = cuda.local.array((TC_MMA_M, TC_MMA_N, 4), float32)  # constant indices after unrolling: registers
    b_frags = cuda.local.array((TC_MMA_N, 2), uint32)  # likewise
    next_a = cuda.local.array((TC_VECTORS, WIDTH), uint32)  # the next step's chunks, on their way
    next_b = cuda.local.array((TC_VECTORS, WIDTH), uint32)
    thread, _, group, quad, row_m, word_m, wm, wn, row0, col0, vectors = _warp_places(C, A, B)
    K = uint64(A.shape[1])
    # This thread's chunks: chunk t % 4 of row t // 4 of A's tile (a warp: 8 rows of 64 bytes), and a further
    # pass 64 rows on; chunk t % 16 of rows 2 (t // 16) and 2 (t // 16) + 1 of B's (a warp: 4 rows of 256 bytes).
    row_a, k_a = thread // uint64(TC_BK // HALVES), thread % uint64(TC_BK // HALVES) * uint64(HALVES)
    k_b, col_b = thread // uint64(TC_CHUNKS_B) * uint64(2), thread % uint64(TC_CHUNKS_B) * uint64(HALVES)
    _zero(acc)
    _fetch_chunks(next_a, next_b, A, B, uint64(0), row0 + row_a, col0 + col_b, k_a, k_b, vectors)
    _stash_chunks(tile_a, tile_b, next_a, next_b, uint64(0), row_a, col_b, k_a, k_b)
    cuda.syncthreads()
    steps = (K + uint64(TC_BK - 1)) // uint64(TC_BK)
    for step in range(steps):
        now = uint64(step) % uint64(2)
        more = uint64(step) + uint64(1) < steps
        if more:  # issue the next step's global loads now; they arrive while the tensor cores work
            _fetch_chunks(next_a, next_b, A, B, (uint64(step) + uint64(1)) * uint64(TC_BK), row0 + row_a,
                          col0 + col_b, k_a, k_b, vectors)
        for kw in range(0, TC_PAIRS, MMA_K16 // 2):  # words kw to kw + 7: halves 2 kw to 2 kw + 15 along K
            w = uint64(kw) + quad  # the PTX layout's a0, a1 (and b0, b1): halves 2 w and 2 w + 1
            for j in range(TC_MMA_N):
                n = wn + uint64(j * MMA_N) + group
                b_frags[j, 0] = tile_b[now * uint64(TC_PAIRS) + w, n]  # b0, b1
                b_frags[j, 1] = tile_b[now * uint64(TC_PAIRS) + w + uint64(4), n]  # b2, b3: 8 rows of K on
            _multiply(acc, tile_a, now * uint64(TC_BM) + wm + row_m, uint64(kw) + word_m, b_frags)
        if more:  # the other copy was last read before the previous barrier: free to fill
            _stash_chunks(tile_a, tile_b, next_a, next_b, uint64(1) - now, row_a, col_b, k_a, k_b)
        cuda.syncthreads()
    _store_tile(C, acc, row0, col0, wm, wn, group, quad)


TCA_STAGES = 2  # gemm_tensor_core_async: copies of the tiles, filled by cp.async (a third would pass 48 KiB)
TCA_WAIT = TCA_STAGES - 2  # groups of copies that may still be on their way when a stage is read
TCA_PITCH_B = TC_BN // 2 + 4  # B's tile rows: 64 words of halves and 4 of padding, so 8 rows start 4 banks apart
TCA_ROWS_B = TC_BK  # B's tile: TC_BK rows of B per stage, as they are in B
TCA_TILE_A, TCA_TILE_B = (TCA_STAGES * TC_BM, TC_PITCH_A), (TCA_STAGES * TCA_ROWS_B, TCA_PITCH_B)  # all stages


@cuda.jit(device=True)
def _store_halves(tile, i, j, X, row, col, rows, cols, staged):
    """``tile[i, j : j + 4]`` = ``X[row, col : col + 8]`` as 4 words, zeros past ``rows`` and ``cols``, loaded one
    half at a time (`_fetch_halves` into ``staged``) and stored with one 16-byte store: where cp.async may not go."""
    _fetch_halves(staged, 0, X, row, col, rows, cols)
    store4w(tile, (i, j), (staged[0, 0], staged[0, 1], staged[0, 2], staged[0, 3]))


@cuda.jit(device=True, inline="always")  # cp.async from sm_80 on: see `_multiply`
def _copy_step(tile_a, tile_b, A, B, stage, start, row0, col0, row_a, k_a, row_b, col_b, vectors, staged):
    """Start the copies of the step at ``start`` along K into ``stage`` of the tiles: this thread's 2 chunks of
    A (rows ``row_a`` and ``row_a + 64`` of the block's, halves ``k_a`` on) and 2 of B (rows ``row_b`` and
    ``row_b + 16`` of the step's, columns ``col_b`` on). Where ``vectors`` (K and N multiples of 8: a chunk is all
    inside or all outside), one `vector.copy_async16` each; one outside reads nothing and writes zeros, but must
    name a place inside: the last row or chunk; else one half per load (`_store_halves`), done at once."""
    M, K, N = uint64(A.shape[0]), uint64(A.shape[1]), uint64(B.shape[1])
    one, chunk = uint64(1), uint64(HALVES)
    if vectors:
        for v in range(TC_VECTORS):
            m, k = row0 + row_a + uint64(v * TC_PASS), start + k_a
            copy_async16(tile_a, (stage * uint64(TC_BM) + row_a + uint64(v * TC_PASS), k_a // uint64(2)),
                         A, (min(m, M - one), min(k, K - chunk)), m < M and k < K)
            k, n = start + row_b + uint64(v * TCA_ROWS_B // TC_VECTORS), col0 + col_b
            copy_async16(tile_b, (stage * uint64(TCA_ROWS_B) + row_b + uint64(v * TCA_ROWS_B // TC_VECTORS),
                                  col_b // uint64(2)), B, (min(k, K - one), min(n, N - chunk)), k < K and n < N)
    else:
        for v in range(TC_VECTORS):
            r, k = row_a + uint64(v * TC_PASS), row_b + uint64(v * TCA_ROWS_B // TC_VECTORS)
            _store_halves(tile_a, stage * uint64(TC_BM) + r, k_a // uint64(2), A, row0 + r, start + k_a, M, K,
                          staged)
            _store_halves(tile_b, stage * uint64(TCA_ROWS_B) + k, col_b // uint64(2), B, start + k, col0 + col_b,
                          K, N, staged)


@cuda.jit(**TC_BOUNDS)
def gemm_tensor_core_async(C, A, B):
    """`gemm_tensor_core_tiled` as CUTLASS's Ampere GEMMs feed their tensor cores: the same block and warp tiles
    and mma, but global memory goes straight to shared memory with ``cp.async`` (`vector.copy_async16`; SASS
    LDGSTS: no registers, no byte permutations, no shared stores), and B's tile holds plain rows of B, its
    fragments read with ``ldmatrix .trans`` (`vector.ldmatrix4w_trans`: one x4 gives b0 to b3 of two n8 tiles).

    Pipeline: TCA_STAGES copies of the tiles. A step waits for its own copies (`vector.copy_async_wait`, at most
    TCA_WAIT later groups still on their way) and meets the block at one barrier: everyone's copies have landed,
    and every warp is done with the stage the next copies overwrite, which start at once and run during the mma.
    One group of copies per step (`vector.copy_async_commit`; empty at the end, so that the counts hold).

    Shared memory (48 KiB of static shared memory a block may declare): per stage A's 128 rows of 20 words (16 of
    halves, 4 of padding: 10 KiB) and B's 32 rows of 68 words (64 and 4: 8.5 KiB): 2 stages, 37 KiB; 3 would
    need 55.5 KiB (dynamic shared memory) or tiles without padding and a swizzle (48 KiB). Bank conflicts: none.
    An ldmatrix reads each 8 x 8 matrix (8 rows of 16 bytes) in one pass; A's rows start 20 words apart, banks
    0, 20, 8, 28, 16, 4, 24, 12 (+ the column), B's 68 apart: 0, 4, ..., 28: 8 different 4-bank groups. A copy's
    8 lanes of a pass write, of A, chunk l // 8 of 8 consecutive rows (the same 8 groups), of B, 8 consecutive
    chunks of a row (128 bytes). Each warp's copy reads 512 bytes in 16 sectors.

    Shapes where a 16-byte copy is not allowed (K or N not a multiple of 8, rows not 16-byte aligned): the same
    pipeline with the chunks loaded one half at a time (`_fetch_halves`) and stored with one 16-byte store.

    sm_90 SASS (nvJitLink 13.5, nvdisasm 13.1; counted, not timed): 125 registers, no local memory; a step of 32
    along K on the 16-byte path is about 238 instructions, as `gemm_tensor_core_tiled`'s: DEPBAR and BAR, 4
    LDGSTS.128 in 115 (the rest: 64-bit address and bounds arithmetic), 2 passes of the mma loop (16 HMMA.16816,
    4 LDSM.16.M88.4 and 2 LDSM.16.MT88.4 in 41), no LDG, PRMT or STS.
    """
    tile_a = cuda.shared.array(TCA_TILE_A, uint32, alignment=16)  # [stage * 128 + m, k // 2]
    tile_b = cuda.shared.array(TCA_TILE_B, uint32, alignment=16)  # [stage * 32 + k, n // 2]
    acc = cuda.local.array((TC_MMA_M, TC_MMA_N, 4), float32)  # constant indices after unrolling: registers
    b_frags = cuda.local.array((TC_MMA_N, 2), uint32)  # likewise
    staged = cuda.local.array((1, WIDTH), uint32)  # the one-half-per-load path's chunk
    # ldmatrix: A's fragments as in gemm_tensor_core_tiled; B's rows of k: matrices 1 and 3 8 rows of k on, 2 and
    # 3 8 columns (4 words) on, so an x4 .trans gives b0 b1, b2 b3 of n tile 2 jj, then of n tile 2 jj + 1
    thread, lane, group, quad, row_m, word_m, wm, wn, row0, col0, vectors = _warp_places(C, A, B)
    K = uint64(A.shape[1])
    # This thread's chunks: of A, chunk l // 8 of row 8 w + l % 8 (warp w, lane l) and 64 rows on; of B, chunk
    # t % 16 of rows t // 16 and t // 16 + 16
    row_a, k_a = thread // uint64(WARP) * uint64(8) + lane % uint64(8), lane // uint64(8) * uint64(HALVES)
    row_b, col_b = thread // uint64(TC_CHUNKS_B), thread % uint64(TC_CHUNKS_B) * uint64(HALVES)
    _zero(acc)
    steps = (K + uint64(TC_BK - 1)) // uint64(TC_BK)
    for s in range(TCA_STAGES - 1):  # the prologue: the first stages on their way, a group each
        if uint64(s) < steps:
            _copy_step(tile_a, tile_b, A, B, uint64(s), uint64(s * TC_BK), row0, col0, row_a, k_a, row_b, col_b,
                       vectors, staged)
        copy_async_commit()
    for step in range(steps):
        now = uint64(step) % uint64(TCA_STAGES)
        copy_async_wait(TCA_WAIT)  # this thread's copies of this step have landed
        cuda.syncthreads()  # and everyone's; every warp is done with the stage the next copies overwrite
        ahead = uint64(step) + uint64(TCA_STAGES - 1)
        if ahead < steps:  # start the copies of a later step: they run while the tensor cores work
            _copy_step(tile_a, tile_b, A, B, ahead % uint64(TCA_STAGES), ahead * uint64(TC_BK), row0, col0, row_a,
                       k_a, row_b, col_b, vectors, staged)
        copy_async_commit()
        for kw in range(0, TC_PAIRS, MMA_K16 // 2):  # words kw to kw + 7 of A's rows: halves 2 kw to 2 kw + 15
            k = now * uint64(TCA_ROWS_B) + uint64(2 * kw) + row_m  # the row of B's tile this lane names
            for jj in range(TC_MMA_N // 2):  # B's fragments of n tiles 2 jj and 2 jj + 1: one ldmatrix .trans
                n = (wn + uint64(jj * 2 * MMA_N)) // uint64(2) + word_m
                b_frags[2 * jj, 0], b_frags[2 * jj, 1], b_frags[2 * jj + 1, 0], b_frags[2 * jj + 1, 1] = \
                    ldmatrix4w_trans(tile_b, (k, n))
            _multiply(acc, tile_a, now * uint64(TC_BM) + wm + row_m, uint64(kw) + word_m, b_frags)
    _store_tile(C, acc, row0, col0, wm, wn, group, quad)


GEMM_KERNELS = [gemm_fp16_fp32acc, gemm_tensor_core, gemm_tensor_core_tiled, gemm_tensor_core_async]


def _check_gemm(C, A, B) -> None:
    if A.ndim != 2 or B.ndim != 2 or C.ndim != 2:
        raise ValueError(f"A, B and C must be 2-D matrices, got {A.ndim}-D, {B.ndim}-D and {C.ndim}-D")
    if A.dtype != np.float16 or B.dtype != np.float16 or C.dtype != np.float32:
        raise ValueError(f"A and B must be float16 and C float32 (got {A.dtype}, {B.dtype}, {C.dtype}): "
                         "convert with .astype(np.float16) / np.float32")
    if A.shape[1] != B.shape[0] or C.shape != (A.shape[0], B.shape[1]):
        raise ValueError(f"A is {A.shape[0]}x{A.shape[1]}, B {B.shape[0]}x{B.shape[1]} and C "
                         f"{C.shape[0]}x{C.shape[1]}: need A's columns = B's rows and C of A's rows x B's columns")


def configuration(kernel, shape_c) -> tuple[tuple[int, int], tuple[int, ...]]:
    """(grid, block) covering C of shape (M, N) for one of the `GEMM_KERNELS`."""
    M, N = shape_c
    if kernel is gemm_tensor_core:
        return (-(-N // BLOCK_N), -(-M // BLOCK_M)), (THREADS,)
    if kernel in (gemm_tensor_core_tiled, gemm_tensor_core_async):
        return (-(-N // TC_BN), -(-M // TC_BM)), (TC_THREADS,)
    return (-(-N // TILE), -(-M // TILE)), (TILE, TILE)


def launch_gemm(kernel, C, A, B) -> None:
    """``kernel[grid, block](C, A, B)`` with the grid that covers C; a clear error on wrong shapes or dtypes."""
    _check_gemm(C, A, B)
    grid, block = configuration(kernel, C.shape)
    kernel[grid, block](C, A, B)


def gemm(A, B, kernel=gemm_tensor_core) -> np.ndarray:
    """``A @ B`` for 2-D host arrays stored in fp16, accumulated in fp32; returns float32."""
    A16, B16 = np.ascontiguousarray(A, np.float16), np.ascontiguousarray(B, np.float16)
    if A16.ndim != 2 or B16.ndim != 2:
        raise ValueError(f"A and B must be 2-D matrices, got {A16.ndim}-D and {B16.ndim}-D")
    d_C = cuda.to_device(np.zeros((A16.shape[0], B16.shape[1]), np.float32))
    launch_gemm(kernel, d_C, cuda.to_device(A16), cuda.to_device(B16))
    return d_C.copy_to_host()


def launch_sum(kernel, x) -> np.ndarray:
    """The sum of the float16 vector ``x`` by `sum_fp16` or `sum_fp16_fp32acc`: a 1-element array."""
    x = np.asarray(x)
    if x.ndim != 1 or x.dtype != np.float16:
        raise ValueError(f"x must be a 1-D float16 vector, got {x.ndim}-D {x.dtype}")
    out = np.zeros(1, np.float16 if kernel is sum_fp16 else np.float32)
    kernel[1, 1](out, x)
    return out


def launch_map(kernel, out, x, blocks: int = 64, threads: int = 256) -> None:
    """`map_fp16` or `map_fp32` over a grid of ``blocks x threads`` (a grid-stride loop covers the rest)."""
    kernel[blocks, threads](out, x)


__all__ = ["FORMATS", "Bits", "bits", "ulp", "round_to", "MMA_PTX", "MMA_K16_PTX", "MMA_SHAPES", "fragment_layout",
           "matrix_of", "fragments_of", "emulate_mma_m16n8k8", "emulate_mma_m16n8k16", "mma_error_bound", "mma_m16n8k8",
           "mma_m16n8k16", "gemm_fp16_fp32acc", "gemm_tensor_core",
           "gemm_tensor_core_tiled", "gemm_tensor_core_async",
           "sum_fp16",
           "sum_fp16_fp32acc", "map_fp16", "map_fp32", "GEMM_KERNELS", "configuration", "launch_gemm", "gemm",
           "launch_sum", "launch_map"]
