"""GPU semantics the course simulator keeps: lanes in lockstep, short-circuits, warps, distinct arrays."""

import math

import numpy as np
import pytest
from numba import cuda, int32, int64, njit

from conformance_kernels import block_sums, integer_ops
from gpucourse import simulated, trace
from gpucourse.simulator import (UnsupportedInKernel, int16_negation_unwrapped, remainder_sign_of_dividend,
                                 signed_overflows)


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


@cuda.jit
def two_arrays_on_one_line(out):
    a = cuda.shared.array(4, int32); b = cuda.shared.array(4, int32)  # noqa: E702 (the point of the test)
    t = cuda.threadIdx.x
    a[t] = t
    b[t] = 10 * t
    cuda.syncthreads()
    out[t] = a[3 - t] + b[t]


def test_shared_arrays_declared_on_one_line_are_distinct():
    out = np.zeros(4, np.int32)
    two_arrays_on_one_line[1, 4](out)
    assert out.tolist() == [3, 12, 21, 30]


@cuda.jit
def guarded_by_short_circuits(out, a):
    i = cuda.grid(1)
    if i < a.size and a[i] > 0:
        out[i] = a[i]
    elif i < a.size:
        out[i] = a[i - 1] if i > 0 else a[i]


def test_and_and_conditional_expressions_evaluate_only_where_needed():
    a = np.random.default_rng(0).uniform(-1, 1, 37).astype(np.float32)
    out = np.zeros_like(a)
    guarded_by_short_circuits[2, 32](out, a)
    expected = np.where(a > 0, a, np.r_[a[:1], a[:-1]])
    np.testing.assert_array_equal(out, expected)


@cuda.jit(device=True)
def first_digit(x):
    """Early returns in a device function, different per lane."""
    if x < 10:
        return x
    while x >= 10:
        x //= 10
        if x == 7:
            return -1
    return x


@cuda.jit
def digits(out, a):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = first_digit(a[i])


def test_device_functions_return_per_lane():
    a = np.random.default_rng(1).integers(0, 100000, 100).astype(np.int64)
    out = np.zeros_like(a)
    digits[4, 32](out, a)

    assert out.tolist() == [first_digit.py_func(int(x)) for x in a]  # the same code, as plain Python


@cuda.jit
def warp_votes(out, a):
    t = cuda.threadIdx.x
    positive = 1 if a[t] > 0 else 0
    out[0, t] = cuda.ballot_sync(0xFFFFFFFF, positive)
    out[1, t] = cuda.syncthreads_count(positive)
    out[2, t] = cuda.syncthreads_and(positive)
    out[3, t] = cuda.syncthreads_or(positive)
    out[4, t] = cuda.shfl_sync(0xFFFFFFFF, t, 31 - cuda.laneid)
    out[5, t] = cuda.shfl_up_sync(0xFFFFFFFF, t, 3)
    if t % 2 == 0:
        out[6, t] = cuda.activemask()
    else:
        out[6, t] = 0


def test_warp_and_block_votes_match_numpy():
    a = np.random.default_rng(2).uniform(-1, 1, 64).astype(np.float32)
    out = np.zeros((7, 64), np.int64)
    warp_votes[1, 64](out, a)
    positive = (a > 0).reshape(2, 32)
    bits = (positive * (1 << np.arange(32))).sum(1)
    np.testing.assert_array_equal(out[0], np.repeat(bits.astype(np.uint32).view(np.int32), 32))  # int32 in numba
    assert (out[1] == positive.sum()).all()
    assert (out[2] == int(positive.all())).all() and (out[3] == int(positive.any())).all()
    lanes = np.arange(64)
    np.testing.assert_array_equal(out[4], lanes - lanes % 32 + 31 - lanes % 32)
    np.testing.assert_array_equal(out[5], np.where(lanes % 32 >= 3, lanes - 3, lanes))
    np.testing.assert_array_equal(out[6], np.where(lanes % 2 == 0, 0x55555555, 0))


@cuda.jit
def more_votes(out, a):
    t = cuda.threadIdx.x
    positive = a[t] > 0
    out[0, t] = cuda.eq_sync(0xFFFFFFFF, positive)
    out[1, t] = cuda.lanemask_lt()
    out[2, t] = -cuda.any_sync(0xFFFFFFFF, positive)  # a boolean in numba-cuda: -True is -1
    out[3, t] = cuda.ballot_sync(0xFFFFFFFF, positive) >> 31  # int32: an arithmetic shift


def test_votes_have_numba_cudas_types():
    a = np.ones(64, np.float32)
    a[40] = -1.0  # the second warp disagrees
    out = np.zeros((4, 64), np.int64)
    more_votes[1, 64](out, a)
    assert out[0].tolist() == [1] * 32 + [0] * 32
    assert out[1].tolist() == [(1 << lane) - 1 for lane in range(32)] * 2
    assert (out[2] == -1).all()
    assert out[3].tolist() == [-1] * 64  # lane 31's bit set: the sign of an int32


