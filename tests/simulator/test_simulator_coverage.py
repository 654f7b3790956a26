"""Python and numba-cuda features beyond plain indexing run on the simulator (issue 13, part 3), and what it
still cannot run stops with one course message naming the kernel and the line, never a Python error."""

import cmath
import math

import numba
import numpy as np
import pytest
from numba import cuda, float32
from numba.cuda.random import create_xoroshiro128p_states, xoroshiro128p_uniform_float32

from gpucourse import simulated
from gpucourse.simulator import DataRace, OutOfBounds, UninitializedRead, UnsupportedInKernel

N = 40


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


# -- support ------------------------------------------------------------------------------------------------
@cuda.jit
def bit_intrinsics(a, popc, clz, ffs, brev):
    i = cuda.grid(1)
    if i < a.size:
        popc[i] = cuda.popc(a[i])
        clz[i] = cuda.clz(a[i])
        ffs[i] = cuda.ffs(a[i])
        brev[i] = cuda.brev(a[i])


@pytest.mark.parametrize("dtype", [np.uint32, np.uint64])
def test_bit_intrinsics(dtype):
    bits = np.dtype(dtype).itemsize * 8
    a = np.random.default_rng(1).integers(0, 2**bits - 1, N, dtype=dtype, endpoint=True)
    a[:3] = [0, 1, 2**bits - 1]
    out = [np.zeros(N, dtype) for _ in range(3)] + [np.zeros(N, np.uint32)]
    bit_intrinsics[1, 64](a, out[0], out[1], out[3], out[2])
    values = [int(v) for v in a]
    assert out[0].tolist() == [bin(v).count("1") for v in values]
    assert out[1].tolist() == [bits - v.bit_length() for v in values]
    assert out[3].tolist() == [(v & -v).bit_length() for v in values]
    assert out[2].tolist() == [int(f"{v:0{bits}b}"[::-1], 2) for v in values]


@cuda.jit
def math_and_rounding(a, out):
    i = cuda.grid(1)
    if i < a.size:
        x = a[i]
        out[i, 0] = math.radians(x)
        out[i, 1] = math.degrees(x)
        out[i, 2] = math.remainder(x, 0.7)
        out[i, 3] = round(x, 2)
        out[i, 4] = math.exp2(x)
        out[i, 5] = math.nextafter(x, 0.0)
        out[i, 6] = math.ldexp(x, 3)


def test_math_functions_and_round_to_digits_as_python():
    a = np.random.default_rng(2).uniform(-5, 5, N)
    out = np.zeros((N, 7))
    math_and_rounding[1, 64](a, out)
    for x, row in zip(a.tolist(), out.tolist()):
        assert row[:4] + row[5:] == [math.radians(x), math.degrees(x), math.remainder(x, 0.7), round(x, 2),
                                     math.nextafter(x, 0.0), math.ldexp(x, 3)]
        assert row[4] == pytest.approx(math.exp2(x), rel=1e-15)  # libdevice and libm may differ in the last bit


@cuda.jit
def complex_math(z, out):
    i = cuda.grid(1)
    if i < z.size:
        out[i, 0] = cmath.sqrt(z[i])
        out[i, 1] = cmath.exp(z[i])
        out[i, 2] = cmath.log(z[i])
        out[i, 3] = cmath.phase(z[i])


def test_cmath_functions():
    rng = np.random.default_rng(3)
    z = rng.uniform(-3, 3, N) + 1j * rng.uniform(-3, 3, N)
    out = np.zeros((N, 4), np.complex128)
    complex_math[1, 64](z, out)
    for value, row in zip(z.tolist(), out.tolist()):
        np.testing.assert_allclose(row, [cmath.sqrt(value), cmath.exp(value), cmath.log(value),
                                         cmath.phase(value)], rtol=1e-15)


@cuda.jit
def exp_and_rect(z, r, phi, out):
    i = cuda.grid(1)
    if i < z.size:
        out[i, 0] = cmath.exp(z[i])
        out[i, 1] = cmath.rect(r[i], phi[i])


def test_cmath_special_values_are_c99s():
    inf, nan = math.inf, math.nan
    z = np.array([complex(-inf, -inf), complex(inf, 0.0), complex(nan, 0.0), 1 + 1j])
    r, phi = np.array([0.0, inf, 2.0, 1.0]), np.array([-0.0, 0.0, -0.0, 0.5])
    out = np.zeros((4, 2), np.complex128)
    exp_and_rect[1, 4](z, r, phi, out)
    expected = [[cmath.exp(v), cmath.rect(a, b)] for v, a, b in zip(z.tolist(), r.tolist(), phi.tolist())]
    for got, want in zip(out.tolist(), expected):
        for g, w in zip(got, want):  # equal, nan for nan, and zeros with their sign
            assert (math.copysign(1, g.real), math.copysign(1, g.imag)) == (math.copysign(1, w.real), math.copysign(1, w.imag))
            np.testing.assert_equal(g, w)


