"""Module 6's checks: right kernels pass, each classic precision mistake fails with the bits in the message."""

import linecache
import math

import ml_dtypes
import numpy as np
import pytest
from numba import cuda, float32, types, uint32

from gpucourse import simulated
from gpucourse.grading import CheckFailed
from gpucourse.grading import precision as checks
from gpucourse.kernels.precision import mma_m16n8k8
from gpucourse.run import ptx

float16 = types.float16


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


def test_bit_fields_show_sign_exponent_and_mantissa():
    assert checks.bit_fields(np.float16(1.0), np.float16) == "0 01111 0000000000 (1)"
    assert checks.bit_fields(np.float32(-2.5), np.float32) == "1 10000000 01000000000000000000000 (-2.5)"
    assert checks.bit_fields(np.uint16(0x3F80), np.uint16) == "0 01111111 0000000 (1)"  # a bfloat16 pattern


def test_the_bfloat16_reference_is_ml_dtypes_rounding():
    bits32 = checks.bfloat16_inputs(np.random.default_rng(0), 2000, ["ties", "denormals", "infinities", "overflow"])
    expected = bits32.view(np.float32).astype(ml_dtypes.bfloat16).view(np.uint16)
    np.testing.assert_array_equal(checks.bfloat16_reference(bits32), expected)
    nans = checks.bfloat16_inputs(np.random.default_rng(1), 0, ["nan"])
    converted = checks.bfloat16_reference(nans)
    assert np.isnan(converted.view(ml_dtypes.bfloat16).astype(np.float32)).all()  # 0x7F800001 is no inf


def make_linear(accumulator, with_bias: bool = True, products_left_out: int = 0):
    @cuda.jit
    def linear(Y, X, W, bias):
        col, row = cuda.grid(2)
        if row < Y.shape[0] and col < Y.shape[1]:
            acc = accumulator(0)
            for k in range(X.shape[1] - products_left_out):
                acc += accumulator(X[row, k]) * accumulator(W[col, k])
            Y[row, col] = float16(float32(acc) + bias[col]) if with_bias else float16(acc)

    return linear


def test_linear_fp16_needs_a_float32_accumulator():
    checks.check_linear_fp16(make_linear(float32), [(5, 300, 7), (1, 1, 1)], special=["denormals", "large", "nan"],
                             quiet=True)
    with pytest.raises(CheckFailed, match=r"(?s)Y\[\d+, \d+\] should be [01] [01]{5} [01]{10} .*got .*"
                                          r"is every step float32 \(each fp16 value widened before its product"):
        checks.check_linear_fp16(make_linear(float16), [(5, 300, 7)])


@cuda.jit
def linear_rows_from_x(Y, X, W, bias):  # the row from cuda.grid(2)'s x, the column from its y
    row, col = cuda.grid(2)
    if row < Y.shape[0] and col < Y.shape[1]:
        acc = float32(0)
        for k in range(X.shape[1]):
            acc += float32(X[row, k]) * float32(W[col, k])
        Y[row, col] = float16(acc + bias[col])


@pytest.mark.parametrize("kernel, hint", [
    (make_linear(float32, with_bias=False),
     r"Y\[0, 0\] is row 0 of X times row 0 of W without the bias: add bias\[0\] to the sum"),
    (make_linear(float32, products_left_out=1),
     r"leaves out the last product, X\[0, 39\] \* W\[0, 39\]: check the loop's bounds; k runs from 0 to K - 1 = 39")])
def test_linear_fp16_names_a_missing_bias_or_product(kernel, hint):
    """A student's review (2026-12-02): both were told to check that every step is float32."""
    with pytest.raises(CheckFailed, match=hint):
        checks.check_linear_fp16(kernel, [(5, 40, 3)])


def test_linear_fp16_says_the_row_came_from_x():
    with pytest.raises(CheckFailed, match=r"only rows 0 to 4 and columns 0 to 15 were written, as if the row came from "
                                          r"x \(48 threads along x\) and the column from y \(16 along y\)\. "
                                          r"cuda\.grid\(2\) gives \(x, y\)"):
        checks.check_linear_fp16(linear_rows_from_x, [(5, 3, 40)])


@pytest.mark.parametrize("accumulator", [types.float64, float])  # float64(0), or 0. in place of float32(0)
def test_linear_fp16_rejects_a_float64_accumulator(accumulator):
    """numba-cuda's ``float()`` of a float16 is a float16: with ``float`` the products round to float16 first,
    which the values show before the PTX does."""
    found = r"computes in float64 \(.*f64.* in its PTX\)" + ("" if accumulator is types.float64 else
                                                            r"|is every step float32 \(")
    with pytest.raises(CheckFailed, match=found):
        checks.check_linear_fp16(make_linear(accumulator), [(5, 30, 7)])


