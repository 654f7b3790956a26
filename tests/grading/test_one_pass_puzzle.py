"""Lecture 5's online-softmax puzzle (`check_row_kernel` over `thread_rows`, x read twice at most): the right
update passes; a sum never rescaled, a masked row's NaN, a separate pass for the max and a float64 sum are each
named."""

import math

import pytest
from numba import cuda, float32

from gpucourse.grading import CheckFailed, check_row_kernel, float32_only, global_traffic, thread_rows
from gpucourse.kernels import fusion as fu

ONE_PASS = [global_traffic("x", reads=2, writes=0, why="one pass for m and l, one to write y"),
            global_traffic("y", reads=0, writes=1), float32_only()]  # as the lecture's cell has them
PLANS = thread_rows([(3, 1), (40, 33), (9, 200)], threads=(32, 8))


def make(first_pass):
    """The lecture's kernel with ``first_pass(x, r) -> (m, l)`` in place of its first loop."""
    first_pass = cuda.jit(device=True)(first_pass)

    @cuda.jit
    def softmax_one_pass(y, x):
        r = cuda.grid(1)
        if r < x.shape[0]:
            m, l = first_pass(x, r)
            for j in range(x.shape[1]):
                y[r, j] = math.exp(x[r, j] - fu.safe_max(m)) * fu.reciprocal(l)
    return softmax_one_pass


def online(update):
    """The lecture's first loop, with ``update(m, l, v) -> (m, l)`` as the student's lines."""
    update = cuda.jit(device=True)(update)

    def first_pass(x, r):
        m, l = float32(-math.inf), float32(0)
        for j in range(x.shape[1]):
            m, l = update(m, l, x[r, j])
        return m, l
    return first_pass


def right(m, l, v):
    m_new = max(m, v)
    if m_new == -math.inf:
        return m, l
    return m_new, l * math.exp(m - m_new) + math.exp(v - m_new)


def never_rescaled(m, l, v):
    m_new = max(m, v)
    if m_new == -math.inf:
        return m, l
    return m_new, l + math.exp(v - m_new)


def float64_sum(m, l, v):  # 1.0 is a float64: the sum becomes one
    m_new = max(m, v)
    if m_new == -math.inf:
        return m, l
    return m_new, l * math.exp(m - m_new) + 1.0 * math.exp(v - m_new)


def masked_nan(m, l, v):  # exp(-inf - (-inf)) on a row that starts masked
    m_new = max(m, v)
    return m_new, l * math.exp(m - m_new) + math.exp(v - m_new)


def test_thread_rows_covers_each_row_with_one_thread():
    plan = thread_rows([(40, 3)], threads=(32,))[0]
    assert (plan.shape, plan.grid, plan.block) == ((40, 3), (2,), (32,))


def test_the_right_update_passes():
    check_row_kernel(make(online(right)), fu.softmax_reference, PLANS, budget=ONE_PASS, quiet=True)


@pytest.mark.parametrize("update, said", [
    (never_rescaled, "rescale the sum so far by exp(m_old - m_new)"),
    (masked_nan, "a partly masked row"),
    (float64_sum, "computes in float64 on the GPU"),
])
def test_wrong_updates_are_named(update, said):
    with pytest.raises(CheckFailed) as failed:
        check_row_kernel(make(online(update)), fu.softmax_reference, PLANS, budget=ONE_PASS, quiet=True)
    assert said in str(failed.value) and "times 0:" not in str(failed.value)


def max_first(x, r):  # a pass for the max, another for the sum
    m, l = float32(-math.inf), float32(0)
    for j in range(x.shape[1]):
        m = max(m, x[r, j])
    for j in range(x.shape[1]):
        l += math.exp(x[r, j] - fu.safe_max(m))
    return m, l


def test_a_separate_pass_for_the_max_is_over_the_budget():
    with pytest.raises(CheckFailed, match=r"`x` .* more than .*\(2 per element\)"):
        check_row_kernel(make(max_first), fu.softmax_reference, PLANS, budget=ONE_PASS, quiet=True)
