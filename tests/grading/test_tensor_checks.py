"""gpucourse.grading.elementwise and .reduction: checks over strided tensors, axis reductions, block reductions and scans."""

import math

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import simulated
from gpucourse.grading import (CheckFailed, block_per_row, check_axis_reduce, check_broadcast_zip, check_reduction,
                               check_strided_map, one_block, one_block_reduce, reads_each_element_once, tensor,
                               writes_each_element_once)
from gpucourse.grading import core as checks
from gpucourse.grading.runner import random_values

THREADS = 1024


@pytest.fixture(autouse=True)
def on_the_simulator():
    """Races and out-of-bounds faults are the simulator's: run there on a GPU machine too."""
    with simulated():
        yield


def copy_spec(a):
    return np.ascontiguousarray(a)


def sub(a, b):
    return a - b


def dot_spec(a, b):
    return np.array([np.sum(a * b)])


def row_max_spec(a):
    return a.max(axis=1)


# ---------------------------------------------------------------- kernels under test


@cuda.jit(device=True)
def position(ordinal, shape, strides):
    p = 0
    for k in range(len(shape) - 1, -1, -1):
        p += (ordinal % shape[k]) * strides[k]
        ordinal //= shape[k]
    return p


@cuda.jit(device=True)
def position_first_dimension_first(ordinal, shape, strides):
    p = 0
    for k in range(len(shape)):
        p += (ordinal % shape[k]) * strides[k]
        ordinal //= shape[k]
    return p


@cuda.jit(device=True)
def position_not_written(ordinal, shape, strides):
    p = 0
    for k in range(len(shape)):
        raise NotImplementedError()
    return p


@cuda.jit
def contiguous(out, a, a_shape, a_strides):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[position(i, a_shape, a_strides)]


@cuda.jit
def contiguous_wrong_order(out, a, a_shape, a_strides):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[position_first_dimension_first(i, a_shape, a_strides)]


@cuda.jit
def contiguous_unguarded(out, a, a_shape, a_strides):
    i = cuda.grid(1)
    out[i] = a[position(i, a_shape, a_strides)]


@cuda.jit
def contiguous_ignores_strides(out, a, a_shape, a_strides):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i * a_strides[0]]


@cuda.jit
def contiguous_device_function_not_written(out, a, a_shape, a_strides):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[position_not_written(i, a_shape, a_strides)]


@cuda.jit
def contiguous_scribbles_on_input(out, a, a_shape, a_strides):
    i = cuda.grid(1)
    if i < out.size:
        j = position(i, a_shape, a_strides)
        out[i] = a[j]
        a[j] = 0


@cuda.jit(device=True)
def broadcast_position(ordinal, out_shape, shape, strides, size_one_is_broadcast):
    p = 0
    for k in range(len(out_shape) - 1, -1, -1):
        index = ordinal % out_shape[k]
        ordinal //= out_shape[k]
        j = k - (len(out_shape) - len(shape))
        if j >= 0 and (shape[j] != 1 or not size_one_is_broadcast):
            p += index * strides[j]
    return p


@cuda.jit
def broadcast_sub(out, out_shape, a, a_shape, a_strides, b, b_shape, b_strides):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[broadcast_position(i, out_shape, a_shape, a_strides, True)] - \
            b[broadcast_position(i, out_shape, b_shape, b_strides, True)]


@cuda.jit
def broadcast_sub_forgets_size_one(out, out_shape, a, a_shape, a_strides, b, b_shape, b_strides):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[broadcast_position(i, out_shape, a_shape, a_strides, False)] - \
            b[broadcast_position(i, out_shape, b_shape, b_strides, False)]


@cuda.jit
def sum_axis(out, a, axis):
    c, r = cuda.grid(2)
    if r < out.shape[0] and c < out.shape[1]:
        total = float32(0)
        for k in range(a.shape[axis]):
            if axis == 0:
                total += a[k, r, c]
            elif axis == 1:
                total += a[r, k, c]
            else:
                total += a[r, c, k]
        out[r, c] = total


@cuda.jit
def dot(out, a, b):
    partial = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    value = float32(0)
    for i in range(t, a.size, cuda.blockDim.x):
        value += a[i] * b[i]
    partial[t] = value
    cuda.syncthreads()
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        cuda.syncthreads()
        stride //= 2
    if t == 0:
        out[0] = partial[0]


@cuda.jit
def dot_without_barriers(out, a, b):
    partial = cuda.shared.array(THREADS, float32)
    t = cuda.threadIdx.x
    value = float32(0)
    for i in range(t, a.size, cuda.blockDim.x):
        value += a[i] * b[i]
    partial[t] = value
    stride = cuda.blockDim.x // 2
    while stride > 0:
        if t < stride:
            partial[t] += partial[t + stride]
        stride //= 2
    if t == 0:
        out[0] = partial[0]