def make_dot_rows(accumulator, first=0, short=0):
    """A dot product per row; ``first`` and ``short`` move the loop's bounds (``range(first, K - short)``)."""

    @cuda.jit
    def dot_rows(out, A, x):
        r = cuda.grid(1)
        if r < A.shape[0]:
            acc = accumulator(0)
            for k in range(first, A.shape[1] - short):
                acc += accumulator(A[r, k]) * accumulator(x[k])
            out[r] = float32(acc)

    return dot_rows


def test_dot_rows_puzzle_needs_a_float32_accumulator(capsys):
    from gpucourse.course import try_puzzle

    assert try_puzzle(checks.check_dot_rows, make_dot_rows(float32))
    assert capsys.readouterr().out.startswith("✓ dot_rows: correct on 3 launches")
    with pytest.raises(CheckFailed, match=r"is the accumulator float32"):
        checks.check_dot_rows(make_dot_rows(float16))
    with pytest.raises(CheckFailed, match=r"computes in float64"):
        checks.check_dot_rows(make_dot_rows(types.float64))
    assert not try_puzzle(checks.check_dot_rows, make_dot_rows(float16))
    assert capsys.readouterr().out.startswith("✗ Not yet: dot_rows gave a wrong result")


@pytest.mark.parametrize("first, short, shapes, hint", [
    (1, 0, [(33, 1000)], r"your sum leaves out element 0, A\[0, 0\] \* x\[0\]: check the loop's bounds; k runs "
                         r"from 0 to K - 1 = 999, as range\(A.shape\[1\]\) gives"),
    (0, 1, [(300, 17)], r"your sum leaves out the last element, A\[0, 16\] \* x\[16\]: check the loop's bounds"),
    (1, 0, ((1, 1),), r"got 0: does your loop over the row run\? Check its bounds: k runs from 0 to K - 1 = 0"),
    (0, 1, ((1, 1),), r"got 0: does your loop over the row run\?")],
    ids=["range(1, K)", "range(K - 1)", "range(1, K) over one element", "range(K - 1) over one element"])
def test_a_dot_product_loop_with_a_wrong_bound_is_told_to_check_it(first, short, shapes, hint):
    """A student-path review of lecture 6 met the accumulator's hint ('is the accumulator float32...') for these."""
    with pytest.raises(CheckFailed, match=r"rounding allows ±\S+ there: " + hint):
        checks.check_dot_rows(make_dot_rows(float32, first, short), shapes)


def make_row_sum(compensated, guard_infinities, accumulator=float16):
    """A row sum in ``accumulator`` (float16; float32 or float64 are wrong answers a bound alone lets through)."""

    @cuda.jit
    def row_sum(out, x):
        row = cuda.grid(1)
        if row < x.shape[0]:
            total, c = accumulator(0), accumulator(0)
            for k in range(x.shape[1]):
                y = accumulator(x[row, k]) - c
                t = total + y
                if compensated and (t - t == accumulator(0) or not guard_infinities):
                    c = (t - total) - y
                else:
                    c = accumulator(0)
                total = t
            out[row] = float16(total)

    return row_sum


def test_kahan_rows_catch_the_stall_at_2048_and_infinities_turned_into_nan():
    kahan = make_row_sum(True, True)
    for values in ("ones", "positive", "mixed"):
        checks.check_kahan_rows(kahan, [(3, 3000), (33, 50)], values=values, quiet=True)
    checks.check_kahan_rows(kahan, [(33, 500)], special=["denormals", "infinities", "nan", "overflow"], quiet=True)
    # a row that overflows holds no infinity: its fp16 sum is +inf before it meets a -inf (NaN; float64: -inf)
    checks.check_kahan_rows(kahan, [(40, 3000)], values="positive", special=["overflow", "infinities", "denormals"],
                            seed=9, quiet=True)
    with pytest.raises(CheckFailed, match=r"out\[0\] should be 0 11010 0111011100 \(3000\),\n.* got 0 11010 "
                                          r"0000000000 \(2048\)"):
        checks.check_kahan_rows(make_row_sum(False, False), [(3, 3000)], values="ones")
    with pytest.raises(CheckFailed, match=r"should be [01] 11111 0000000000 \(-?inf\),\n.*got . 11111 1\d+ \(nan\)\n"
                                          r"(?s:.*)once t is inf, Kahan's c = \(t - total\) - y is inf - inf = NaN"):
        checks.check_kahan_rows(make_row_sum(True, False), [(33, 500)], special=["infinities"])  # not "never written"
    # assignment 6's special rows are long positive ones: a sum without compensation cannot earn that point
    with pytest.raises(CheckFailed, match="does the sum carry Kahan's compensation"):
        checks.check_kahan_rows(make_row_sum(False, True), [(33, 500)], values="positive", special=["denormals"])


@cuda.jit
def kahan_isinf(out, x):  # right, but math.isinf widens t to float32
    row = cuda.grid(1)
    if row < x.shape[0]:
        total, c = float16(0), float16(0)
        for k in range(x.shape[1]):
            y = x[row, k] - c
            t = total + y
            c = float16(0) if math.isinf(t) else (t - total) - y
            total = t
        out[row] = total