@cuda.jit
def loops_over_arrays(a, b, out):
    i = cuda.grid(1)
    if i < out.size:
        total = 0.0
        for v in a:
            total += v
        for k, v in enumerate(b):
            total += k * v
        for u, v in zip(a, b):
            total += u * v
        out[i] = total + a.shape[i % 1]


def test_iteration_over_arrays_enumerate_zip_and_shape_by_expression():
    a, b = np.arange(5.0), np.arange(3.0) + 1
    out = np.zeros(N)
    loops_over_arrays[1, 64](a, b, out)
    expected = a.sum() + sum(k * v for k, v in enumerate(b)) + sum(u * v for u, v in zip(a, b)) + 5
    np.testing.assert_array_equal(out, expected)


@cuda.jit
def array_attributes(out, a, b):
    s = cuda.shared.array((4, 8), float32)
    out[0], out[1], out[2], out[3] = a.strides[0], a.strides[1], b.strides[0], s.strides[0]
    out[4], out[5], out[6] = a.itemsize, a.nbytes, s.nbytes


def test_strides_itemsize_and_nbytes_in_bytes_as_numba_gives_them():
    """Of a global array, a strided view and a shared array (numba-cuda compiles each: UniTuple(int64) strides)."""
    out = cuda.to_device(np.zeros(7, np.int64))
    b = cuda.to_device(np.zeros(20, np.float64))[::2]
    array_attributes[1, 1](out, cuda.to_device(np.zeros((3, 5), np.float32)), b)
    assert out.copy_to_host().tolist() == [20, 4, 16, 32, 4, 60, 128]


@cuda.jit
def add_one(a):
    i = cuda.grid(1)
    if i < a.size:
        a[i] += 1


def test_argument_hints_and_forall():
    a = np.zeros(N, np.int32)
    add_one[1, 64](cuda.In(a))
    assert not a.any()  # In: copied to the device only
    add_one[1, 64](cuda.InOut(a))
    add_one[1, 64](cuda.Out(a))
    add_one.forall(N)(a)
    np.testing.assert_array_equal(a, 3)


@cuda.jit
def count_with_unsigned_index(counts, keys):
    i = cuda.grid(1)
    if i < keys.size:
        cuda.atomic.add(counts, (np.uint64(0), keys[i]), 1)


def test_atomic_with_an_unsigned_index():
    keys = np.arange(N, dtype=np.uint64) % 4
    counts = np.zeros((1, 4), np.int64)
    count_with_unsigned_index[1, 64](counts, keys)
    np.testing.assert_array_equal(counts, [[10, 10, 10, 10]])


PARTICLE = np.dtype([("x", np.float32), ("n", np.int32)])


@cuda.jit
def move_particles(particles):
    i = cuda.grid(1)
    if i < particles.size:
        particles[i].x = particles[i].x + particles[i]["n"]
        particles[i]["n"] = 0


def test_record_arrays_read_and_write_fields():
    particles = np.zeros(N, PARTICLE)
    particles["x"], particles["n"] = np.arange(N), 2
    move_particles[1, 64](particles)
    np.testing.assert_array_equal(particles["x"], np.arange(N) + 2)
    assert not particles["n"].any()


SAMPLE = np.dtype([("x", np.float64), ("h", np.float32, 2), ("counts", np.int32, 3)])


@cuda.jit
def fill_record(r, counts):
    if cuda.grid(1) == 0:
        r.x = 1.5
        r.h[1] = 4.0
        r["counts"] = counts


def test_a_record_argument_is_written_by_one_thread_and_racy_with_more():
    record = np.zeros(1, SAMPLE).view(np.recarray)[0]  # a record scalar, as numba-cuda's tests pass one
    fill_record[1, 4](record, np.arange(3, dtype=np.int32))
    assert record["x"] == 1.5 and list(record["h"]) == [0, 4] and list(record["counts"]) == [0, 1, 2]
    with pytest.raises(DataRace, match=r"`r\.x`: thread threadIdx=\(0, 0, 0\).* and thread threadIdx=\(1, 0, 0\)"):
        set_record_field[1, 2](record)


@cuda.jit
def set_record_field(r):
    r.x = cuda.threadIdx.x