@cuda.jit
def dot_in_thread_zero(out, a, b):
    if cuda.threadIdx.x == 0:
        value = float32(0)
        for i in range(a.size):
            value += a[i] * b[i]
        out[0] = value


@cuda.jit
def dot_renamed(out, x, y):
    if cuda.threadIdx.x == 0:
        value = float32(0)
        for i in range(x.size):
            value += x[i] * y[i]
        out[0] = value


@cuda.jit
def dot_skips_last(out, a, b):
    if cuda.threadIdx.x == 0:
        value = float32(0)
        for i in range(a.size - 1):
            value += a[i] * b[i]
        out[0] = value


@cuda.jit
def dot_slightly_off(out, a, b):
    if cuda.threadIdx.x == 0:
        value = float32(0)
        for i in range(a.size):
            value += a[i] * b[i]
        out[0] = value * float32(1.002)


def make_row_max(pad):
    @cuda.jit
    def row_max(out, a):
        best = cuda.shared.array(THREADS, float32)
        t = cuda.threadIdx.x
        r = cuda.blockIdx.x
        value = float32(pad)
        for c in range(t, a.shape[1], cuda.blockDim.x):
            value = max(value, a[r, c])
        best[t] = value
        cuda.syncthreads()
        stride = cuda.blockDim.x // 2
        while stride > 0:
            if t < stride:
                best[t] = max(best[t], best[t + stride])
            cuda.syncthreads()
            stride //= 2
        if t == 0:
            out[r] = best[0]

    return row_max


row_max = make_row_max(-math.inf)
row_max_zero_padding = make_row_max(0)


@cuda.jit
def scan_quadratic(out, a):
    t = cuda.threadIdx.x
    if t < a.size:
        total = float32(0)
        for k in range(t + 1):
            total += a[k]
        out[t] = total


@cuda.jit
def scan_writes_twice(out, a):
    t = cuda.threadIdx.x
    if t == 0:
        total = float32(0)
        for k in range(a.size):
            out[k] = float32(0)
        for k in range(a.size):
            total += a[k]
            out[k] = total


# ---------------------------------------------------------------- layouts, values, plans


def test_tensor_is_a_layout_template():
    t = tensor(4, 6).T
    assert t.shape == (6, 4) and t.strides == (1, 6) and t.offset == 0
    n = tensor(5, 9).narrow(1, 2, 6)
    assert n.offset == 2 and n.shape == (5, 6)
    assert tensor(3, 1).broadcast_to((2, 3, 5)).strides == (0, 1, 0)


def test_random_values_are_distinct_and_can_be_all_negative():
    rng = np.random.default_rng(0)
    mixed = random_values(rng, (200,), np.float32)
    assert (mixed < 0).any() and (mixed > 0).any() and len(np.unique(mixed)) == 200
    assert (random_values(rng, (200,), np.float32, "negative") < 0).all()
    assert (random_values(rng, (200,), np.int32, "negative") < 0).all()
    with pytest.raises(ValueError, match="values must be one of"):
        random_values(rng, (3,), np.float32, "positive")


def test_launch_plans():
    (c,) = one_block_reduce([100], threads=[32], inputs=2)
    assert c.grid == (1,) and c.block == (32,) and c.inputs == ((100,), (100,)) and c.out == (1,)
    (r,) = block_per_row([(3, 50)], threads=[64])
    assert r.grid == (3,) and r.block == (64,) and r.inputs == ((3, 50),) and r.out == (3,)


# ---------------------------------------------------------------- strided map and zip


def test_strided_map_passes_on_every_kind_of_view(capsys):
    views = [tensor(10), tensor(4, 6).T, tensor(2, 3, 4, 5).permute(3, 1, 0, 2), tensor(5, 9).narrow(1, 2, 6),
             tensor(3, 1).broadcast_to((2, 3, 5))]
    check_strided_map(contiguous, copy_spec, views, threads=[1, 32])
    check_strided_map(contiguous, copy_spec, [tensor(33, 9).T], threads=[64], dtype=np.int32, quiet=True)
    assert "✓ contiguous: correct on 10 launches" in capsys.readouterr().out


