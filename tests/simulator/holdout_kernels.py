"""Holdout kernels: launches the simulator was not tuned on, for ``benchmarks/simulator_speed.py``.

Like `conformance_kernels` this module must not import gpucourse (numba's simulator imports it
too) and every kernel is plain numba-cuda. Each case comes with a NumPy reference of its outputs
(`HOLDOUT_REFERENCES`), which the benchmark checks on both simulators and
`test_simulator_holdout` checks on the course simulator.
"""

from __future__ import annotations

import math

import numpy as np
from numba import cuda, float32, int32

from conformance_kernels import Case, _f32, blocks

RADIUS = 3  # stencil half-width
STENCIL_THREADS = 128
HALO_WIDTH = STENCIL_THREADS + 2 * RADIUS  # the block's elements and its halo
SCAN_WIDTH = 128  # elements per block of the work-efficient scan (two per thread)
BINS = 40
TILE = 32  # transpose tile: TILE x TILE elements, TILE x ROWS threads
ROWS = 8
PADDED = TILE + 1  # a padded row: a column of the tile spans every shared memory bank
SOFTMAX_THREADS = 64
WARP = 32
KERNEL = 3  # im2col window


@cuda.jit
def stencil_1d(out, a):
    """out[i] = sum of a[i-RADIUS .. i+RADIUS] (zero outside), with the block's halo in shared memory."""
    window = cuda.shared.array(HALO_WIDTH, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    window[t + RADIUS] = a[i] if i < a.size else float32(0)
    if t < RADIUS:
        left = i - RADIUS
        window[t] = a[left] if left >= 0 else float32(0)
        right = i + cuda.blockDim.x
        window[t + RADIUS + cuda.blockDim.x] = a[right] if right < a.size else float32(0)
    cuda.syncthreads()
    if i < a.size:
        total = float32(0)
        for k in range(-RADIUS, RADIUS + 1):
            total += window[t + RADIUS + k]
        out[i] = total


@cuda.jit
def blelloch_scan(out, a):
    """Exclusive scan of each block's SCAN_WIDTH elements: up-sweep, then down-sweep, two elements a thread."""
    buffer = cuda.shared.array(SCAN_WIDTH, int32)
    t = cuda.threadIdx.x
    base = cuda.blockIdx.x * SCAN_WIDTH
    for k in range(2):
        j = base + 2 * t + k
        buffer[2 * t + k] = a[j] if j < a.size else 0
    offset = 1
    d = SCAN_WIDTH // 2
    while d > 0:
        cuda.syncthreads()
        if t < d:
            buffer[offset * (2 * t + 2) - 1] += buffer[offset * (2 * t + 1) - 1]
        offset *= 2
        d //= 2
    if t == 0:
        buffer[SCAN_WIDTH - 1] = 0
    d = 1
    while d < SCAN_WIDTH:
        offset //= 2
        cuda.syncthreads()
        if t < d:
            left = offset * (2 * t + 1) - 1
            right = offset * (2 * t + 2) - 1
            carried = buffer[left]
            buffer[left] = buffer[right]
            buffer[right] += carried
        d *= 2
    cuda.syncthreads()
    for k in range(2):
        j = base + 2 * t + k
        if j < a.size:
            out[j] = buffer[2 * t + k]


@cuda.jit
def value_histogram(hist, values, low, width):
    """Bins of float values (clamped to the first and last bin), counted with global atomics, grid-stride."""
    for i in range(cuda.grid(1), values.size, cuda.gridsize(1)):
        b = int32(math.floor((values[i] - low) / width))
        b = min(max(b, 0), hist.size - 1)
        cuda.atomic.add(hist, b, 1)


@cuda.jit
def transpose_tiled(out, a):
    """out = a.T through a padded TILE x (TILE + 1) shared tile; each thread moves TILE // ROWS elements."""
    tile = cuda.shared.array((TILE, PADDED), float32)
    x = cuda.blockIdx.x * TILE + cuda.threadIdx.x
    y0 = cuda.blockIdx.y * TILE
    for j in range(cuda.threadIdx.y, TILE, ROWS):
        if y0 + j < a.shape[0] and x < a.shape[1]:
            tile[j, cuda.threadIdx.x] = a[y0 + j, x]
    cuda.syncthreads()
    x = cuda.blockIdx.y * TILE + cuda.threadIdx.x
    y0 = cuda.blockIdx.x * TILE
    for j in range(cuda.threadIdx.y, TILE, ROWS):
        if y0 + j < out.shape[0] and x < out.shape[1]:
            out[y0 + j, x] = tile[cuda.threadIdx.x, j]


@cuda.jit
def softmax_rows(out, a):
    """One block per row: a strided max, a tree reduction for the max and one for the sum of exponentials."""
    scratch = cuda.shared.array(SOFTMAX_THREADS, float32)
    row = cuda.blockIdx.x
    t = cuda.threadIdx.x
    n = a.shape[1]
    best = -math.inf
    for j in range(t, n, SOFTMAX_THREADS):
        best = max(best, a[row, j])
    scratch[t] = best
    cuda.syncthreads()
    step = SOFTMAX_THREADS // 2
    while step > 0:
        if t < step:
            scratch[t] = max(scratch[t], scratch[t + step])
        cuda.syncthreads()
        step //= 2
    top = scratch[0]
    cuda.syncthreads()
    total = float32(0)
    for j in range(t, n, SOFTMAX_THREADS):
        total += math.exp(a[row, j] - top)
    scratch[t] = total
    cuda.syncthreads()
    step = SOFTMAX_THREADS // 2
    while step > 0:
        if t < step:
            scratch[t] += scratch[t + step]
        cuda.syncthreads()
        step //= 2
    total = scratch[0]
    for j in range(t, n, SOFTMAX_THREADS):
        out[row, j] = math.exp(a[row, j] - top) / total


@cuda.jit
def warp_shuffle_sum(total, a):
    """Grid-stride partial sums, a shfl_down_sync tree per warp, one atomic per warp."""
    value = float32(0)
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        value += a[i]
    offset = WARP // 2
    while offset > 0:
        value += cuda.shfl_down_sync(0xFFFFFFFF, value, offset)
        offset //= 2
    if cuda.laneid == 0:
        cuda.atomic.add(total, 0, value)


@cuda.jit
def im2col(columns, image):
    """Unfold KERNEL x KERNEL windows (padding 1, stride 1) of a (channels, height, width) image: one column
    per output pixel, one row per (channel, dy, dx); a thread per element of the column matrix."""
    r, c = cuda.grid(2)
    channels, height, width = image.shape
    if r < columns.shape[0] and c < columns.shape[1]:
        channel = r // (KERNEL * KERNEL)
        dy = (r // KERNEL) % KERNEL - 1
        dx = r % KERNEL - 1
        y = c // width + dy
        x = c % width + dx
        if 0 <= y < height and 0 <= x < width:
            columns[r, c] = image[channel, y, x]
        else:
            columns[r, c] = float32(0)


@cuda.jit
def escape_times(counts, re, im, limit):
    """Mandelbrot escape time: a while loop whose trip count depends on each thread's point."""
    i = cuda.grid(1)
    if i < counts.size:
        cr = re[i]
        ci = im[i]
        zr = float32(0)
        zi = float32(0)
        n = 0
        while n < limit and zr * zr + zi * zi <= float32(4):
            zr, zi = zr * zr - zi * zi + cr, float32(2) * zr * zi + ci
            n += 1
        counts[i] = n


# -- launches and references -----------------------------------------------------------------------
def stencil_case(n: int = 1500, seed: int = 31) -> Case:
    return Case("stencil_1d", stencil_1d, blocks(n, STENCIL_THREADS), STENCIL_THREADS,
                lambda rng: [np.zeros(n, np.float32), _f32(rng, n)], (0,), seed, rtol=1e-5, atol=1e-5,
                size=f"n={n}")


def scan_case(n: int = 1000, seed: int = 32) -> Case:
    return Case("blelloch_scan", blelloch_scan, blocks(n, SCAN_WIDTH), SCAN_WIDTH // 2,
                lambda rng: [np.zeros(n, np.int32), rng.integers(0, 20, n).astype(np.int32)], (0,), seed,
                size=f"n={n}")


def histogram_case(n: int = 3000, grid: int = 5, threads: int = 96, seed: int = 33) -> Case:
    def arguments(rng):
        return [np.zeros(BINS, np.int32), _f32(rng, n), np.float32(-2), np.float32(0.125)]

    return Case("value_histogram", value_histogram, grid, threads, arguments, (0,), seed, size=f"n={n}")


def transpose_case(shape=(70, 100), seed: int = 34) -> Case:
    grid = (blocks(shape[1], TILE), blocks(shape[0], TILE))
    return Case("transpose_tiled", transpose_tiled, grid, (TILE, ROWS),
                lambda rng: [np.zeros(shape[::-1], np.float32), _f32(rng, *shape)], (0,), seed,
                size=f"{shape[0]}x{shape[1]}")


def softmax_case(shape=(24, 150), seed: int = 35) -> Case:
    return Case("softmax_rows", softmax_rows, shape[0], SOFTMAX_THREADS,
                lambda rng: [np.zeros(shape, np.float32), _f32(rng, *shape, low=-6, high=6)], (0,), seed,
                rtol=1e-5, atol=1e-7, size=f"{shape[0]}x{shape[1]}")


def warp_shuffle_case(n: int = 5000, grid: int = 4, threads: int = 96, seed: int = 36) -> Case:
    return Case("warp_shuffle_sum", warp_shuffle_sum, grid, threads,
                lambda rng: [np.zeros(1, np.float32), _f32(rng, n)], (0,), seed, rtol=1e-4, atol=1e-3,
                size=f"n={n}")


def im2col_case(image=(3, 13, 17), threads=(8, 32), seed: int = 37) -> Case:
    channels, height, width = image
    shape = (channels * KERNEL * KERNEL, height * width)
    grid = (blocks(shape[0], threads[0]), blocks(shape[1], threads[1]))
    return Case("im2col", im2col, grid, threads,
                lambda rng: [np.full(shape, np.nan, np.float32), _f32(rng, *image)], (0,), seed,
                size="x".join(map(str, image)))


def escape_case(n: int = 600, threads: int = 64, seed: int = 38) -> Case:
    def arguments(rng):
        re = rng.uniform(-2.0, 0.6, n).astype(np.float32)
        im = rng.uniform(-1.2, 1.2, n).astype(np.float32)
        return [np.full(n, -1, np.int32), re, im, 200]

    return Case("escape_while", escape_times, blocks(n, threads), threads, arguments, (0,), seed, size=f"n={n}")


def _stencil_reference(args):
    a = args[1].astype(np.float64)
    padded = np.pad(a, RADIUS)
    return [sum(padded[k:k + a.size] for k in range(2 * RADIUS + 1))]


def _scan_reference(args):
    a = args[1]
    out = np.empty_like(a)
    for start in range(0, a.size, SCAN_WIDTH):
        part = a[start:start + SCAN_WIDTH]
        out[start:start + SCAN_WIDTH] = np.cumsum(part) - part
    return [out]


def _histogram_reference(args):
    values, low, width = args[1], args[2], args[3]
    bins = np.clip(np.floor((values - low) / width).astype(np.int64), 0, BINS - 1)
    return [np.bincount(bins, minlength=BINS)]


def _softmax_reference(args):
    a = args[1].astype(np.float64)
    e = np.exp(a - a.max(axis=1, keepdims=True))
    return [e / e.sum(axis=1, keepdims=True)]


def _im2col_reference(args):
    image = args[1]
    channels, height, width = image.shape
    padded = np.pad(image, ((0, 0), (1, 1), (1, 1)))
    rows = [padded[c, dy:dy + height, dx:dx + width].reshape(-1)
            for c in range(channels) for dy in range(KERNEL) for dx in range(KERNEL)]
    return [np.stack(rows)]


def _escape_reference(args):
    re, im, limit = args[1], args[2], args[3]
    counts = np.empty(re.size, np.int32)
    for k in range(re.size):  # float32 arithmetic, as the kernel does it
        cr, ci, zr, zi, n = re[k], im[k], np.float32(0), np.float32(0), 0
        while n < limit and zr * zr + zi * zi <= np.float32(4):
            zr, zi = zr * zr - zi * zi + cr, np.float32(2) * zr * zi + ci
            n += 1
        counts[k] = n
    return [counts]


# {case name: the expected outputs (in `Case.outputs` order) of the inputs it is given}
HOLDOUT_REFERENCES = {
    "stencil_1d": _stencil_reference,
    "blelloch_scan": _scan_reference,
    "value_histogram": _histogram_reference,
    "transpose_tiled": lambda args: [args[1].T],
    "softmax_rows": _softmax_reference,
    "warp_shuffle_sum": lambda args: [np.array([args[1].astype(np.float64).sum()])],
    "im2col": _im2col_reference,
    "escape_while": _escape_reference,
}


def holdout_cases() -> list[Case]:
    return [stencil_case(), scan_case(), histogram_case(), transpose_case(), softmax_case(), warp_shuffle_case(),
            im2col_case(), escape_case()]


def check_outputs(case: Case, args: list) -> None:
    """Raise AssertionError where a launch's outputs differ from the reference beyond the case's bounds."""
    expected = HOLDOUT_REFERENCES[case.name](case.inputs())
    for k, want in zip(case.outputs, expected):
        np.testing.assert_allclose(np.asarray(args[k]), want, rtol=case.rtol, atol=case.atol,
                                   err_msg=f"{case.name}: output {k}")
