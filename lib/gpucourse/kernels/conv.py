"""2-D convolution as in a CNN layer, from one thread per output to implicit GEMM, float32.

``y[b, m, h, w] = sum over c, p, q of x[b, c, h*stride + p - padding, w*stride + q - padding] * w[m, c, p, q]``
(zero outside the image). Layouts: NCHW input ``x`` (B, C, H, W), filters ``w`` (M, C, R, S),
output ``y`` (B, M, Ho, Wo); NHWC input ``x`` (B, H, W, C), filters ``w`` (M, R, S, C), output
``y`` (B, Ho, Wo, M). Stride and padding are ints, the same along both axes.

The GEMM view: each output pixel ``n = (b, h, w)`` is a row, each filter ``m`` a column, and the
sum runs over ``k = (c, p, q)`` (``(p, q, c)`` in NHWC): ``Y[n, m] = sum_k X[n, k] * W[m, k]``,
with ``X`` the im2col matrix of ``N = B*Ho*Wo`` rows and ``K = C*R*S`` columns.

1. `conv_direct`: one thread per output element, reading its ``C*R*S`` inputs and weights.
2. `im2col` + module 3's GEMM (`conv_im2col`): builds ``X`` in memory, ``R*S`` copies of
   (almost) every input element, then multiplies it by the filters.
3. `conv_implicit_gemm`: module 3's register-tiled GEMM whose tile loader computes the im2col
   index of each element on the fly (`im2col_value`): the same tiles, no ``X`` in memory. A thread
   copies cells of the same output pixel at every step, so it works out the pixel's image and
   patch corner once, and per cell only the tap ``(c, p, q)``. Threads along output pixels, so a
   warp loads neighbouring pixels (coalesced in NCHW at stride 1) and writes neighbouring outputs.
4. `conv_implicit_gemm_nhwc`: the same in NHWC, threads along filters and ``k = (p, q, c)``
   with ``c`` fastest: a warp loads neighbouring channels, coalesced at any stride.
5. `conv_implicit_gemm_warp_tiled` (`make_implicit_gemm_warp_tiled`): NHWC on module 3's top
   rung (`sgemm`): 16-byte loads of 4 channels, double-buffered transposed tiles, warp tiles.
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32, int32

from . import matmul as mm, sgemm, vector

# implicit GEMM: a block computes BP output pixels x BF filters, in steps of BK along k,
# with THREADS x THREADS threads, each a TP x TF micro-tile held in registers
BP, BF, BK = 64, 64, 16
TP, TF = 4, 4
BF_PADDED = BF + 2  # NHWC's [k, filter] weight tile: rows 2 banks apart, so a warp's stores along k hit 32 banks
THREADS = 16
SWEEP = THREADS * THREADS  # a block's threads, which copy SWEEP cells of a tile at a time
LOADS_X = BK * BP // SWEEP  # cells of each tile a thread copies per step
LOADS_W = BK * BF // SWEEP

DIRECT_THREADS = 128
IM2COL_BLOCK = (32, 8)  # x along the columns of the im2col matrix, y along its rows


def output_size(size: int, taps: int, stride: int = 1, padding: int = 0, dilation: int = 1) -> int:
    """Outputs along an axis of ``size`` inputs, for a filter of ``taps`` taps; a ValueError for a stride or a
    padding that makes no convolution."""
    if not (isinstance(stride, (int, np.integer)) and isinstance(padding, (int, np.integer))):
        raise ValueError(f"stride and padding must be ints, got {stride!r} and {padding!r}")
    if stride < 1 or padding < 0:
        raise ValueError(f"stride must be at least 1 and padding at least 0, got stride={stride}, padding={padding}")
    return (size + 2 * padding - dilation * (taps - 1) - 1) // stride + 1


def output_shape(x_shape, w_shape, stride: int = 1, padding: int = 0, layout: str = "NCHW") -> tuple[int, ...]:
    """``y``'s shape; a ValueError that says what to fix when the arguments do not make a convolution."""
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"layout must be 'NCHW' or 'NHWC', not {layout!r}")
    if len(x_shape) != 4 or len(w_shape) != 4:
        raise ValueError(f"x and w must be 4-D ({'B, C, H, W' if layout == 'NCHW' else 'B, H, W, C'} and "
                         f"{'M, C, R, S' if layout == 'NCHW' else 'M, R, S, C'}), got {len(x_shape)}-D and "
                         f"{len(w_shape)}-D")
    if layout == "NCHW":
        (B, C, H, W), (M, Cw, R, S) = x_shape, w_shape
    else:
        (B, H, W, C), (M, R, S, Cw) = x_shape, w_shape
    if C != Cw:
        raise ValueError(f"x has {C} channels and w filters of {Cw}: the filters' channels must equal the input's")
    Ho, Wo = output_size(H, R, stride, padding), output_size(W, S, stride, padding)
    if Ho < 1 or Wo < 1:
        raise ValueError(f"a {R}x{S} filter does not fit in a {H}x{W} image with padding {padding}: "
                         "pad more or use a smaller filter")
    return (B, M, Ho, Wo) if layout == "NCHW" else (B, Ho, Wo, M)