def test_strided_map_failure_names_the_layout_and_the_element():
    with pytest.raises(CheckFailed) as failure:
        check_strided_map(contiguous_wrong_order, copy_spec, [tensor(4, 6).T])
    message = str(failure.value)
    assert message.startswith("contiguous_wrong_order gave a wrong result with grid=(1,), block=(32,), "
                              "a of shape (6, 4) with strides (1, 6) -> out (24,):")
    assert "out[1] should be" in message
    with pytest.raises(CheckFailed, match=r"a of shape \(5, 6\) with strides \(9, 1\), offset 2"):
        check_strided_map(contiguous_ignores_strides, copy_spec, [tensor(5, 9).narrow(1, 2, 6)])


def test_unguarded_thread_and_wrong_index_get_different_advice():
    with pytest.raises(CheckFailed) as failure:
        check_strided_map(contiguous_unguarded, copy_spec, [tensor(10)], threads=[32])
    assert "index 10 is out of bounds for `out`" in str(failure.value)
    assert "A thread past the end of `out` needs a guard." in str(failure.value)
    with pytest.raises(CheckFailed) as failure:
        check_broadcast_zip(broadcast_sub_forgets_size_one, sub, [(tensor(4, 1), tensor(1, 6))])
    message = str(failure.value)
    assert "out of bounds for `a`" in message
    assert "or the index it computed into `a` is wrong: check it against the shape and strides" in message


def test_unwritten_device_function_says_what_to_do():
    with pytest.raises(CheckFailed, match=r"\Aposition_not_written is not written yet \(contiguous_device_function_"
                                          r"not_written calls it\): replace its `raise NotImplementedError\(\)`"):
        check_strided_map(contiguous_device_function_not_written, copy_spec, [tensor(4)])


def test_writing_an_input_is_caught_by_name():
    with pytest.raises(CheckFailed, match="changed its input `a` with"):
        check_strided_map(contiguous_scribbles_on_input, copy_spec, [tensor(4, 3).T])


def test_a_write_past_the_end_is_caught_even_where_it_does_not_fault(monkeypatch):
    real_run = checks.launch_on_copies

    def run_then_scribble_past_the_end(*args):
        out, canary, after = real_run(*args)
        canary[0] = 1.0
        return out, canary, after

    monkeypatch.setattr(checks, "launch_on_copies", run_then_scribble_past_the_end)
    with pytest.raises(CheckFailed, match="wrote past the end of `out`.*needs a guard"):
        check_strided_map(contiguous, copy_spec, [tensor(4)])


def test_broadcast_zip_passes_and_describes_both_inputs():
    pairs = [(tensor(4, 6), tensor(6, 4).T), (tensor(5), tensor(3, 4, 5)), (tensor(2, 1, 4), tensor(3, 1)),
             (tensor(3, 1).broadcast_to((3, 4)), tensor(4))]
    check_broadcast_zip(broadcast_sub, sub, pairs, threads=[7, 32], quiet=True)
    check_broadcast_zip(broadcast_sub, sub, pairs[:1], dtype=np.int32, quiet=True)
    with pytest.raises(CheckFailed, match=r"a of shape \(4, 1\) with strides \(1, 1\), b of shape \(1, 6\) "
                                          r"with strides \(6, 1\) -> out of shape \(4, 6\)"):
        check_broadcast_zip(broadcast_sub_forgets_size_one, sub, [(tensor(4, 1), tensor(1, 6))])
    with pytest.raises(ValueError, match="do not broadcast"):
        check_broadcast_zip(broadcast_sub, sub, [(tensor(4, 2), tensor(3))])


# ---------------------------------------------------------------- reductions


def test_axis_reduce_checks_every_axis():
    check_axis_reduce(sum_axis, lambda a, axis: a.sum(axis=axis), [(3, 7, 2), (1, 1, 1)], blocks=[(4, 4), (1, 1)],
                      quiet=True)
    with pytest.raises(CheckFailed) as failure:
        check_axis_reduce(sum_axis, lambda a, axis: a.mean(axis=axis), [(4, 5, 6)], axes=[1])
    message = str(failure.value)
    assert "a of shape (4, 5, 6), axis=1 -> out (4, 6)" in message and "out[0, 0] should be" in message
    with pytest.raises(ValueError, match="3-D shapes"):
        check_axis_reduce(sum_axis, lambda a, axis: a.sum(axis=axis), [(4, 5)])
    with pytest.raises(CheckFailed, match=r"returned an array of shape \(1, 5, 6\), but reducing \(4, 5, 6\) along "
                                          r"axis 0 gives \(5, 6\)"):
        check_axis_reduce(sum_axis, lambda a, axis: a.sum(axis=axis, keepdims=True), [(4, 5, 6)])