def test_kahan_rows_say_what_widens_to_float32():
    with pytest.raises(CheckFailed, match="math.isinf, abs or float32"):
        checks.check_kahan_rows(kahan_isinf, [(3, 300)], values="positive")


@pytest.mark.parametrize("wide, compensated", [(float32, False), (float32, True), (types.float64, False)])
def test_kahan_rows_reject_a_wider_accumulator(wide, compensated):
    with pytest.raises(CheckFailed, match=rf"computes in float{64 if wide is types.float64 else 32} .*fp16 "
                                          "arithmetic only"):
        checks.check_kahan_rows(make_row_sum(compensated, False, wide), [(3, 300)], values="positive")


def make_to_bfloat16(rounding, nan_guard):
    @cuda.jit
    def to_bfloat16(out, bits):
        i = cuda.grid(1)
        if i < bits.shape[0]:
            u = bits[i]
            if nan_guard and (u & uint32(0x7FFFFFFF)) > uint32(0x7F800000):
                out[i] = (u >> uint32(16)) | uint32(0x0040)
            elif rounding:
                out[i] = (u + uint32(0x7FFF) + ((u >> uint32(16)) & uint32(1))) >> uint32(16)
            else:
                out[i] = u >> uint32(16)

    return to_bfloat16


def test_to_bfloat16_names_a_tie_rounded_up():
    @cuda.jit
    def half_up(out, bits):  # round half up: right but at ties
        i = cuda.grid(1)
        if i < bits.shape[0]:
            out[i] = (bits[i] + uint32(0x8000)) >> uint32(16)

    with pytest.raises(CheckFailed, match=r"Its 16 dropped bits are exactly 0x8000: a tie, which rounds to the even"):
        checks.check_to_bfloat16(half_up, [100], special=["ties"])


def test_to_bfloat16_catches_truncation_and_nan_turned_into_infinity():
    everything = ["ties", "denormals", "infinities", "nan", "overflow"]
    checks.check_to_bfloat16(make_to_bfloat16(True, True), [300, 1], threads=[32, 128], special=everything, quiet=True)
    with pytest.raises(CheckFailed, match=r"(?s)out\[\d+\] should be .*got .*the float32 input bits\[\d+\] is"):
        checks.check_to_bfloat16(make_to_bfloat16(False, True), [300])
    with pytest.raises(CheckFailed, match=r"should be 0 11111111 1000000 \(nan\),\n.*got 0 11111111 0000000 \(inf\)"):
        checks.check_to_bfloat16(make_to_bfloat16(True, False), [0], special=["nan"])

    @cuda.jit
    def nan_by_low_bits(out, bits):  # a NaN whose payload is in the kept bits is rounded, not made quiet
        i = cuda.grid(1)
        if i < bits.shape[0]:
            u = bits[i]
            if (u & uint32(0x7F800000)) == uint32(0x7F800000) and (u & uint32(0xFFFF)) != uint32(0):
                out[i] = (u >> uint32(16)) | uint32(0x0040)
            else:
                out[i] = (u + uint32(0x7FFF) + ((u >> uint32(16)) & uint32(1))) >> uint32(16)

    with pytest.raises(CheckFailed, match=r"should be 0 11111111 1000001 \(nan\),\n.*got 0 11111111 0000001 \(nan\)"):
        checks.check_to_bfloat16(nan_by_low_bits, [0], special=["nan"])

    @cuda.jit
    def canonical_nan(out, bits):  # a NaN as 0x7FC0, whatever its sign and bits: a NaN, but not the exercise's
        i = cuda.grid(1)
        if i < bits.shape[0]:
            u = bits[i]
            if (u & uint32(0x7FFFFFFF)) > uint32(0x7F800000):
                out[i] = uint32(0x7FC0)
            else:
                out[i] = (u + uint32(0x7FFF) + ((u >> uint32(16)) & uint32(1))) >> uint32(16)

    with pytest.raises(CheckFailed, match=r"It is a NaN. IEEE 754 lets a conversion return any NaN .* this exercise "
                                          r"asks for its sign and top bits kept"):
        checks.check_to_bfloat16(canonical_nan, [10], special=["nan"])

    @cuda.jit
    def infinity_as_nan(out, bits):  # the NaN test with >=: an infinity is made a NaN (a student's review, 2026-12-02)
        i = cuda.grid(1)
        if i < bits.shape[0]:
            u = bits[i]
            if (u & uint32(0x7FFFFFFF)) >= uint32(0x7F800000):
                out[i] = (u >> uint32(16)) | uint32(0x0040)
            else:
                out[i] = (u + uint32(0x7FFF) + ((u >> uint32(16)) & uint32(1))) >> uint32(16)

    with pytest.raises(CheckFailed, match=r"It is an infinity \(exponent all ones, mantissa 0\), not a NaN, which "
                                          r"has a mantissa other than 0: test \(u & 0x7FFFFFFF\) > 0x7F800000 for a "
                                          r"NaN"):
        checks.check_to_bfloat16(infinity_as_nan, [10], special=["infinities"])


