"""Module 2's reductions: the sum ladder (each step's result, access budget and compiled loads) and the axis
reduction on any axis of a view.

Random non-uniform data, sizes that are not multiples of a block, poisoned outputs; race-free (the simulator would
stop) and within their access budgets.
"""

import re

import numpy as np
import pytest
from numba.core import types

from gpucourse import simulated, trace
from gpucourse.kernels import Tensor, axis_reduction, elementwise, reduction
from gpucourse.run.ptx import compile_for_gpu
from gpucourse.run.resources import kernel_resources


@pytest.fixture(autouse=True)
def on_the_simulator():
    """Budgets need the trace, so these run on the simulator on a GPU machine too."""
    with simulated():
        yield


def larger(x, y):
    return max(x, y)


def add(x, y):
    return x + y


rng = np.random.default_rng(42)


def random(shape):
    return rng.standard_normal(shape).astype(np.float32) * rng.uniform(0.5, 4)


def poisoned(shape):
    return Tensor.from_numpy(np.full(shape, np.nan, np.float32))


@pytest.mark.parametrize("kernel", reduction.LADDER, ids=lambda k: k.py_func.__name__)
@pytest.mark.parametrize("size", [1, 255, 1000, 5001])
def test_sum_ladder(kernel, size):
    a = random(size)
    total = reduction.block_sums_to_total(kernel, a).copy_to_host()[0]
    np.testing.assert_allclose(total, a.sum(dtype=np.float64), rtol=1e-5, atol=1e-4)


@pytest.mark.parametrize("kernel", reduction.LADDER, ids=lambda k: k.py_func.__name__)
def test_sum_ladder_budgets(kernel):
    a = random(3000)
    with trace() as t:
        reduction.block_sums_to_total(kernel, a, blocks=3)
    first = t[0]
    first.assert_reads_per_element("a", exactly=1)  # every step reads each element from global memory once
    # step 7's 16-byte loads: 512 bytes per warp request, 16 sectors; the others' 4-byte loads 4 sectors
    assert first.sectors_per_request("a") <= (16.0 if kernel is reduction.sum_grid_stride_vectorised else 4.0)
    if kernel in reduction.ONE_LAUNCH:
        assert len(t) == 1 and first.array("total").per_thread["atomic"].sum() == 3  # one atomic per block
        first.assert_reads_per_thread("a", at_most=-(-3000 // (3 * reduction.THREADS)))
    if kernel is reduction.sum_interleaved_compact:
        assert first.bank_conflicts("buffer") > 1
    else:
        first.assert_no_bank_conflicts()


@pytest.mark.parametrize("n, offset, blocks", [(70_003, 0, 8), (5001, 0, 1), (4099, 1, 3), (1030, 2, 5), (3, 0, 2)])
def test_vectorised_sum_any_length_alignment_and_grid(n, offset, blocks):
    """Whole rounds of CHUNKS loads (70,003 with 8 blocks: 2), a partial round, a scalar tail of 3; not 16-byte
    aligned (offset 1 or 2): every element as a scalar. Each element read once, one atomic add per block."""
    storage = random(n + offset)
    a = storage[offset:]
    total = np.array([0, np.nan], np.float32)  # the atomics add into total[0]; total[1] must stay poisoned
    with trace() as t:
        reduction.sum_grid_stride_vectorised[blocks, reduction.THREADS](total, a)
    np.testing.assert_allclose(total[0], a.sum(dtype=np.float64), rtol=1e-5, atol=1e-4)
    assert np.isnan(total[1])
    t.assert_reads_per_element("a", exactly=1)
    assert t.array("total").per_thread["atomic"].sum() == blocks
    if offset == 0 and n > 1000:  # 16-byte loads: 512 bytes, 16 sectors a warp request (fewer in partial warps)
        assert 15 < t.sectors_per_request("a") <= 16
    else:  # 4-byte loads: a warp's 128 bytes, 5 sectors where they start off a sector's boundary
        assert t.sectors_per_request("a") <= 5


def test_vectorised_sum_compiles_to_16_byte_loads_in_registers():
    signature = (types.float32[::1],) * 2
    ptx = compile_for_gpu(reduction.sum_grid_stride_vectorised, signature)
    assert len(re.findall(r"ld\.global\.v4\.f32", ptx)) >= elementwise.CHUNKS + 1  # a round's loads, the partial one
    assert not re.search(r"\b(ld|st)\.local\b", ptx)
    used = kernel_resources(reduction.sum_grid_stride_vectorised, signature, "sm_90")
    if used is not None:  # None without nvJitLink
        assert used.local_bytes == used.spilled_bytes == 0
        assert used.registers * reduction.THREADS * 4 <= 65536  # its launch bounds: 4 blocks of 256 per SM


def test_interleaved_addressing_leaves_warps_mostly_idle():
    a = random(2048)
    with trace() as interleaved:
        reduction.sum_interleaved[8, reduction.THREADS](np.zeros(8, np.float32), a)
    with trace() as sequential:
        reduction.sum_sequential[8, reduction.THREADS](np.zeros(8, np.float32), a)
    # Both do 255 additions per block; the interleaved tree spreads them over more, emptier warps.
    assert interleaved.threads_per_request("buffer") < sequential.threads_per_request("buffer")
    assert interleaved.array("buffer").instructions["read"].requests > sequential.array("buffer").instructions["read"].requests


@pytest.mark.parametrize("shape, view", [((4, 300, 6), None), ((50, 3, 7), "T"), ((129,), None)])
def test_axis_reduce_any_axis(shape, view):
    a = Tensor.from_numpy(random(shape))
    a = a.T if view == "T" else a
    summing = axis_reduction.make_axis_reduce(add, 0.0)
    biggest = axis_reduction.make_axis_reduce(larger, -np.inf)
    for axis in range(a.ndim):
        kept = a.shape[:axis] + (1,) + a.shape[axis + 1:]
        total, top = poisoned(kept), poisoned(kept)
        with trace() as t:
            axis_reduction.launch_axis_reduce(summing, total, a, axis)
        axis_reduction.launch_axis_reduce(biggest, top, a, axis)
        np.testing.assert_allclose(total.numpy(), a.numpy().sum(axis, keepdims=True), rtol=1e-5, atol=1e-4)
        np.testing.assert_array_equal(top.numpy(), a.numpy().max(axis, keepdims=True))
        t.assert_reads_per_element("a", exactly=1)
        t.assert_writes_per_element("out", exactly=1)


def test_axis_reduce_refuses_a_wrong_output_shape():
    a = Tensor.from_numpy(random((3, 4)))
    kernel = axis_reduction.make_axis_reduce(add, 0.0)
    with pytest.raises(ValueError, match=r"gives shape \(3, 1\), but out has \(3,\)"):
        axis_reduction.launch_axis_reduce(kernel, poisoned((3,)), a, 1)
