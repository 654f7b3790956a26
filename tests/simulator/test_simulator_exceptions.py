"""Exceptions a kernel raises carry numba's message; debug=True divides by zero as numba's Python error
model does; a launch that does not finish stops at its step budget."""

import inspect

import numpy as np
import pytest
from numba import cuda

from gpucourse import simulated
from gpucourse.simulator import TIME_BUDGET_ENV, EndlessLoop, TooSlowToSimulate, step_budget


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


class CourseError(Exception):
    pass


@cuda.jit(debug=True, opt=False)
def raises_in_one_thread(flags, code):
    i = cuda.grid(1)
    if i < flags.size and flags[i]:
        if code == 1:
            raise CourseError
        raise CourseError("bad flag")


def test_user_exception_names_function_file_line_and_thread():
    flags = np.zeros(100, np.int32)
    raises_in_one_thread[4, 32](flags, 1)  # nothing raised
    flags[70] = 1  # block 2, thread 6
    with pytest.raises(CourseError) as caught:
        raises_in_one_thread[4, 32](flags, 1)
    line = raises_in_one_thread.py_func.__code__.co_firstlineno + 5  # the decorator's line, then 5 on
    assert str(caught.value) == (f"In function 'raises_in_one_thread', file {__file__}, line {line}, "
                                 "tid=[0, 0, 6] ctaid=[0, 0, 2]")
    with pytest.raises(CourseError, match=r"line \d+, tid=\[0, 0, 6\] ctaid=\[0, 0, 2\]: bad flag$"):
        raises_in_one_thread[4, 32](flags, 2)


@cuda.jit(debug=True, opt=False)
def quotients_debug(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] // b[i]
        out[i] += 1


@cuda.jit
def quotients(out, a, b):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a[i] // b[i]
        out[i] += 1


@pytest.mark.parametrize("dtype", [np.int32, np.float64])
def test_division_by_zero_raises_only_in_debug(dtype):
    rng = np.random.default_rng(1)
    a, b = rng.integers(1, 50, 77).astype(dtype), rng.integers(1, 9, 77).astype(dtype)
    out = np.full(77, -7, dtype)
    quotients_debug[3, 32](out, a, b)
    np.testing.assert_array_equal(out, a // b + 1)
    b[40] = 0  # block 1, thread 8: the other lanes' zero divisors are masked out by the guard
    out[:] = -7
    with pytest.raises(ZeroDivisionError, match=r"tid=\[0, 0, 8\] ctaid=\[0, 0, 1\]: division by zero"):
        quotients_debug[3, 32](out, a, b)
    assert (out == -7).all()  # the launch stopped at the division, before any store
    quotients[3, 32](out, a, b)  # no error model without debug: no exception


@cuda.jit(debug=True, opt=False)
def divides_in_a_header(out, a, b, where):
    i = cuda.grid(1)
    if where == 0 and a[i] // b[i] > 0:
        out[i] += 1
    if where != 1:
        out[i] += 2
    elif a[i] // b[i] > 0:
        out[i] += 3
    k = 0
    while where == 2 and k < a[i] // b[i]:
        k += 1
        out[i] += k
    for k in range(a[i] // b[i] if where == 3 else 1):
        out[i] += k
        cuda.syncthreads()


@pytest.mark.parametrize("where, header", [(0, "if "), (1, "elif "), (2, "while "), (3, "for ")])
def test_an_error_in_a_header_names_the_header_s_line(where, header):
    """As numba does: the line of the ``if``, ``elif``, ``while`` or ``for`` header, not one of its body."""
    lines, first = inspect.getsourcelines(divides_in_a_header.py_func)
    line = first + next(k for k, text in enumerate(lines) if text.strip().startswith(header))
    a, b = np.ones(4, np.int32), np.zeros(4, np.int32)
    with pytest.raises(ZeroDivisionError, match=rf", line {line}, tid=\[0, 0, 0\] ctaid=\[0, 0, 0\]: division by"):
        divides_in_a_header[1, 4](np.zeros(4, np.int32), a, b, where)


@cuda.jit
def waits_for_a_flag(flag, out):
    i = cuda.grid(1)
    steps = 0
    while flag[0] == 0:
        steps += 1
    out[i] = steps


@cuda.jit
def counts(out, n):
    i = cuda.grid(1)
    total = 0
    for k in range(n):
        total += k
    out[i] = total


def test_endless_loop_stops_at_the_step_budget():
    with step_budget(500), pytest.raises(EndlessLoop) as caught:
        waits_for_a_flag[2, 32](np.zeros(1, np.int32), np.zeros(64, np.int32))
    message = str(caught.value)
    assert message.startswith("kernel `waits_for_a_flag`, line ")
    assert "while flag[0] == 0:" in message and "did not finish: an endless loop?" in message
    out = np.zeros(64, np.int64)
    with step_budget(500):
        counts[2, 32](out, 500)  # exactly the budget: it finishes
        np.testing.assert_array_equal(out, 500 * 499 // 2)
        with pytest.raises(EndlessLoop, match="ran 500 loop iterations"):
            counts[2, 32](out, 501)


def test_a_launch_whose_loops_run_past_the_time_budget_stops_with_a_message(monkeypatch):
    """A GPU-sized problem on a laptop: a message after the budget, not a notebook that seems to hang."""
    out = np.zeros(64, np.int64)
    monkeypatch.setenv(TIME_BUDGET_ENV, "0.05")
    with pytest.raises(TooSlowToSimulate) as caught:
        counts[2, 32](out, 900_000)  # under the step budget; a few seconds of loop iterations
    message = str(caught.value)
    assert message.startswith("kernel `counts`, line ") and "for k in range(n):" in message
    assert "the launch of 64 threads still ran after 0.05 s (the simulator's time budget)" in message
    assert f"allow more time with {TIME_BUDGET_ENV}=<seconds>" in message
    monkeypatch.setenv(TIME_BUDGET_ENV, "60")
    counts[2, 32](out, 500)  # well within it
    np.testing.assert_array_equal(out, 500 * 499 // 2)