def _windows(x, R: int, S: int, stride: int, padding: int) -> np.ndarray:
    """NCHW ``x`` as float64 windows (B, C, Ho, Wo, R, S): the patch each output pixel sees."""
    padded = np.pad(np.asarray(x, np.float64), ((0, 0), (0, 0), (padding, padding), (padding, padding)))
    windows = np.lib.stride_tricks.sliding_window_view(padded, (R, S), axis=(2, 3))
    return windows[:, :, ::stride, ::stride]


def conv2d_reference(x, w, stride: int = 1, padding: int = 0, layout: str = "NCHW") -> np.ndarray:
    """The convolution in float64 NumPy, in ``layout`` (``"NCHW"`` or ``"NHWC"``)."""
    output_shape(np.shape(x), np.shape(w), stride, padding, layout)
    if layout == "NHWC":
        x, w = np.transpose(x, (0, 3, 1, 2)), np.transpose(w, (0, 3, 1, 2))
    w = np.asarray(w, np.float64)
    y = np.einsum("bchwpq,mcpq->bmhw", _windows(x, w.shape[2], w.shape[3], stride, padding), w, optimize=True)
    return y if layout == "NCHW" else np.ascontiguousarray(y.transpose(0, 2, 3, 1))


def im2col_reference(x, R: int, S: int, stride: int = 1, padding: int = 0) -> np.ndarray:
    """The im2col matrix of NCHW ``x`` in float64: (B*Ho*Wo, C*R*S), one row per output pixel, columns (c, p, q)."""
    B, C = np.shape(x)[:2]
    output_shape(np.shape(x), (1, C, R, S), stride, padding)
    windows = _windows(x, R, S, stride, padding)  # (B, C, Ho, Wo, R, S)
    return windows.transpose(0, 2, 3, 1, 4, 5).reshape(-1, C * R * S)


# ---------------------------------------------------------------- kernels