def make_unscale(flags, counts=False, sets=False, resets=False, in_fp16=False):
    """Right with ``flags`` alone; wrong when it ``counts`` (atomic.add), ``sets`` the flag with `=`, ``resets`` it
    (thread 0 writes 0: another block's raise races with it), or multiplies ``in_fp16``."""

    @cuda.jit
    def unscale(out, found_inf, grads, inv_scale):
        i = cuda.grid(1)
        if resets:
            if i == 0:
                found_inf[0] = 0
            cuda.syncthreads()
        if i < grads.shape[0]:
            g = float32(grads[i] * float16(inv_scale)) if in_fp16 else float32(grads[i]) * inv_scale
            out[i] = g
            if flags and g - g != float32(0):
                if counts:
                    cuda.atomic.add(found_inf, 0, 1)
                elif sets:
                    found_inf[0] = 1
                else:
                    cuda.atomic.max(found_inf, 0, 1)

    return unscale


def test_unscale_must_flag_infinities_and_nan():
    for special in ([], ["infinities"], ["nan", "denormals"]):
        checks.check_unscale(make_unscale(True), [300, 7], scales=[1024.0, 65536.0], special=special, quiet=True)
    with pytest.raises(CheckFailed, match=r"found_inf\[0\] should be 1, got 0 \(the gradients hold an inf or a NaN\)"):
        checks.check_unscale(make_unscale(False), [300], special=["nan"])
    with pytest.raises(CheckFailed, match=r"found_inf\[0\] should be 1, got \d+ .*a flag, not a count"):
        checks.check_unscale(make_unscale(True, counts=True), [300], special=["nan"])


@cuda.jit
def unscale_flags_plus_inf_only(out, found_inf, grads, inv_scale):  # misses -inf (a student's review, 2026-12-02)
    i = cuda.grid(1)
    if i < grads.shape[0]:
        g = float32(grads[i]) * inv_scale
        out[i] = g
        if g != g or g == float32(math.inf):
            cuda.atomic.max(found_inf, 0, 1)


def test_unscale_plants_each_infinity_alone_so_a_flag_that_misses_one_sign_fails():
    with pytest.raises(CheckFailed, match=r"1000 gradients, loss scale 1024 \(one -inf among them, the others "
                                          r"finite\): found_inf\[0\] should be 1, got 0"):
        checks.check_unscale(unscale_flags_plus_inf_only, [1000], special=["infinities"])
    checks.check_unscale(unscale_flags_plus_inf_only, [1000], special=["nan"], quiet=True)  # NaN alone: flagged


def test_unscale_names_a_product_computed_in_fp16():
    """A student's review (2026-12-02): '30 of 1000 elements differ' and nothing more."""
    with pytest.raises(CheckFailed, match=r"elements differ: out holds the product computed in float16"):
        checks.check_unscale(make_unscale(True, in_fp16=True), [1000], scales=[65536.0])


@pytest.mark.parametrize("kernel", [make_unscale(True, resets=True), make_unscale(True, sets=True)])
def test_unscale_says_the_flag_is_never_written_with_an_equals_sign(kernel):
    """The simulator's advice on a race (barriers; one thread writing) is not this exercise's fix."""
    with pytest.raises(CheckFailed, match=r"data race on `found_inf\[0\]`: [^\n]*: found_inf\[0\] is 0 before the "
                                          r"launch .* never writes it with `=`, to set it or to reset it; each such "
                                          r"thread raises it with cuda.atomic.max\(found_inf, 0, 1\)$") as failed:
        checks.check_unscale(kernel, [1000], special=["infinities"])
    assert "syncthreads" not in str(failed.value) and "different blocks" not in str(failed.value)


