"""The optimisation ladder of a sum, one kernel per step (float32, 1-D).

Every kernel runs with ``THREADS`` threads per block. Steps 1 to 5 write one
partial sum per block into ``partial``; `block_sums_to_total` launches them
again on the partials until one value is left. Steps 6 and 7 (`ONE_LAUNCH`)
finish in one launch with one atomic add per block into ``total``, which
starts at 0.

1. `sum_interleaved`: a tree in shared memory, pairs ``stride`` apart picked by
   ``t % (2 * stride) == 0``: the active threads are scattered over every warp.
2. `sum_interleaved_compact`: the same pairs, picked by the first threads
   (``index = 2 * stride * t``): warps stay whole, but the shared memory
   accesses of a warp pile onto few banks (bank conflicts).
3. `sum_sequential`: the pairs are ``t`` and ``t + stride`` with ``stride``
   halving: whole warps, no bank conflicts.
4. `sum_first_add`: each thread adds two elements while loading, so a block
   covers ``2 * THREADS`` elements and half the threads are not idle.
5. `sum_warp_shuffle`: the last 32 sums inside one warp with shuffles, no shared
   memory and no barriers.
6. `sum_grid_stride_atomic`: each thread first sums many elements in a register
   (a grid-stride loop), then the block tree, then one ``atomic.add`` per block.
7. `sum_grid_stride_vectorised`: step 6 reading 16 bytes per load (`vector.load4`),
   `elementwise.CHUNKS` loads per thread issued before any is added (bytes in
   flight), then the vectors of a last partial round one by one, then a scalar tail
   of up to 3 elements (all of it when ``a`` is not 16-byte aligned).
"""

from __future__ import annotations

import numpy as np
from numba import cuda, float32

from .bounds import launch_bounds
from .elementwise import CHUNKS
from .vector import WIDTH, load4, vector_aligned

THREADS = 256
FULL_MASK = 0xFFFFFFFF


@cuda.jit(device=True)
def warp_sum(value):
    """The sum of ``value`` over the 32 lanes of a warp, in lane 0 (shuffle down, 5 steps)."""
    offset = 16
    while offset > 0:
        value += cuda.shfl_down_sync(FULL_MASK, value, offset)
        offset //= 2
    return value


@cuda.jit(device=True)
def tree_to_one_warp(buffer, t):
    """Sequential-addressing tree until ``buffer[0:32]`` holds the block's 32 partial sums."""
    stride = cuda.blockDim.x // 2
    while stride >= 32:
        if t < stride:
            buffer[t] += buffer[t + stride]
        cuda.syncthreads()
        stride //= 2


@cuda.jit(device=True)
def block_sum(value):
    """The sum of ``value`` over the block (``THREADS`` threads), valid in thread 0."""
    buffer = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    buffer[t] = value
    cuda.syncthreads()
    tree_to_one_warp(buffer, t)
    total = float32(0)
    if t < 32:
        total = warp_sum(buffer[t])
    return total


@cuda.jit
def sum_interleaved(partial, a):
    buffer = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buffer[t] = a[i] if i < a.size else float32(0)
    cuda.syncthreads()
    stride = 1
    while stride < cuda.blockDim.x:
        if t % (2 * stride) == 0:
            buffer[t] += buffer[t + stride]
        cuda.syncthreads()
        stride *= 2
    if t == 0:
        partial[cuda.blockIdx.x] = buffer[0]


@cuda.jit
def sum_interleaved_compact(partial, a):
    buffer = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    buffer[t] = a[i] if i < a.size else float32(0)
    cuda.syncthreads()
    stride = 1
    while stride < cuda.blockDim.x:
        index = 2 * stride * t
        if index < cuda.blockDim.x:
            buffer[index] += buffer[index + stride]
        cuda.syncthreads()
        stride *= 2
    if t == 0:
        partial[cuda.blockIdx.x] = buffer[0]


@cuda.jit
def sum_sequential(partial, a):
    buffer = cuda.shared.array(THREADS, float32)
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


@cuda.jit(device=True)
def load_two(a, t):
    """Thread ``t``'s two elements of its block's ``2 * blockDim.x``, added (0 past the end)."""
    i = cuda.blockIdx.x * 2 * cuda.blockDim.x + t
    value = a[i] if i < a.size else float32(0)
    j = i + cuda.blockDim.x
    if j < a.size:
        value += a[j]
    return value


