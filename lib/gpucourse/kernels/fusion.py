"""Fusion: a matmul epilogue, row softmax from naive to online, attention from naive to flash (float32).

Rows are the last axis; every array is C-contiguous float32 on the device.

- GEMM epilogue: `matmul_bias_relu` is module 3's shared-memory tiling (``C = A @ B``,
  2-D here) with ``+ bias`` and ReLU applied to the accumulator before its one store;
  `add_bias` and `relu` are the unfused kernels that read and write ``C`` again.
- Softmax of each row of ``x`` (M, N) into ``y``: `softmax_naive` (host) launches three
  kernels (row max, exp and row sum, divide) with intermediate arrays;
  `softmax_row_fused` keeps the row in shared memory (``N <= MAX_COLS``): one read of
  ``x``, one write of ``y``; `softmax_online` keeps a running max ``m`` and sum ``l``
  (rescaled by ``exp(m_old - m_new)`` when the max grows), then a write pass: two reads
  of ``x``, any ``N``. All three use one block of ``THREADS`` threads per row.
- Attention ``softmax(Q K^T / sqrt(d)) V`` for one head, Q, K, V and O of shape (N, d),
  ``d <= MAX_D``, optional causal mask (query i sees keys 0..i): `attention_naive` (host)
  materialises the N x N scores and probabilities; `attention_row_fused` (one block per
  query row, its row of scores in shared memory, ``N <= MAX_COLS``); `attention_flash`
  (a block of ``BLOCK_ROWS`` query rows, one thread each, walks tiles of ``BLOCK_KEYS``
  keys of K and V through shared memory with the online softmax: no N x N buffer, K and
  V read once per block of queries, and with the mask the tiles past the block's last
  query are skipped). `attention_flash` is the case study of lecture 5: its per-thread arrays are indexed at
  run time (local memory) and its grid is one warp per 32 queries. `attention_flash2` (`make_flash2`, a build
  per head dimension in ``FLASH_DIMS``) is the fix, after FlashAttention-2: Q, K, V, O of shape (batch*heads,
  N, d), 4 warps per 64 queries, S and O as register micro-tiles (`make_micro_tile`, a GEMM's inner loop),
  the online softmax with shuffles over row groups (`row_group_max`), exp2 with the scale folded into Q. Where
  its grid is small for the GPU (one head of N = 4096: 64 blocks for 132 SMs), `launch_flash2` splits the keys
  into slices (`flash2_splits`, flash-decoding): `attention_flash2_split` writes each slice's partial output,
  max and sum, and `flash2_combine` merges them.
- `softmax_registers` (`make_softmax_registers`): the row in registers, every load issued first (16-byte
  loads and stores where the rows are aligned): one read of ``x``, one write of ``y``, rows up to
  ``SOFTMAX_VALUES x threads``.
- `softmax_vectorised` (`make_softmax_vectorised`), the top rung, built for bandwidth: the matrices flattened, a
  row held by the fewest warps whose registers cover it (``4 SOFTMAX_VECTORS`` values per thread), several short
  rows per block; 16-byte loads and stores on every row (its up to 6 elements off a 16-byte boundary as scalars),
  one exp per element, the row's online-softmax state merged with shuffles and at most one barrier.
- `softmax_pipelined` (`make_softmax_pipelined`): the same rows on a persistent grid (`pipelined_configuration`),
  each block taking rows in turns and each thread's loads of its next row in flight while it computes the current
  one (software pipelining through a second set of registers), rows up to ``PIPELINED_MAX_COLS``.

A row of scores that is all ``-inf`` (every key masked) gives zeros, not NaN (torch
gives NaN): the references and every kernel here agree on that.

Host side: `launch_softmax` and `launch_attention` pick the grid and check shapes with a
clear message; `softmax`, `attention` and the naive host functions take and return host
arrays. Memory: every device allocation those host functions make goes through
`device_array`, and ``with allocations() as record:`` lists them (``record.sizes``,
``record.largest`` in bytes): the naive paths allocate N x N, the fused ones only
inputs and outputs.
"""

from __future__ import annotations

import contextlib
import functools
import math

import numpy as np
from numba import cuda, float32, uint64

from . import matmul as mm
from .bounds import launch_bounds
from .vector import WIDTH, load4, store4, vector_aligned

TILE = mm.TILE  # the GEMM's square tile
THREADS = 128  # threads per block of the row kernels (softmax, row-fused attention): a multiple of 32
MAX_COLS = 4096  # the longest row `softmax_row_fused` and `attention_row_fused` hold in shared memory (16 KiB)
MAX_WARPS = 32  # warps a block can have (1024 threads)
MAX_D = 128  # the largest head dimension
BLOCK_ROWS = 32  # attention_flash: query rows per block (one thread each)
BLOCK_KEYS = 32  # attention_flash: keys per tile of K and V
FULL_MASK = 0xFFFFFFFF
NEG_INF = -math.inf


# ------------------------------------------------------------------ float64 references


def softmax_reference(x, axis=-1) -> np.ndarray:
    """Softmax in float64 along ``axis``; a slice that is all ``-inf`` gives zeros (torch: NaN)."""
    x = np.asarray(x, np.float64)
    top = np.max(x, axis=axis, keepdims=True)
    top = np.where(np.isneginf(top), 0.0, top)
    e = np.exp(x - top)
    total = np.sum(e, axis=axis, keepdims=True)
    return np.divide(e, total, out=np.zeros_like(e), where=total > 0)


def attention_reference(Q, K, V, causal=False) -> np.ndarray:
    """``softmax(Q K^T / sqrt(d)) V`` in float64; with ``causal`` query i sees keys 0..i."""
    Q, K, V = (np.asarray(a, np.float64) for a in (Q, K, V))
    scores = Q @ K.T / np.sqrt(Q.shape[1])
    if causal:
        scores = np.where(np.tri(Q.shape[0], K.shape[0], dtype=bool), scores, -np.inf)
    return softmax_reference(scores) @ V


# ------------------------------------------------------------------ GEMM with a fused epilogue


@cuda.jit(device=True)
def tile_product(A, B, row, col):
    """``A[row] . B[:, col]`` for this thread, the block stepping through 16 x 16 tiles in shared memory."""
    tile_a = cuda.shared.array((TILE, TILE), float32)
    tile_b = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    M, K = A.shape
    N = B.shape[1]
    acc = float32(0)
    for start in range(0, K, TILE):
        a_k, b_k = start + tx, start + ty
        tile_a[ty, tx] = A[row, a_k] if row < M and a_k < K else float32(0)
        tile_b[ty, tx] = B[b_k, col] if b_k < K and col < N else float32(0)
        cuda.syncthreads()
        for j in range(TILE):
            acc += tile_a[ty, j] * tile_b[j, tx]
        cuda.syncthreads()
    return acc


@cuda.jit
def matmul_bias_relu(C, A, B, bias):
    col, row = cuda.grid(2)
    acc = tile_product(A, B, row, col)
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = max(acc + bias[col], float32(0))  # the epilogue: in registers, before the one store


@cuda.jit
def matmul_plain(C, A, B):
    col, row = cuda.grid(2)
    acc = tile_product(A, B, row, col)
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = acc


@cuda.jit
def add_bias(C, bias):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] += bias[col]


@cuda.jit
def relu(C):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = max(C[row, col], float32(0))


