"""Assignment 2's budgets: a stencil's halo, coalesced row reductions, a work-efficient scan.

Each budget passes the intended kernel and rejects a planted wrong answer that computes the right numbers.
"""

import math

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import simulated
from gpucourse.grading import (CheckFailed, block_per_row, check_reduction, coalesced, halo_reads, pairs_per_thread,
                               reads_each_element_once, shared_reads_per_element, stencil_blocks, tree_reads)

MAX_THREADS = 1024
RADIUS = 3
HALO_SIZE = MAX_THREADS + 2 * RADIUS
SCAN_SIZE = 2 * MAX_THREADS


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


def stencil_spec(a, w):
    padded = np.pad(a, RADIUS)
    return sum(w[j] * padded[j:j + a.size] for j in range(2 * RADIUS + 1))


@cuda.jit
def stencil_shared(out, a, w):
    window = cuda.shared.array(HALO_SIZE, float32)
    t, T = cuda.threadIdx.x, cuda.blockDim.x
    start = cuda.blockIdx.x * T
    for s in range(t, T + 2 * RADIUS, T):
        i = start - RADIUS + s
        window[s] = a[i] if 0 <= i < a.size else float32(0)
    cuda.syncthreads()
    i = start + t
    if i < out.size:
        total = float32(0)
        for j in range(2 * RADIUS + 1):
            total += w[j] * window[t + j]
        out[i] = total


@cuda.jit
def stencil_from_global(out, a, w):
    i = cuda.grid(1)
    if i < out.size:
        total = float32(0)
        for j in range(2 * RADIUS + 1):
            k = i - RADIUS + j
            if 0 <= k < a.size:
                total += w[j] * a[k]
        out[i] = total


def test_halo_reads_pass_a_shared_window_and_reject_seven_global_reads_per_output():
    plan = stencil_blocks([100, 1000], threads=[32, 2, 1024], radius=RADIUS)
    check_reduction(stencil_shared, stencil_spec, plan, budget=halo_reads("a", RADIUS), quiet=True)
    check_reduction(stencil_from_global, stencil_spec, plan, quiet=True)  # the right numbers
    with pytest.raises(CheckFailed, match=r"each element of `a` may be read at most 2 times, but `a\[3\]` was "
                                          r"read 7 times: copy the block's elements and a halo of 3"):
        check_reduction(stencil_from_global, stencil_spec, plan, budget=halo_reads("a", RADIUS))


def row_max_spec(a):
    return a.max(axis=1)


def row_max(chunked: bool = False, tree: bool = True, start: float = -math.inf):
    """The row max; ``chunked`` reads chunks of neighbours; without ``tree`` thread 0 loops over the shared values;
    ``start``: each thread's first value (the identity of max, -inf)."""

    @cuda.jit
    def kernel(out, a):
        best = cuda.shared.array(MAX_THREADS, float32)
        t, T, r = cuda.threadIdx.x, cuda.blockDim.x, cuda.blockIdx.x
        cols = a.shape[1]
        value = float32(start)
        if chunked:  # thread t takes a chunk of neighbours: each element once, uncoalesced
            chunk = (cols + T - 1) // T
            for c in range(t * chunk, min(cols, (t + 1) * chunk)):
                value = max(value, a[r, c])
        else:
            for c in range(t, cols, T):
                value = max(value, a[r, c])
        best[t] = value
        cuda.syncthreads()
        stride = T // 2 if tree else 0
        while stride > 0:
            if t < stride:
                best[t] = max(best[t], best[t + stride])
            cuda.syncthreads()
            stride //= 2
        if t == 0:
            for k in range(1, 1 if tree else T):
                best[0] = max(best[0], best[k])
            out[r] = best[0]

    return kernel