@cuda.jit
def float_division(out, x, y, wide):
    i = cuda.grid(1)
    if i < x.size:
        out[0, i] = x[i] % y[i]
        out[1, i] = x[i] // y[i]
        out[2, i], out[3, i] = divmod(wide[i], 7)  # uint64 and int64: divmod takes both as float64


def test_float_remainders_are_the_gpus_not_pythons():
    """LLVM's frem on a GPU is |x| - floor(|x| / |y|) * |y| in one fused multiply-add, not C's exact fmod: where
    the quotient rounds, so does the remainder. 2**64 % 7.0 gave 1024.0 on an NVIDIA H200 (2026-11-29, fuzz
    kernel k1750 of seed 1); Python says 2.0. An infinite divisor gives NaN, not x."""
    x = np.array([2.0**64, -5.5, 5.5, -0.0, 7.0, 5.5, 1e300])
    y = np.array([7.0, 2.0, -2.0, 3.0, 0.0, np.inf, 3e-300])
    wide = np.array([2**64 - 1, 7, 0, 1, 2, 3, 4], np.uint64)
    out = np.full((4, x.size), 123.0)
    float_division[1, 32](out, x, y, wide)
    quotient_of_2_64 = (2.0**64 - 1024.0) / 7.0
    # 1e300 / 3e-300 overflows: floor(inf) * 3e-300 is inf, the remainder -inf (what the PTX computes)
    np.testing.assert_array_equal(out[0], [1024.0, 0.5, -0.5, 0.0, np.nan, np.nan, -np.inf])
    np.testing.assert_array_equal(out[1], [quotient_of_2_64, -3.0, -3.0, -0.0, np.inf, np.nan, np.inf])
    assert math.copysign(1, out[0, 3]) == 1 and math.copysign(1, out[1, 3]) == -1
    assert (out[2, 0], out[3, 0]) == (quotient_of_2_64, 1024.0)
    assert (out[2, 1:4].tolist(), out[3, 1:4].tolist()) == ([1.0, 0.0, 0.0], [0.0, 0.0, 1.0])




@cuda.jit
def remainder_of_arguments(out, a, b):
    out[0], out[1] = a % b, divmod(a, b)[1]


def test_a_float_argument_is_a_float64_of_the_gpu_not_a_python_constant():
    out = np.zeros(2)
    remainder_of_arguments[1, 1](out, 2.0**64, 7.0)  # computed at run time on a GPU: its remainder, not Python's
    assert out.tolist() == [1024.0, 1024.0]

@cuda.jit
def negations(out, a8, u8, a16, u16):
    out[0], out[1], out[2], out[3] = -a8[0], -u8[0], -a16[0], -u16[0]


def test_negations_of_narrow_integers_wrap_as_ptx_defines_them():
    """numba negates in the operand's width, then widens to int64: -(-32768) is -32768 in PTX (neg.s16, cvt.s64.s16)
    and under ptxas 13.3 and later; ptxas 12.9 to 13.2 leave the 32-bit negation where the result stays an integer
    (fuzz kernel k1568 of seed 1 on the H200), which `int16_negation_unwrapped` computes for the fuzzing's check."""
    inputs = (np.array([-128], np.int8), np.array([1], np.uint8), np.array([-32768], np.int16),
              np.array([1], np.uint16))
    out = np.zeros(4, np.int64)
    negations[1, 1](out, *inputs)
    assert out.tolist() == [-128, 255, -32768, 65535]
    with int16_negation_unwrapped():
        negations[1, 1](out, *inputs)
    assert out.tolist() == [-128, 255, 32768, 65535]
    negations[1, 1](out, *inputs)
    assert out[2] == -32768


@cuda.jit
def overflow_spreads(a, u, out, counts, wrapped, total):
    i = cuda.grid(1)
    wrapped[i] = u[i] + u[i]  # unsigned: wraps by definition
    s = cuda.shared.array(64, int64)
    s[i] = i
    if i == 3:
        s[i] = a[i] + a[i]  # signed: overflows where a[i] is past 2**62 (numba marks it nsw)
    cuda.syncthreads()
    x = s[(i + 60) % 64]  # thread 7 reads s[3]
    out[i] = x + cuda.shfl_xor_sync(0xFFFFFFFF, x, 1)  # and 6 reads 7's
    counts[i] = cuda.ballot_sync(0xFFFFFFFF, out[i] > 0)  # their warp takes a vote
    if i >= 40:
        cuda.atomic.add(total, 0, i)


