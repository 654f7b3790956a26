"""gpucourse.grading.core: launch plans, and failures that say what went wrong."""


import numpy as np
import pytest

import gpucourse  # noqa: F401  (chooses the backend)
from gpucourse.grading import (
    CheckFailed,
    blocks_1d,
    blocks_2d,
    blocks_needed,
    case,
    check_function,
    check_kernel,
    one_block,
    one_block_2d,
    outer,
)
from gpucourse.grading.core import poison, random_array
from numba import cuda, float32


def add(a, b):
    return a + b


@cuda.jit
def zip_guarded(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]


@cuda.jit
def zip_unguarded(out, a, b):
    i = cuda.grid(1)
    out[i] = a[i] + b[i]


@cuda.jit
def zip_skips_last(out, a, b):
    i = cuda.grid(1)
    if i < out.size - 1:
        out[i] = a[i] + b[i]


@cuda.jit
def zip_reads_neighbour(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[(i + 1) % out.size]


@cuda.jit
def zip_overwrites_input(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] + b[i]
        a[i] = float32(0)


@cuda.jit
def zip_not_written(out, a, b):
    raise NotImplementedError()


@cuda.jit
def add_ten_2d(out, a):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = a[row, col] + 10


@cuda.jit
def outer_sum(out, column, row_vector):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = column[row, 0] + row_vector[0, col]


def test_launch_plans_cover_the_arrays():
    assert blocks_needed(0, 32) == 0 and blocks_needed(32, 32) == 1 and blocks_needed(33, 32) == 2
    assert [(c.grid, c.block) for c in blocks_1d([33], [8, 32])] == [((5,), (8,)), ((2,), (32,))]
    assert one_block([5], inputs=2, extra_threads=3)[0] == case(1, 8, [(5,), (5,)])
    assert one_block_2d([(3, 5)], extra=(2, 1))[0].block == (7, 4)
    (c,) = blocks_2d([(33, 9)], [(8, 4)])
    assert c.grid == (2, 9) and c.out == (33, 9)
    assert outer([(3, 5)], (4, 4))[0].inputs == ((3, 1), (1, 5))


def test_random_data_is_not_uniform_and_poison_is_visible():
    a = random_array(np.random.default_rng(0), (64,), np.float32)
    assert len(np.unique(a)) == 64
    assert np.isnan(poison((3,), np.float32)).all()
    assert (poison((3,), np.int32) == np.iinfo(np.int32).min).all()


def test_correct_kernels_pass_and_say_so(capsys):
    check_kernel(zip_guarded, add, one_block([1, 7, 32], inputs=2, extra_threads=5))
    check_kernel(zip_guarded, add, blocks_1d([1, 33, 100], [8, 32], inputs=2), dtype=np.int32)
    check_kernel(add_ten_2d, lambda a: a + 10, blocks_2d([(5, 7), (17, 3)], [(4, 4), (8, 2)]))
    check_kernel(outer_sum, add, outer([(5, 7)], (4, 4), extra=(3, 2)))
    out = capsys.readouterr()
    assert "✓ zip_guarded: correct on 3 launches\n" in out.out and out.err == ""  # no budget, none said


def test_missing_guard_names_the_launch_and_the_index():
    with pytest.raises(CheckFailed) as failure:
        check_kernel(zip_unguarded, add, one_block([5], inputs=2, extra_threads=3))
    message = str(failure.value)
    assert "zip_unguarded failed with grid=(1,), block=(8,)" in message
    assert "thread threadIdx=(5, 0, 0) of block blockIdx=(0, 0, 0): index 5 is out of bounds for `a`" in message
    assert "needs a guard" in message


def test_unwritten_element_is_reported_as_poison():
    with pytest.raises(CheckFailed) as failure:
        check_kernel(zip_skips_last, add, one_block([7], inputs=2))
    message = str(failure.value)
    assert "out[6] should be" in message and "never written" in message
    assert "1 of 7 elements are wrong" in message


@cuda.jit
def add_ten_2d_row_from_x(out, a):
    row, col = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[1]:
        out[row, col] = a[row, col] + 10


@cuda.jit
def add_ten_2d_columns_guarded_by_rows(out, a):
    col, row = cuda.grid(2)
    if row < out.shape[0] and col < out.shape[0]:
        out[row, col] = a[row, col] + 10


def test_a_row_taken_from_x_is_named_where_no_wrong_guard_explains_what_was_written():
    with pytest.raises(CheckFailed, match=r"Only out\[0:5, 0:6\] was written, as if the row came from x \(8 threads "
                                          r"along x\) and the column from y \(6 along y\)\. cuda\.grid\(2\) gives"):
        check_kernel(add_ten_2d_row_from_x, lambda a: a + 10, blocks_2d([(5, 7)], [(8, 2)]))
    for kernel in (add_ten_2d_row_from_x, add_ten_2d_columns_guarded_by_rows):  # both write out[0:4, 0:4]
        with pytest.raises(CheckFailed) as failure:
            check_kernel(kernel, lambda a: a + 10, blocks_2d([(4, 7)], [(8, 4)]))
        assert "never written" in str(failure.value) and "cuda.grid(2) gives" not in str(failure.value)


def test_wrong_index_shows_expected_and_actual_values():
    with pytest.raises(CheckFailed) as failure:
        check_kernel(zip_reads_neighbour, add, one_block([6], inputs=2), seed=3)
    message = str(failure.value)
    rng = np.random.default_rng(3)
    a, b = random_array(rng, (6,), np.float32), random_array(rng, (6,), np.float32)
    assert f"out[0] should be {(a[0] + b[0]).item()!r}, got {(a[0] + b[1]).item()!r}" in message
    assert "never written" not in message


def test_writing_to_an_input_is_caught():
    with pytest.raises(CheckFailed, match="changed its input number 1"):
        check_kernel(zip_overwrites_input, add, one_block([4], inputs=2))


def test_unwritten_exercise_says_what_to_do():
    with pytest.raises(CheckFailed, match="not written yet.*NotImplementedError"):
        check_kernel(zip_not_written, add, one_block([4], inputs=2))


def test_only_a_real_kernel_is_checked():
    class HostFake:  # indexes and calls like a kernel, computes on the host
        def __getitem__(self, configuration):
            return lambda out, a, b: out.__setitem__(slice(None), a + b)

    @cuda.jit(device=True)
    def a_device_function(x):
        return x

    for fake in (HostFake(), a_device_function, add):
        with pytest.raises(CheckFailed, match=r"is not a kernel: write it as a function decorated with @cuda.jit"):
            check_kernel(fake, add, one_block([4], inputs=2), name="fake")


def test_float32_rounding_passes_but_real_errors_do_not():
    @cuda.jit
    def add_then_tiny_error(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = (a[i] + b[i]) * float32(1.0000005)

    check_kernel(add_then_tiny_error, add, one_block([32], inputs=2), quiet=True)
    with pytest.raises(CheckFailed):
        check_kernel(add_then_tiny_error, lambda a, b: a + b + 1e-3, one_block([32], inputs=2))


def test_a_write_past_the_end_is_caught_even_where_it_does_not_fault(monkeypatch):
    """On a GPU an unguarded write lands after `out` without an error: the canary shows it."""
    from gpucourse.grading import core as checks

    real_launch = checks.launch_on_copies

    def launch_then_scribble_past_the_end(*args):
        out, canary, inputs = real_launch(*args)
        canary[0] = 1.0
        return out, canary, inputs

    monkeypatch.setattr(checks, "launch_on_copies", launch_then_scribble_past_the_end)
    with pytest.raises(CheckFailed, match="wrote past the end of `out`.*needs a guard"):
        check_kernel(zip_guarded, add, one_block([4], inputs=2))


@cuda.jit
def scale_one_read(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * a[i]


@cuda.jit
def sum_pairs_twice(out, a):
    """Correct, but reads every element twice."""
    i = cuda.grid(1)
    if i < out.size:
        out[i] = (a[i] + a[i]) / 2 + a[i]


def test_budget_failures_say_correct_but_over_budget(capsys):
    one_read = lambda t: t.assert_reads_per_element("a", exactly=1)  # noqa: E731
    check_kernel(scale_one_read, lambda a: 2 * a, blocks_1d([37], [16]), budget=one_read)
    assert capsys.readouterr().out == "✓ scale_one_read: correct on 1 launch, within its budget\n"
    one_write = lambda t: t.assert_writes_per_element("out", exactly=1)  # noqa: E731
    check_kernel(scale_one_read, lambda a: 2 * a, blocks_1d([37], [16]), budget=[one_read, one_write], quiet=True)
    with pytest.raises(CheckFailed) as failure:
        check_kernel(sum_pairs_twice, lambda a: 2 * a, blocks_1d([37], [16]), budget=[one_write, one_read])
    message = str(failure.value)
    assert message.startswith("sum_pairs_twice is correct but over its budget: every element of `a` should be read "
                              "exactly 1 time, but `a[0]` was read 3 times")  # the rule first, then the launch
    assert "\n  (with grid=(3,), block=(16,)" in message
    wrong_name = lambda t: t.assert_reads_per_element("x", exactly=1)  # noqa: E731
    with pytest.raises(CheckFailed, match=r"touched no array called `x`.*Keep the parameter names the exercise gives \(out, a\)"):
        check_kernel(scale_one_read, lambda a: 2 * a, blocks_1d([37], [16]), budget=wrong_name)


def round_up(n, t):
    return -(-n // t)


def test_check_function_passes_right_answers(capsys):
    check_function(round_up, [((10, 4), 3), ((0, 32), 0)])
    assert capsys.readouterr().out == "✓ round_up: correct on 2 calls\n"


def test_check_function_names_the_call_expected_got_and_hint():
    with pytest.raises(CheckFailed) as failure:
        check_function(lambda n, t: n // t, [((8, 4), 2), ((10, 4), 3)], name="blocks_for", hint="round up")
    assert str(failure.value) == "blocks_for(10, 4) should be 3, got 2\n  Hint: round up"


def test_check_function_wants_the_expected_type():
    with pytest.raises(CheckFailed, match=r"blocks_for\(10, 4\) should return int 3, got float 3.0"):
        check_function(lambda n, t: float(round_up(n, t)), [((10, 4), 3)], name="blocks_for")
    with pytest.raises(CheckFailed) as failure:  # the right value: the hint on the value does not apply
        check_function(lambda n, t: np.int64(round_up(n, t)), [((10, 4), 3)], name="blocks_for", hint="round up")
    assert str(failure.value) == ("blocks_for(10, 4) should return int 3, got np.int64(3): a NumPy integer, which a "
                                  "GPU refuses as a launch's size (numba-cuda takes Python ints only); return int(...)")


def test_check_function_says_not_written_yet_or_names_the_call_that_raised():
    def blocks_for(n, t):
        raise NotImplementedError()

    with pytest.raises(CheckFailed) as failure:
        check_function(blocks_for, [((10, 4), 3)])
    assert str(failure.value) == "blocks_for is not written yet: replace `raise NotImplementedError()` with your code."
    assert failure.value.__suppress_context__
    with pytest.raises(CheckFailed, match=r"^blocks_for\(10, 0\) raised ZeroDivisionError: integer division"):
        check_function(lambda n, t: n // t, [((10, 0), 3)], name="blocks_for")


@cuda.jit
def map_missing_input(out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 1


def test_a_kernel_with_the_wrong_parameters_is_told_which_it_takes_and_which_it_gets():
    with pytest.raises(CheckFailed, match=r"map_missing_input takes 1 parameter \(out\), but the check launches it "
                                          r"with 3: the output, an array of shape \(4,\), an array of shape \(4,\)"):
        check_kernel(map_missing_input, add, one_block([4], inputs=2))


def test_the_count_of_a_kernels_parameters_counts_defaults_and_star_args():
    """numba's own simulator (NUMBA_ENABLE_CUDASIM=1) gives a kernel object called with *args, which has no
    __defaults__: the count of parameters must not ask for them."""
    from gpucourse.grading.core import _takes

    class StarArgs:  # as numba's FakeCUDAKernel
        def __call__(self, *args):
            pass

    def with_default(out, a, scale=1.0):
        pass

    assert _takes(StarArgs(), 3) and _takes(with_default, 2) and _takes(with_default, 3)
    assert not _takes(with_default, 4) and not _takes(with_default, 1)


def test_a_spec_that_returns_nothing_or_the_wrong_shape_is_named():
    with pytest.raises(CheckFailed, match=r"forgets_return returned None: .*is a `return` missing"):
        def forgets_return(a, b):
            a + b
        check_kernel(zip_guarded, forgets_return, one_block([4], inputs=2))
    with pytest.raises(CheckFailed, match=r"returned an array of shape \(3,\), but the case expects \(4,\)"):
        check_kernel(zip_guarded, lambda a, b: (a + b)[1:], one_block([4], inputs=2))
    from gpucourse.grading import check_reduction
    with pytest.raises(CheckFailed, match=r"returned an array of shape \(\), but the case expects \(1,\)"):
        check_reduction(zip_guarded, lambda a, b: (a + b).sum(), [case(1, 4, [(4,), (4,)], out=(1,))])


def test_a_budget_maker_given_uncalled_fails_instead_of_checking_nothing():
    from gpucourse.grading import float32_only, reads_each_element_once
    for maker in (reads_each_element_once, float32_only):
        with pytest.raises(CheckFailed, match=f"budget={maker.__name__} makes a budget but is not one: call it"):
            check_kernel(zip_guarded, add, one_block([4], inputs=2), budget=maker, quiet=True)
    with pytest.raises(CheckFailed, match="is not a budget"):
        check_kernel(zip_guarded, add, one_block([4], inputs=2), budget="float32_only", quiet=True)
    check_kernel(zip_guarded, add, one_block([4], inputs=2), budget=[float32_only(), lambda t: None], quiet=True)


def test_plans_take_one_size_or_several_and_refuse_what_is_not_a_whole_number_in_range():
    assert one_block(7) == one_block([7])
    assert blocks_1d([10], threads=4) == blocks_1d([10], threads=[4])
    assert len(one_block([0, 1], extra_threads=8)) == 2  # an empty array (assignment 1's guard test)
    for plan in (lambda: one_block([-1]), lambda: one_block([7.5]), lambda: one_block("7"),
                 lambda: blocks_1d([10], threads=[0]), lambda: blocks_1d(None, threads=[4])):
        with pytest.raises(CheckFailed, match="must be whole numbers from [01] up, such as"):
            plan()


def test_check_function_reports_an_array_returned_for_a_number():
    with pytest.raises(CheckFailed, match=r"halves\(8\) should be 4, got array\(\[4, 4\]\)"):
        def halves(n):
            return np.array([n // 2, n // 2])
        check_function(halves, [((8,), 4)])


def test_2d_plans_take_one_pair_or_several_and_refuse_what_is_not_a_pair():
    assert one_block_2d((2, 9)) == one_block_2d([(2, 9)])
    assert blocks_2d([(5, 7)], blocks=(4, 4)) == blocks_2d([(5, 7)], blocks=[(4, 4)])
    assert outer([(3, 5)], block=[(4, 4), (2, 8)]) == outer([(3, 5)], (4, 4)) + outer([(3, 5)], (2, 8))
    for plan, what in ((lambda: outer([(3, 5)], block=8), "outer's block"),
                       (lambda: one_block_2d([(2, 9, 1)]), "one_block_2d's shapes"),
                       (lambda: blocks_2d([(5, 7)], blocks=[(0, 4)]), "blocks_2d's blocks")):
        with pytest.raises(CheckFailed, match=f"{what} must be pairs of whole numbers from 1 up, such as "
                                              r"\[\(2, 9\), \(5, 7\)\] \(or one pair, \(5, 7\)\), not"):
            plan()
    with pytest.raises(CheckFailed, match=r"case's block must be a whole number or a tuple of them, such as 32 or "
                                          r"\(8, 4\), not None"):
        case(1, None, [(8,)])


def test_an_empty_plan_or_a_dtype_the_checks_cannot_draw_fails():
    with pytest.raises(CheckFailed, match="zip_guarded was checked on 0 launches, which shows nothing: give the check "
                                          "at least one launch"):
        check_kernel(zip_guarded, add, [])
    with pytest.raises(CheckFailed, match="halves was checked on 0 calls"):
        check_function(lambda n: n // 2, [], name="halves")
    with pytest.raises(CheckFailed, match="the checks draw random floats or integers, not bool: give dtype=np.float32"):
        check_kernel(zip_guarded, add, one_block([4], inputs=2), dtype=bool)


def test_check_function_says_how_to_write_its_calls():
    def blocks_for(n, threads):
        return -(-n // threads)

    for calls in ([(10, 4)], [((10, 4), 3, 1)]):
        with pytest.raises(CheckFailed, match=r"check_function takes \(arguments, answer\) pairs, the arguments in a "
                                              r"tuple, such as \[\(\(10, 4\), 3\)\] for blocks_for\(10, 4\) == 3"):
            check_function(blocks_for, calls)
    with pytest.raises(CheckFailed, match="blocks_for is 3, not a function: write it with def"):
        check_function(3, [((10, 4), 3)], name="blocks_for")
