"""Kernels and launches that numba's simulator and the course simulator must agree on.

Imported by `test_simulator_conformance` (course simulator, in the test process),
by `run_on_numba_simulator` (numba's simulator, in a subprocess started with
``NUMBA_ENABLE_CUDASIM=1``) and by ``benchmarks/simulator_speed.py``. So this module
must not import gpucourse, and every kernel is plain numba-cuda that compiles for
a real GPU (the test suite compiles each one to PTX).

A `Case` is one launch: the kernel, its grid and block, the seed of its inputs
and which arguments are its outputs. Sizes are deliberately not multiples of the
block, and inputs are random and non-uniform.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
from numba import cuda, float32, int32

from kernels_elsewhere import square_plus_one

TILE = 16  # matmul tiles are TILE x TILE
MAX_THREADS = 1024  # the shared buffer of the block reduction fits any block
NBINS = 64  # histogram bins
WINDOW = 5  # median filter width (a local array per thread)
WARP = 32
SCAN_THREADS = 64  # shared buffers of the scan and of the device function


# -- kernels ---------------------------------------------------------------------------------------
@cuda.jit
def affine_map(out, a):
    """1-D map, guarded."""
    i = cuda.grid(1)
    if i < a.size:
        out[i] = float32(2.5) * a[i] - float32(1)


@cuda.jit
def fused_zip(out, a, b):
    """1-D zip of two inputs with a math function, guarded."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] * b[i] + math.exp(-abs(a[i]))


@cuda.jit
def affine_map_2d(out, a):
    """2-D map over a matrix whose shape is not a multiple of the 2-D block."""
    x, y = cuda.grid(2)
    if x < a.shape[0] and y < a.shape[1]:
        out[x, y] = a[x, y] * float32(3) - float32(y) + float32(0.5) * float32(x)


@cuda.jit
def axpy_grid_stride(out, alpha, x, y):
    """A grid smaller than the data: each thread loops with the grid's stride."""
    start = cuda.grid(1)
    stride = cuda.gridsize(1)
    for i in range(start, x.size, stride):
        out[i] = alpha * x[i] + y[i]


