"""Lecture 2b's dot-product puzzle (`check_reduction` over one block, the lecture's budgets): the grid-stride sum
and a tree pass; a contiguous chunk per thread (uncoalesced), an atomic per product on a NaN output and an atomic per
thread in place of the tree are named."""

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import trace
from gpucourse.grading import (CheckFailed, check_reduction, coalesced, float32_only, no_atomics, one_block_reduce,
                               reads_each_element_once, tree_reads, writes_each_element_once)
from gpucourse.simulator import BudgetExceeded

THREADS = 128
BUDGETS = [reads_each_element_once("a", "b"), coalesced("a", "b"), writes_each_element_once("out"), no_atomics(),
           tree_reads(3), float32_only()]
PLANS = one_block_reduce([1, 7, 100, 1000], threads=[32, 128], inputs=2)


def dot_spec(a, b):
    return np.array([a @ b])


def make(chunked=False):
    @cuda.jit
    def dot_block(out, a, b):
        buffer = cuda.shared.array(THREADS, float32)
        t, T = cuda.threadIdx.x, cuda.blockDim.x
        acc = float32(0)
        if chunked:  # neighbours read addresses a chunk apart
            per = (a.size + T - 1) // T
            for k in range(t * per, min(a.size, (t + 1) * per)):
                acc += a[k] * b[k]
        else:
            for k in range(t, a.size, T):
                acc += a[k] * b[k]
        buffer[t] = acc
        cuda.syncthreads()
        stride = T // 2
        while stride > 0:
            if t < stride:
                buffer[t] += buffer[t + stride]
            cuda.syncthreads()
            stride //= 2
        if t == 0:
            out[0] = buffer[0]

    return dot_block


def test_the_grid_stride_dot_product_passes_and_a_chunk_per_thread_is_not_coalesced():
    check_reduction(make(), dot_spec, PLANS, budget=BUDGETS, quiet=True)
    check_reduction(make(chunked=True), dot_spec, PLANS, quiet=True)  # the right numbers
    with pytest.raises(CheckFailed, match=r"sectors .*coalesc"):
        check_reduction(make(chunked=True), dot_spec, PLANS, budget=BUDGETS)


@cuda.jit
def atomic_dot(out, a, b):
    for k in range(cuda.threadIdx.x, a.size, cuda.blockDim.x):
        cuda.atomic.add(out, 0, a[k] * b[k])


def test_an_atomic_sum_into_the_poisoned_output_is_not_called_never_written():
    with pytest.raises(CheckFailed, match=r"got nan \(never written, or only added to: it still holds the poison value\)"):
        check_reduction(atomic_dot, dot_spec, PLANS)


def make_atomic_total(through_shared: bool):
    """The loop, then every thread adds its total to ``out[0]`` (zeroed by thread 0) with an atomic: the right sum
    with no tree; ``through_shared``: the total goes through the shared array first, so that shared memory is used."""

    @cuda.jit
    def dot_block(out, a, b):
        buffer = cuda.shared.array(THREADS, float32)
        t = cuda.threadIdx.x
        acc = float32(0)
        for k in range(t, a.size, cuda.blockDim.x):
            acc += a[k] * b[k]
        if through_shared:
            buffer[t] = acc
        if t == 0:
            out[0] = float32(0)
        cuda.syncthreads()
        cuda.atomic.add(out, 0, buffer[t] if through_shared else acc)

    return dot_block


@pytest.mark.parametrize("through_shared", [True, False])
def test_an_atomic_per_thread_in_place_of_the_tree_is_named(through_shared):
    kernel = make_atomic_total(through_shared)
    check_reduction(kernel, dot_spec, PLANS, quiet=True)  # the right numbers
    with pytest.raises(CheckFailed, match=r"32 threads made 32 atomic updates of `out` \(cuda.atomic\).*no atomics: "
                                          r"combine the block's values with a tree in shared memory"):
        check_reduction(kernel, dot_spec, PLANS, budget=BUDGETS)


def test_no_atomics_fails_a_kernel_with_an_atomic_and_passes_one_without():
    a, b = np.arange(1, 41, dtype=np.float32), np.linspace(-1, 1, 40, dtype=np.float32)
    for kernel, atomics in ((make_atomic_total(False), 32), (make(), 0)):
        out = np.full(1, np.nan, np.float32)
        with trace() as t:
            kernel[1, 32](out, a, b)
        assert np.isclose(out[0], a @ b, rtol=1e-5)
        if atomics:
            with pytest.raises(BudgetExceeded, match=rf"{atomics} atomic updates of `out`.*no atomics"):
                no_atomics()(t[0])
            no_atomics("a", "b")(t[0])  # only the arrays named
        else:
            no_atomics()(t[0])
            no_atomics("out")(t[0])