def test_signed_overflows_are_found_with_the_elements_they_reach():
    """A GPU's result is undefined where a signed +, - or * overflows (numba marks them nsw): the fuzzing's check
    finds where one happened and what it reached: the thread, what it stored and what other threads read of it,
    shuffled or voted; the simulator's values are unchanged (it wraps)."""
    a, u = np.arange(64, dtype=np.int64), np.full(64, 2**63, np.uint64)
    a[3] = 2**62 + 5
    outputs = [np.zeros(64, np.int64), np.zeros(64, np.int32), np.zeros(64, np.uint64), np.zeros(1, np.int64)]
    overflow_spreads[1, 64](a, u, *outputs)
    plain = [o.copy() for o in outputs]
    outputs[-1][0] = 0  # the atomic total
    with signed_overflows() as overflows:
        overflow_spreads[1, 64](a, u, *outputs)
    assert all((p == o).all() for p, o in zip(plain, outputs))
    assert overflows.found == ["int64 +: 4611686018427387909 and 4611686018427387909"]
    assert np.flatnonzero(overflows.reached("s")).tolist() == [3]
    # 3 overflowed (and carries it on), 7 read s[3]; 2 and 6 shuffled with them
    assert np.flatnonzero(overflows.reached("out")).tolist() == [2, 3, 6, 7]
    assert np.flatnonzero(overflows.reached("counts")).tolist() == list(range(32))  # their warp's vote
    assert not overflows.reached("total").any() and overflows.reached("wrapped") is None  # stored before it
    with signed_overflows() as overflows:
        overflow_spreads[1, 64](np.arange(64, dtype=np.int64), u, *outputs)
    assert overflows.found == [] and overflows.reached("out") is None


@cuda.jit
def powers(a, e, out):
    i = cuda.grid(1)
    out[i] = ((a[i] + a[i]) ** 2) % 6 + a[i] ** e[i]  # uint32 + uint32 is uint64; its ** 2, an int64


def test_a_power_that_overflows_is_found_too():
    """numba's integer power multiplies (`x ** 2` is `x * x`, nsw): LLVM computed ((2**32 - 1) * 2) ** 2 % 6 as 0
    (found by comparing the fuzzing's kernels with numba's CPU compile), where the wrapped int64 gives 2. A
    negative exponent, or one past numba's cutoff (math.pow then), multiplies nothing that can overflow."""
    a, out = np.array([2**32 - 1, 3, 3, 2], np.uint32), np.zeros(4, np.int64)
    exponents = np.array([0, -2, 2**20, 3], np.int64)
    with signed_overflows() as overflows:
        powers[1, 4](a, exponents, out)
    assert out[0] == 2 + 1  # wrapped, as the simulator computes it
    assert overflows.found == ["int64 **: 8589934590 and 2"]
    assert np.flatnonzero(overflows.reached("out")).tolist() == [0]
    with signed_overflows() as overflows:
        powers[1, 3](a[1:], exponents[1:], out[1:])
    assert overflows.found == []


@cuda.jit
def remainders(x, out):
    i = cuda.grid(1)
    out[i] = x[i] % 100.0


def test_an_inexact_float_remainder_moves_into_the_divisors_sign_by_the_remainders_or_the_dividends():
    """2**65 % 100.0 is -768 before numba moves it into the divisor's sign (the GPU's frem is not exact past 2**53);
    numba adds 100 by the remainder's sign, NVVM folds the test to the dividend's where it proves it."""
    x, out = np.array([2.0**65, -7.0, 7.5]), np.zeros(3)
    remainders[1, 3](x, out)
    assert out.tolist() == [-668.0, 93.0, 7.5]
    with remainder_sign_of_dividend():
        remainders[1, 3](x, out)
    assert out.tolist() == [-768.0, 93.0, 7.5]


def test_the_same_launch_gives_the_same_result_and_trace():
    a = np.random.default_rng(3).uniform(-1, 1, 1000).astype(np.float32)
    results, summaries = [], []
    for _ in range(2):
        out = np.zeros(4, np.float32)
        with trace() as t:
            block_sums[4, 256](out, a)
        results.append(out)
        summaries.append(t.summary())
    np.testing.assert_array_equal(results[0], results[1])
    assert summaries[0] == summaries[1]
    np.testing.assert_allclose(results[0].sum(), a.sum(), rtol=1e-4)


@cuda.jit
def assigns_a_slice(out, a):
    i = cuda.grid(1)
    if i < 1:
        out[0:2] = a[0]


def test_unsupported_python_gets_a_plain_message():
    a = np.ones(4, np.float32)
    with pytest.raises(UnsupportedInKernel, match="assigning to a slice of an array .* is not supported"):
        assigns_a_slice[1, 1](np.zeros(2, np.float32), a)