add_device = cuda.jit(device=True)(lambda a, b: a + b)


@cuda.jit
def sums_with_a_lambda(out, a):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = add_device(a[i], 1.0)


def test_a_device_function_written_as_a_lambda():
    a = np.arange(N, dtype=np.float32)
    out = np.zeros_like(a)
    sums_with_a_lambda[1, 64](out, a)
    np.testing.assert_array_equal(out, a + 1)


@cuda.jit
def log_base_polar_and_quotient(z, base, out):
    i = cuda.grid(1)
    if i < z.size:
        out[i, 0] = cmath.log(z[i], base[i])
        out[i, 1] = complex(*cmath.polar(z[i]))
        out[i, 2] = z[i] / base[i]


def numba_on_the_cpu(z, base):
    """The same three values from numba's CPU compilation, which shares numba-cuda's complex algorithms."""
    log_base = numba.njit(lambda z, b: cmath.log(z, b))
    polar = numba.njit(lambda z: complex(*cmath.polar(z)))
    quotient = numba.njit(lambda z, b: z / b)
    return [[log_base(a, b), polar(a), quotient(a, b)] for a, b in zip(z.tolist(), base.tolist())]


def test_cmath_log_with_a_base_polar_and_complex_division_as_numba_computes_them():
    inf, nan = math.inf, math.nan
    parts = [0.0, -0.0, 1.0, -1.0, math.pi, inf, -inf, nan]
    specials = [complex(x, y) for x in parts for y in parts]
    rng = np.random.default_rng(4)
    z = np.array(specials + list(rng.uniform(-3, 3, 30) + 1j * rng.uniform(-3, 3, 30)))
    base = np.array(specials[::-1] + list(rng.uniform(-3, 3, 30) + 1j * rng.uniform(-3, 3, 30)))
    with np.errstate(divide="ignore"):  # dividing by 0 or log(1) = 0: numba raises, a GPU leaves the result unset
        keep = (base != 0) & (np.log(base) != 0)
    z, base = z[keep], base[keep]
    out = np.zeros((z.size, 3), np.complex128)
    log_base_polar_and_quotient[2, 64](z, base, out)
    for got, want in zip(out.tolist(), numba_on_the_cpu(z, base)):
        np.testing.assert_allclose(np.array(got), np.array(want), rtol=1e-15)  # nan where nan, inf where inf


@cuda.jit
def reshape_in_a_kernel(a, shape, out):
    b = a.reshape(shape)
    i, j = cuda.grid(2)
    if i < b.shape[0] and j < b.shape[1]:
        out[i, j] = b[i, j] * 2


@pytest.mark.parametrize("shape", [(4, 15), (12, 5), (-1, 3), (60, 1)])
def test_reshape_in_a_kernel_views_the_same_elements(shape):
    a = np.random.default_rng(5).uniform(-1, 1, 60).astype(np.float32)
    expected = a.reshape(shape) * 2
    out = np.full(expected.shape, np.nan, np.float32)
    reshape_in_a_kernel[(4, 2), (16, 8)](a, shape, out)
    np.testing.assert_array_equal(out, expected)


