"""Fresh device allocations start unwritten: reading an element nothing wrote is an uninitialised read."""

import numpy as np
import pytest

import gpucourse
from gpucourse.simulator import UninitializedRead
from numba import cuda

pytestmark = pytest.mark.skipif(gpucourse.BACKEND.on_gpu, reason="tests the CPU backend")


@cuda.jit
def fill(out, value):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = value


@cuda.jit
def doubled(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * a[i]


@cuda.jit
def accumulate(total, a):
    i = cuda.grid(1)
    if i < a.size:
        cuda.atomic.add(total, 0, a[i])


def test_reading_a_fresh_device_array_is_an_uninitialised_read():
    a = cuda.device_array(40, np.float32)
    with pytest.raises(UninitializedRead) as fault:
        doubled[2, 32](cuda.device_array_like(a), a)
    message = str(fault.value)
    assert "kernel `doubled`" in message and "out[i] = 2 * a[i]" in message
    assert "thread threadIdx=(0, 0, 0) of block blockIdx=(0, 0, 0) reads `a[0]`, which nothing has written" in message
    assert "cuda.device_array" in message


def test_an_atomic_on_a_fresh_device_array_is_an_uninitialised_read():
    with pytest.raises(UninitializedRead, match=r"reads `total\[0\]`"):
        accumulate[1, 32](cuda.device_array(1, np.float32), cuda.to_device(np.ones(32, np.float32)))


def test_what_a_kernel_wrote_stays_written_for_the_next_launch():
    a, out = cuda.device_array(40, np.float32), cuda.device_array(40, np.float32)
    fill[2, 32](a, np.float32(1.5))
    doubled[2, 32](out, a)
    np.testing.assert_array_equal(out.copy_to_host(), np.full(40, 3.0, np.float32))


def test_a_partly_written_array_names_the_first_unwritten_element():
    a = cuda.device_array(40, np.float32)
    fill[1, 32](a, np.float32(1.0))  # elements 32..39 stay unwritten
    with pytest.raises(UninitializedRead, match=r"blockIdx=\(1, 0, 0\) reads `a\[32\]`"):
        doubled[2, 32](cuda.device_array(40, np.float32), a)


@pytest.mark.parametrize("write", [
    lambda d: d.copy_to_device(np.ones(40, np.float32)),
    lambda d: cuda.to_device(np.ones(40, np.float32), to=d),
    lambda d: d.__setitem__(slice(None), 1.0),
])
def test_host_copies_count_as_writes(write):
    a = cuda.device_array(40, np.float32)
    write(a)
    out = cuda.device_array_like(a)
    doubled[2, 32](out, a)
    np.testing.assert_array_equal(out.copy_to_host(), np.full(40, 2.0, np.float32))


def test_views_share_what_was_written():
    a = cuda.device_array((2, 40), np.float32)
    fill[2, 32](a[0], np.float32(1.0))
    fill[2, 32](a.reshape(80)[40:], np.float32(2.0))
    out = cuda.device_array(80, np.float32)
    doubled[3, 32](out, a.ravel())
    np.testing.assert_array_equal(out.copy_to_host(), np.repeat([2.0, 4.0], 40).astype(np.float32))
    half = cuda.device_array(40, np.float32)
    half[:20] = 0.0
    with pytest.raises(UninitializedRead, match=r"reads `a\[20\]`"):
        doubled[2, 32](cuda.device_array(40, np.float32), half)


def test_host_arrays_and_copies_to_the_device_are_written():
    host = np.ones(40, np.float32)
    out = np.zeros_like(host)
    doubled[2, 32](out, host)
    doubled[2, 32](cuda.device_array(40, np.float32), cuda.to_device(host))
    np.testing.assert_array_equal(out, 2 * host)