@cuda.jit
def prints(a):
    i = cuda.grid(1)
    if i % 2 == 0:
        print(i, a[i], i == 0, "x", (i, (a[i],)), cuda.threadIdx)
    if i == 5:
        print()
        print(i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i, i)


@pytest.mark.filterwarnings("ignore:CUDA print\\(\\) cannot print more than 32 items")  # numba's, from the PTX check
def test_print_writes_a_line_per_thread_in_numba_cudas_printf_formats(capsys):
    """Integers %lld, floats %f, booleans, string constants, tuples, dim3; a GPU orders the lines as it likes."""
    a = np.array([1.5, -2.25, 0.1, 3.0, -0.0, 7.0], np.float32)
    prints[2, 3](a)
    lines = capsys.readouterr().out.splitlines()
    expected = [f"{i} {float(a[i]):f} {i == 0} x ({i}, ({float(a[i]):f},)) ({i % 3}, 0, 0)" for i in (0, 2, 4)]
    assert lines == expected + ["", " ".join(["%lld"] * 33)]  # past 32 items the GPU prints the format string
    assert lines[1] == "2 0.100000 False x (2, (0.100000,)) (2, 0, 0)"


@cuda.jit
def prints_an_array(a):
    print(a)


def test_print_of_what_numba_cuda_cannot_print_is_a_course_message(monkeypatch):
    monkeypatch.setenv("GPUCOURSE_PTX_CHECK", "off")  # the PTX check rejects it first where NVVM is installed
    with pytest.raises(UnsupportedInKernel, match="numba-cuda cannot print an array: print its elements"):
        prints_an_array[1, 1](np.zeros(2, np.float32))


def test_launches_too_big_to_simulate_are_refused_before_allocating():
    with pytest.raises(ValueError, match="the CPU simulator runs at most 4,194,304 per launch"):
        block_sums[1 << 15, 256](np.zeros(1, np.float32), np.zeros(1, np.float32))


@cuda.jit
def claim_slots(slots, owners):
    """Each thread swaps its id into a slot and records who held it before."""
    t = cuda.threadIdx.x
    owners[t] = cuda.atomic.exch(slots, t % 2, t)


def test_atomic_exchange_returns_the_previous_owner_in_lane_order():
    slots = np.full(2, -1, np.int32)
    owners = np.zeros(6, np.int32)
    claim_slots[1, 6](slots, owners)
    assert slots.tolist() == [4, 5]  # the last thread of each slot, in lane order
    assert owners.tolist() == [-1, -1, 0, 1, 2, 3]