def test_float32_sums_in_any_order_pass_but_a_missing_term_does_not():
    """A tree and a sequential loop round differently; the tolerance follows the sum of |terms|."""
    plan = one_block_reduce([1, 33, 4000], threads=[32, 1024], inputs=2)
    check_reduction(dot, dot_spec, plan, quiet=True)
    check_reduction(dot_in_thread_zero, dot_spec, plan, quiet=True)
    with pytest.raises(CheckFailed, match=r"out\[0\] should be"):
        check_reduction(dot_skips_last, dot_spec, one_block_reduce([100], threads=[32], inputs=2))
    with pytest.raises(CheckFailed, match="more than the rounding of float32 sums allows there"):
        check_reduction(dot_slightly_off, dot_spec, one_block_reduce([1000], threads=[32], inputs=2))


def test_missing_barrier_is_a_data_race():
    with pytest.raises(CheckFailed) as failure:
        check_reduction(dot_without_barriers, dot_spec, one_block_reduce([100], threads=[32], inputs=2))
    message = str(failure.value)
    assert message.startswith("dot_without_barriers failed with grid=(1,), block=(32,), inputs (100,), (100,)")
    assert "data race on `partial[" in message and "cuda.syncthreads()" in message


def test_padding_a_max_with_zero_gets_the_identity_hint():
    plan = block_per_row([(3, 20), (2, 300)], threads=[32, 128])
    check_reduction(row_max, row_max_spec, plan, values="negative", quiet=True)
    with pytest.raises(CheckFailed) as failure:
        check_reduction(row_max_zero_padding, row_max_spec, plan, values="negative")
    message = str(failure.value)
    assert ", got 0.0" in message
    assert "must hold the identity of the operation" in message and "-inf" in message
    check_reduction(row_max_zero_padding, row_max_spec, block_per_row([(3, 40)], threads=[32]), quiet=True)


def test_budgets_read_once_spread_evenly_write_once():
    plan = one_block_reduce([100], threads=[32], inputs=2)
    check_reduction(dot, dot_spec, plan, budget=reads_each_element_once("a", "b"), quiet=True)
    with pytest.raises(CheckFailed) as failure:
        check_reduction(dot_in_thread_zero, dot_spec, plan, budget=reads_each_element_once("a", "b"))
    message = str(failure.value)
    assert message.startswith("dot_in_thread_zero is correct but over its budget: each thread may read")
    assert "\n  (with grid=(1,), block=(32,)" in message
    assert "each thread may read `a` at most 4 times" in message and "spread the work" in message
    check_reduction(dot_in_thread_zero, dot_spec, plan, budget=reads_each_element_once("a", "b", evenly=False),
                    quiet=True)

    scan = one_block([7])
    with pytest.raises(CheckFailed, match=r"every element of `a` should be read exactly 1 time, but `a\[0\]` "
                                          r"was read 7 times"):
        check_reduction(scan_quadratic, np.cumsum, scan, budget=[reads_each_element_once("a")])
    with pytest.raises(CheckFailed, match="every element of `out` should be written exactly 1 time"):
        check_reduction(scan_writes_twice, np.cumsum, scan,
                        budget=[reads_each_element_once("a", evenly=False), writes_each_element_once("out")])


def test_budget_on_renamed_parameters_says_to_keep_the_names():
    with pytest.raises(CheckFailed, match=r"touched no array called `a`.*Keep the parameter names the exercise "
                                          r"gives \(out, x, y\)"):
        check_reduction(dot_renamed, dot_spec, one_block_reduce([10], threads=[32], inputs=2),
                        budget=reads_each_element_once("a"))


@cuda.jit
def square_root_of_the_non_negative(out, a, a_shape, a_strides):  # contiguous 1-D: writes no element where a < 0
    i = cuda.grid(1)
    if i < out.size and a[i] >= 0:
        out[i] = math.sqrt(a[i])


def test_an_element_never_written_fails_where_the_spec_is_nan():
    """NaN is the poison of an unwritten element: a NaN in the spec's answer must not let one through."""
    with np.errstate(invalid="ignore"), pytest.raises(CheckFailed, match=r"out\[1\] should be nan, got nan \(never "
                                                                         r"written"):
        check_strided_map(square_root_of_the_non_negative, np.sqrt, [tensor(100)], threads=[32])


def test_an_infinite_expected_value_leaves_the_other_elements_tolerance_finite():
    """A spec that overflows at one element (inf) must not let any value through at the others."""
    from gpucourse.grading.runner import Launch, tolerance_of, wrong_indices
    expected = np.array([2.5, -3.0, np.inf])
    got = np.array([0.0, -3.0, np.inf])  # wrong at 0, right at 1 and 2
    tolerance = tolerance_of(Launch((1,), (32,), "", [], expected), np.float32)
    assert np.isfinite(tolerance[:2]).all()
    assert wrong_indices(got, expected, tolerance).ravel().tolist() == [0]