def test_coalesced_rejects_a_chunked_row_reduction_that_reads_each_element_once():
    plan = block_per_row([(3, 24), (4, 320), (2, 2048)], threads=[32, 128])
    budget = [reads_each_element_once("a"), coalesced("a")]
    check_reduction(row_max(chunked=False), row_max_spec, plan, budget=budget, quiet=True)
    check_reduction(row_max(chunked=True), row_max_spec, plan, budget=reads_each_element_once("a"), quiet=True)
    with pytest.raises(CheckFailed, match=r"warp reads of `a` touch [0-9.]+ sectors of 32 bytes each on average, "
                                          r"more than 4: neighbouring threads should access neighbouring elements"):
        check_reduction(row_max(chunked=True), row_max_spec, plan, budget=budget)


def test_tree_reads_pass_a_row_max_tree_and_reject_thread_zero_looping_over_the_shared_values():
    plan = block_per_row([(3, 24), (2, 2048)], threads=[32, 128])
    budget = [reads_each_element_once("a"), tree_reads(3)]
    check_reduction(row_max(), row_max_spec, plan, values="negative", budget=budget, quiet=True)
    check_reduction(row_max(tree=False), row_max_spec, plan, values="negative", quiet=True)  # the right numbers
    with pytest.raises(CheckFailed, match=r"read shared memory 63 times, more than 16 \(3 per level of a tree over the "
                                          r"block's 32 values, 5 levels, and 1 for its result\)"):
        check_reduction(row_max(tree=False), row_max_spec, plan, budget=budget)


def test_a_row_max_that_starts_from_a_large_negative_number_fails_on_a_masked_row():
    """-1e30 never loses to the drawn values, only to a row of -inf (a fully masked row): its max is -inf."""
    plan = block_per_row([(4, 50), (2, 7)], threads=[64])
    check_reduction(row_max(), row_max_spec, plan, values="masked", quiet=True)
    check_reduction(row_max(start=-1e30), row_max_spec, plan, values="negative", quiet=True)
    with pytest.raises(CheckFailed, match=r"(?s)out\[0\] should be -inf, got -1\.0000000150474662e\+30\n.*This row is "
                                          r"all -inf .*`float32\(-math.inf\)`") as failure:
        check_reduction(row_max(start=-1e30), row_max_spec, plan, values="masked")
    assert "rounding" not in str(failure.value)  # no tolerance reaches -inf
    with pytest.raises(CheckFailed, match=r"a 0 can only come from padding") as padded:  # the cause, not the start
        check_reduction(row_max(start=0.0), row_max_spec, plan, values="masked")
    assert "only very negative" not in str(padded.value)


@cuda.jit
def zeros_per_row(out, a):  # a wrong answer: 0 for every row
    if cuda.threadIdx.x == 0:
        out[cuda.blockIdx.x] = float32(0)


def test_masked_rows_leave_the_tolerance_of_the_other_outputs_finite():
    """A column max of a square matrix with rows of -inf: each column's max is finite, and so is its tolerance."""
    plan = block_per_row([(6, 6)], threads=[32])
    with pytest.raises(CheckFailed, match=r"out\[0\] should be"):
        check_reduction(zeros_per_row, lambda a: a.max(axis=0), plan, values="masked")


def exclusive_scan_spec(a):
    return np.cumsum(a) - a


def make_blelloch(clear_the_root=True):
    """Blelloch's scan, two elements per thread; without ``clear_the_root``, the down-sweep starts from the total."""

    @cuda.jit
    def blelloch(out, a):
        s = cuda.shared.array(SCAN_SIZE, float32)
        t, T = cuda.threadIdx.x, cuda.blockDim.x
        m, n = 2 * T, a.size
        s[t] = a[t] if t < n else float32(0)
        s[t + T] = a[t + T] if t + T < n else float32(0)
        d = 1
        while d < m:
            cuda.syncthreads()
            i = 2 * d * (t + 1) - 1
            if i < m:
                s[i] += s[i - d]
            d *= 2
        if t == 0 and clear_the_root:
            s[m - 1] = float32(0)
        d = m // 2
        while d >= 1:
            cuda.syncthreads()
            i = 2 * d * (t + 1) - 1
            if i < m:
                left = s[i - d]
                s[i - d] = s[i]
                s[i] += left
            d //= 2
        cuda.syncthreads()
        if t < n:
            out[t] = s[t]
        if t + T < n:
            out[t + T] = s[t + T]

    return blelloch