@cuda.jit
def tally(counts, olds, bins, deltas):
    """Integer atomic adds, then subtracts, where many threads share an element; each keeps the values it found."""
    i = cuda.grid(1)
    if i < bins.size:
        olds[i, 0] = cuda.atomic.add(counts, bins[i], deltas[i])
        olds[i, 1] = cuda.atomic.sub(counts, bins[i], deltas[i] // 3)


@pytest.mark.parametrize("dtype, largest, blocks, threads",
                         [(np.int32, 1 << 30, 3, 64), (np.uint32, 100, 2, 96), (np.int64, 1 << 40, 5, 32)])
def test_integer_atomics_on_shared_elements_apply_in_lane_order(dtype, largest, blocks, threads):
    rng = np.random.default_rng(11)
    n = blocks * threads - 7
    bins = np.minimum(rng.geometric(0.3, n) - 1, 5).astype(np.int32)  # a few elements take most updates
    deltas = rng.integers(0, largest, n).astype(dtype)  # int32 sums wrap, as on the GPU
    counts = rng.integers(0, largest, 6).astype(dtype)
    expected_counts, expected_olds = counts.copy(), np.zeros((n, 2), dtype)
    with np.errstate(over="ignore"):
        for column, steps in enumerate((deltas, -(deltas // 3))):  # each statement, one thread after the other
            for i in range(n):
                expected_olds[i, column] = expected_counts[bins[i]]
                expected_counts[bins[i]] = expected_counts[bins[i]] + steps[i]
    olds = np.zeros((n, 2), dtype)
    tally[blocks, threads](counts, olds, bins, deltas)
    np.testing.assert_array_equal(counts, expected_counts)
    np.testing.assert_array_equal(olds, expected_olds)


@cuda.jit
def row_sums_through_views(out, a):
    i = cuda.grid(1)
    if i < a.shape[0]:
        row = a[i]  # a view: the row i of a, as numba gives it
        total = int32(0)
        for value in row:
            total += value
        out[i, 0] = total
        out[i, 1] = a[i][len(row) - 1]  # index a view again
        out[i][2] = row.size  # store through a view


def test_partial_indexing_gives_views_like_numba():
    a = np.random.default_rng(5).integers(-9, 9, (7, 5)).astype(np.int32)
    out = np.zeros((7, 3), np.int32)
    row_sums_through_views[1, 8](out, a)
    np.testing.assert_array_equal(out, np.stack([a.sum(1), a[:, -1], np.full(7, 5)], axis=1))


@cuda.jit
def minima_and_maxima(out, x, y, n):
    i = cuda.grid(1)
    if i < x.size:
        out[i, 0] = min(x[i], y[i])  # two float64: PTX's min.f64
        out[i, 1] = max(x[i], y[i])
        out[i, 2] = min(n[i], y[i])  # an integer and a float: Python's order
        out[i, 3] = max(n[i], y[i])
        out[i, 4] = min(x[i], y[i], x[i])  # three values: Python's order
        out[i, 5] = max(x[i], y[i], x[i])


def test_min_and_max_give_what_numba_cuda_compiles():
    """Of two float32 or float64 values, numba-cuda calls libdevice's fmin/fmax (`max.f64` in the PTX): a NaN
    loses to a number and -0.0 < +0.0 in either order. Anything else is numba's do_minmax, Python's order: the
    first of equal values stays, a NaN only in first place (NumPy's minimum gets every one of these wrong)."""
    nan = np.nan
    x = np.array([0.0, -0.0, nan, 1.0, nan, 2.0, -0.0])
    y = np.array([-0.0, 0.0, 1.0, nan, nan, 2.0, -0.0])
    n = np.array([0, 0, 1, 1, 0, 2, 0])
    out = np.full((x.size, 6), 99.0)
    minima_and_maxima[1, 32](out, x, y, n)

    def ptx(a, b, smaller):
        if np.isnan(a) or np.isnan(b):
            return b if np.isnan(a) else a
        if a == b == 0:  # -0.0 < +0.0
            negative = (np.signbit(a) or np.signbit(b)) if smaller else (np.signbit(a) and np.signbit(b))
            return -0.0 if negative else 0.0
        return min(a, b) if smaller else max(a, b)

    def python(values, smaller):
        best = values[0]
        for v in values[1:]:
            best = v if (v < best if smaller else v > best) else best
        return best

    rows = [[ptx(a, b, True), ptx(a, b, False), python([float(k), b], True), python([float(k), b], False),
             python([a, b, a], True), python([a, b, a], False)] for a, b, k in zip(x, y, n)]
    expected = np.array(rows)
    same = (out.view(np.int64) == expected.view(np.int64)) | (np.isnan(out) & np.isnan(expected))
    assert same.all(), f"rows {np.flatnonzero(~same.all(axis=1)).tolist()}:\n{out}\nexpected\n{expected}"


@cuda.jit
def atomic_extrema(out, values):
    i = cuda.grid(1)
    if i < values.size:
        cuda.atomic.max(out, (i, 0), values[i])
        cuda.atomic.min(out, (i, 1), values[i])
        cuda.atomic.nanmax(out, (i, 2), values[i])
        cuda.atomic.nanmin(out, (i, 3), values[i])


def test_float_atomic_extrema_replace_only_a_strictly_better_value_as_numba_cudas_loops_do():
    """numba-cuda's float atomic max/min (a compare-and-swap loop, `cudadrv/nvvm.py`) store ``val`` only where it
    is strictly larger (smaller), and leave the element as it is when either is a NaN; nanmax/nanmin skip a
    NaN ``val`` and replace a NaN element. NumPy's maximum would spread the NaN and pick between signed zeros."""
    nan = np.nan
    old = np.array([1.0, 1.0, nan, nan, 0.0, -0.0, 1.0, 3.0])
    val = np.array([nan, 2.0, 5.0, nan, -0.0, 0.0, 0.5, 3.0])
    out = np.repeat(old[:, None], 4, axis=1)
    atomic_extrema[1, 32](out, val)
    expected = np.array([
        [1.0, 1.0, 1.0, 1.0],  # a NaN val: max and min keep 1, nanmax and nanmin skip it
        [2.0, 1.0, 2.0, 1.0],
        [nan, nan, 5.0, 5.0],  # a NaN element: max and min keep it, nanmax and nanmin replace it
        [nan, nan, nan, nan],
        [0.0, 0.0, 0.0, 0.0],  # equal values: the element stays, sign of zero included
        [-0.0, -0.0, -0.0, -0.0],
        [1.0, 0.5, 1.0, 0.5],
        [3.0, 3.0, 3.0, 3.0],
    ])
    same = (out.view(np.int64) == expected.view(np.int64)) | (np.isnan(out) & np.isnan(expected))
    assert same.all(), f"rows {np.flatnonzero(~same.all(axis=1)).tolist()}:\n{out}"


@cuda.jit
def half_extrema(out, a, b):
    i = cuda.grid(1)
    if i < a.size:
        out[i, 0] = cuda.fp16.hmax(a[i], b[i])
        out[i, 1] = cuda.fp16.hmin(a[i], b[i])


def test_half_extrema_are_cudas_hmax_and_hmin():
    """cuda_fp16.h: "If either of inputs is NaN, the other input is returned ... If values of both inputs are
    0.0, then +0.0 > -0.0"."""
    a = np.array([np.nan, 1.0, -0.0, 0.0, np.nan, 2.0], np.float16)
    b = np.array([1.0, np.nan, 0.0, -0.0, np.nan, -3.0], np.float16)
    out = np.zeros((a.size, 2), np.float16)
    half_extrema[1, 32](out, a, b)
    expected = np.array([[1, 1], [1, 1], [0.0, -0.0], [0.0, -0.0], [np.nan, np.nan], [2, -3]], np.float16)
    same = (out.view(np.int16) == expected.view(np.int16)) | (np.isnan(out) & np.isnan(expected))
    assert same.all(), out


@cuda.jit
def float_to_integers(o32, ou32, o64, o8, ou8, a):
    i = cuda.grid(1)
    if i < a.size:
        o32[i] = a[i]  # cvt.rzi.s32.f64
        ou32[i] = a[i]  # cvt.rzi.u32.f64
        o64[i] = int(a[i])  # cvt.rzi.s64.f64
        o8[i] = a[i]  # cvt.rzi.s16.f64, then the low byte
        ou8[i] = a[i]  # cvt.rzi.u16.f64, then the low byte


def test_floats_become_integers_as_ptx_converts_them():
    """numba-cuda converts with `cvt.rzi` (read in its PTX): toward zero, NaN to 0, out-of-range values clamped
    to the type's range, to 16 bits for an 8-bit type (whose low byte is stored). NumPy's cast gives x86's
    lowest integer for all of them."""
    a = np.array([np.inf, -np.inf, np.nan, 3e9, -3e9, 300.0, -300.0, 1e20, 2.7, -2.7])
    outputs = [np.full(a.size, 7, dtype) for dtype in (np.int32, np.uint32, np.int64, np.int8, np.uint8)]
    float_to_integers[1, 32](*outputs, a)
    i32, u32, i64 = 2**31 - 1, 2**32 - 1, 2**63 - 1
    assert outputs[0].tolist() == [i32, -i32 - 1, 0, i32, -i32 - 1, 300, -300, i32, 2, -2]
    assert outputs[1].tolist() == [u32, 0, 0, 3_000_000_000, 0, 300, 0, u32, 2, 0]
    assert outputs[2].tolist() == [i64, -i64 - 1, 0, 3_000_000_000, -3_000_000_000, 300, -300, i64, 2, -2]
    assert outputs[3].tolist() == [-1, 0, 0, -1, 0, 44, -44, -1, 2, -2]  # 32767 -> 0xFF, -32768 -> 0x00
    assert outputs[4].tolist() == [255, 0, 0, 255, 0, 44, 0, 255, 2, 0]


@cuda.jit
def shuffled(out, offset):
    lane = cuda.threadIdx.x
    out[0, lane] = cuda.shfl_down_sync(0xFFFFFFFF, lane, offset)
    out[1, lane] = cuda.shfl_up_sync(0xFFFFFFFF, lane, offset)
    out[2, lane] = cuda.shfl_xor_sync(0xFFFFFFFF, lane, offset)
    out[3, lane] = cuda.shfl_sync(0xFFFFFFFF, lane, offset)


@pytest.mark.parametrize("offset", [1, 32, 33, 40, -1])
def test_shuffles_read_the_low_five_bits_of_their_lane_or_offset(offset):
    """PTX's shfl.sync: ``bval[4:0] = b[4:0]``; down reads lane + bval where that is at most 31, up lane - bval
    where that is at least 0, else the lane keeps its own value; xor reads lane ^ bval, idx lane bval."""
    out = np.full((4, 32), -1, np.int64)
    shuffled[1, 32](out, offset)
    lane, b = np.arange(32), offset & 31
    expected = [np.where(lane + b <= 31, lane + b, lane), np.where(lane - b >= 0, lane - b, lane), lane ^ b,
                np.full(32, b)]
    np.testing.assert_array_equal(out, np.array(expected))


@cuda.jit
def fused(out, a, b, c):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = cuda.fma(a[i], b[i], c[i])


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_cuda_fma_rounds_once(dtype):
    """PTX's fma.rn: ``a * b + c`` exactly, then one rounding (a * b + c in NumPy rounds twice: 0 for the first
    case, NaN for the second). The reference: exact fractions, rounded to the nearest ``dtype``."""
    from fractions import Fraction

    eps = float(np.finfo(dtype).eps)
    rng = np.random.default_rng(3)
    a = np.r_[1 + eps, 1e30, 3.0, rng.standard_normal(97)].astype(dtype)
    b = np.r_[1 - eps, 1e10, 1 / 3, rng.standard_normal(97)].astype(dtype)
    c = np.r_[-1.0, -np.inf, -1.0, -(a[3:].astype(np.float64) * b[3:])].astype(dtype)  # cancellations
    out = np.zeros(a.size, dtype)
    fused[4, 32](out, a, b, c)
    assert out[0] == -(eps * eps) and out[1] == -np.inf

    def nearest(x: Fraction):  # of the float next to x and its neighbours, the nearest; on a tie, the even one
        f = dtype(float(x))
        even = f"u{np.dtype(dtype).itemsize}"
        return min((f, np.nextafter(f, dtype(np.inf)), np.nextafter(f, dtype(-np.inf))),
                   key=lambda y: (abs(Fraction(float(y)) - x), int(np.array(y).view(even)) & 1))

    exact = [nearest(Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z)))
             for x, y, z in zip(a[2:], b[2:], c[2:])]
    np.testing.assert_array_equal(out[2:], np.array(exact, dtype))


def uniform_fma(out, a, b, c):
    out[cuda.threadIdx.x] = cuda.fma(a, b, c)  # scalars: one value for every thread


@pytest.mark.parametrize("signature, dtype", [("void(f4[:], f4, f4, f4)", np.float32),
                                              ("void(f8[:], f8, f8, f8)", np.float64)])
def test_cuda_fma_of_scalar_arguments(signature, dtype):
    """numba-cuda's own test_fma_f8: the float64 emulation refused one value for all threads (a 0-d array)."""
    eps = float(np.finfo(dtype).eps)
    out = np.full(3, np.nan, dtype)
    cuda.jit(signature)(uniform_fma)[1, 3](out, 1 + eps, 1 - eps, -1.0)
    np.testing.assert_array_equal(out, np.full(3, -(eps * eps), dtype))  # rounded once: not 0


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_integer_division_follows_numba_where_numpy_and_a_gpu_would_differ(dtype):
    """numba's integer // and %: Python's floor, 0 and 0 for a zero divisor, and 0 and 0 for MIN // -1 of int64,
    the one quotient that overflows (numba guards it; NumPy wraps to MIN). int32 is divided in int64 (numba's
    typing), where -2**31 // -1 is 2**31."""
    low = np.iinfo(dtype).min
    a = np.array([low, low, 7, -7, 7, -7], dtype)
    b = np.array([-1, 1, 0, 0, -2, 2], dtype)
    out = np.full((a.size, 5), 99, np.int64)
    integer_ops[1, 32](out, a, b)  # its columns 0 and 1: a // b, a % b
    first = 0 if dtype is np.int64 else -low
    assert out[:, :2].tolist() == [[first, 0], [low, 0], [0, 0], [0, 0], [-4, -1], [-4, 1]]


@cuda.jit
def quotients_and_remainders(out, a, b):
    i = cuda.grid(1)
    if i < a.size:
        out[i, 0], out[i, 1] = divmod(a[i], b[i])


@pytest.mark.parametrize("dtype", [np.int32, np.int64])
def test_divmod_is_the_two_operators_in_numba_s_machine_integers(dtype):
    """numba types ``divmod`` of two integers as int64 (its machine integers: -2**31 // -1 of int32 is 2**31, not
    the wrapped -2**31) and computes it with the operators' guards (0 and 0 for MIN // -1 of int64, and for 0)."""
    low = np.iinfo(dtype).min
    a, b = np.array([low, low, 7, -7, 7, -7], dtype), np.array([-1, 1, 0, 0, -2, 2], dtype)
    out = np.full((a.size, 2), 99, np.int64)
    quotients_and_remainders[1, 32](out, a, b)
    first = 0 if dtype is np.int64 else -low
    assert out.tolist() == [[first, 0], [low, 0], [0, 0], [0, 0], [-4, -1], [-4, 1]]
    floats = np.full((2, 2), np.nan)
    quotients_and_remainders[1, 32](floats, np.array([7.5, -7.5], np.float32), np.array([-2, 2], np.float32))
    assert floats.tolist() == [[-4.0, -0.5], [-4.0, 0.5]]  # Python's floor and sign of the divisor


@cuda.jit
def powers_by_builtin(out, x, n):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = pow(x[i], n)


def test_the_pow_builtin_is_the_power_operator():
    """numba lowers ``pow(a, b)`` as ``a ** b``: an integer exponent by squaring and multiplying, x ** 3 being
    x * (x * x) rounded twice in float32 (NumPy's power rounds once: different in about 1 of 4 elements)."""
    x = np.random.default_rng(3).uniform(-8, 8, 500).astype(np.float32)
    out = np.full(x.size, np.nan, np.float32)
    powers_by_builtin[5, 100](out, x, 3)
    np.testing.assert_array_equal(out, x * (x * x))


@cuda.jit
def math_powers(out, x, n):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = math.pow(x[i], int32(n[i]))


def square_and_multiply(x, n):
    """libdevice's ``__nv_powif`` / ``__nv_powi`` (read from its bitcode), one element at a time: each product
    rounded in x's type, the reciprocal of the result for a negative exponent."""
    result, base, e = x.dtype.type(1), x, abs(int(n))
    while True:
        if e & 1:
            result = result * base
        e >>= 1
        if e == 0:
            return x.dtype.type(1) / result if n < 0 else result
        base = base * base


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_math_pow_with_an_int32_exponent_squares_and_multiplies_as_libdevice(dtype):
    """numba-cuda lowers ``math.pow(float, int32)`` to ``__nv_powif`` (``__nv_powi``): not the correctly rounded
    power (different in the last bits of most of these elements), and ``pow(nan, 0)`` is 1."""
    rng = np.random.default_rng(4)
    x = np.concatenate([rng.uniform(0.5, 1.5, 300), [np.nan, 0.0, -0.0, 2.0, np.inf]]).astype(dtype)
    n = np.concatenate([rng.integers(-40, 41, 300), [0, -1, -3, 2 ** 31 - 1, -2]]).astype(np.int32)
    out = np.full(x.size, 7, dtype)
    with np.errstate(all="ignore"):
        expected = np.array([square_and_multiply(a, k) for a, k in zip(x, n)], dtype)
        math_powers[3, 128](out, x, n)
    np.testing.assert_array_equal(out, expected)
    assert out[300] == 1 and np.isinf(out[301]) and out[303] == np.inf and out[304] == 0
    assert (out[:300] != np.power(x[:300].astype(np.float64), n[:300]).astype(dtype)).mean() > 0.2


@cuda.jit
def rounded_to(out, x, digits):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = round(x[i], digits)


@njit
def numba_cuda_round(x, digits):
    """numba-cuda's ``round(x, digits)`` (its cudaimpl.round_to_impl, CPython's old fallback), in numba on the CPU;
    __nv_llrint is rint there (it saturates on a GPU: not reached by these values)."""
    scale = 10.0 ** abs(digits)
    y = x * scale if digits >= 0 else x / scale
    z = np.rint(y)
    if abs(y - z) == 0.5:
        z = 2.0 * np.rint(y / 2.0)
    return z / scale if digits >= 0 else z * scale


@pytest.mark.parametrize("digits", [-1, 0, 1, 2, 3])
def test_round_to_digits_is_numba_cuda_s_not_python_s(digits):
    rng = np.random.default_rng(digits + 5)
    x = np.round(rng.uniform(-100, 100, 3000), 3) + 0.0005 * rng.integers(-1, 2, 3000)  # many near a tie
    out = np.full_like(x, np.nan)
    rounded_to[30, 100](out, x, digits)
    np.testing.assert_array_equal(out, [numba_cuda_round(v, digits) for v in x])


def test_round_to_digits_keeps_infinities_and_saturates_as_the_gpu():
    x = np.array([2.675, 0.125, np.inf, -np.inf, np.nan, 1e300])
    out = np.zeros_like(x)
    rounded_to[1, 32](out, x, 2)
    # 2.675 is 2.67499999...: Python says 2.67; numba-cuda scales it to 267.5 first. 1e300 * 100 is past int64:
    # __nv_llrint (cvt.rni.s64.f64) saturates at 2**63 - 1
    np.testing.assert_array_equal(out, [2.68, 0.12, np.inf, -np.inf, np.nan, float(2**63) / 100])


@cuda.jit
def angles(out, x):
    i = cuda.grid(1)
    if i < x.size:
        out[i, 0] = math.degrees(x[i])
        out[i, 1] = math.radians(x[i])


def test_degrees_and_radians_multiply_by_the_constant_rounded_once_to_the_type():
    """numba-cuda lowers math.degrees(x) as x * float32(180 / pi) for a float32 (cudaimpl.gen_deg_rad); NumPy's
    float32 degrees rounds 180 / float32(pi) instead: a different constant, 1 ulp apart for most x."""
    x = np.random.default_rng(4).uniform(-1000, 1000, 300).astype(np.float32)
    out = np.zeros((x.size, 2), np.float32)
    angles[3, 100](out, x)
    np.testing.assert_array_equal(out, np.stack([x * np.float32(180 / math.pi), x * np.float32(math.pi / 180)], 1))
