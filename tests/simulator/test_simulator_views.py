"""Slices and views in kernels: ``a[1:3]``, ``a[i, :]``, ``a[:, j]``, ``a[::2]``, checked and traced as elements."""

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import simulated
from gpucourse.simulator import DataRace, OutOfBounds, UninitializedRead, UnsupportedInKernel


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


@cuda.jit
def reads_through_views(out, a, b):
    i = cuda.grid(1)
    if i < 2:
        out[i, 0] = a[1:3][i]
        out[i, 1] = a[::2][i]
        out[i, 2] = b[i, :][1]
        out[i, 3] = b[:, i][2]
        out[i, 4] = a[-3:][i]
        out[i, 5] = b[1:, ::2][i, 1]
        out[i, 6] = a[1:][1:][0]
        out[i, 7] = len(b[:, 1:3]) + b[1:3, 1:].shape[1]
        out[i, 8] = a[::-1][i]


def test_views_read_what_numpy_slices_hold():
    a = np.arange(8, dtype=np.float32)
    b = np.arange(12, dtype=np.float32).reshape(3, 4)
    out = np.zeros((2, 9), np.float32)
    reads_through_views[1, 32](out, a, b)
    for i in range(2):
        expected = [a[1:3][i], a[::2][i], b[i, :][1], b[:, i][2], a[-3:][i], b[1:, ::2][i, 1], a[1:][1:][0],
                    len(b[:, 1:3]) + b[1:3, 1:].shape[1], a[::-1][i]]
        np.testing.assert_array_equal(out[i], expected)


@cuda.jit
def writes_rows_and_columns(out, column_sums):
    i = cuda.grid(1)
    if i < out.shape[0]:
        row = out[i, :]
        for j in range(row.shape[0]):
            row[j] = i * 10 + j
        cuda.atomic.add(column_sums[1:], 0, 1.0)


@cuda.jit
def shared_row_view(out):
    tile = cuda.shared.array((4, 8), float32)
    t = cuda.threadIdx.x
    mine = tile[t, 2:6]
    for j in range(mine.size):
        mine[j] = t + j
    cuda.syncthreads()
    out[t] = tile[3 - t, 2:][3]


def test_writes_and_atomics_through_views_of_global_and_shared_memory():
    out = np.zeros((3, 4), np.float32)
    sums = np.zeros(2, np.float32)
    writes_rows_and_columns[1, 32](out, sums)
    np.testing.assert_array_equal(out, 10 * np.arange(3)[:, None] + np.arange(4))
    np.testing.assert_array_equal(sums, [0, 3])
    result = np.zeros(4, np.float32)
    shared_row_view[1, 4](result)
    np.testing.assert_array_equal(result, 3 - np.arange(4) + 3)


@cuda.jit
def past_the_view(out, a):
    i = cuda.grid(1)
    out[i] = a[1:3][i]


@cuda.jit
def bounds_per_thread(out, a):
    i = cuda.grid(1)
    out[i] = a[i:][0] + a[i + 1:i + 3][1]


@cuda.jit
def step_per_thread(out, a):
    i = cuda.grid(1)
    out[i] = a[::i + 1][0]


@cuda.jit
def unwritten_shared_through_a_view(out):
    tile = cuda.shared.array(8, float32)
    out[cuda.threadIdx.x] = tile[4:][cuda.threadIdx.x]


@cuda.jit
def racing_through_a_view(out):
    out[1:][0] = cuda.threadIdx.x


def test_views_are_checked_like_arrays():
    a = np.arange(8, dtype=np.float32)
    with pytest.raises(OutOfBounds, match=r"threadIdx=\(2, 0, 0\).*index 2 is out of bounds for `a\[1:3\]` of shape \(2,\)"):
        past_the_view[1, 4](np.zeros(4, np.float32), a)
    with pytest.raises(UninitializedRead, match=r"reads `tile\[4\]`"):
        unwritten_shared_through_a_view[1, 4](np.zeros(4, np.float32))
    with pytest.raises(DataRace, match=r"`out\[1\]`"):
        racing_through_a_view[1, 4](np.zeros(4, np.float32))


def test_slice_bounds_that_differ_between_threads_and_a_step_that_does():
    a, out = np.random.default_rng(9).uniform(-1, 1, 8).astype(np.float32), np.zeros(5, np.float32)
    bounds_per_thread[1, 5](out, a)
    np.testing.assert_array_equal(out, a[:5] + a[2:7])
    with pytest.raises(UnsupportedInKernel, match="step of the slice .* differs from thread to thread") as fault:
        step_per_thread[1, 4](np.zeros(4, np.float32), a)
    assert str(fault.value).startswith("kernel `step_per_thread`, line ")