blelloch = make_blelloch()


def make_hillis_steele(shift):
    """Two elements per thread, n log2(n) additions; an exclusive scan with ``shift`` 1, inclusive with 0."""

    @cuda.jit
    def hillis_steele(out, a):
        s = cuda.shared.array(SCAN_SIZE, float32)
        t, T = cuda.threadIdx.x, cuda.blockDim.x
        n = a.size
        for e in range(t, 2 * T, T):
            s[e] = a[e - shift] if shift <= e < n + shift else float32(0)
        cuda.syncthreads()
        d = 1
        while d < n:
            b0 = float32(0)
            b1 = float32(0)
            if d <= t < n:
                b0 = s[t - d]
            if d <= t + T < n:
                b1 = s[t + T - d]
            cuda.syncthreads()
            if d <= t < n:
                s[t] += b0
            if d <= t + T < n:
                s[t + T] += b1
            cuda.syncthreads()
            d *= 2
        if t < n:
            out[t] = s[t]
        if t + T < n:
            out[t + T] = s[t + T]

    return hillis_steele


hillis_steele = make_hillis_steele(1)


def test_pairs_per_thread_needs_two_elements_per_thread_at_most():
    assert [(c.grid, c.block, c.inputs, c.out) for c in pairs_per_thread([64], threads=[32])] == [
        ((1,), (32,), ((64,),), (64,))]
    with pytest.raises(ValueError, match="65 elements need at least 33 threads"):
        pairs_per_thread([65], threads=[32])


def test_shared_reads_per_element_passes_blelloch_and_rejects_hillis_steele():
    plan = pairs_per_thread([64, 50], threads=[32]) + pairs_per_thread([256], threads=[128])
    check_reduction(blelloch, exclusive_scan_spec, plan, budget=shared_reads_per_element(8), quiet=True)
    check_reduction(hillis_steele, exclusive_scan_spec, plan, quiet=True)  # the right numbers
    with pytest.raises(CheckFailed, match=r"read shared memory \d+ times for a scan of 64 elements \(2 per thread\), "
                                          r"1\d\.\d per element, more than 8: a work-efficient scan"):
        check_reduction(hillis_steele, exclusive_scan_spec, plan, budget=shared_reads_per_element(8))



def test_an_inclusive_scan_for_an_exclusive_one_is_told_to_shift_by_one():
    with pytest.raises(CheckFailed, match=r"This is the inclusive scan \(out\[i\] includes a\[i\]\)"):
        check_reduction(make_hillis_steele(0), exclusive_scan_spec, pairs_per_thread([50], threads=[32]))


def test_a_blelloch_scan_that_keeps_the_root_is_told_to_clear_it_not_to_shift():
    with pytest.raises(CheckFailed, match=r"too large by the total of a: .*Set the last element to 0"):
        check_reduction(make_blelloch(clear_the_root=False), exclusive_scan_spec, pairs_per_thread([50], threads=[32]))


def test_a_scan_of_one_element_names_every_mistake_that_gives_its_value():
    """With one element, keeping the root, the inclusive scan and a down-sweep without the swap all give a[0]."""
    for kernel in (make_blelloch(clear_the_root=False), make_hillis_steele(0)):
        with pytest.raises(CheckFailed, match=r"With one element, out\[0\] = a\[0\] fits three mistakes: the "
                                              r"down-sweep started from the total \(set the last element to 0 .*"
                                              r"inclusive scan"):
            check_reduction(kernel, exclusive_scan_spec, pairs_per_thread([1], threads=[32]))
