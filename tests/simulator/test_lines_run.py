"""Which lines of a kernel ran (`trace(lines=True)`, what the cost model reads): the rewrite's markers against
what `sys.settrace` sees of the same launch, line by line."""

import dis
import sys

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import trace


@cuda.jit
def _branchy(out, x, repeats):
    i = cuda.grid(1)
    if i >= out.size:
        return
    total = float32(0)
    for _ in range(repeats):
        total += x[i]
    total += float32(1)  # after a loop that may run no pass
    if x[i] > float32(1e9):
        total = float32(-1)  # no thread takes it
    else:
        total += float32(2)
    j = 0
    while j < 3:
        if j == 1:
            j += 1
            continue
        total += (x[i] if x[i] > float32(1e9)
                  else float32(0.5))  # the first side needed by no thread
        j += 1
    ok = (x[i] < float32(1e9)
          or x[i] > float32(2e9))  # never needed
    if ok and (i < 0 or
               i > 1000000):
        total = float32(0)
    out[i] = total


def _seen_by_settrace(launch) -> tuple[set, set]:
    """(lines known, lines run) of the launch's rewritten code in this file, as `sys.settrace` sees them: every line
    event of it, and the line starts of each of its code objects that ran."""
    known, ran = set(), set()

    def line(frame, event, _):
        if event == "line":
            ran.add(frame.f_lineno)
        return line

    def call(frame, event, _):
        code = frame.f_code
        if "_g_rt" in frame.f_globals and code.co_filename == __file__ and code.co_name != "<module>":
            known.update(number for _, number in dis.findlinestarts(code) if number)
            return line
        return None

    sys.settrace(call)
    try:
        launch()
    finally:
        sys.settrace(None)
    return known, ran


@pytest.mark.parametrize("repeats, threads", [(0, 64), (2, 64), (1, 70)])
def test_the_lines_marked_as_run_are_those_settrace_sees_run(repeats, threads):
    x = np.random.default_rng(repeats).uniform(1, 2, 70).astype(np.float32)
    out = np.full(70, np.nan, np.float32)
    with trace(lines=True) as t:
        _branchy[-(-70 // threads), threads](out, x, repeats)
    np.testing.assert_allclose(out, repeats * x + 4.0, rtol=1e-6)  # 1 + 2 + 0.5 twice, in float32
    known, ran = _seen_by_settrace(lambda: _branchy[-(-70 // threads), threads](out, x, repeats))
    assert {line for _, line in t.last.lines_ran} == ran
    assert {line for _, line in t.last.lines_known} == known
    first = _branchy.py_func.__code__.co_firstlineno
    not_run = {line - first for _, line in t.last.lines_not_run}
    assert {10, 25} <= not_run and (7 in not_run) == (repeats == 0)  # the loop's body only where it ran no pass
    assert (4 in not_run) == (threads * -(-70 // threads) == 70)  # the early return, where a thread is past the end


def test_lines_are_watched_under_a_debugger_or_coverage(monkeypatch):
    """Another tracer set (a debugger, coverage) does not stop the watch: before the markers, every line then
    counted as run."""
    x, out = np.full(70, 1.5, np.float32), np.zeros(70, np.float32)
    with trace(lines=True) as alone:
        _branchy[2, 64](out, x, 0)
    sys.settrace(lambda *_: None)
    try:
        with trace(lines=True) as traced:
            _branchy[2, 64](out, x, 0)
    finally:
        sys.settrace(None)
    assert traced.last.lines_not_run == alone.last.lines_not_run != set()