@cuda.jit
def reshape_then_read(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a.reshape(out.size)[i]


def test_reading_an_unwritten_element_through_a_reshaped_array_is_reported():
    a = cuda.device_array((2, 3), np.float32)
    with pytest.raises(UninitializedRead, match="reshape_then_read"):
        reshape_then_read[1, 8](a, np.zeros(6, np.float32))


@cuda.jit
def bytes_as_int32(byte_arr, start, stop, output):  # numba-cuda's test_reinterpret_array_type
    output[0] = byte_arr[start:stop].view(np.int32)[0]


@cuda.jit
def whole_bytes_as_int32(byte_arr, output):
    output[0] = byte_arr.view(np.int32)[0]


def test_reading_an_arrays_bytes_as_another_type_is_refused_with_the_host_way_to_do_it():
    """Not simulated (each element is checked in its own type); the message says so, not a Python error."""
    byte_arr, output = np.arange(256, dtype=np.uint8), np.zeros(1, np.int32)
    with pytest.raises(UnsupportedInKernel, match=r"line \d+: output\[0\] = byte_arr\[start:stop\]\.view") as found:
        bytes_as_int32[1, 1](byte_arr, 4, 8, output)
    assert "another type" in str(found.value) and "x.view(np.int32)" in str(found.value)
    with pytest.raises(UnsupportedInKernel, match="another type"):
        whole_bytes_as_int32[1, 1](byte_arr, output)


@cuda.jit
def windows_and_compare_and_swap(a, out, flags, old):
    i = cuda.grid(1)
    if i < out.size:
        window = a[i:i + 3]  # a view starting at a different element in each thread
        total = 0.0
        for k in range(window.shape[0]):
            total += window[k]
        out[i] = total
        old[i] = cuda.atomic.compare_and_swap(flags[i:], 0, i + 1)


@cuda.jit
def parts_of_complex_numbers(z, counts, out):
    i = cuda.grid(1)
    if i < z.size:
        out[i] = z.real[i] - z.imag[i]
        cuda.atomic.add(counts.imag, i % 3, 1.0)  # the imaginary parts: memory that is not one block


def test_real_and_imaginary_parts_of_complex_arrays_read_and_update_atomically():
    rng = np.random.default_rng(14)
    z = rng.uniform(-1, 1, 70) + 1j * rng.uniform(-1, 1, 70)
    counts, out = np.full(3, 5 + 0.5j), np.zeros(70)
    parts_of_complex_numbers[3, 32](z, counts, out)
    np.testing.assert_array_equal(out, z.real - z.imag)
    np.testing.assert_array_equal(counts, 5 + 1j * (0.5 + np.bincount(np.arange(70) % 3)))


@cuda.jit
def vectors(a, out):
    i = cuda.grid(1)
    if i < a.size:
        pair = cuda.float32x2(a[i], float32(2) * a[i])
        v = cuda.float4(pair, a[i] + float32(1), i)  # components from a smaller vector and from numbers
        out[i, 0], out[i, 1], out[i, 2], out[i, 3] = v.x, v.y, v.z, v.w


def test_vector_types_built_from_numbers_and_smaller_vectors():
    a = np.random.default_rng(16).uniform(-1, 1, 50).astype(np.float32)
    out = np.zeros((50, 4), np.float32)
    vectors[2, 32](a, out)
    np.testing.assert_array_equal(out, np.stack([a, 2 * a, a + 1, np.arange(50)], axis=1).astype(np.float32))


@cuda.jit
def shape_by_thread(a, out):
    i = cuda.threadIdx.x
    if i < 3:
        out[i] = a.shape[i - 1]


def test_a_shape_index_out_of_range_is_out_of_bounds_in_the_threads_that_use_it():
    out = np.zeros(4, np.int64)
    shape_by_thread[1, 3](np.zeros((5, 6)), out)  # -1, 0, 1: Python's negative index, as in numba
    assert out.tolist() == [6, 5, 6, 0]
    with pytest.raises(OutOfBounds, match=r"threadIdx=\(2, 0, 0\).*: `a\.shape\[i - 1\]` with i - 1 = 1: the "
                       r"tuple has 1 element \(index 0, or -1\); numba raises IndexError"):
        shape_by_thread[1, 4](np.zeros(5), out)


@cuda.jit(device=True)
def contiguous_offset(index, shape):
    offset = 0
    for j in range(4):
        if shape[j] != 1 and j >= 0:
            offset += index * shape[j]
    return offset


@cuda.jit
def offsets(a, out, j):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a.shape[j]
        if j == 0:
            out[i] = contiguous_offset(i, a.shape)


def test_a_tuple_index_out_of_range_is_the_kernel_s_fault_and_a_negative_one_counts_from_the_end():
    """numba-cuda indexes a tuple at run time as Python does, -n to -1 from the end, and raises IndexError past
    it (a GPU without debug=True ends the thread there): the student's bug, reported as such."""
    a, out = np.zeros((2, 3, 4)), np.zeros(4, np.int64)
    for j, extent in ((1, 3), (-1, 4), (-3, 2)):
        offsets[1, 4](a, out, j)
        assert out.tolist() == [extent] * 4
    with pytest.raises(OutOfBounds) as fault:
        offsets[1, 4](a, out, 0)
    line = contiguous_offset.py_func.__code__.co_firstlineno + 4  # the decorator's line, then 4 on: the if
    assert str(fault.value) == (
        f"kernel `offsets`, device function `contiguous_offset`, line {line}: if shape[j] != 1 and j >= 0:\n"
        "  thread threadIdx=(0, 0, 0) of block blockIdx=(0, 0, 0): `shape[j]` with j = 3: the tuple has 3 elements "
        "(indices 0 to 2, or -3 to -1 from the end); numba raises IndexError for an index out of range (on a GPU "
        "without debug=True, the thread just stops there)")
    with pytest.raises(OutOfBounds, match=r"`a\.shape\[j\]` with j = -4: the tuple has 3 elements"):
        offsets[1, 4](a, out, -4)
    with pytest.raises(OutOfBounds, match=r"`a\.shape\[j\]` with j = 3: the tuple has 3 elements"):
        offsets[1, 4](a, out, 3)


def test_slices_with_bounds_that_differ_from_thread_to_thread():
    a = np.random.default_rng(8).uniform(-1, 1, 41)
    out, flags, old = np.zeros(41), np.where(np.arange(41) % 3 == 0, 7, 0).astype(np.int32), np.zeros(41, np.int32)
    before = flags.copy()
    windows_and_compare_and_swap[2, 32](a, out, flags, old)
    np.testing.assert_allclose(out, [a[i:i + 3].sum() for i in range(41)], rtol=1e-15)
    np.testing.assert_array_equal(old, before)
    np.testing.assert_array_equal(flags, np.where(before == 0, np.arange(1, 42), before))


@cuda.jit
def past_the_window(a, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i:i + 2][2]


def test_an_index_past_a_per_thread_window_is_out_of_bounds():
    with pytest.raises(OutOfBounds, match=r"threadIdx=\(0, 0, 0\).*index 2 is past the end of axis 0 \(size 2\)"):
        past_the_window[1, 8](np.zeros(20), np.zeros(8))


# -- the rest: one course message -----------------------------------------------------------------------------
@cuda.jit
def transposed(a, out):
    i = cuda.grid(1)
    out[i] = a.T[0, i]


@cuda.jit
def stepped_per_thread(a, out):
    i = cuda.grid(1)
    out[i] = a[::i + 1][0]


@pytest.mark.parametrize("kernel, args, line", [
    (transposed, (np.zeros((4, 4), np.float32), np.zeros(4, np.float32)), "out[i] = a.T[0, i]"),
    (stepped_per_thread, (np.zeros(5), np.zeros(4)), "a[::i + 1]"),
])
def test_what_the_simulator_cannot_run_gets_one_course_message(kernel, args, line):
    with pytest.raises(UnsupportedInKernel) as fault:
        kernel[1, 4](*args)
    message = str(fault.value)
    assert message.startswith(f"kernel `{kernel.py_func.__name__}`, line ")
    assert line in message
    assert "not supported" in message or "does not support" in message


@cuda.jit
def uniform_draws(states, out):
    i = cuda.grid(1)
    if i < out.shape[0]:
        for k in range(out.shape[1]):
            out[i, k] = xoroshiro128p_uniform_float32(states, i)


def test_numba_jit_functions_run_as_device_functions_like_numba_cudas_random_numbers():
    """numba.cuda.random's generators are @numba.jit functions; from a kernel they are device functions."""
    states = create_xoroshiro128p_states(40, seed=17)
    host_states = states.copy_to_host()
    out = np.zeros((40, 3), np.float32)
    uniform_draws[2, 32](states, out)
    expected = [[xoroshiro128p_uniform_float32(host_states, i) for _ in range(3)] for i in range(40)]
    np.testing.assert_array_equal(out, np.array(expected, np.float32))
    np.testing.assert_array_equal(states.copy_to_host(), host_states)  # both advanced the same


@cuda.jit
def aligned_scratch(out, a):
    tile = cuda.shared.array(32, float32, alignment=64)
    scratch = cuda.local.array(2, float32, alignment=16)
    t = cuda.threadIdx.x
    tile[t] = a[t]
    scratch[0] = tile[t] * float32(2)
    out[t] = scratch[0]


def test_shared_and_local_arrays_with_an_alignment():
    a = np.random.default_rng(18).uniform(-1, 1, 32).astype(np.float32)
    out = np.zeros(32, np.float32)
    aligned_scratch[1, 32](out, a)
    np.testing.assert_array_equal(out, 2 * a)


@cuda.jit
def pick_from_a_tuple_of_loads(out, a):
    i = cuda.grid(1)
    if i % 3 == 0:  # some lanes only: each picks its own item of a tuple whose items differ per lane
        pair = (a[i], a[i] + float32(1))
        for k in range(2):
            out[i, k] = pair[k]


def test_a_tuple_of_per_lane_values_indexed_in_some_lanes_gives_each_lane_its_own():
    a = np.arange(8, dtype=np.float32) * 2
    out = np.full((8, 2), -1, np.float32)
    pick_from_a_tuple_of_loads[1, 8](out, a)
    expected = np.full((8, 2), -1, np.float32)
    expected[::3] = np.stack([a[::3], a[::3] + 1], axis=1)
    np.testing.assert_array_equal(out, expected)
