"""Lecture 6's loss-scaling puzzle (`check_scaled_gradient`): float32 arithmetic rounded once passes; rounding to
fp16 before the scale, dividing by the scale and float64 arithmetic are each named."""

import pytest
from numba import cuda, float32
from numba.types import float16

from gpucourse.grading import CheckFailed, check_scaled_gradient


@cuda.jit
def scaled_gradient(g, out, y, scale):
    i = cuda.grid(1)
    if i < g.shape[0]:
        g[i] = (out[i] - y[i]) * (scale / float32(g.shape[0]))


@cuda.jit
def rounded_before_scaling(g, out, y, scale):  # the gradient stored in fp16 first, then scaled
    i = cuda.grid(1)
    if i < g.shape[0]:
        g[i] = float16((out[i] - y[i]) / float32(g.shape[0])) * scale


@cuda.jit
def divided_by_scale(g, out, y, scale):
    i = cuda.grid(1)
    if i < g.shape[0]:
        g[i] = (out[i] - y[i]) / float32(g.shape[0]) / scale


@cuda.jit
def not_divided_by_n(g, out, y, scale):
    i = cuda.grid(1)
    if i < g.shape[0]:
        g[i] = (out[i] - y[i]) * scale


@cuda.jit
def divided_by_an_int(g, out, y, scale):  # float32 / int64 is a float64
    i = cuda.grid(1)
    if i < g.shape[0]:
        g[i] = scale * (out[i] - y[i]) / g.shape[0]


@cuda.jit
def float64_literal(g, out, y, scale):
    i = cuda.grid(1)
    if i < g.shape[0]:
        g[i] = scale * (out[i] - y[i]) * (1.0 / float32(g.shape[0]))


@cuda.jit
def all_in_fp16(g, out, y, scale):  # float16(2**16) is inf
    i = cuda.grid(1)
    if i < g.shape[0]:
        g[i] = float16((out[i] - y[i]) / float32(g.shape[0])) * float16(scale)


@cuda.jit
def not_written(g, out, y, scale):
    i = cuda.grid(1)


def test_float32_rounded_once_passes(capsys):
    check_scaled_gradient(scaled_gradient)
    assert capsys.readouterr().out.startswith("✓ scaled_gradient: correct on 3 launches")


@pytest.mark.parametrize("kernel, said", [
    (not_written, "never written, or only added to: it still holds the poison value"),
    (rounded_before_scaling, "rounds to zero before the scale can lift it"),
    (divided_by_scale, "g is the gradient divided by the scale"),
    (not_divided_by_n, "g is n = 1000 times too large"),
    (divided_by_an_int, "computes in float64"),
    (float64_literal, "computes in float64"),
    (all_in_fp16, "is past fp16's largest value (65504) when it is an fp16 itself"),
])
def test_wrong_answers_are_named(kernel, said):
    with pytest.raises(CheckFailed) as failed:
        check_scaled_gradient(kernel)
    assert said in str(failed.value)