@cuda.jit
def tiled_matmul(c, a, b):
    """c = a @ b with TILE x TILE tiles of a and b staged in shared memory."""
    tile_a = cuda.shared.array((TILE, TILE), float32)
    tile_b = cuda.shared.array((TILE, TILE), float32)
    tx = cuda.threadIdx.x
    ty = cuda.threadIdx.y
    col = cuda.blockIdx.x * TILE + tx
    row = cuda.blockIdx.y * TILE + ty
    acc = float32(0)
    for phase in range((a.shape[1] + TILE - 1) // TILE):
        k = phase * TILE
        tile_a[ty, tx] = a[row, k + tx] if row < a.shape[0] and k + tx < a.shape[1] else float32(0)
        tile_b[ty, tx] = b[k + ty, col] if k + ty < b.shape[0] and col < b.shape[1] else float32(0)
        cuda.syncthreads()
        for j in range(TILE):
            acc += tile_a[ty, j] * tile_b[j, tx]
        cuda.syncthreads()
    if row < c.shape[0] and col < c.shape[1]:
        c[row, col] = acc


@cuda.jit
def block_sums(partial, a):
    """One sum per block: a tree in shared memory, sequential addressing, a barrier every step."""
    buffer = cuda.shared.array(MAX_THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buffer[t] = a[i] if i < a.size else float32(0)
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            buffer[t] += buffer[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        partial[cuda.blockIdx.x] = buffer[0]


@cuda.jit
def histogram_global(hist, data):
    """Every thread adds its element's bin atomically in global memory."""
    i = cuda.grid(1)
    if i < data.size:
        cuda.atomic.add(hist, data[i], 1)


@cuda.jit
def histogram_shared(hist, data):
    """A private histogram per block in shared memory (atomics), then one global atomic per bin."""
    counts = cuda.shared.array(NBINS, int32)
    t = cuda.threadIdx.x
    for b in range(t, NBINS, cuda.blockDim.x):
        counts[b] = 0
    cuda.syncthreads()
    for i in range(cuda.grid(1), data.size, cuda.gridsize(1)):
        cuda.atomic.add(counts, data[i], 1)
    cuda.syncthreads()
    for b in range(t, NBINS, cuda.blockDim.x):
        if counts[b] > 0:
            cuda.atomic.add(hist, b, counts[b])


@cuda.jit
def half_multiply_add(out, a, b):
    """float16 arithmetic with the fp16 intrinsics."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = cuda.fp16.hadd(cuda.fp16.hmul(a[i], b[i]), cuda.fp16.hsub(a[i], b[i]))


@cuda.jit
def squares_plus_one(out, a):
    """A device function defined in another module (which calls another device function)."""
    i = cuda.grid(1)
    if i < a.size:
        out[i] = square_plus_one(a[i])


@cuda.jit
def reverse_each_block(out, a):
    """Dynamic shared memory (its size comes with the launch): reverse each block's chunk."""
    buffer = cuda.shared.array(0, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buffer[t] = a[i] if i < a.size else float32(-1)
    cuda.syncthreads()
    if i < a.size:
        out[i] = buffer[cuda.blockDim.x - 1 - t]


@cuda.jit
def median_filter(out, a):
    """A local array per thread, sorted with a while loop whose condition short-circuits."""
    i = cuda.grid(1)
    if i >= a.size:
        return
    window = cuda.local.array(WINDOW, float32)
    for k in range(WINDOW):
        j = min(max(i + k - WINDOW // 2, 0), a.size - 1)
        window[k] = a[j]
    for k in range(1, WINDOW):
        value = window[k]
        m = k - 1
        while m >= 0 and window[m] > value:
            window[m + 1] = window[m]
            m -= 1
        window[m + 1] = value
    out[i] = window[WINDOW // 2]


@cuda.jit
def collatz_steps(steps, start, limit):
    """A data-dependent while loop left with break (and continue), different in every thread."""
    i = cuda.grid(1)
    if i >= start.size:
        return
    x = start[i]
    n = 0
    while True:
        if x == 1:
            break
        if n >= limit:
            break
        n += 1
        if x % 2 == 0:
            x //= 2
            continue
        x = 3 * x + 1
    steps[i] = n


@cuda.jit
def clipped_sqrt(out, a):
    """Early returns: past the end, and for negative inputs after writing 0."""
    i = cuda.grid(1)
    if i >= a.size:
        return
    if a[i] < 0:
        out[i] = float32(0)
        return
    out[i] = math.sqrt(a[i])


@cuda.jit
def positives_per_block(counts, a):
    """syncthreads_count of an int predicate (a barrier that also counts)."""
    i = cuda.grid(1)
    positive = 1 if i < a.size and a[i] > 0 else 0
    count = cuda.syncthreads_count(positive)
    if cuda.threadIdx.x == 0:
        counts[cuda.blockIdx.x] = count


@cuda.jit
def offset_3d(out, a):
    """A 3-D grid of 3-D blocks."""
    x, y, z = cuda.grid(3)
    if x < a.shape[0] and y < a.shape[1] and z < a.shape[2]:
        out[x, y, z] = a[x, y, z] + float32(100 * x + 10 * y + z)


@cuda.jit
def skipping_sums(out, lengths):
    """for loops left with continue and break: trip counts per thread, and iterations every thread skips."""
    i = cuda.grid(1)
    if i < lengths.size:
        total = 0
        for k in range(lengths[i]):
            if k % 3 == 2:
                continue
            if k > 40:
                break
            total += k
        for k in range(8):
            if k % 2 == 0:
                continue
            total += 1000 * k
        out[i] = total


@cuda.jit(device=True)
def sign_class(x):
    """Several returns in one device function."""
    if x < float32(-1):
        return -1
    if x > float32(1):
        return 1
    return 0


@cuda.jit(device=True)
def first_above(a, start, threshold):
    """A return from inside a loop of a device function."""
    for k in range(start, a.size):
        if a[k] > threshold:
            return k
    return -1


@cuda.jit
def classify_and_search(classes, positions, a):
    i = cuda.grid(1)
    if i < a.size:
        classes[i] = sign_class(a[i])
        positions[i] = first_above(a, i, float32(2))


@cuda.jit
def compact_positive(out, count, a):
    """Stream compaction: the old value an atomic returns is the slot (the order of the slots is free)."""
    i = cuda.grid(1)
    if i < a.size and a[i] > 0:
        slot = cuda.atomic.add(count, 0, 1)
        out[slot] = a[i]


@cuda.jit
def integer_ops(out, a, b):
    """Python's integer semantics on negatives (floor division, modulo), shifts, min/max/abs."""
    i = cuda.grid(1)
    if i < a.size:
        out[i, 0] = a[i] // b[i]
        out[i, 1] = a[i] % b[i]
        out[i, 2] = (a[i] << 2) ^ b[i]
        out[i, 3] = max(a[i], b[i]) - min(a[i], -b[i])
        out[i, 4] = abs(a[i]) >> 1


@cuda.jit
def math_functions(out, a):
    i = cuda.grid(1)
    if i < a.size:
        x = a[i]
        out[i, 0] = math.tanh(x)
        out[i, 1] = math.floor(x * float32(3))
        out[i, 2] = math.pow(abs(x), float32(1.5))
        out[i, 3] = math.atan2(x, float32(1.5))
        out[i, 4] = math.erf(x)


@cuda.jit
def inclusive_scan(out, a):
    """Hillis-Steele scan per block: read, barrier, write, barrier (no race, no false race)."""
    buffer = cuda.shared.array(SCAN_THREADS, int32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buffer[t] = a[i] if i < a.size else 0
    cuda.syncthreads()
    offset = 1
    while offset < cuda.blockDim.x:
        value = buffer[t - offset] if t >= offset else 0
        cuda.syncthreads()
        buffer[t] += value
        cuda.syncthreads()
        offset *= 2
    if i < a.size:
        out[i] = buffer[t]


@cuda.jit(device=True)
def rotated_through_shared(a, i):
    """A shared array and barriers inside a device function."""
    buffer = cuda.shared.array(SCAN_THREADS, float32)
    t = cuda.threadIdx.x
    buffer[t] = a[i] if i < a.size else float32(0)
    cuda.syncthreads()
    value = buffer[(t + 3) % cuda.blockDim.x]
    cuda.syncthreads()
    return value


@cuda.jit
def rotate_blocks(out, a):
    i = cuda.grid(1)
    value = rotated_through_shared(a, i)
    if i < a.size:
        out[i] = value


# Warp-level kernels: numba's simulator has no shuffles or votes; the tests check them against NumPy.
@cuda.jit
def warp_sums_shfl_down(out, a):
    """Each warp's sum, with shfl_down_sync (lane 0 ends with it)."""
    i = cuda.grid(1)
    value = a[i] if i < a.size else float32(0)
    offset = WARP // 2
    while offset > 0:
        value += cuda.shfl_down_sync(0xFFFFFFFF, value, offset)
        offset //= 2
    if cuda.laneid == 0:
        out[i // WARP] = value


@cuda.jit
def warp_sums_shfl_xor(out, a):
    """A butterfly with shfl_xor_sync: every lane ends with its warp's sum."""
    i = cuda.grid(1)
    value = a[i] if i < a.size else float32(0)
    mask = WARP // 2
    while mask > 0:
        value += cuda.shfl_xor_sync(0xFFFFFFFF, value, mask)
        mask //= 2
    if i < out.size:
        out[i] = value


@cuda.jit
def positive_ballots(bits, counts, a):
    """ballot_sync of a predicate: one bit per lane, and its popcount."""
    i = cuda.grid(1)
    ballot = cuda.ballot_sync(0xFFFFFFFF, i < a.size and a[i] > 0)
    if cuda.laneid == 0:
        bits[i // WARP] = ballot
        counts[i // WARP] = cuda.popc(ballot)


@cuda.jit
def atomic_total(total, a):
    """Every thread adds its float32 element to one cell: the result depends on the order of the atomics."""
    i = cuda.grid(1)
    if i < a.size:
        cuda.atomic.add(total, 0, a[i])


# -- launches --------------------------------------------------------------------------------------
def blocks(n: int, threads: int) -> int:
    return (n + threads - 1) // threads


@dataclass(frozen=True)
class Case:
    """One launch ``kernel[grid, block, 0, shared_bytes](*arguments(rng))`` and which arguments it writes."""

    name: str
    kernel: object
    grid: object
    block: object
    arguments: Callable[[np.random.Generator], list]
    outputs: tuple[int, ...]
    seed: int = 0
    shared_bytes: int = 0
    rtol: float = 0.0  # 0: the outputs must be equal
    atol: float = 0.0
    size: str = ""
    order_free: bool = False  # compare sorted outputs (atomics decide where each value goes)

    def inputs(self) -> list:
        """Fresh arguments, the same in every process."""
        return self.arguments(np.random.default_rng(self.seed))

    def launch(self, args: list) -> None:
        if self.shared_bytes:
            self.kernel[self.grid, self.block, 0, self.shared_bytes](*args)
        else:
            self.kernel[self.grid, self.block](*args)

    def run(self) -> dict[str, np.ndarray]:
        """Launch on fresh inputs; the outputs by name (``name:k`` for argument k)."""
        args = self.inputs()
        self.launch(args)
        return {f"{self.name}:{k}": np.asarray(args[k]) for k in self.outputs}


def _f32(rng, *shape, low=-2.0, high=2.0):
    """Non-uniform float32 data: normal, skewed, with some larger values."""
    values = rng.standard_normal(shape) * (high - low) / 4 + rng.exponential(0.5, shape)
    return values.astype(np.float32)


def map_case(n: int = 1000, threads: int = 128, seed: int = 1) -> Case:
    return Case("map_1d", affine_map, blocks(n, threads), threads,
                lambda rng: [np.zeros(n, np.float32), _f32(rng, n)], (0,), seed, rtol=1e-6, size=f"n={n}")


def zip_case(n: int = 777, threads: int = 64, seed: int = 2) -> Case:
    return Case("zip_1d", fused_zip, blocks(n, threads), threads,
                lambda rng: [np.zeros(n, np.float32), _f32(rng, n), _f32(rng, n)], (0,), seed,
                rtol=1e-5, atol=1e-6, size=f"n={n}")


def map_2d_case(shape=(37, 45), threads=(16, 8), seed: int = 3) -> Case:
    grid = (blocks(shape[0], threads[0]), blocks(shape[1], threads[1]))
    return Case("map_2d", affine_map_2d, grid, threads,
                lambda rng: [np.zeros(shape, np.float32), _f32(rng, *shape)], (0,), seed, rtol=1e-6,
                size=f"{shape[0]}x{shape[1]}")


def grid_stride_case(n: int = 1001, grid: int = 3, threads: int = 64, seed: int = 4) -> Case:
    return Case("grid_stride", axpy_grid_stride, grid, threads,
                lambda rng: [np.zeros(n, np.float32), np.float32(1.75), _f32(rng, n), _f32(rng, n)], (0,), seed,
                rtol=1e-6, atol=1e-7, size=f"n={n}")


def matmul_case(m: int = 37, k: int = 50, n: int = 29, seed: int = 5) -> Case:
    grid = (blocks(n, TILE), blocks(m, TILE))
    return Case("tiled_matmul", tiled_matmul, grid, (TILE, TILE),
                lambda rng: [np.zeros((m, n), np.float32), _f32(rng, m, k), _f32(rng, k, n)], (0,), seed,
                rtol=1e-5, atol=1e-5, size=f"{m}x{k} @ {k}x{n}")


def block_sum_case(n: int = 700, threads: int = 128, seed: int = 6) -> Case:
    grid = blocks(n, threads)
    return Case("block_sum", block_sums, grid, threads,
                lambda rng: [np.zeros(grid, np.float32), _f32(rng, n)], (0,), seed, rtol=1e-5, atol=1e-4,
                size=f"{grid}x{threads} threads")


def _bins(rng, n):
    return np.minimum(rng.binomial(NBINS - 1, 0.3, n), NBINS - 1).astype(np.int32)


def histogram_global_case(n: int = 2000, threads: int = 128, seed: int = 7) -> Case:
    return Case("histogram_global", histogram_global, blocks(n, threads), threads,
                lambda rng: [np.zeros(NBINS, np.int32), _bins(rng, n)], (0,), seed, size=f"n={n}")


def histogram_shared_case(n: int = 2500, grid: int = 4, threads: int = 48, seed: int = 8) -> Case:
    return Case("histogram_shared", histogram_shared, grid, threads,
                lambda rng: [np.zeros(NBINS, np.int32), _bins(rng, n)], (0,), seed, size=f"n={n}")


def half_case(n: int = 500, threads: int = 64, seed: int = 9) -> Case:
    def arguments(rng):
        return [np.zeros(n, np.float16), _f32(rng, n).astype(np.float16), _f32(rng, n).astype(np.float16)]

    return Case("fp16", half_multiply_add, blocks(n, threads), threads, arguments, (0,), seed,
                rtol=2e-3, atol=2e-3, size=f"n={n}")


def device_function_case(n: int = 300, threads: int = 64, seed: int = 10) -> Case:
    return Case("device_function_elsewhere", squares_plus_one, blocks(n, threads), threads,
                lambda rng: [np.zeros(n, np.float32), _f32(rng, n)], (0,), seed, rtol=1e-6, size=f"n={n}")


def dynamic_shared_case(n: int = 200, threads: int = 64, seed: int = 11) -> Case:
    return Case("dynamic_shared", reverse_each_block, blocks(n, threads), threads,
                lambda rng: [np.zeros(n, np.float32), _f32(rng, n)], (0,), seed, shared_bytes=threads * 4,
                size=f"n={n}")


def local_array_case(n: int = 333, threads: int = 64, seed: int = 12) -> Case:
    return Case("local_array", median_filter, blocks(n, threads), threads,
                lambda rng: [np.zeros(n, np.float32), _f32(rng, n)], (0,), seed, size=f"n={n}")


def while_break_case(n: int = 150, threads: int = 32, seed: int = 13) -> Case:
    return Case("while_break", collatz_steps, blocks(n, threads), threads,
                lambda rng: [np.full(n, -1, np.int32), rng.integers(1, 3000, n).astype(np.int64), 120], (0,), seed,
                size=f"n={n}")


def early_return_case(n: int = 250, threads: int = 64, seed: int = 14) -> Case:
    return Case("early_return", clipped_sqrt, blocks(n, threads), threads,
                lambda rng: [np.full(n, np.float32(7)), _f32(rng, n)], (0,), seed, rtol=1e-6, size=f"n={n}")


def syncthreads_count_case(n: int = 300, threads: int = 64, seed: int = 15) -> Case:
    grid = blocks(n, threads)
    return Case("syncthreads_count", positives_per_block, grid, threads,
                lambda rng: [np.zeros(grid, np.int32), _f32(rng, n)], (0,), seed, size=f"n={n}")


def grid_3d_case(shape=(9, 7, 5), threads=(4, 4, 2), seed: int = 16) -> Case:
    grid = tuple(blocks(s, t) for s, t in zip(shape, threads))
    return Case("grid_3d", offset_3d, grid, threads,
                lambda rng: [np.zeros(shape, np.float32), _f32(rng, *shape)], (0,), seed, rtol=1e-6,
                size="x".join(map(str, shape)))


def loop_continue_case(n: int = 90, threads: int = 32, seed: int = 17) -> Case:
    return Case("loop_continue", skipping_sums, blocks(n, threads), threads,
                lambda rng: [np.zeros(n, np.int64), rng.integers(0, 60, n).astype(np.int32)], (0,), seed,
                size=f"n={n}")


def device_returns_case(n: int = 150, threads: int = 64, seed: int = 18) -> Case:
    return Case("device_returns", classify_and_search, blocks(n, threads), threads,
                lambda rng: [np.zeros(n, np.int32), np.zeros(n, np.int64), _f32(rng, n)], (0, 1), seed,
                size=f"n={n}")


def compaction_case(n: int = 300, threads: int = 64, seed: int = 19) -> Case:
    return Case("atomic_compaction", compact_positive, blocks(n, threads), threads,
                lambda rng: [np.zeros(n, np.float32), np.zeros(1, np.int32), _f32(rng, n)], (0, 1), seed,
                order_free=True, size=f"n={n}")


def integer_case(n: int = 50, threads: int = 32, seed: int = 20) -> Case:
    def arguments(rng):
        a = rng.integers(-100, 100, n).astype(np.int32)
        b = (rng.integers(1, 9, n) * rng.choice([-1, 1], n)).astype(np.int32)
        return [np.zeros((n, 5), np.int32), a, b]

    return Case("integer_ops", integer_ops, blocks(n, threads), threads, arguments, (0,), seed, size=f"n={n}")


def math_case(n: int = 60, threads: int = 32, seed: int = 21) -> Case:
    return Case("math_functions", math_functions, blocks(n, threads), threads,
                lambda rng: [np.zeros((n, 5), np.float32), _f32(rng, n)], (0,), seed, rtol=1e-5, atol=1e-6,
                size=f"n={n}")


def scan_case(n: int = 150, threads: int = SCAN_THREADS, seed: int = 22) -> Case:
    return Case("block_scan", inclusive_scan, blocks(n, threads), threads,
                lambda rng: [np.zeros(n, np.int32), rng.integers(0, 10, n).astype(np.int32)], (0,), seed,
                size=f"n={n}")


def shared_in_device_case(n: int = 150, threads: int = SCAN_THREADS, seed: int = 23) -> Case:
    return Case("shared_in_device_function", rotate_blocks, blocks(n, threads), threads,
                lambda rng: [np.zeros(n, np.float32), _f32(rng, n)], (0,), seed, size=f"n={n}")


def conformance_cases() -> list[Case]:
    """The launches both simulators run (small: numba's simulator starts one Python thread per GPU thread)."""
    return [
        map_case(), zip_case(), map_2d_case(), grid_stride_case(), matmul_case(), block_sum_case(),
        histogram_global_case(), histogram_shared_case(), half_case(), device_function_case(),
        dynamic_shared_case(), local_array_case(), while_break_case(), early_return_case(),
        syncthreads_count_case(), grid_3d_case(), loop_continue_case(), device_returns_case(), compaction_case(),
        integer_case(), math_case(), scan_case(), shared_in_device_case(),
    ]