def gemm_grid(C) -> tuple[tuple[int, int], tuple[int, int]]:
    """(grid, block) of 16 x 16 threads covering the 2-D ``C``, x along its columns."""
    M, N = C.shape
    return (-(-N // TILE), -(-M // TILE)), (TILE, TILE)


def check_gemm(C, A, B, bias) -> None:
    """A clear error when the shapes of ``C = relu(A @ B + bias)`` do not fit."""
    if A.ndim != 2 or B.ndim != 2 or C.ndim != 2:
        raise ValueError(f"A, B and C must be 2-D matrices, got {A.ndim}-D, {B.ndim}-D and {C.ndim}-D")
    if A.shape[1] != B.shape[0]:
        raise ValueError(f"A's columns ({A.shape[1]}) must equal B's rows ({B.shape[0]})")
    if C.shape != (A.shape[0], B.shape[1]) or bias.shape != (B.shape[1],):
        raise ValueError(f"C must be {A.shape[0]}x{B.shape[1]} and bias of length {B.shape[1]}, "
                         f"got C {C.shape} and bias {bias.shape}")


def gemm_bias_relu(C, A, B, bias, fused=True) -> None:
    """``C = relu(A @ B + bias)`` on device arrays: one fused launch, or three (matmul, add_bias, relu)."""
    check_gemm(C, A, B, bias)
    grid, block = gemm_grid(C)
    if fused:
        matmul_bias_relu[grid, block](C, A, B, bias)
    else:
        matmul_plain[grid, block](C, A, B)
        add_bias[grid, block](C, bias)
        relu[grid, block](C)


# ------------------------------------------------------------------ block-wide reductions


@cuda.jit(device=True)
def combine(a, b, take_max):
    """``max(a, b)`` or ``a + b``."""
    return max(a, b) if take_max else a + b


@cuda.jit(device=True)
def block_reduce(value, take_max):
    """The max (``take_max``) or the sum of ``value`` over the block, in every thread.

    The 32 lanes of each warp combine with xor shuffles (every lane gets the warp's value), lane 0 of each
    warp leaves it in shared memory, and after a barrier every thread combines the warps' values.
    """
    partial = cuda.shared.array(MAX_WARPS, float32)
    t = cuda.threadIdx.x
    offset = 16
    while offset > 0:
        value = combine(value, cuda.shfl_xor_sync(FULL_MASK, value, offset), take_max)
        offset //= 2
    if t % 32 == 0:
        partial[t // 32] = value
    cuda.syncthreads()
    result = partial[0]
    for w in range(1, cuda.blockDim.x // 32):
        result = combine(result, partial[w], take_max)
    cuda.syncthreads()  # everyone has read `partial` before it is used again
    return result


@cuda.jit(device=True)
def merge(m, l, m_other, l_other):
    """Two online-softmax states (running max, sum of exp(x - max)) as one; (-inf, 0) is the empty state."""
    m_new = max(m, m_other)
    if m_new == NEG_INF:
        return m_new, float32(0)
    return m_new, l * math.exp(m - m_new) + l_other * math.exp(m_other - m_new)


@cuda.jit(device=True)
def safe_max(m):
    """The max to subtract: 0 for a row that is all -inf, so that exp(-inf - 0) = 0 and not NaN."""
    return float32(0) if m == NEG_INF else m


@cuda.jit(device=True)
def reciprocal(total):
    """1 / total, and 0 for a fully masked row (total 0)."""
    return float32(1) / total if total > float32(0) else float32(0)


# ------------------------------------------------------------------ softmax


@cuda.jit
def row_max(m, x):
    row, t = cuda.blockIdx.x, cuda.threadIdx.x
    best = float32(NEG_INF)
    for j in range(t, x.shape[1], cuda.blockDim.x):
        best = max(best, x[row, j])
    best = block_reduce(best, True)
    if t == 0:
        m[row] = best


@cuda.jit
def exp_and_sum(e, l, x, m):
    row, t = cuda.blockIdx.x, cuda.threadIdx.x
    top = safe_max(m[row])
    total = float32(0)
    for j in range(t, x.shape[1], cuda.blockDim.x):
        value = math.exp(x[row, j] - top)
        e[row, j] = value
        total += value
    total = block_reduce(total, False)
    if t == 0:
        l[row] = total


@cuda.jit
def divide(y, e, l):
    row, t = cuda.blockIdx.x, cuda.threadIdx.x
    scale = reciprocal(l[row])
    for j in range(t, y.shape[1], cuda.blockDim.x):
        y[row, j] = e[row, j] * scale


@cuda.jit
def softmax_row_fused(y, x):
    saved = cuda.shared.array(MAX_COLS, float32)  # the row, read once from global memory
    row, t = cuda.blockIdx.x, cuda.threadIdx.x
    N = x.shape[1]
    best = float32(NEG_INF)
    for j in range(t, N, cuda.blockDim.x):
        saved[j] = x[row, j]
        best = max(best, saved[j])
    top = safe_max(block_reduce(best, True))
    total = float32(0)
    for j in range(t, N, cuda.blockDim.x):  # each thread touches only its own elements: no barrier needed
        saved[j] = math.exp(saved[j] - top)
        total += saved[j]
    scale = reciprocal(block_reduce(total, False))
    for j in range(t, N, cuda.blockDim.x):
        y[row, j] = saved[j] * scale


@cuda.jit
def softmax_online(y, x):
    row, t = cuda.blockIdx.x, cuda.threadIdx.x
    N = x.shape[1]
    m, l = float32(NEG_INF), float32(0)
    for j in range(t, N, cuda.blockDim.x):  # one pass: running max m and sum l of this thread's elements
        m, l = merge(m, l, x[row, j], float32(1))
    offset = 16
    while offset > 0:  # merge the states of the warp ...
        m, l = merge(m, l, cuda.shfl_xor_sync(FULL_MASK, m, offset), cuda.shfl_xor_sync(FULL_MASK, l, offset))
        offset //= 2
    states_m = cuda.shared.array(MAX_WARPS, float32)
    states_l = cuda.shared.array(MAX_WARPS, float32)
    if t % 32 == 0:
        states_m[t // 32], states_l[t // 32] = m, l
    cuda.syncthreads()
    m, l = states_m[0], states_l[0]
    for w in range(1, cuda.blockDim.x // 32):  # ... then of the block's warps
        m, l = merge(m, l, states_m[w], states_l[w])
    top, scale = safe_max(m), reciprocal(l)
    for j in range(t, N, cuda.blockDim.x):  # the write pass
        y[row, j] = math.exp(x[row, j] - top) * scale


SOFTMAX_KERNELS = [softmax_row_fused, softmax_online]
SOFTMAX_VALUES = 8  # softmax_registers: values of the row each thread holds in registers


@functools.cache
def make_softmax_registers(VALUES: int):
    """`softmax_registers` with ``VALUES`` elements of the row per thread (a multiple of 4): rows up to
    ``VALUES x threads`` long.

    One read of ``x``, one write of ``y``, the row in registers (no shared copy, no second read), and all of a
    thread's ``VALUES`` loads issued before it uses any of them, so that a block keeps ``VALUES x threads x 4``
    bytes in flight: the bytes a memory-bound kernel needs in flight per SM to reach the copy's bandwidth.
    Where every row of ``x`` and ``y`` is 16-byte aligned (`vector.vector_aligned`: a multiple of 4 columns),
    thread t holds the groups of 4 columns ``t, t + threads, ...`` and moves each with one 16-byte
    `vector.load4` / `vector.store4`; else (the guarded scalar path) the columns ``t, t + threads, ...``,
    one 4-byte access each. Either way consecutive threads touch consecutive memory: coalesced.
    """
    GROUPS = VALUES // WIDTH

    @cuda.jit
    def softmax_registers(y, x):
        values = cuda.local.array(VALUES, float32)
        row, t, step = cuda.blockIdx.x, cuda.threadIdx.x, cuda.blockDim.x
        N = x.shape[1]
        vectors = vector_aligned(x) and vector_aligned(y)
        if vectors:
            for k in range(GROUPS):  # every load first ...
                j = (t + k * step) * WIDTH  # a whole group or none: N is a multiple of 4 here
                if j < N:
                    values[k * WIDTH], values[k * WIDTH + 1], values[k * WIDTH + 2], values[k * WIDTH + 3] = \
                        load4(x, (row, j))
                else:
                    for e in range(WIDTH):
                        values[k * WIDTH + e] = float32(NEG_INF)
        else:
            for k in range(VALUES):
                j = t + k * step
                values[k] = x[row, j] if j < N else float32(NEG_INF)
        best = float32(NEG_INF)
        for k in range(VALUES):  # ... then the arithmetic on them
            best = max(best, values[k])
        top = safe_max(block_reduce(best, True))
        total = float32(0)
        for k in range(VALUES):
            values[k] = math.exp(values[k] - top)
            total += values[k]
        scale = reciprocal(block_reduce(total, False))
        if vectors:
            for k in range(GROUPS):
                j = (t + k * step) * WIDTH
                if j < N:
                    store4(y, (row, j), (values[k * WIDTH] * scale, values[k * WIDTH + 1] * scale,
                                         values[k * WIDTH + 2] * scale, values[k * WIDTH + 3] * scale))
        else:
            for k in range(VALUES):
                j = t + k * step
                if j < N:
                    y[row, j] = values[k] * scale

    return softmax_registers


softmax_registers = make_softmax_registers(SOFTMAX_VALUES)


def registers_threads(cols: int, values: int = SOFTMAX_VALUES) -> int:
    """The fewest threads (a multiple of 32, at least 128) for which `softmax_registers` holds a row of ``cols``."""
    return max(128, -(-cols // (32 * values)) * 32)


SOFTMAX_VECTORS = 8  # softmax_vectorised: 16-byte vectors of the row each thread holds (32 values)


@cuda.jit(device=True)
def row_state(m, l, turn):
    """The online-softmax state (max, sum) of a row from each of its threads' ``(m, l)``, in every thread of the row.

    A row's threads are row ``threadIdx.y`` of the block, ``blockDim.x`` threads (a multiple of 32): xor shuffles
    merge each warp's states; where a row has several warps, lane 0 of each leaves the warp's state in shared memory
    and, after the block's one barrier, every thread merges its row's (in one order: the same result in each).
    A kernel that merges rows in turns passes the turn's number: even and odd turns use their own shared slots, so
    that a warp already in the next turn cannot overwrite a state another warp has yet to read.
    """
    states_m = cuda.shared.array((2, MAX_WARPS), float32)
    states_l = cuda.shared.array((2, MAX_WARPS), float32)
    offset = 16
    while offset > 0:
        m, l = merge(m, l, cuda.shfl_xor_sync(FULL_MASK, m, offset), cuda.shfl_xor_sync(FULL_MASK, l, offset))
        offset //= 2
    warps = cuda.blockDim.x // 32
    if warps > 1:  # the same in every thread of the block: all of them reach the barrier, or none
        slot = turn % 2
        first = cuda.threadIdx.y * warps  # the row's first warp among the block's
        if cuda.threadIdx.x % 32 == 0:
            w = first + cuda.threadIdx.x // 32
            states_m[slot, w], states_l[slot, w] = m, l
        cuda.syncthreads()
        m, l = states_m[slot, first], states_l[slot, first]
        for w in range(first + 1, first + warps):
            m, l = merge(m, l, states_m[slot, w], states_l[slot, w])
    return m, l


@cuda.jit(device=True)
def load_group(a, i, vectors):
    """``a[i : i + 4]`` of a 1-D array: one 16-byte `vector.load4` where ``vectors``, else four 4-byte loads."""
    if vectors:
        return load4(a, (i,))
    return a[i], a[i + 1], a[i + 2], a[i + 3]


@cuda.jit(device=True)
def store_group(a, i, values, vectors):
    """``a[i : i + 4] = values``: one 16-byte `vector.store4` where ``vectors``, else four 4-byte stores."""
    if vectors:
        store4(a, (i,), values)
    else:
        a[i], a[i + 1], a[i + 2], a[i + 3] = values


@cuda.jit(device=True)
def row_layout(start, cols, vectors):
    """How a row of ``cols`` elements at flat index ``start`` splits into 16-byte vectors: ``(head, groups, scalars,
    column)``: up to 3 scalars before its first 16-byte boundary (none where not ``vectors``), ``groups`` whole
    vectors from ``start + head`` on, ``scalars`` in the head and the tail together, and the column of this thread's
    scalar (thread t < scalars holds one: in the head, else in the tail)."""
    t = cuda.threadIdx.x
    head = min((WIDTH - start % WIDTH) % WIDTH, cols) if vectors else 0
    groups = (cols - head) // WIDTH
    return head, groups, cols - WIDTH * groups, (t if t < head else t + WIDTH * groups)


@cuda.jit(device=True)
def load_row(values, x, start, cols, inside, vectors):
    """This thread's share of the row at ``start`` (`row_layout`) loaded into ``values`` (vectors, 4): vectors ``t,
    t + blockDim.x, ...``, -inf where it has none or the row is not ``inside`` the matrix; returns its scalar (or
    -inf). The loads are only issued: nothing here waits for them."""
    t = cuda.threadIdx.x
    head, groups, scalars, column = row_layout(start, cols, vectors)
    for k in range(values.shape[0]):
        g = k * cuda.blockDim.x + t
        if inside and g < groups:
            values[k, 0], values[k, 1], values[k, 2], values[k, 3] = load_group(x, start + head + WIDTH * g, vectors)
        else:
            for e in range(WIDTH):
                values[k, e] = float32(NEG_INF)
    return x[start + column] if inside and t < scalars else float32(NEG_INF)


@cuda.jit(device=True)
def exp_row(values, scalar):
    """This thread's online-softmax state of its values: ``values`` and the returned scalar become ``exp(x - m)``,
    one exp per element; returns ``(m, l, scalar)``, m its max (-inf where it holds none), l their sum."""
    m = scalar
    for k in range(values.shape[0]):
        for e in range(WIDTH):
            m = max(m, values[k, e])
    base = safe_max(m)
    scalar = math.exp(scalar - base)
    l = scalar
    for k in range(values.shape[0]):
        for e in range(WIDTH):
            values[k, e] = math.exp(values[k, e] - base)
            l += values[k, e]
    return m, l, scalar


@cuda.jit(device=True)
def store_row(y, values, scalar, scale, start, cols, inside, vectors):
    """This thread's share of the row at ``start`` (as `load_row` read it), times ``scale``, into ``y``."""
    if inside:
        t = cuda.threadIdx.x
        head, groups, scalars, column = row_layout(start, cols, vectors)
        for k in range(values.shape[0]):
            g = k * cuda.blockDim.x + t
            if g < groups:
                store_group(y, start + head + WIDTH * g, (values[k, 0] * scale, values[k, 1] * scale,
                                                          values[k, 2] * scale, values[k, 3] * scale), vectors)
        if t < scalars:
            y[start + column] = scalar * scale


@cuda.jit(device=True)
def softmax_of_row(y, values, scalar, start, cols, inside, vectors, turn):
    """The softmax of a row whose values this thread holds (`load_row`), written to ``y``: each thread's state
    (`exp_row`), the row's (`row_state`), and each value scaled from ``exp(x - m)`` to ``exp(x - M) / L``."""
    m, l, scalar = exp_row(values, scalar)
    row_m, row_l = row_state(m, l, turn)
    scale = math.exp(m - safe_max(row_m)) * reciprocal(row_l)  # 0 where m = -inf
    store_row(y, values, scalar, scale, start, cols, inside, vectors)


@functools.cache
def make_softmax_vectorised(VECTORS: int):
    """`softmax_vectorised` with ``VECTORS`` 16-byte vectors (``4 VECTORS`` values) of the row per thread.

    ``softmax_vectorised(y, x, cols)`` on the (rows, cols) matrices flattened to 1-D (`launch_softmax` passes
    ``y.ravel(), x.ravel()``); block ``(row threads, rows per block)`` (`vectorised_configuration`): row
    ``threadIdx.y`` of the block is held by ``blockDim.x`` threads, whole warps, at most ``4 VECTORS blockDim.x``
    columns. A row of any length lies at any 4-byte boundary of the flat array: up to 3 scalars before its first
    16-byte boundary (the head), whole vectors, up to 3 scalars after its last (the tail); where ``x`` or ``y`` does
    not start 16-byte aligned, the same groups of 4 as scalars. Thread t holds vectors ``t, t + blockDim.x, ...``
    (consecutive threads, consecutive 16 bytes: coalesced) in registers and at most one head or tail scalar.

    One read of ``x`` and one write of ``y`` in 16-byte accesses, every load issued before the first is used, and one
    exp per element: each thread keeps ``exp(x - m)`` with ``m`` its own max and ``l`` their sum, an online-softmax
    state; the row's states merge (`row_state`: shuffles, and one barrier where a row has several warps), and each
    thread scales its values by ``exp(m - M) / L`` as it stores them.

    Fast where a row fills most of its threads' values (``cols`` at or a little under a multiple of ``128 VECTORS``,
    1024 with the default 8: 4096 columns are one block of 4 warps) and there are many rows (a few per SM at least).
    Why: at 64 registers 1024 threads fit an SM, each with ``16 VECTORS`` bytes of loads in flight: 128 KiB per SM,
    where Little's law asks about 25 KiB (4.8 TB/s, the data sheet, x an assumed ~700 ns for a DRAM access under
    load, over 132 SMs on an H200). Rows under about 200 columns leave most values empty (under 25 KiB in flight);
    rows just past a multiple of ``128 VECTORS`` leave most of their last warp idle.
    """
    @cuda.jit(**launch_bounds(32 * MAX_WARPS, 1))  # at most 64 registers, so that a row of 1024 threads launches
    def softmax_vectorised(y, x, cols):
        values = cuda.local.array((VECTORS, WIDTH), float32)  # constant indices after unrolling: registers
        start = (cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y) * cols  # the row's first element
        inside = start < x.size  # a block's last rows may lie past the matrix: their threads only merge states
        vectors = vector_aligned(x) and vector_aligned(y)
        scalar = load_row(values, x, start, cols, inside, vectors)  # every load first ...
        softmax_of_row(y, values, scalar, start, cols, inside, vectors, 0)  # ... then the arithmetic

    return softmax_vectorised


SOFTMAX_PIPELINED_VECTORS = 8  # softmax_pipelined: 16-byte vectors per thread and row (32 values; twice: 2 rows)
PIPELINED_THREADS = 256  # its blocks: rows up to 8 x 4 x 256 = 8192 columns with the default
PIPELINED_BLOCKS_PER_SM = 2  # blocks of 256 resident per SM: at most 128 registers (64 hold the two rows' values)


@functools.cache
def make_softmax_pipelined(VECTORS: int, BLOCKS_PER_SM: int = PIPELINED_BLOCKS_PER_SM):
    """`softmax_pipelined`: `softmax_vectorised`'s rows (the same layout and launch arguments), with each thread's
    loads of its next row in flight while it reduces and writes the current one.

    Why it was built (a prediction; an H200 then measured it at 85% of a device copy's bandwidth against
    `softmax_vectorised`'s 96%, 2026-11-30, RESULTS.md section `fusion`: an SM's blocks do not all compute at
    once, so the others' loads keep the memory busy): in `softmax_vectorised` a block loads its row, then reduces
    it while none of its bytes are in flight, then stores; memory stays busy only as far as other blocks happen to
    be loading. Here the grid is persistent (``BLOCKS_PER_SM`` blocks per SM, `pipelined_configuration`): block b
    takes the row groups ``b, b + gridDim.x, ...`` in turns (`pipelined_turns`), and each turn first issues the
    loads of the next turn's row into a second set of registers (``ahead``), then computes the softmax of the row
    it holds (``now``): up to ``16 VECTORS`` bytes per thread stay in flight while it computes, one row ahead
    (moving ``ahead`` to ``now`` waits for them, so never two), and none in a block's last turn. The cost: twice
    the registers for the values (launch bounds of `PIPELINED_THREADS` threads and ``BLOCKS_PER_SM`` blocks per
    SM), so half the threads of `softmax_vectorised` per SM and half its bytes in flight at its peak (64 against
    128 KiB per SM with the defaults), held through the whole turn instead of only while the rows load; and two
    shared slots for the rows' states (`row_state`'s turns).
    """
    @cuda.jit(**launch_bounds(PIPELINED_THREADS, BLOCKS_PER_SM))
    def softmax_pipelined(y, x, cols):
        now = cuda.local.array((VECTORS, WIDTH), float32)  # the row this turn computes
        ahead = cuda.local.array((VECTORS, WIDTH), float32)  # the next turn's row, loading meanwhile
        vectors = vector_aligned(x) and vector_aligned(y)
        groups = -(-(x.size // cols) // cuda.blockDim.y)  # groups of blockDim.y rows: one per block and turn
        turns = -(-(groups - cuda.blockIdx.x) // cuda.gridDim.x)  # the same in every thread of the block
        step = cuda.gridDim.x * cuda.blockDim.y * cols  # from a row to the one it computes next turn
        start = (cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y) * cols
        scalar_ahead = load_row(ahead, x, start, cols, start < x.size, vectors)
        for turn in range(turns):
            for k in range(VECTORS):
                for e in range(WIDTH):
                    now[k, e] = ahead[k, e]
            scalar = scalar_ahead
            if turn + 1 < turns:  # the next row's loads first: they arrive while this row is computed
                scalar_ahead = load_row(ahead, x, start + step, cols, start + step < x.size, vectors)
            softmax_of_row(y, now, scalar, start, cols, start < x.size, vectors, turn)
            start += step

    return softmax_pipelined


softmax_vectorised = make_softmax_vectorised(SOFTMAX_VECTORS)
VECTORISED_MAX_COLS = SOFTMAX_VECTORS * WIDTH * 32 * MAX_WARPS  # its longest row: 32 values in each of 1024 threads


def vectorised_configuration(rows: int, cols: int, threads: int = THREADS, vectors: int = SOFTMAX_VECTORS):
    """(grid, block) of `softmax_vectorised` (built with ``vectors``): a row held by the fewest warps whose
    ``4 vectors`` values per thread cover it, as many rows per block as fit in ``threads`` (at least one)."""
    row_threads = 32 * max(1, -(-cols // (32 * WIDTH * vectors)))
    rows_per_block = max(1, threads // row_threads)
    return -(-rows // rows_per_block), (row_threads, rows_per_block)


softmax_pipelined = make_softmax_pipelined(SOFTMAX_PIPELINED_VECTORS)
PIPELINED_MAX_COLS = SOFTMAX_PIPELINED_VECTORS * WIDTH * PIPELINED_THREADS  # its longest row: one block's threads


def pipelined_configuration(rows: int, cols: int, sms: int | None = None, vectors: int = SOFTMAX_PIPELINED_VECTORS,
                            blocks_per_sm: int = PIPELINED_BLOCKS_PER_SM):
    """(grid, block) of `softmax_pipelined` (built with ``vectors`` and ``blocks_per_sm``) on ``sms`` SMs (default:
    `multiprocessors`): `vectorised_configuration`'s blocks of `PIPELINED_THREADS`, at most ``blocks_per_sm`` per
    SM (the persistent grid: each block computes its rows in turns)."""
    grid, block = vectorised_configuration(rows, cols, PIPELINED_THREADS, vectors)
    return min(grid, blocks_per_sm * (multiprocessors() if sms is None else sms)), block


def pipelined_turns(rows: int, grid: int, block) -> int:
    """The most rows a block of `softmax_pipelined` computes, one per turn: its row groups, ``block[1]`` rows each,
    shared by ``grid`` blocks."""
    return -(-rows // (block[1] * grid))


def check_rows(y, x) -> None:
    """A clear error when ``x`` and ``y`` are not two float32 matrices of one shape."""
    if x.ndim != 2 or y.shape != x.shape:
        raise ValueError(f"x must be 2-D (rows, columns) and y of its shape, got x {x.shape} and y {y.shape}")
    if x.dtype != np.float32 or y.dtype != np.float32:
        raise TypeError(f"x and y must be float32, got {x.dtype} and {y.dtype}: convert with .astype(np.float32)")


def launch_softmax(kernel, y, x, threads=THREADS) -> None:
    """``kernel[rows, threads](y, x)``: one block per row; ``threads`` a multiple of 32 up to 1024.

    `softmax_vectorised`: on the flattened matrices, with the blocks of `vectorised_configuration` (``threads``: the
    threads a block fills with rows). `softmax_pipelined`: the same, on its persistent grid (`pipelined_configuration`;
    ``threads`` unused: its launch bounds fix its blocks at `PIPELINED_THREADS`).
    """
    check_rows(y, x)
    if threads % 32 or not 32 <= threads <= 32 * MAX_WARPS:
        raise ValueError(f"threads must be a multiple of 32 between 32 and 1024, got {threads}")
    if kernel is softmax_vectorised or kernel is softmax_pipelined:
        name = kernel.py_func.__name__
        if not (x.flags["C_CONTIGUOUS"] and y.flags["C_CONTIGUOUS"]):  # flattened below: a copy would lose y
            raise ValueError(f"{name} reads x and writes y flattened: both must be C-contiguous; pass "
                             "np.ascontiguousarray copies (and copy y back), or use softmax_online")
        if kernel is softmax_pipelined and x.shape[1] > PIPELINED_MAX_COLS:
            instead = (f"softmax_vectorised (rows up to {VECTORISED_MAX_COLS})" if x.shape[1] <= VECTORISED_MAX_COLS
                       else "softmax_online")
            raise ValueError(f"softmax_pipelined holds {SOFTMAX_PIPELINED_VECTORS * WIDTH} values per thread, at "
                             f"most {PIPELINED_MAX_COLS} columns per row of {PIPELINED_THREADS} threads, got "
                             f"{x.shape[1]}; use {instead}")
        if x.shape[1] > VECTORISED_MAX_COLS:
            raise ValueError(f"softmax_vectorised holds {SOFTMAX_VECTORS * WIDTH} values per thread, at most "
                             f"{VECTORISED_MAX_COLS} columns per row of 1024 threads, got {x.shape[1]}; "
                             "use softmax_online")
        if x.size:
            grid, block = (vectorised_configuration(*x.shape, threads) if kernel is softmax_vectorised
                           else pipelined_configuration(*x.shape))
            kernel[grid, block](y.ravel(), x.ravel(), x.shape[1])
        return
    if kernel is softmax_row_fused and x.shape[1] > MAX_COLS:
        raise ValueError(f"softmax_row_fused holds a row in shared memory: at most {MAX_COLS} columns, got "
                         f"{x.shape[1]}; use softmax_online for longer rows")
    if kernel is softmax_registers and x.shape[1] > SOFTMAX_VALUES * threads:
        raise ValueError(f"softmax_registers holds {SOFTMAX_VALUES} values per thread: {threads} threads hold "
                         f"{SOFTMAX_VALUES * threads} columns, got {x.shape[1]}; use "
                         f"threads={registers_threads(x.shape[1])} (rows up to {SOFTMAX_VALUES * 32 * MAX_WARPS}) "
                         "or softmax_online")
    if x.shape[0]:
        kernel[x.shape[0], threads](y, x)


# ------------------------------------------------------------------ allocations of the host paths


class Allocations:
    """The device allocations made inside ``with allocations():``, in bytes."""

    def __init__(self):
        self.sizes: list[int] = []

    @property
    def largest(self) -> int:
        return max(self.sizes, default=0)

    @property
    def total(self) -> int:
        return sum(self.sizes)


_recording: list[Allocations] = []


@contextlib.contextmanager
def allocations():
    """Record every `device_array` the host functions of this module make inside the block."""
    record = Allocations()
    _recording.append(record)
    try:
        yield record
    finally:
        _recording.remove(record)


def device_array(shape, source=None):
    """A float32 device array of ``shape`` (a copy of ``source`` when given), recorded by `allocations`."""
    host = np.zeros(shape, np.float32) if source is None else np.ascontiguousarray(source, np.float32)
    for record in _recording:
        record.sizes.append(host.nbytes)
    return cuda.to_device(host)


def softmax_naive(x) -> np.ndarray:
    """Softmax of each row of the host matrix ``x`` in three launches, with intermediate arrays m, e and l."""
    d_x = device_array(np.shape(x), x)
    rows = d_x.shape[0]
    d_m, d_e, d_l, d_y = device_array(rows), device_array(d_x.shape), device_array(rows), device_array(d_x.shape)
    if rows:
        row_max[rows, THREADS](d_m, d_x)
        exp_and_sum[rows, THREADS](d_e, d_l, d_x, d_m)
        divide[rows, THREADS](d_y, d_e, d_l)
    return d_y.copy_to_host()


def softmax(x, kernel=softmax_online) -> np.ndarray:
    """Softmax of each row of the host matrix ``x`` with one fused kernel."""
    d_x = device_array(np.shape(x), x)
    d_y = device_array(d_x.shape)
    launch_softmax(kernel, d_y, d_x)
    return d_y.copy_to_host()


# ------------------------------------------------------------------ attention


@cuda.jit
def scores(S, Q, K, causal):
    """``S = Q K^T / sqrt(d)``, ``-inf`` above the diagonal with ``causal``: one thread per score."""
    key, query = cuda.grid(2)
    N, d = Q.shape
    if query < N and key < K.shape[0]:
        s = float32(NEG_INF)
        if not causal or key <= query:
            s = float32(0)
            for c in range(d):
                s += Q[query, c] * K[key, c]
            s *= float32(1) / math.sqrt(float32(d))
        S[query, key] = s


@cuda.jit
def attention_row_fused(O, Q, K, V, causal):
    s = cuda.shared.array(MAX_COLS, float32)  # this query's row of scores
    q = cuda.shared.array(MAX_D, float32)
    query, t = cuda.blockIdx.x, cuda.threadIdx.x
    N, d = Q.shape
    for c in range(t, d, cuda.blockDim.x):
        q[c] = Q[query, c]
    cuda.syncthreads()
    keys = query + 1 if causal else N
    scale = float32(1) / math.sqrt(float32(d))
    best = float32(NEG_INF)
    for j in range(t, keys, cuda.blockDim.x):  # thread t scores keys t, t + blockDim, ...
        acc = float32(0)
        for c in range(d):
            acc += q[c] * K[j, c]
        s[j] = acc * scale
        best = max(best, s[j])
    top = safe_max(block_reduce(best, True))
    total = float32(0)
    for j in range(t, keys, cuda.blockDim.x):
        s[j] = math.exp(s[j] - top)
        total += s[j]
    scale = reciprocal(block_reduce(total, False))  # its barriers also make every s[j] visible to every thread
    for c in range(t, d, cuda.blockDim.x):  # thread t sums column c of V weighted by the probabilities
        acc = float32(0)
        for j in range(keys):
            acc += s[j] * V[j, c]
        O[query, c] = acc * scale


@cuda.jit
def attention_flash(O, Q, K, V, causal):
    k_tile = cuda.shared.array((BLOCK_KEYS, MAX_D), float32)
    v_tile = cuda.shared.array((BLOCK_KEYS, MAX_D), float32)
    q = cuda.local.array(MAX_D, float32)  # this thread's query row ...
    acc = cuda.local.array(MAX_D, float32)  # ... and its unnormalised output row
    p = cuda.local.array(BLOCK_KEYS, float32)  # its scores for the current tile
    t = cuda.threadIdx.x
    first = cuda.blockIdx.x * BLOCK_ROWS
    query = first + t
    N, d = Q.shape
    scale = float32(1) / math.sqrt(float32(d))
    for c in range(d):
        q[c] = Q[query, c] * scale if query < N else float32(0)
        acc[c] = float32(0)
    m, l = float32(NEG_INF), float32(0)
    end = min(N, first + BLOCK_ROWS) if causal else N  # causal: no key past the block's last query
    for start in range(0, end, BLOCK_KEYS):
        for e in range(t, BLOCK_KEYS * d, BLOCK_ROWS):  # the block copies the tiles by rows
            j, c = e // d, e % d
            inside = start + j < N
            k_tile[j, c] = K[start + j, c] if inside else float32(0)
            v_tile[j, c] = V[start + j, c] if inside else float32(0)
        cuda.syncthreads()
        tile_max = float32(NEG_INF)
        for j in range(BLOCK_KEYS):
            s = float32(NEG_INF)
            if start + j < N and (not causal or start + j <= query):
                s = float32(0)
                for c in range(d):
                    s += q[c] * k_tile[j, c]
            p[j] = s
            tile_max = max(tile_max, s)
        m_new = max(m, tile_max)
        if m_new != NEG_INF:  # else every key so far is masked: nothing to add
            rescale = math.exp(m - m_new)  # the old sum and output were relative to m
            l *= rescale
            for c in range(d):
                acc[c] *= rescale
            for j in range(BLOCK_KEYS):
                w = math.exp(p[j] - m_new)
                l += w
                for c in range(d):
                    acc[c] += w * v_tile[j, c]
            m = m_new
        cuda.syncthreads()  # everyone is done with the tiles before the next copy
    if query < N:
        inverse = reciprocal(l)
        for c in range(d):
            O[query, c] = acc[c] * inverse


def attention_naive(Q, K, V, causal=False) -> np.ndarray:
    """Attention on host arrays in three steps with two N x N device arrays: scores, their softmax, times V."""
    d_Q, d_K, d_V = (device_array(np.shape(a), a) for a in (Q, K, V))
    check_attention(d_Q, d_Q, d_K, d_V)
    N = d_Q.shape[0]
    d_S, d_P, d_O = device_array((N, N)), device_array((N, N)), device_array(d_Q.shape)
    if N:
        scores[(-(-N // TILE), -(-N // TILE)), (TILE, TILE)](d_S, d_Q, d_K, causal)
        launch_softmax(softmax_online, d_P, d_S)
        mm.launch(mm.matmul_tiled, d_O.reshape((1,) + d_O.shape), d_P.reshape((1, N, N)),
                  d_V.reshape((1,) + d_V.shape))
    return d_O.copy_to_host()


def attention(Q, K, V, causal=False, kernel=attention_flash) -> np.ndarray:
    """Attention on host arrays with one fused kernel."""
    d_Q, d_K, d_V = (device_array(np.shape(a), a) for a in (Q, K, V))
    d_O = device_array(d_Q.shape)
    launch_attention(kernel, d_O, d_Q, d_K, d_V, causal)
    return d_O.copy_to_host()


# ------------------------------------------------------------------ register micro-tiles (GEMM-shaped)


K_STEPS = 4  # make_micro_tile: steps of k per pass of its loop (its 4 calls of `step`, written out)


@functools.cache
def make_fragment(count: int, vector: bool):
    """``fragment(out, M, k, first, step)``: ``out[n] = M[k, first + n * step]`` for ``n < count`` (uint64 indices),
    or with ``vector`` ``M[k, first + (n // 4) * step + n % 4]``, one 16-byte load per 4 neighbours."""

    @cuda.jit(device=True)
    def fragment(out, M, k, first, step):
        if vector:
            for g in range(count // WIDTH):
                values = load4(M, (k, first + uint64(g) * step))
                for v in range(WIDTH):
                    out[g * WIDTH + v] = values[v]
        else:
            for n in range(count):
                out[n] = M[k, first + uint64(n) * step]

    return fragment


@functools.cache
def make_micro_tile(TM: int, TN: int, vector_b: bool = False, vector_a: bool = False):
    """The ``TM x TN`` register micro-tile product of one thread, shaped like a GEMM's inner loop.

    ``micro_tile_product(acc, A, row, row_step, B, col, col_step, depth)`` adds
    ``A[rows, :depth] @ B[:depth, cols]`` to ``acc`` (a ``cuda.local.array((TM, TN))``), with this
    thread's rows ``row + i * row_step`` and columns ``col + j * col_step``: per step of ``k`` it
    loads TM values of A and TN of B from shared memory and does TM x TN multiply-adds on them.
    Every local index is a constant once the loops over ``i`` and ``j`` are unrolled, so ``acc`` and
    the two fragments stay in registers. Its helpers (`make_fragment`, ``step``) are plain device functions that
    NVVM inlines: with numba's ``inline="always"``, which copies a helper's IR into every call, the sm_90 SASS of
    `attention_flash2` had the same main loops and 6 more registers, and it compiled in 7 s instead of 3 (numba-cuda
    0.30, 2026-11-28). The shared-memory indices are unsigned: read on the sm_90 SASS of
    `attention_flash2` (`run.tuning.inspect_compiled`), instructions per step of ``O += P V`` (32 FFMA)
    90 -> 58, per two steps of ``S = Q K^T`` 92 -> 76, the same 128 registers. The loop over ``k`` has
    ``K_STEPS`` = 4 steps written out per pass (then the last ``depth % 4`` one by one): numba's counter of a
    ``range`` over uint64 costs about 14 instructions per pass, and NVVM had unrolled only 1 or 2 steps per
    pass (a ``while`` loop instead lets NVVM unroll every step of a short loop, which spilled at d = 16).

    ``vector_b``: this thread's columns come in groups of 4 neighbours, ``col + (j // 4) * col_step + j % 4``,
    each group one 16-byte load (`vector.load4`; ``col`` a multiple of 4 in 16-byte aligned rows of ``B``)
    instead of 4 (``TN`` a multiple of 4). ``micro_tile_product.column(col, col_step, j)`` is column ``j``'s
    place either way, for the code that writes the tile out.

    ``vector_a``: ``A`` is given transposed, ``A[k, row]`` (depth x rows), and this thread's rows come in groups
    of 4 neighbours, ``row + (i // 4) * row_step + i % 4``, each group one 16-byte load per step of ``k``
    (``row`` a multiple of 4 in 16-byte aligned rows of ``A``; ``TM`` a multiple of 4) instead of 4 loads.
    """
    for option, vector, size, name in (("vector_a", vector_a, TM, "TM"), ("vector_b", vector_b, TN, "TN")):
        if vector and size % WIDTH:
            raise ValueError(f"make_micro_tile({TM}, {TN}, {option}=True): {name} must be a multiple of {WIDTH}")

    @cuda.jit(device=True)
    def column(col, col_step, j):
        """The column of ``B`` (and of the result) that this thread's column ``j`` is."""
        if vector_b:
            return col + (j // WIDTH) * col_step + j % WIDTH
        return col + j * col_step

    a_fragment, b_fragment = make_fragment(TM, vector_a), make_fragment(TN, vector_b)

    @cuda.jit(device=True)
    def step(acc, a, b, A, row, row_step, B, col, col_step, k):
        """Step ``k``: this thread's TM values of column k of A and TN of row k of B, TM x TN multiply-adds."""
        if vector_a:
            a_fragment(a, A, k, row, row_step)  # A given transposed: its column k is row k of A^T
        else:
            for i in range(TM):
                a[i] = A[row + uint64(i) * row_step, k]
        b_fragment(b, B, k, col, col_step)
        for i in range(TM):
            for j in range(TN):
                acc[i, j] += a[i] * b[j]

    @cuda.jit(device=True)
    def micro_tile_product(acc, A, row, row_step, B, col, col_step, depth):
        a = cuda.local.array(TM, float32)
        b = cuda.local.array(TN, float32)
        # unsigned indices: numba wraps a negative signed index around, which hides that the rows of A (and the
        # columns of B) are constants apart; unsigned, each shared load is one address plus a constant offset
        row, row_step, col, col_step = uint64(row), uint64(row_step), uint64(col), uint64(col_step)
        depth = uint64(depth)
        for k0 in range(depth // uint64(K_STEPS)):  # K_STEPS steps per pass of numba's loop counter
            k = k0 * uint64(K_STEPS)
            step(acc, a, b, A, row, row_step, B, col, col_step, k)
            step(acc, a, b, A, row, row_step, B, col, col_step, k + uint64(1))
            step(acc, a, b, A, row, row_step, B, col, col_step, k + uint64(2))
            step(acc, a, b, A, row, row_step, B, col, col_step, k + uint64(3))
        for k in range(depth - depth % uint64(K_STEPS), depth):
            step(acc, a, b, A, row, row_step, B, col, col_step, k)

    micro_tile_product.column = column
    return micro_tile_product


# ------------------------------------------------------------------ flash attention after FlashAttention-2

FLASH_QUERIES = 64  # attention_flash2: queries per block, 16 per warp
FLASH_KEYS = 32  # keys per tile of K and V
FLASH_THREADS = 128  # 4 warps; in a warp, 4 row groups x 8 column lanes
ROW_GROUPS = 4  # row groups per warp: lane % 4 picks a thread's 4 neighbouring rows, warp * 16 + 4 (lane % 4) + i
COLUMN_LANES = 8  # lanes per row group: they share its rows; lane // 4 picks a thread's keys and output columns
FLASH_DIMS = (16, 32, 64)  # head dimensions with a compiled kernel; a smaller d runs on the next one, zero-padded
LOG2E = 1.4426950408889634
H100_SMS = 132  # the SMs a split is planned for where the device has none of its own (the simulator says 1)
FLASH_BLOCKS_PER_SM = 4  # attention_flash2's blocks resident per SM of an H100: 128 registers x 128 threads each
MIN_SPLIT_TILES = 4  # a slice of the keys has at least 4 tiles of 32 (else the merge costs what the slice saves)
MAX_SPLITS = 16  # the partial results stay O(N): at most 16 x (batch*heads) x N x (d + 2) float32


@cuda.jit(device=True)
def row_group_max(value):
    """The max over the 8 lanes of this lane's row group (lanes that share their 2 lowest bits: lane % 4)."""
    for offset in (16, 8, 4):
        value = max(value, cuda.shfl_xor_sync(FULL_MASK, value, offset))
    return value


@cuda.jit(device=True)
def row_group_sum(value):
    """The sum over the 8 lanes of this lane's row group."""
    for offset in (16, 8, 4):
        value += cuda.shfl_xor_sync(FULL_MASK, value, offset)
    return value


@cuda.jit(device=True)
def tile_chunk(e, rows):
    """Row and first column of chunk ``e`` (4 columns, 16 bytes) of a tile of ``rows`` rows: the 32 lanes of a warp
    copy 2 neighbouring chunks of each of 16 rows (lane % 2 picks the chunk), a whole 32-byte sector per row."""
    return (e // 2) % rows, (e // (2 * rows) * 2 + e % 2) * WIDTH


@cuda.jit(device=True)
def read_chunk(X, head, row, c, inside, d, vectors):
    """``X[head, row, c:c + 4]``, zero where the row is not ``inside`` or past column ``d - 1``: one 16-byte load
    where ``vectors`` (d a multiple of 4, rows of X 16-byte aligned), else one load per column."""
    if vectors and inside and c < d:
        return load4(X, (head, row, c))
    zero = float32(0)
    return (X[head, row, c] if inside and c < d else zero, X[head, row, c + 1] if inside and c + 1 < d else zero,
            X[head, row, c + 2] if inside and c + 2 < d else zero, X[head, row, c + 3] if inside and c + 3 < d else zero)


@functools.cache
def make_flash2(D: int, split: bool = False, blocks_per_sm: int = FLASH_BLOCKS_PER_SM):
    """`attention_flash2` for head dimensions up to ``D`` (a multiple of 8): Q, K, V, O of shape (batch*heads, N, d);
    its launch bounds keep ``blocks_per_sm`` blocks resident per SM (4: at most 128 registers; 5: at most 96).

    Grid (query blocks, batch*heads), 128 threads. The block copies its 64 queries once (scaled by
    ``log2(e) / sqrt(d)``, so that ``exp2`` of a score is ``exp`` of the true one), then walks tiles of
    32 keys: K and V through shared memory, ``S = Q K^T`` as a 4 x 4 register micro-tile
    per thread, the online softmax of its 4 rows (max over the row's 8 lanes by shuffles; the sum ``l``
    stays a per-lane partial, added over the lanes once at the end), ``P`` through the warp's own columns
    of shared memory, ``O += P V`` as a 4 x D/8 micro-tile. With ``causal`` the tiles past the block's
    last query are skipped. Nothing is N x N; K and V are read once per 64 queries.

    Every fragment read of both products is one 16-byte load (LDS.128) of 4 neighbouring words: a thread's 4
    rows are neighbours (``4 (lane % 4)`` on), read from Q and P kept transposed (d x queries, keys x queries),
    its 4 keys from K transposed, its output columns from V in groups of 4 (d = 32 or 64; d = 16 reads V a word
    at a time). The tile copies read 16 bytes per load where d is a multiple of 4 and the rows aligned (`read_chunk`).
    Bank conflicts, counted by hand (32 banks of 4 bytes; a 16-byte access is served per quarter warp; rows
    of the transposed tiles are 16 (mod 32) words apart in steps of 4 columns, hence the paddings):

    - copies (`tile_chunk`: a warp takes 16 rows x 2 neighbouring chunks): the transposed stores of Q (rows of
      68 floats) and K (36) hit bank 16 (chunk % 2) + row (mod 32) + a constant: conflict-free. K's were 8-way
      at d = 64 (4-way at 32, 2-way at 16) when a warp copied the 16 chunks of 2 keys. V's 16-byte stores,
      4 rows x 2 chunks per quarter warp, fall in distinct banks with rows of d + 8 floats (unpadded: 4-way at
      d = 32 and 64).
    - P's 16-byte stores (a thread's 4 rows of one key): a quarter warp is 4 row groups x 2 column lanes, keys
      4 apart in rows of 68 floats: conflict-free. This is why lane % 4, not lane // 8, picks the rows: with the
      8 lanes of a quarter warp in one row group, their keys 4 apart land in 2 places of 8 for any padding
      that keeps the rows 16-byte aligned (4-way).
    - the product's loads: all lanes read one row of a tile, 2 (K, V) or 4 (Q, P) neighbouring chunks per
      quarter warp: conflict-free.

    ``split``: `attention_flash2_split` instead, for grids too small for the GPU (flash-decoding): grid
    (query blocks, batch*heads, splits); block z walks only its slice of the keys and writes its rows'
    unnormalised output, max and sum to ``O_part`` (batch*heads, splits, N, d), ``m_part`` and ``l_part``
    (batch*heads, splits, N); `flash2_combine` merges the slices.
    """
    TN_O = D // COLUMN_LANES
    TN_S = FLASH_KEYS // COLUMN_LANES
    TM = FLASH_QUERIES // (FLASH_THREADS // 32) // ROW_GROUPS  # 4 neighbouring rows: one 16-byte load of Q or P
    Q_STRIDE = P_STRIDE = FLASH_QUERIES + WIDTH  # transposed tiles (Q^T, P^T, K^T): rows 16-byte aligned, padded
    K_STRIDE = FLASH_KEYS + WIDTH  # so that the copies and P's stores are free of bank conflicts (see above)
    V_STRIDE = D + 2 * WIDTH
    VECTOR_O = TN_O % WIDTH == 0  # d = 32 or 64: a thread's output columns in groups of 4 neighbours
    # On the sm_90 SASS of `attention_flash2` (d = 64), shared loads per 32 FFMA: S = Q K^T 16 -> 10 (K's 4 keys
    # in one load) -> 4 (Q's 4 rows in one load); O += P V 12 -> 6 (V's columns) -> 3 (P's rows); instructions
    # per 32 FFMA: S 66 -> 60, O 51 -> 48 (then 42.5 and 38 with make_micro_tile's K_STEPS), registers 128 -> 104
    # (117 with K_STEPS), the same 4 blocks per SM.
    scores_product = make_micro_tile(TM, TN_S, vector_b=True, vector_a=True)
    output_product = make_micro_tile(TM, TN_O, vector_b=VECTOR_O, vector_a=True)
    FIRST_KEY, FIRST_COLUMN = WIDTH, (WIDTH if VECTOR_O else 1)  # times col: this thread's first key, column
    COLUMN_STEP = WIDTH * COLUMN_LANES if VECTOR_O else COLUMN_LANES  # between its groups of output columns
    output_column = output_product.column  # column j of this thread's output micro-tile

    @cuda.jit(device=True)
    def attend(acc, m, l, Q, K, V, head, first, row, col, begin, end, causal):
        """The online softmax of the block's queries over keys ``begin .. end - 1`` into acc, m and l."""
        q_tile = cuda.shared.array((D, Q_STRIDE), float32, alignment=16)  # Q transposed: S = q_tile^T @ k_tile
        k_tile = cuda.shared.array((D, K_STRIDE), float32, alignment=16)  # K transposed
        v_tile = cuda.shared.array((FLASH_KEYS, V_STRIDE), float32, alignment=16)
        p_tile = cuda.shared.array((FLASH_KEYS, P_STRIDE), float32, alignment=16)  # P transposed; warp w: its 16 rows
        s = cuda.local.array((TM, TN_S), float32)
        t = cuda.threadIdx.x
        N, d = Q.shape[1], Q.shape[2]
        scale = float32(LOG2E) / math.sqrt(float32(d))
        vectors = d % WIDTH == 0 and vector_aligned(Q) and vector_aligned(K) and vector_aligned(V)
        for e in range(t, FLASH_QUERIES * D // WIDTH, FLASH_THREADS):
            r, c = tile_chunk(e, FLASH_QUERIES)
            q4 = read_chunk(Q, head, first + r, c, first + r < N, d, vectors)
            for v in range(WIDTH):
                q_tile[c + v, r] = q4[v] * scale
        for i in range(TM):
            m[i], l[i] = float32(NEG_INF), float32(0)
            for j in range(TN_O):
                acc[i, j] = float32(0)
        stop = min(end, first + FLASH_QUERIES) if causal else end  # with the mask, no key past the last query
        for start in range(begin, stop, FLASH_KEYS):
            cuda.syncthreads()  # everyone is done with the previous tiles (and q_tile is written)
            for e in range(t, FLASH_KEYS * D // WIDTH, FLASH_THREADS):
                j, c = tile_chunk(e, FLASH_KEYS)
                k4 = read_chunk(K, head, start + j, c, start + j < end, d, vectors)
                for v in range(WIDTH):
                    k_tile[c + v, j] = k4[v]
                store4(v_tile, (j, c), read_chunk(V, head, start + j, c, start + j < end, d, vectors))
            cuda.syncthreads()
            for i in range(TM):
                for j in range(TN_S):
                    s[i, j] = float32(0)
            scores_product(s, q_tile, row, 0, k_tile, FIRST_KEY * col, 0, D)  # keys 4 col .. 4 col + 3
            for i in range(TM):
                query = first + row + i
                top = float32(NEG_INF)
                for j in range(TN_S):
                    key = start + FIRST_KEY * col + j
                    if key >= end or (causal and key > query):
                        s[i, j] = float32(NEG_INF)
                    top = max(top, s[i, j])
                m_new = max(m[i], row_group_max(top))
                base = safe_max(m_new)  # 0 while every key of the row so far is masked: exp2(-inf) = 0
                rescale = math.exp2(m[i] - base)  # the old sum and output were relative to m[i]
                m[i] = m_new
                l[i] *= rescale
                for j in range(TN_O):
                    acc[i, j] *= rescale
                for j in range(TN_S):
                    s[i, j] = math.exp2(s[i, j] - base)  # s now holds P
                    l[i] += s[i, j]
            for j in range(TN_S):  # P transposed: the thread's 4 rows of key j in one 16-byte store
                store4(p_tile, (FIRST_KEY * col + j, row), (s[0, j], s[1, j], s[2, j], s[3, j]))
            cuda.syncwarp()  # the warp's rows of P are written before its lanes read them
            output_product(acc, p_tile, row, 0, v_tile, FIRST_COLUMN * col, COLUMN_STEP, FLASH_KEYS)

    @cuda.jit(device=True)
    def place():
        """This thread's first row (of 4 neighbours) and its column lane."""
        lane = cuda.threadIdx.x % 32
        return (cuda.threadIdx.x // 32) * (FLASH_QUERIES // 4) + WIDTH * (lane % ROW_GROUPS), lane // ROW_GROUPS

    bounds = launch_bounds(FLASH_THREADS, blocks_per_sm)

    @cuda.jit(**bounds)  # registers capped so that blocks_per_sm blocks of 128 threads fit an SM
    def attention_flash2(O, Q, K, V, causal):
        acc = cuda.local.array((TM, TN_O), float32)
        m = cuda.local.array(TM, float32)  # running max of each row (log2 units) ...
        l = cuda.local.array(TM, float32)  # ... and this lane's part of the row's sum
        row, col = place()
        head, first = cuda.blockIdx.y, cuda.blockIdx.x * FLASH_QUERIES
        N, d = Q.shape[1], Q.shape[2]
        attend(acc, m, l, Q, K, V, head, first, row, col, 0, N, causal)
        for i in range(TM):
            query = first + row + i
            inverse = reciprocal(row_group_sum(l[i]))
            for j in range(TN_O):
                c = output_column(FIRST_COLUMN * col, COLUMN_STEP, j)
                if query < N and c < d:
                    O[head, query, c] = acc[i, j] * inverse

    @cuda.jit(**bounds)
    def attention_flash2_split(O_part, m_part, l_part, Q, K, V, causal):
        acc = cuda.local.array((TM, TN_O), float32)
        m = cuda.local.array(TM, float32)
        l = cuda.local.array(TM, float32)
        row, col = place()
        head, first, split = cuda.blockIdx.y, cuda.blockIdx.x * FLASH_QUERIES, cuda.blockIdx.z
        N, d = Q.shape[1], Q.shape[2]
        begin = split * split_keys(N, m_part.shape[1])
        end = min(N, begin + split_keys(N, m_part.shape[1]))
        attend(acc, m, l, Q, K, V, head, first, row, col, begin, end, causal)
        for i in range(TM):
            query = first + row + i
            total = row_group_sum(l[i])
            if query < N:
                if col == 0:
                    m_part[head, split, query], l_part[head, split, query] = m[i], total
                for j in range(TN_O):
                    c = output_column(FIRST_COLUMN * col, COLUMN_STEP, j)
                    if c < d:
                        O_part[head, split, query, c] = acc[i, j]

    return attention_flash2_split if split else attention_flash2


@cuda.jit(device=True)
def split_keys(N, splits):
    """Keys per slice of `attention_flash2_split`: whole tiles, as even as they go."""
    tiles = (N + FLASH_KEYS - 1) // FLASH_KEYS
    return (tiles + splits - 1) // splits * FLASH_KEYS


@cuda.jit
def flash2_combine(O, O_part, m_part, l_part):
    """``O[head, query, c]`` from the slices of `attention_flash2_split`: with ``M`` the largest of their maxima,
    ``sum_s 2^(m_s - M) O_s / sum_s 2^(m_s - M) l_s``. Grid (ceil(N d / threads), batch*heads)."""
    e, head = cuda.grid(1), cuda.blockIdx.y
    N, d, splits = O.shape[1], O.shape[2], m_part.shape[1]
    if e < N * d:
        query, c = e // d, e % d
        top = float32(NEG_INF)
        for z in range(splits):
            top = max(top, m_part[head, z, query])
        base = safe_max(top)
        total, value = float32(0), float32(0)
        for z in range(splits):
            weight = math.exp2(m_part[head, z, query] - base)  # 0 for a slice whose keys are all masked
            total += weight * l_part[head, z, query]
            value += weight * O_part[head, z, query, c]
        O[head, query, c] = value * reciprocal(total)


def flash2_for(d: int, split: bool = False, blocks_per_sm: int = FLASH_BLOCKS_PER_SM):
    """The `attention_flash2` (or ``split``: `attention_flash2_split`) compiled for the smallest head dimension in
    `FLASH_DIMS` that holds ``d``, with ``blocks_per_sm`` blocks resident per SM."""
    fits = [D for D in FLASH_DIMS if d <= D]
    if not fits or d < 1:
        raise ValueError(f"attention_flash2 takes head dimensions 1 to {FLASH_DIMS[-1]}, got {d}; "
                         f"use attention_flash for d up to {MAX_D}")
    return make_flash2(fits[0], split, blocks_per_sm)


attention_flash2 = make_flash2(64)


ATTENTION_KERNELS = [attention_row_fused, attention_flash, attention_flash2]


def check_attention(O, Q, K, V, batched=False) -> None:
    """A clear error when Q, K, V and O are not float32 (N, d) matrices of one shape with d <= MAX_D.

    ``batched``: (batch*heads, N, d) is accepted too.
    """
    shapes = {name: a.shape for name, a in zip("OQKV", (O, Q, K, V))}
    dims = (2, 3) if batched else (2,)
    if len(set(shapes.values())) != 1 or len(Q.shape) not in dims:
        layout = "2-D (N, d) or 3-D (batch*heads, N, d)" if batched else "2-D (N, d)"
        raise ValueError(f"O, Q, K and V must be {layout} of one shape, got {shapes}")
    d = tuple(Q.shape)[-1]
    if d > MAX_D or d == 0:
        raise ValueError(f"the head dimension d must be between 1 and {MAX_D}, got {d}")
    dtypes = {name: str(a.dtype) for name, a in zip("OQKV", (O, Q, K, V))}
    if set(dtypes.values()) != {"float32"}:
        raise TypeError(f"O, Q, K and V must be float32, got {dtypes}: convert with .astype(np.float32)")


def flash2_configuration(shape, splits: int = 1) -> tuple[tuple[int, ...], int]:
    """(grid, block) of `attention_flash2` for Q of shape (batch*heads, N, d): 64 queries per block of 128;
    with ``splits`` > 1, of `attention_flash2_split`: the same blocks once per slice of the keys."""
    heads, N = shape[0], shape[1]
    grid = (-(-N // FLASH_QUERIES), heads)
    return (grid + (splits,) if splits > 1 else grid), FLASH_THREADS


def multiprocessors() -> int:
    """The current device's SM count; `H100_SMS` on the CPU simulator, whose device reports a single SM."""
    count = cuda.get_current_device().MULTIPROCESSOR_COUNT
    return count if count > 1 else H100_SMS


def flash2_splits(heads: int, N: int, sms: int | None = None, blocks_per_sm: int = FLASH_BLOCKS_PER_SM) -> int:
    """Slices of the keys for `attention_flash2` on ``sms`` SMs (default: `multiprocessors`): 1 when its
    (query blocks x heads) fill ``blocks_per_sm`` blocks per SM, else enough slices to do so, each of at least
    ``MIN_SPLIT_TILES`` tiles, at most ``MAX_SPLITS``."""
    blocks = -(-N // FLASH_QUERIES) * heads
    wanted = -(-blocks_per_sm * (multiprocessors() if sms is None else sms) // blocks)
    most = min(MAX_SPLITS, max(1, -(-N // FLASH_KEYS) // MIN_SPLIT_TILES))
    return max(1, min(wanted, most))


def flash2_partials(shape, splits: int) -> tuple:
    """The partial results of `attention_flash2_split` for Q of shape (batch*heads, N, d): O_part, m_part, l_part
    (`device_array`s)."""
    heads, N, d = shape
    return device_array((heads, splits, N, d)), device_array((heads, splits, N)), device_array((heads, splits, N))


def launch_flash2(O, Q, K, V, causal=False, splits: int | None = None, partials=None,
                  blocks_per_sm: int = FLASH_BLOCKS_PER_SM) -> None:
    """`attention_flash2` on (batch*heads, N, d) arrays: one kernel, or with ``splits`` > 1 (default: `flash2_splits`)
    `attention_flash2_split` into ``partials`` (default: new `flash2_partials`), then `flash2_combine`;
    ``blocks_per_sm``: the launch bounds of the kernels (`make_flash2`) and the blocks a split fills."""
    heads, N, d = Q.shape
    splits = flash2_splits(heads, N, blocks_per_sm=blocks_per_sm) if splits is None else splits
    grid, block = flash2_configuration(Q.shape, splits)
    if splits <= 1:
        flash2_for(d, False, blocks_per_sm)[grid, block](O, Q, K, V, causal)
        return
    partials = flash2_partials(Q.shape, splits) if partials is None else partials
    flash2_for(d, True, blocks_per_sm)[grid, block](*partials, Q, K, V, causal)
    flash2_combine[(-(-N * d // THREADS), heads), THREADS](O, *partials)


def launch_attention(kernel, O, Q, K, V, causal=False, splits: int | None = None) -> None:
    """``kernel[grid, block](O, Q, K, V, causal)`` with the grid of ``kernel``.

    `attention_flash2` takes (N, d) or (batch*heads, N, d) and runs `launch_flash2` (``splits``: its slices of the
    keys; default: as many as the device needs).
    """
    check_attention(O, Q, K, V, batched=kernel is attention_flash2)
    *heads, N, d = tuple(Q.shape)
    if kernel is attention_row_fused and N > MAX_COLS:
        raise ValueError(f"attention_row_fused holds a row of scores in shared memory: at most {MAX_COLS} keys, "
                         f"got {N}; use attention_flash")
    if not N or 0 in heads:
        return
    if kernel is attention_flash2:
        arrays = [a.reshape((1,) + a.shape) if a.ndim == 2 else a for a in (O, Q, K, V)]
        launch_flash2(*arrays, causal, splits)
    elif kernel is attention_flash:
        kernel[-(-N // BLOCK_ROWS), BLOCK_ROWS](O, Q, K, V, causal)
    else:
        kernel[N, THREADS](O, Q, K, V, causal)