@cuda.jit
def conv_direct(y, x, w, stride, padding):
    B, C, H, W = x.shape
    M, R, S = w.shape[0], w.shape[2], w.shape[3]
    Ho, Wo = y.shape[2], y.shape[3]
    i = cuda.grid(1)  # one thread per element of y, consecutive threads along its rows
    if i < B * M * Ho * Wo:
        wo = i % Wo
        ho = (i // Wo) % Ho
        m = (i // (Wo * Ho)) % M
        b = i // (Wo * Ho * M)
        acc = float32(0)
        for c in range(C):
            for p in range(R):
                h = ho * stride + p - padding
                if 0 <= h < H:
                    for q in range(S):
                        v = wo * stride + q - padding
                        if 0 <= v < W:
                            acc += x[b, c, h, v] * w[m, c, p, q]
        y[b, m, ho, wo] = acc


@cuda.jit
def im2col(cols, x, R, S, stride, padding):
    B, C, H, W = x.shape
    Wo = (W + 2 * padding - S) // stride + 1
    Ho = cols.shape[0] // (B * Wo)
    k, n = cuda.grid(2)  # x along the columns (c, p, q): a warp writes a contiguous piece of a row
    if n < cols.shape[0] and k < cols.shape[1]:
        wo, ho, b = n % Wo, (n // Wo) % Ho, n // (Wo * Ho)
        q, p, c = k % S, (k // S) % R, k // (S * R)
        h, v = ho * stride + p - padding, wo * stride + q - padding
        cols[n, k] = x[b, c, h, v] if 0 <= h < H and 0 <= v < W else float32(0)


@cuda.jit(device=True)
def im2col_value(x, b, top, left, k, R, S):
    """Cell ``k = (c, p, q)`` of an im2col row of NCHW ``x``: ``x[b, c, top + p, left + q]``, 0 in the padding.

    The row is the output pixel whose ``R x S`` patch starts at ``(top, left)`` of image ``b``; an image
    past the batch or a ``k`` past ``C*R*S`` (the edges of the last tiles) gives 0 too.
    """
    B, C, H, W = x.shape
    c, p, q = k // (R * S), k // S % R, k % S
    h, v = top + p, left + q
    return x[b, c, h, v] if b < B and c < C and 0 <= h < H and 0 <= v < W else float32(0)


@cuda.jit(device=True)
def im2col_value_nhwc(x, b, top, left, k, R, S):
    """The same for NHWC ``x``, whose ``k = (p, q, c)`` runs fastest along the channels."""
    B, H, W, C = x.shape
    c, q, p = k % C, k // C % S, k // (C * S)
    h, v = top + p, left + q
    return x[b, h, v, c] if b < B and p < R and 0 <= h < H and 0 <= v < W else float32(0)


@cuda.jit
def conv_implicit_gemm(y, x, w, stride, padding):
    tile_x = cuda.shared.array((BK, BP), float32)  # [k, pixel]: a warp stores 32 neighbouring pixels
    tile_w = cuda.shared.array((BF, BK), float32)  # [filter, k]: a warp stores two filters' 16 k
    acc = cuda.local.array((TF, TP), float32)
    x_values = cuda.local.array(TP, float32)
    w_values = cuda.local.array(TF, float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    thread = ty * THREADS + tx
    C, R, S = x.shape[1], w.shape[2], w.shape[3]
    M, Ho, Wo = y.shape[1], y.shape[2], y.shape[3]
    N, K = y.shape[0] * Ho * Wo, C * R * S
    n0, m0 = cuda.blockIdx.x * BP, cuda.blockIdx.y * BF
    # at every step this thread copies cells of the same im2col row, output pixel n0 + thread % BP:
    # its image and the corner of its patch are worked out once
    n = n0 + thread % BP
    b, top, left = n // (Ho * Wo), n // Wo % Ho * stride - padding, n % Wo * stride - padding
    for i in range(TF):
        for j in range(TP):
            acc[i, j] = float32(0)
    for start in range(0, K, BK):
        for load in range(LOADS_X):  # consecutive threads copy consecutive pixels' cell k
            k = thread // BP + load * (SWEEP // BP)
            tile_x[k, thread % BP] = im2col_value(x, b, top, left, start + k, R, S)
        kk = start + thread % BK  # ... and consecutive k of a filter (w is (M, K) in memory)
        c, p, q = kk // (R * S), kk // S % R, kk % S
        for load in range(LOADS_W):
            f = thread // BK + load * (SWEEP // BK)
            tile_w[f, thread % BK] = w[m0 + f, c, p, q] if m0 + f < M and kk < K else float32(0)
        cuda.syncthreads()
        for k in range(BK):
            for j in range(TP):  # this thread's pixels: tx, tx + THREADS, ...
                x_values[j] = tile_x[k, tx + j * THREADS]
            for i in range(TF):  # its filters: ty, ty + THREADS, ...
                w_values[i] = tile_w[ty + i * THREADS, k]
            for i in range(TF):
                for j in range(TP):
                    acc[i, j] += w_values[i] * x_values[j]
        cuda.syncthreads()
    for j in range(TP):
        n = n0 + tx + j * THREADS
        if n < N:
            wo, ho, b = n % Wo, (n // Wo) % Ho, n // (Wo * Ho)
            for i in range(TF):
                m = m0 + ty + i * THREADS
                if m < M:
                    y[b, m, ho, wo] = acc[i, j]


@cuda.jit
def conv_implicit_gemm_nhwc(y, x, w, stride, padding):
    tile_x = cuda.shared.array((BP, BK), float32)  # [pixel, k]: a warp stores two pixels' 16 channels
    tile_w = cuda.shared.array((BK, BF_PADDED), float32)  # [k, filter], padded
    acc = cuda.local.array((TP, TF), float32)
    x_values = cuda.local.array(TP, float32)
    w_values = cuda.local.array(TF, float32)
    images = cuda.local.array(LOADS_X, int32)
    tops = cuda.local.array(LOADS_X, int32)
    lefts = cuda.local.array(LOADS_X, int32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    thread = ty * THREADS + tx
    C, R, S = x.shape[3], w.shape[1], w.shape[2]
    Ho, Wo, M = y.shape[1], y.shape[2], y.shape[3]
    N, K = y.shape[0] * Ho * Wo, C * R * S
    m0, n0 = cuda.blockIdx.x * BF, cuda.blockIdx.y * BP
    # this thread copies cell start + thread % BK of the rows of pixels thread // BK, + SWEEP // BK, ...
    # of the tile: their images and patch corners are worked out once
    for load in range(LOADS_X):
        n = n0 + thread // BK + load * (SWEEP // BK)
        images[load] = n // (Ho * Wo)
        tops[load] = n // Wo % Ho * stride - padding
        lefts[load] = n % Wo * stride - padding
    for i in range(TP):
        for j in range(TF):
            acc[i, j] = float32(0)
    for start in range(0, K, BK):
        kk = start + thread % BK  # consecutive threads copy consecutive k (channels) ...
        for load in range(LOADS_X):
            tile_x[thread // BK + load * (SWEEP // BK), thread % BK] = im2col_value_nhwc(
                x, images[load], tops[load], lefts[load], kk, R, S)
        c, q, p = kk % C, kk // C % S, kk // (C * S)
        for load in range(LOADS_W):  # ... of a pixel, and of a filter (w is (M, K) in memory)
            f = thread // BK + load * (SWEEP // BK)
            tile_w[thread % BK, f] = w[m0 + f, p, q, c] if m0 + f < M and kk < K else float32(0)
        cuda.syncthreads()
        for k in range(BK):
            for i in range(TP):  # this thread's pixels: ty, ty + THREADS, ...
                x_values[i] = tile_x[ty + i * THREADS, k]
            for j in range(TF):  # its filters: tx, tx + THREADS, ... (a warp writes neighbouring channels of y)
                w_values[j] = tile_w[k, tx + j * THREADS]
            for i in range(TP):
                for j in range(TF):
                    acc[i, j] += x_values[i] * w_values[j]
        cuda.syncthreads()
    for i in range(TP):
        n = n0 + ty + i * THREADS
        if n < N:
            wo, ho, b = n % Wo, (n // Wo) % Ho, n // (Wo * Ho)
            for j in range(TF):
                m = m0 + tx + j * THREADS
                if m < M:
                    y[b, ho, wo, m] = acc[i, j]


def make_implicit_gemm_warp_tiled(BM: int = 128, BN: int = 64, BK: int = 8, WM: int = 32, WN: int = 64,
                                  LANES_M: int = 8):
    """NHWC implicit GEMM on module 3's top rung (`sgemm`): ``BM`` pixels x ``BN`` filters per block.

    Both operands are read along ``k = (p, q, c)``, ``c`` fastest: 4 neighbouring channels of a pixel
    (or of a filter) are one 16-byte load when ``C`` is a multiple of 4, stored transposed into the
    tiles ``[k, pixel]`` and ``[k, filter]``, double-buffered, multiplied by `sgemm.make_block_product`.
    A thread's pixels are the same at every step: their image and patch corner are worked out once;
    its ``k`` is split into ``(p, q, c)`` once (all its chunks share it) and counted on by ``BK`` per
    step like an odometer, so the padding test per chunk is a few comparisons, not a div/mod per
    element (nor per step: three 64-bit divisions there cost about 100 instructions of the sm_90
    SASS). Where ``C`` is not a multiple of 4 (a first layer's 3 channels) the cells go one by one
    through `im2col_value_nhwc`.
    """
    problem = sgemm.parameter_problem(BM, BN, BK, WM, WN, LANES_M)
    if problem:
        raise ValueError(f"make_implicit_gemm_warp_tiled({BM}, {BN}, {BK}, {WM}, {WN}, {LANES_M}): {problem}")
    W4 = vector.WIDTH
    LANES_N = sgemm.WARP // LANES_M
    WARPS_N = BN // WN
    WSUB_M, WSUB_N = W4 * LANES_M, W4 * LANES_N
    TM, TN = WM // LANES_M, WN // LANES_N
    THREADS = sgemm.threads(BM, BN, WM, WN)
    LOADS_X, LOADS_W = BM * BK // W4 // THREADS, BN * BK // W4 // THREADS
    SPLIT = BK // W4  # 16-byte chunks along k in a row of either tile
    ROWS_X, ROWS_W = BM + sgemm.PAD, BN + sgemm.PAD
    SIZE_X, SIZE_W = 2 * BK * ROWS_X, 2 * BK * ROWS_W
    multiply_step = sgemm.make_block_product(BK, TM, TN, WSUB_M, WSUB_N, ROWS_X, ROWS_W)

    @cuda.jit(device=True, inline="always")  # a tuple returned from a call that is not inlined goes through the stack
    def pixel_chunk(x, b, top, left, k, p, q, c, R, S, vectors):
        """Cells ``k .. k + 3`` of the im2col row of the pixel whose patch starts at (top, left) in image b."""
        B, H, W = x.shape[0], x.shape[1], x.shape[2]
        h, v = top + p, left + q
        if vectors:
            if p < R and b < B and 0 <= h < H and 0 <= v < W:
                x0, x1, x2, x3 = vector.load4(x, (b, h, v, c))
            else:  # the padding, past the last pixel or past K
                x0, x1, x2, x3 = float32(0), float32(0), float32(0), float32(0)
        else:
            x0 = im2col_value_nhwc(x, b, top, left, k, R, S)
            x1 = im2col_value_nhwc(x, b, top, left, k + 1, R, S)
            x2 = im2col_value_nhwc(x, b, top, left, k + 2, R, S)
            x3 = im2col_value_nhwc(x, b, top, left, k + 3, R, S)
        return x0, x1, x2, x3

    @cuda.jit(device=True, inline="always")
    def filter_chunk(w, m, k, p, q, c, K, vectors):
        """``w[m]``'s cells ``k .. k + 3`` (w is (M, K) in memory); zeros past M or K."""
        M, S, C = w.shape[0], w.shape[2], w.shape[3]
        if vectors:
            if m < M and k < K:
                x0, x1, x2, x3 = vector.load4(w, (m, p, q, c))
            else:
                x0, x1, x2, x3 = float32(0), float32(0), float32(0), float32(0)
        else:
            mm_ = min(m, M - 1)
            k0, k1, k2, k3 = min(k, K - 1), min(k + 1, K - 1), min(k + 2, K - 1), min(k + 3, K - 1)
            x0 = w[mm_, k0 // (C * S), k0 // C % S, k0 % C] if m < M and k < K else float32(0)
            x1 = w[mm_, k1 // (C * S), k1 // C % S, k1 % C] if m < M and k + 1 < K else float32(0)
            x2 = w[mm_, k2 // (C * S), k2 // C % S, k2 % C] if m < M and k + 2 < K else float32(0)
            x3 = w[mm_, k3 // (C * S), k3 // C % S, k3 % C] if m < M and k + 3 < K else float32(0)
        return x0, x1, x2, x3

    @cuda.jit
    def conv_implicit_gemm_warp_tiled(y, x, w, stride, padding):
        tile_x = cuda.shared.array(SIZE_X, float32, alignment=16)  # [buffer, k, pixel], flat (see sgemm's)
        tile_w = cuda.shared.array(SIZE_W, float32, alignment=16)  # [buffer, k, filter], flat
        acc = cuda.local.array((TM, TN), float32)
        x_values = cuda.local.array(TM, float32)
        w_values = cuda.local.array(TN, float32)
        next_x = cuda.local.array((LOADS_X, W4), float32)
        next_w = cuda.local.array((LOADS_W, W4), float32)
        images = cuda.local.array(LOADS_X, int32)  # this thread's pixels, once for all steps
        tops = cuda.local.array(LOADS_X, int32)
        lefts = cuda.local.array(LOADS_X, int32)
        thread = cuda.threadIdx.x
        warp, lane = thread // sgemm.WARP, thread % sgemm.WARP
        wm, wn = (warp // WARPS_N) * WM, (warp % WARPS_N) * WN
        tm, tn = (lane // LANES_N) * W4, (lane % LANES_N) * W4
        C, R, S = x.shape[3], w.shape[1], w.shape[2]
        Ho, Wo, M = y.shape[1], y.shape[2], y.shape[3]
        N, K = y.shape[0] * Ho * Wo, C * R * S
        n0, m0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BN
        vectors_x = C % W4 == 0 and vector.vector_aligned(x)
        vectors_w = C % W4 == 0 and vector.vector_aligned(w)
        kc = (thread % SPLIT) * W4  # this thread's chunk along k, the same in every row it copies
        for load in range(LOADS_X):
            n = n0 + (load * THREADS + thread) // SPLIT
            images[load] = n // (Ho * Wo)  # past N: an image past the batch, read as zeros
            tops[load] = n // Wo % Ho * stride - padding
            lefts[load] = n % Wo * stride - padding
        for i in range(TM):
            for j in range(TN):
                acc[i, j] = float32(0)

        steps = (K + BK - 1) // BK
        c, q, p = kc % C, kc // C % S, kc // (C * S)  # the chunk's channel and tap: divided once, then counted on
        for step in range(steps + 1):  # step s loads tile s (into registers) and multiplies tile s - 1
            now = (step + 1) % 2
            if step < steps:
                k = step * BK + kc
                for load in range(LOADS_X):
                    values = pixel_chunk(x, images[load], tops[load], lefts[load], k, p, q, c, R, S, vectors_x)
                    for v in range(W4):
                        next_x[load, v] = values[v]
                for load in range(LOADS_W):
                    m = m0 + (load * THREADS + thread) // SPLIT
                    values = filter_chunk(w, m, k, p, q, c, K, vectors_w)
                    for v in range(W4):
                        next_w[load, v] = values[v]
                c += BK  # k + BK, as an odometer: channels carry into q, q into p (no 64-bit division per step)
                while c >= C:
                    c -= C
                    q += 1
                    if q == S:
                        q, p = 0, p + 1
            if step > 0:
                multiply_step(tile_x, tile_w, now, acc, x_values, w_values, wm + tm, wn + tn)
            if step < steps:  # the other buffer was last read before the previous barrier
                later = step % 2
                for load in range(LOADS_X):
                    r = (load * THREADS + thread) // SPLIT
                    for v in range(W4):
                        tile_x[(later * BK + kc + v) * ROWS_X + r] = next_x[load, v]
                for load in range(LOADS_W):
                    f = (load * THREADS + thread) // SPLIT
                    for v in range(W4):
                        tile_w[(later * BK + kc + v) * ROWS_W + f] = next_w[load, v]
            cuda.syncthreads()

        vectors_y = vector.vector_aligned(y)
        for i in range(TM):
            n = n0 + wm + (i // W4) * WSUB_M + tm + i % W4
            if n < N:
                wo, ho, b = n % Wo, n // Wo % Ho, n // (Wo * Ho)
                for j in range(TN // W4):
                    m = m0 + wn + j * WSUB_N + tn
                    if vectors_y and m + W4 <= M:
                        vector.store4(y, (b, ho, wo, m), (acc[i, j * W4], acc[i, j * W4 + 1], acc[i, j * W4 + 2],
                                                          acc[i, j * W4 + 3]))
                    else:
                        for v in range(W4):
                            if m + v < M:
                                y[b, ho, wo, m + v] = acc[i, j * W4 + v]

    conv_implicit_gemm_warp_tiled.tiles = dict(BM=BM, BN=BN, BK=BK, WM=WM, WN=WN, LANES_M=LANES_M)
    return conv_implicit_gemm_warp_tiled


conv_implicit_gemm_warp_tiled = make_implicit_gemm_warp_tiled()

KERNELS = {"direct": conv_direct, "implicit_gemm": conv_implicit_gemm, "implicit_gemm_nhwc": conv_implicit_gemm_nhwc,
           "implicit_gemm_warp_tiled": conv_implicit_gemm_warp_tiled}
MAX_GRID_Y = 65535


def layout_of(kernel) -> str:
    """The layout a convolution kernel takes: ``"NHWC"`` for `conv_implicit_gemm_nhwc` and the warp-tiled kernels,
    else ``"NCHW"``."""
    return "NHWC" if kernel is conv_implicit_gemm_nhwc or hasattr(kernel, "tiles") else "NCHW"


def configuration(kernel, y_shape) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(grid, block) covering ``y`` of ``y_shape`` for one of `KERNELS`."""
    if kernel is conv_direct:
        return (-(-int(np.prod(y_shape)) // DIRECT_THREADS),), (DIRECT_THREADS,)
    block = (THREADS, THREADS)
    if kernel is conv_implicit_gemm:
        B, M, Ho, Wo = y_shape
        grid = (-(-(B * Ho * Wo) // BP), -(-M // BF))
    elif hasattr(kernel, "tiles"):  # a kernel of make_implicit_gemm_warp_tiled
        B, Ho, Wo, M = y_shape
        t = kernel.tiles
        grid = (-(-M // t["BN"]), -(-(B * Ho * Wo) // t["BM"]))
        block = (sgemm.threads(t["BM"], t["BN"], t["WM"], t["WN"]),)
    elif kernel is conv_implicit_gemm_nhwc:
        B, Ho, Wo, M = y_shape
        grid = (-(-M // BF), -(-(B * Ho * Wo) // BP))
    else:
        raise ValueError(f"launch_conv launches {', '.join(KERNELS)}, not {getattr(kernel, '__name__', kernel)!r}")
    if grid[1] > MAX_GRID_Y:
        raise ValueError(f"y of shape {tuple(y_shape)} needs {grid[1]} blocks along grid y, more than {MAX_GRID_Y}: "
                         "split the batch")
    return grid, block


def launch_conv(kernel, y, x, w, stride: int = 1, padding: int = 0) -> None:
    """``kernel[grid, block](y, x, w, stride, padding)`` with the grid that covers ``y``; shapes checked first."""
    expected = output_shape(x.shape, w.shape, stride, padding, layout_of(kernel))
    if tuple(y.shape) != expected:
        raise ValueError(f"y has shape {tuple(y.shape)}; this convolution gives {expected}")
    grid, block = configuration(kernel, y.shape)
    kernel[grid, block](y, x, w, int(stride), int(padding))


def _float32_on_device(a):
    return a if cuda.is_cuda_array(a) else cuda.to_device(np.ascontiguousarray(a, np.float32))


def im2col_matrix(x, R: int, S: int, stride: int = 1, padding: int = 0):
    """The im2col matrix of NCHW ``x`` (host or device) as a device array, built by the `im2col` kernel."""
    x = _float32_on_device(x)
    B, C, H, W = x.shape
    output_shape(x.shape, (1, C, R, S), stride, padding)
    Ho, Wo = output_size(H, R, stride, padding), output_size(W, S, stride, padding)
    cols = cuda.device_array((B * Ho * Wo, C * R * S), np.float32)
    bx, by = IM2COL_BLOCK
    grid = (-(-cols.shape[1] // bx), -(-cols.shape[0] // by))
    if grid[1] > MAX_GRID_Y:
        raise ValueError(f"the im2col matrix has {cols.shape[0]} rows, more than {MAX_GRID_Y * by} for one launch: "
                         "split the batch")
    im2col[grid, IM2COL_BLOCK](cols, x, R, S, int(stride), int(padding))
    return cols


def conv_im2col(x, w, stride: int = 1, padding: int = 0, gemm=mm.matmul_tiled) -> np.ndarray:
    """NCHW convolution as `im2col` then module 3's ``gemm`` (``cols @ w.reshape(M, -1).T``); returns y on the host.

    The im2col matrix is a device array of ``B*Ho*Wo x C*R*S`` float32 (`im2col_matrix`).
    """
    B, M, Ho, Wo = output_shape(np.shape(x), np.shape(w), stride, padding)
    R, S = np.shape(w)[2:]
    cols = im2col_matrix(x, R, S, stride, padding)
    filters = np.ascontiguousarray(np.asarray(w, np.float32).reshape(M, -1).T)[None]  # (1, K, M)
    product = cuda.device_array((1, cols.shape[0], M), np.float32)
    mm.launch(gemm, product, cols.reshape((1,) + cols.shape), cuda.to_device(filters))
    return np.ascontiguousarray(product.copy_to_host()[0].reshape(B, Ho, Wo, M).transpose(0, 3, 1, 2))


def conv2d(x, w, stride: int = 1, padding: int = 0, kernel=conv_implicit_gemm) -> np.ndarray:
    """The convolution of host arrays with one of `KERNELS` (NHWC for `conv_implicit_gemm_nhwc`), as NumPy."""
    y = cuda.device_array(output_shape(np.shape(x), np.shape(w), stride, padding, layout_of(kernel)), np.float32)
    launch_conv(kernel, y, _float32_on_device(x), _float32_on_device(w), stride, padding)
    return y.copy_to_host()