@cuda.jit
def sum_first_add(partial, a):
    buffer = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    buffer[t] = load_two(a, t)
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
def sum_warp_shuffle(partial, a):
    buffer = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    buffer[t] = load_two(a, t)
    cuda.syncthreads()
    tree_to_one_warp(buffer, t)
    if t < 32:
        total = warp_sum(buffer[t])
        if t == 0:
            partial[cuda.blockIdx.x] = total


@cuda.jit
def sum_grid_stride_atomic(total, a):
    value = float32(0)
    for i in range(cuda.grid(1), a.size, cuda.gridsize(1)):
        value += a[i]
    value = block_sum(value)
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(total, 0, value)


@cuda.jit(device=True)
def vector_sum(values):
    """The sum of the 4 floats of a 16-byte vector, in pairs."""
    return (values[0] + values[1]) + (values[2] + values[3])


# At most THREADS threads per block, 4 blocks per SM (64 registers at most). Told the block's size, the compiler keeps
# the CHUNKS loads of a round together; without, it put each load beside its additions (one or two in flight per
# thread, seen in the sm_90 SASS).
@cuda.jit(**launch_bounds(THREADS, 4))
def sum_grid_stride_vectorised(total, a):
    loaded = cuda.local.array((CHUNKS, WIDTH), float32)  # constant indices after unrolling: registers
    start, step = cuda.grid(1), cuda.gridsize(1)
    vectors = a.size // WIDTH if vector_aligned(a) else 0  # 16-byte vectors: a[4 v : 4 v + 4]
    span = step * CHUNKS  # the vectors the grid reads in one round of the loop
    whole = vectors - vectors % span  # those of the whole rounds: no thread needs a check
    value = float32(0)
    for first in range(start, whole, span):
        for u in range(CHUNKS):  # every load of the round first ...
            x = load4(a, ((first + u * step) * WIDTH,))
            for e in range(WIDTH):
                loaded[u, e] = x[e]
        for u in range(CHUNKS):  # ... then the additions
            value += vector_sum((loaded[u, 0], loaded[u, 1], loaded[u, 2], loaded[u, 3]))
    for v in range(whole + start, vectors, step):  # the last, partial round: one vector at a time
        value += vector_sum(load4(a, (v * WIDTH,)))
    for i in range(vectors * WIDTH + start, a.size, step):  # the scalar tail (all of it when not aligned)
        value += a[i]
    value = block_sum(value)
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(total, 0, value)


LADDER = [sum_interleaved, sum_interleaved_compact, sum_sequential, sum_first_add, sum_warp_shuffle,
          sum_grid_stride_atomic, sum_grid_stride_vectorised]
ONE_LAUNCH = (sum_grid_stride_atomic, sum_grid_stride_vectorised)  # (total, a): one atomic add per block


def elements_per_block(kernel) -> int:
    """Elements a block covers: step 7 in one round of its loop, steps 4 and 5 two per thread, the others one."""
    if kernel is sum_grid_stride_vectorised:
        return THREADS * CHUNKS * WIDTH
    return 2 * THREADS if kernel in (sum_first_add, sum_warp_shuffle) else THREADS


def blocks_for(kernel, size: int, max_blocks: int = 1024) -> int:
    """Blocks to launch for ``size`` elements: enough to cover them (steps 6 and 7: at most ``max_blocks``)."""
    blocks = max(1, -(-size // elements_per_block(kernel)))
    return min(blocks, max_blocks) if kernel in ONE_LAUNCH else blocks


def block_sums_to_total(kernel, a, blocks: int | None = None):
    """The sum of device or host array ``a`` with one ladder kernel, as a 1-element array on the device.

    Steps 1-5 relaunch on their partial sums until one is left; steps 6 and 7 need one launch.
    """
    data = a if hasattr(a, "copy_to_host") else cuda.to_device(np.ascontiguousarray(a, np.float32))
    if kernel in ONE_LAUNCH:
        total = cuda.to_device(np.zeros(1, np.float32))
        kernel[blocks or blocks_for(kernel, data.size), THREADS](total, data)
        return total
    while True:
        count = blocks_for(kernel, data.size)
        partial = cuda.device_array(count, np.float32)
        kernel[count, THREADS](partial, data)
        if count == 1:
            return partial
        data = partial