def test_loss_scale_update_follows_the_run():
    def update(scale, good, found):
        if found:
            return scale / 2, 0, True
        return (scale * 2, 0, False) if good + 1 == 3 else (scale, good + 1, False)

    runs = [(1024.0, [False] * 7 + [True, True, False])]
    checks.check_loss_scale_update(update, runs, interval=3, quiet=True)
    with pytest.raises(CheckFailed, match=r"update\(1024.0, 2, False\) should return \(2048.0, 0, False\), got "
                                          r"\(1024.0, 3, False\)\n  at step 2 .*\.\.\.\)"):
        checks.check_loss_scale_update(lambda s, g, f: (s / 2, 0, True) if f else (s, g + 1, False), runs,
                                       interval=3, name="update")

    def unwritten(scale, good, found):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="unwritten is not written yet"):
        checks.check_loss_scale_update(unwritten, runs, interval=3)
    with pytest.raises(CheckFailed, match=r"update\(1.0, 0, True\) should return \(0.5, 0, True\), got \(0.0, 0, True\)"):
        checks.check_loss_scale_update(lambda s, g, f: (s // 2, 0, True) if f else update(s, g, f),
                                       [(1.0, [True, False])], interval=3, name="update")
    with pytest.raises(CheckFailed, match=r"update\(1024.0, 0, False\) raised ZeroDivisionError"):
        checks.check_loss_scale_update(lambda s, g, f: 1 / 0, runs, interval=3, name="update")


UPDATES = """
GROWTH_INTERVAL = 3


def update_reading_the_interval(scale, good, found):
    if found:
        return scale / 2, 0, True
    return (scale * 2, 0, False) if good + 1 == GROWTH_INTERVAL else (scale, good + 1, False)


def update_with_the_interval_written_out(scale, good, found):
    if found:
        return scale / 2, 0, True
    return (scale * 2, 0, False) if good + 1 == 3 else (scale, good + 1, False)


def update_with_the_interval_as_a_default(scale, good, found, interval=GROWTH_INTERVAL):
    if found:
        return scale / 2, 0, True
    return (scale * 2, 0, False) if good + 1 == interval else (scale, good + 1, False)


def update_with_its_value_as_a_default(scale, good, found, interval=3):
    if found:
        return scale / 2, 0, True
    return (scale * 2, 0, False) if good + 1 == interval else (scale, good + 1, False)
"""


def test_loss_scale_update_must_read_the_interval_not_write_its_value():
    notebook = {}  # a notebook's namespace: the functions' globals, GROWTH_INTERVAL among them
    cell = "<notebook cell>"  # as IPython runs a cell: its source kept in linecache, for inspect
    linecache.cache[cell] = (len(UPDATES), None, UPDATES.splitlines(True), cell)
    exec(compile(UPDATES, cell, "exec"), notebook)
    runs = [(1024.0, [False] * 7 + [True, True, False])]
    checks.check_loss_scale_update(notebook["update_reading_the_interval"], runs, interval=3, quiet=True)
    checks.check_loss_scale_update(notebook["update_with_the_interval_as_a_default"], runs, interval=3, quiet=True)
    with pytest.raises(CheckFailed, match=r"update_with_the_interval_written_out is right with GROWTH_INTERVAL = 3, "
                                          r"but with GROWTH_INTERVAL = 6 it returned \(2048.0, 0, False\) for "
                                          r"\(1024.0, 2, False\), not \(1024.0, 3, False\): read GROWTH_INTERVAL"):
        checks.check_loss_scale_update(notebook["update_with_the_interval_written_out"], runs, interval=3)
    with pytest.raises(CheckFailed, match=r"read GROWTH_INTERVAL in the function rather than writing its value 3"):
        checks.check_loss_scale_update(notebook["update_with_its_value_as_a_default"], runs, interval=3)
    assert notebook["GROWTH_INTERVAL"] == 3  # put back


def make_sgd(master_weights, wide=float32, weights_before=False):
    @cuda.jit
    def sgd(weights, master, grads, lr):
        i = cuda.grid(1)
        if i < master.shape[0]:
            if weights_before:  # wrong: the weights rounded from the master before its update
                weights[i] = float16(master[i])
            if master_weights:  # in float32, or in a wider type (a wrong answer with right values)
                m = float32(wide(master[i]) - wide(lr) * wide(grads[i]))
            else:  # the update in fp16: it vanishes below half an ulp of the weight
                m = float32(float16(master[i]) - float16(lr * float32(grads[i])))
            master[i] = m
            if not weights_before:
                weights[i] = float16(m)

    return sgd


def test_master_sgd_names_weights_rounded_before_the_update():
    """A student's review (2026-12-02): '539 of 1000 elements differ' and nothing more."""
    with pytest.raises(CheckFailed, match=r"elements differ: weights holds the fp16 rounding of the master before the "
                                          r"update: store float16 of the updated master"):
        checks.check_master_sgd(make_sgd(True, weights_before=True), [1000])


def test_master_sgd_keeps_the_updates_fp16_loses():
    checks.check_master_sgd(make_sgd(True), [300, 7], special=["small updates", "denormals", "large"], quiet=True)
    with pytest.raises(CheckFailed, match=r"(?s)master\[\d+\] should be 0 10000011 .*got 0 10000011 "):
        checks.check_master_sgd(make_sgd(False), [300], special=["small updates"])
    with pytest.raises(CheckFailed, match=r"computes in float64 .*float32 arithmetic"):
        checks.check_master_sgd(make_sgd(True, types.float64), [300])  # right values, a float64 update

    @cuda.jit
    def reads_weights(weights, master, grads, lr):  # the master right, weights from the poison it was handed
        i = cuda.grid(1)
        if i < master.shape[0]:
            master[i] = master[i] - lr * float32(grads[i])
            weights[i] = weights[i] + float16(master[i]) - weights[i]

    with pytest.raises(CheckFailed, match=r"master is right, but weights holds NaN .* an output only"):
        checks.check_master_sgd(reads_weights, [300])


def make_step(mistake=""):
    """A training step from `make_unscale`, the loss-scale update and `make_sgd`, right or with one mistake."""
    unscale, sgd, flag = make_unscale(True), make_sgd(True), cuda.to_device(np.zeros(1, np.int32))

    def step(weights, master, scaled_grads, lr, scale, good_steps):
        n = master.shape[0]
        grads = cuda.device_array(n, np.float16 if mistake == "fp16 gradients" else np.float32)
        found = flag if mistake == "one flag for every step" else cuda.to_device(np.zeros(1, np.int32))
        inverse = 1 / scale if mistake == "a Python float for inv_scale" else np.float32(1 / scale)
        unscale[math.ceil(n / 64), 64](grads, found, scaled_grads, inverse)
        if mistake == "checked on the host":
            overflow = not np.isfinite(scaled_grads.copy_to_host()).all()
        else:
            overflow = bool(found.copy_to_host()[0])
        if mistake == "the flag's device array passed":
            overflow = found
        if mistake == "arguments swapped":
            scale, good_steps = good_steps, scale
        new = ((scale / 2, 0, True) if overflow else
               (scale * 2, 0, False) if good_steps + 1 == 4 else (scale, good_steps + 1, False))
        if not new[2] or mistake == "updates on an overflow":
            used = scaled_grads if mistake == "scaled gradients" else grads
            sgd[math.ceil(n / 64), 64](weights, master, used, lr)
        return None if mistake == "no return" else list(new) if mistake == "a list returned" else new

    return step


@pytest.mark.parametrize("mistake, message", [
    ("updates on an overflow", r"changed `master` at step 2 .*a skipped step updates nothing"),
    ("one flag for every step", r"should return \(512.0, 1, False\) .* at step 3 .*got \(256.0, 0, True\): skipped, "
                                r"though every gradient is finite: the flag must be 0 at the start of every step"),
    ("the flag's device array passed", r"got \(512.0, 0, True\): skipped, though .*not the device array"),
    ("no return", r"got None: return what loss_scale_update returns"),
    ("a list returned", r"got \[1024.0, 1, False\]: the right values, but return a tuple"),
    ("arguments swapped", r"got \(0, 1025.0, False\): loss_scale_update\(scale, good_steps, found_inf\) decides"),
    ("scaled gradients", r"(?s)master\[0\] should be .*divided by the scale"),
    ("fp16 gradients", r"(?s)master\[\d+\] should be .*not rounded to fp16 on the way"),
    ("checked on the host", r"copied 4 bytes to the device and 2000 to the host .*from the flag alone"),
    # the right values (1 / scale is a power of two), multiplied in float64: a review found it passed
    ("a Python float for inv_scale", r"(?s)correct but over its budget: it launches `unscale` with float64 "
                                     r"arithmetic: it passes `inv_scale` a Python float, which is a float64.*"
                                     r"mul\.f64.*np\.float32\(1 / scale\).*\(at step 0 of a run of 11"),
])
def test_training_step_catches_each_way_to_get_the_composition_wrong(mistake, message):
    checks.check_training_step(make_step(), [300, 7], interval=4, quiet=True)
    with pytest.raises(CheckFailed, match=message):
        checks.check_training_step(make_step(mistake), [1000], interval=4)


def test_unscales_budget_reads_its_own_compilation_not_a_float64_one_of_the_step():
    """A training step that passed a Python float compiled unscale for a float64 inv_scale: Exercise 4's check run
    again after it still checks the float32 compilation its own launches use."""
    unscale = make_unscale(True)
    grads = cuda.to_device(np.ones(40, np.float16))
    unscale[1, 64](cuda.device_array(40, np.float32), cuda.to_device(np.zeros(1, np.int32)), grads, 1 / 1024)
    assert ptx.float_operations(unscale.py_func, 64)  # the float64 compilation is there
    checks.check_unscale(unscale, [300], quiet=True)


def test_training_step_says_not_written_and_names_the_step_of_an_error():
    def unwritten(*args):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match="unwritten is not written yet"):
        checks.check_training_step(unwritten, [10], interval=4)

    def loss_scale_update(scale, good_steps, found_inf):
        raise NotImplementedError()

    def calls_a_stub(weights, master, scaled_grads, lr, scale, good_steps):
        return loss_scale_update(scale, good_steps, False)

    with pytest.raises(CheckFailed, match="loss_scale_update, which calls_a_stub calls, is not written yet: write it "
                                          "and run its cell"):
        checks.check_training_step(calls_a_stub, [10], interval=4)

    def host_arrays(weights, master, scaled_grads, lr, scale, good_steps):
        return make_step()(weights.copy_to_host(), master.copy_to_host(), scaled_grads, lr, scale, good_steps)

    with pytest.raises(CheckFailed, match=r"copied \d+ bytes to the device .* launch on them"):
        checks.check_training_step(host_arrays, [10], interval=4, name="host_arrays")
    with pytest.raises(CheckFailed, match=r"step raised ZeroDivisionError at step 0 of a run of 11"):
        checks.check_training_step(lambda *args: 1 / 0, [10], interval=4, name="step")


