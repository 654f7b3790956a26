"""Assignment 1's shared-memory budgets: a sum per block, a 3-wide sum with a halo, a 2-D tile copy.

Each budget passes the intended kernel and rejects a planted wrong answer that computes the right numbers.
"""

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import simulated
from gpucourse.grading import (CheckFailed, barrier_before_reads, block_sums, blocks_1d, blocks_2d, check_kernel,
                               check_reduction, coalesced, conflict_free_shared_memory, halo_reads,
                               reads_each_element_once, writes_each_element_once)

MAX_THREADS = 1024
HALO_SIZE = MAX_THREADS + 2
TILE = 16


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


# ---------------------------------------------------------------- a sum per block


def block_sum_spec(a, threads):
    padded = np.pad(a, (0, -a.size % threads))
    return padded.reshape(-1, threads).sum(axis=1)


@cuda.jit
def block_sum_tree(out, a):
    partial = cuda.shared.array(MAX_THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    partial[t] = a[i] if i < a.size else float32(0)
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[cuda.blockIdx.x] = partial[0]


@cuda.jit
def block_sum_by_thread_zero(out, a):
    """Right numbers, no shared memory: thread 0 reads its block's whole chunk."""
    if cuda.threadIdx.x == 0:
        start = cuda.blockIdx.x * cuda.blockDim.x
        total = float32(0)
        for i in range(start, min(start + cuda.blockDim.x, a.size)):
            total += a[i]
        out[cuda.blockIdx.x] = total


@cuda.jit
def block_sum_written_twice(out, a):
    """Right numbers: a tree, but thread 0 clears `out` first, then writes the total: two writes per block."""
    partial = cuda.shared.array(MAX_THREADS, float32)
    t = cuda.threadIdx.x
    i = cuda.grid(1)
    if t == 0:
        out[cuda.blockIdx.x] = float32(0)
    partial[t] = a[i] if i < a.size else float32(0)
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[cuda.blockIdx.x] = partial[0]


def test_block_sum_budget_passes_a_tree_and_rejects_one_reader_and_two_writes():
    once = [reads_each_element_once("a"), writes_each_element_once("out")]
    for threads in (1, 4, 32):
        spec = lambda a, T=threads: block_sum_spec(a, T)  # noqa: E731
        plan = block_sums([1, 7, 100], threads)
        check_reduction(block_sum_tree, spec, plan, budget=once, quiet=True)
        check_reduction(block_sum_by_thread_zero, spec, plan, quiet=True)  # the right numbers
        check_reduction(block_sum_written_twice, spec, plan, quiet=True)
    spec = lambda a: block_sum_spec(a, 32)  # noqa: E731
    with pytest.raises(CheckFailed, match=r"spread the work"):
        check_reduction(block_sum_by_thread_zero, spec, block_sums([100], 32), budget=once)
    with pytest.raises(CheckFailed, match=r"`out\[0\]` was written 2 times"):
        check_reduction(block_sum_written_twice, spec, block_sums([100], 32), budget=once)


# ---------------------------------------------------------------- a 3-wide sum with a halo


def sum3_spec(a):
    padded = np.pad(a, 1)
    return padded[:-2] + padded[1:-1] + padded[2:]


@cuda.jit
def sum3_shared(out, a):
    window = cuda.shared.array(HALO_SIZE, float32)
    t, T = cuda.threadIdx.x, cuda.blockDim.x
    start = cuda.blockIdx.x * T
    for s in range(t, T + 2, T):
        i = start - 1 + s
        window[s] = a[i] if 0 <= i < a.size else float32(0)
    cuda.syncthreads()
    i = start + t
    if i < out.size:
        out[i] = window[t] + window[t + 1] + window[t + 2]


@cuda.jit
def sum3_from_global(out, a):
    i = cuda.grid(1)
    if i < out.size:
        total = a[i]
        if i > 0:
            total += a[i - 1]
        if i + 1 < a.size:
            total += a[i + 1]
        out[i] = total


def test_halo_reads_pass_a_shared_window_and_reject_three_global_reads_per_output():
    plan = blocks_1d([1, 33, 100], threads=[1, 2, 32])
    check_kernel(sum3_shared, sum3_spec, plan, budget=halo_reads("a", 1), quiet=True)
    check_kernel(sum3_from_global, sum3_spec, plan, quiet=True)  # the right numbers
    with pytest.raises(CheckFailed, match=r"each element of `a` may be read at most 2 times, but `a\[1\]` was "
                                          r"read 3 times: copy the block's elements and a halo of 1"):
        check_kernel(sum3_from_global, sum3_spec, blocks_1d([100], threads=[32]), budget=halo_reads("a", 1))


# ---------------------------------------------------------------- a 2-D tile copy


def copy_spec(a):
    return a.copy()


def tile_copy_with(barrier_first: bool = False, barrier_between: bool = True):
    """The 2-D tile copy; with its barrier first or none at all (each thread reads back its own element, so the
    numbers are right and there is no race), it is not the skeleton of a tiled kernel."""

    @cuda.jit
    def kernel(out, a):
        tile = cuda.shared.array((TILE, TILE), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        c, r = cuda.grid(2)
        if barrier_first:
            cuda.syncthreads()
        if r < a.shape[0] and c < a.shape[1]:
            tile[ty, tx] = a[r, c]
        if barrier_between:
            cuda.syncthreads()
        if r < out.shape[0] and c < out.shape[1]:
            out[r, c] = tile[ty, tx]

    return kernel


tile_copy = tile_copy_with()


@cuda.jit
def copy_without_shared_memory(out, a):
    c, r = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = a[r, c]


@cuda.jit
def tile_copy_x_along_rows(out, a):
    """Right numbers, shared memory, but threadIdx.x runs down a column: a warp's reads are rows apart."""
    tile = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    r = cuda.blockIdx.y * TILE + tx
    c = cuda.blockIdx.x * TILE + ty
    if r < a.shape[0] and c < a.shape[1]:
        tile[tx, ty] = a[r, c]
    cuda.syncthreads()
    if r < out.shape[0] and c < out.shape[1]:
        out[r, c] = tile[tx, ty]


def test_tile_budgets_pass_a_shared_tile_and_reject_no_tile_and_uncoalesced_reads():
    budget = [coalesced("a"), coalesced("out", kind="write"), conflict_free_shared_memory()]
    plan = blocks_2d([(40, 72), (16, 16), (3, 8)], blocks=[(TILE, TILE)])
    check_kernel(tile_copy, copy_spec, plan, budget=budget, quiet=True)
    check_kernel(copy_without_shared_memory, copy_spec, plan, quiet=True)  # the right numbers
    check_kernel(tile_copy_x_along_rows, copy_spec, plan, quiet=True)
    with pytest.raises(CheckFailed, match=r"uses no shared memory"):
        check_kernel(copy_without_shared_memory, copy_spec, plan, budget=budget)
    with pytest.raises(CheckFailed, match=r"sectors"):
        check_kernel(tile_copy_x_along_rows, copy_spec, plan, budget=budget)


def test_barrier_before_reads_passes_the_skeleton_and_rejects_a_missing_or_early_barrier():
    budget = [conflict_free_shared_memory(), barrier_before_reads(), coalesced("a"), coalesced("out", kind="write")]
    plan = blocks_2d([(40, 72), (7, 8), (20, 40)], blocks=[(TILE, TILE)])
    check_kernel(tile_copy, copy_spec, plan, budget=budget, quiet=True)
    for kernel in (tile_copy_with(barrier_between=False), tile_copy_with(barrier_first=True, barrier_between=False)):
        check_kernel(kernel, copy_spec, plan, quiet=True)  # the right numbers, no race
        with pytest.raises(CheckFailed, match=r"(?s)is correct but over its budget: .*thread threadIdx=\(0, 0, 0\) of "
                                              r"block blockIdx=\(0, 0, 0\) reads `tile\[0, 0\]` with no barrier since "
                                              r"it was written: copy the tile in, wait at cuda.syncthreads\(\), then read"):
            check_kernel(kernel, copy_spec, plan, budget=budget)
    with pytest.raises(CheckFailed, match=r"uses no shared memory"):
        check_kernel(copy_without_shared_memory, copy_spec, plan, budget=barrier_before_reads())