def make_tile_gemm(tensor_cores):
    @cuda.jit
    def tile_gemm(C, A, B):
        lane, warp = cuda.threadIdx.x, cuda.threadIdx.y
        row0, col0 = cuda.blockIdx.y * 16, (cuda.blockIdx.x * cuda.blockDim.y + warp) * 8
        g, p = lane // 4, 2 * (lane % 4)
        M, N, K = C.shape[0], C.shape[1], A.shape[1]
        acc = (float32(0), float32(0), float32(0), float32(0))
        for k0 in range(0, K, 8):
            a = (A[row0 + g, k0 + p] if row0 + g < M and k0 + p < K else float16(0),
                 A[row0 + g, k0 + p + 1] if row0 + g < M and k0 + p + 1 < K else float16(0),
                 A[row0 + g + 8, k0 + p] if row0 + g + 8 < M and k0 + p < K else float16(0),
                 A[row0 + g + 8, k0 + p + 1] if row0 + g + 8 < M and k0 + p + 1 < K else float16(0))
            b = (B[k0 + p, col0 + g] if k0 + p < K and col0 + g < N else float16(0),
                 B[k0 + p + 1, col0 + g] if k0 + p + 1 < K and col0 + g < N else float16(0))
            if tensor_cores:
                acc = mma_m16n8k8(a, b, acc)
        for i in range(4):
            r, c = row0 + g + 8 * (i // 2), col0 + p + i % 2
            if r < M and c < N:
                value = acc[i]
                if not tensor_cores:  # the same product without the tensor cores
                    for k in range(K):
                        value += float32(A[r, k]) * float32(B[k, c])
                C[r, c] = value

    return tile_gemm


def make_mma_nt(mistake=""):
    """Lecture 6's puzzle, D = A @ Bt.T by two mma_m16n8k8, right or with one of a student's mistakes."""

    @cuda.jit
    def mma_nt(D, A, Bt):
        lane = cuda.threadIdx.x
        group, pair = lane // 4, 2 * (lane % 4)
        a = (A[group, pair], A[group, pair + 1], A[group + 8, pair], A[group + 8, pair + 1])
        zero = float32(0)
        for half in range(1 if mistake == "left half only" else 2):
            n = group if mistake == "same rows of Bt" else 8 * half + group
            b = (Bt[pair, group], Bt[pair + 1, group]) if mistake == "Bt read as B" else (Bt[n, pair], Bt[n, pair + 1])
            c = (zero, zero, zero, zero)
            d = c if mistake == "no tensor cores" else mma_m16n8k8(a, b, c)
            for i in range(4):
                row, col = group + 8 * (i // 2), 8 * half + pair + i % 2
                D[row, col] = d[i]
                if mistake == "no tensor cores":  # the same product on the CUDA cores
                    D[row, col] = zero
                    for k in range(8):
                        D[row, col] += float32(A[row, k]) * float32(Bt[col, k])

    return mma_nt


def test_mma_nt_puzzle_reads_b_from_its_transpose():
    checks.check_mma_nt(make_mma_nt(), quiet=True)
    for mistake, message in (("Bt read as B", r"256 of 256 elements are wrong.*B\[k, n\] is Bt\[n, k\]"),
                             ("same rows of Bt", r"D\[0, 8\] should be .*128 of 256 elements are wrong"),
                             ("left half only", r"never written, or only added to: it still holds the poison value.*"
                                                r"so it is at rows 0 to 15, columns 8 to 15 \(all of them, nothing "
                                                r"else\): is a store, or a whole call, left out\?"),
                             ("no tensor cores", r"calls mma_m16n8k8 0 times, not 2")):
        with pytest.raises(CheckFailed, match=f"(?s){message}"):
            checks.check_mma_nt(make_mma_nt(mistake))


def test_mma_gemm_must_use_the_tensor_cores():
    checks.check_mma_gemm(make_tile_gemm(True), [(37, 29, 45), (16, 8, 8)], special=["denormals", "large"], quiet=True)
    checks.check_mma_gemm(make_tile_gemm(True), [(20, 9, 70)], warps=2, quiet=True)
    with pytest.raises(CheckFailed, match=r"call mma_m16n8k8 0 times in all, not 72: once per step of 8 along K "
                                          r"\(4\) in every warp whose 16 x 8 tile overlaps C \(18 of the 24 warps"):
        checks.check_mma_gemm(make_tile_gemm(False), [(37, 29, 45)], warps=4)


def make_softmax(subtract_max, sum_type):
    @cuda.jit
    def softmax_fp16(out, x):
        row, lane = cuda.blockIdx.x, cuda.threadIdx.x
        n = x.shape[1]
        top = float32(-math.inf)
        if subtract_max:
            for k in range(lane, n, 32):
                top = max(top, float32(x[row, k]))
            for offset in (16, 8, 4, 2, 1):
                top = max(top, cuda.shfl_xor_sync(0xFFFFFFFF, top, offset))
        else:
            top = float32(0)
        total = sum_type(0)
        for k in range(lane, n, 32):
            total += sum_type(math.exp(float32(x[row, k]) - top))
        total = float32(total)
        for offset in (16, 8, 4, 2, 1):
            total += cuda.shfl_xor_sync(0xFFFFFFFF, total, offset)
        for k in range(lane, n, 32):
            out[row, k] = float16(math.exp(float32(x[row, k]) - top) / total)

    return softmax_fp16


def test_softmax_fp16_needs_the_maximum_and_an_fp32_sum():
    right = make_softmax(True, float32)
    checks.check_softmax_fp16(right, [(3, 1), (5, 40), (2, 1000)], quiet=True)
    checks.check_softmax_fp16(right, [(6, 70)], special=["large", "masked"], quiet=True)
    with pytest.raises(CheckFailed, match=r"(?s)should be .* got .*(nan|inf|0 00000 0000000000).*maximum subtracted"):
        checks.check_softmax_fp16(make_softmax(False, float32), [(6, 70)], special=["large"])
    with pytest.raises(CheckFailed, match=r"(?s)elements are wrong.*maximum subtracted"):
        checks.check_softmax_fp16(make_softmax(True, float16), [(2, 1000)])


def make_shared_tile_gemm(warps, warp_0_alone=False):
    @cuda.jit
    def shared_tile_gemm(C, A, B):
        tile = cuda.shared.array((16, 8), float16)
        lane, warp = cuda.threadIdx.x, cuda.threadIdx.y
        row0, col0 = cuda.blockIdx.y * 16, (cuda.blockIdx.x * warps + warp) * 8
        g, p = lane // 4, 2 * (lane % 4)
        M, N, K = C.shape[0], C.shape[1], A.shape[1]
        zero = float16(0)
        c = (float32(0), float32(0), float32(0), float32(0))
        for k0 in range(0, K, 8):
            first, step = (lane if warp == 0 else 128, 32) if warp_0_alone else (warp * 32 + lane, 32 * warps)
            for e in range(first, 128, step):  # the block copies A's 16 x 8 slice once
                r, k = row0 + e // 8, k0 + e % 8
                tile[e // 8, e % 8] = A[r, k] if r < M and k < K else zero
            cuda.syncthreads()
            a = (tile[g, p], tile[g, p + 1], tile[g + 8, p], tile[g + 8, p + 1])
            k1, k2, col = k0 + p, k0 + p + 1, col0 + g
            b = (B[k1, col] if k1 < K and col < N else zero, B[k2, col] if k2 < K and col < N else zero)
            c = mma_m16n8k8(a, b, c)
            cuda.syncthreads()
        for i in range(4):
            r, j = row0 + g + 8 * (i // 2), col0 + p + i % 2
            if r < M and j < N:
                C[r, j] = c[i]

    return shared_tile_gemm


def test_mma_gemm_shared_a_budget():
    checks.check_mma_gemm(make_shared_tile_gemm(4), [(37, 29, 45), (16, 8, 8)], shared_a=True, quiet=True)
    checks.check_mma_gemm(make_shared_tile_gemm(2), [(20, 9, 70)], warps=2, shared_a=True, quiet=True)
    with pytest.raises(CheckFailed, match=r"an element of A is read 8 times from global memory, not at most 2"):
        checks.check_mma_gemm(make_tile_gemm(True), [(37, 29, 45)], warps=4, shared_a=True)
    with pytest.raises(CheckFailed, match=r"one thread reads 16 elements of A, not at most 4 \(1 per step"):
        checks.check_mma_gemm(make_shared_tile_gemm(4, warp_0_alone=True), [(37, 29, 45)], warps=4, shared_a=True)


@cuda.jit
def softmax_in_lane_0(out, x):  # right values, but lane 0 does the whole row: not one warp per row
    row, lane = cuda.blockIdx.x, cuda.threadIdx.x
    if lane == 0:
        m = float32(-math.inf)
        for k in range(x.shape[1]):
            m = max(m, float32(x[row, k]))
        total = float32(0)
        for k in range(x.shape[1]):
            total += math.exp(float32(x[row, k]) - m)
        for k in range(x.shape[1]):
            out[row, k] = float16(math.exp(float32(x[row, k]) - m) / total)


def test_softmax_fp16_shares_each_row_among_the_lanes_of_a_warp():
    with pytest.raises(CheckFailed, match=r"(?s)over its budget: .*read `x` at most 9 times.* read it 210 times: "
                                          r"one warp per row"):
        checks.check_softmax_fp16(softmax_in_lane_0, [(6, 70)], special=["large"])
