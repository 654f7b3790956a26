"""Lecture 4's NHWC loader puzzle (`check_nhwc_rows`): the right kernel passes; the padding read, NCHW's order (of
the columns, or of x's axes), the stride or the padding shift left out, Ho and Wo off by one or taken from x, and
the threads' axes swapped (cells never written), the padding's cells left unwritten are each named in the message,
with no traceback of the course's code."""

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import simulated
from gpucourse.course import try_puzzle
from gpucourse.grading import CheckFailed, check_nhwc_rows, nhwc_rows
from gpucourse.grading.conv import im2col_nhwc_reference
from gpucourse.kernels import conv as cv


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


def make(order="pqc", step=True, shift=True, extra=1, from_x=False, masked=True, nchw_x=False, swapped=False,
         zeroed=True, grid_short=False):
    """The puzzle's kernel, with one of the learners' mistakes switched on."""

    @cuda.jit
    def nhwc_cells(X, x, R, S, stride, padding):
        if swapped:
            n, k = cuda.grid(2)
        else:
            k, n = cuda.grid(2)
        B, H, W, C = x.shape
        s = stride if step else 1
        shifted = padding if shift else 0
        Ho = H if from_x else (H + 2 * padding - R) // stride + extra
        Wo = W if from_x else (W + 2 * padding - S) // stride + extra
        rows = X.shape[0] - 1 if grid_short else X.shape[0]  # grid_short: the last row's threads stop
        if n < rows and k < X.shape[1]:
            b, ho, wo = n // (Ho * Wo), n // Wo % Ho, n % Wo
            if order == "pqc":
                p, q, c = k // (S * C), k // C % S, k % C
            else:
                c, p, q = k // (R * S), k // S % R, k % S
            h, v = ho * s + p - shifted, wo * s + q - shifted
            if nchw_x:
                X[n, k] = x[b, c, h, v] if 0 <= h < H and 0 <= v < W else float32(0)
            elif not zeroed:  # the padding's cells skipped, not set to 0
                if 0 <= h < H and 0 <= v < W:
                    X[n, k] = x[b, h, v, c]
            elif masked:
                X[n, k] = x[b, h, v, c] if 0 <= h < H and 0 <= v < W else float32(0)
            else:
                X[n, k] = x[b, h, v, c]
    return nhwc_cells


def test_the_reference_is_the_nchw_im2col_with_columns_reordered():
    x = np.random.default_rng(1).standard_normal((2, 5, 6, 3))
    X = im2col_nhwc_reference(x, 3, 2, 2, 1)
    Ho, Wo = cv.output_size(5, 3, 2, 1), cv.output_size(6, 2, 2, 1)
    assert X.shape == (2 * Ho * Wo, 3 * 2 * 3)
    n, (p, q, c) = 1 * Ho * Wo + 1 * Wo + 2, (1, 1, 2)  # image 1, output pixel (1, 2), tap (1, 1), channel 2
    assert X[n, (p * 2 + q) * 3 + c] == x[1, 1 * 2 + p - 1, 2 * 2 + q - 1, c]
    assert X[0, 0] == 0  # output (0, 0)'s tap (0, 0) is in the padding


def test_the_plan_runs_threads_along_k():
    plan = nhwc_rows([(1, 5, 7, 3, 3, 2)], stride=2, padding=1, block=(16, 8))[0]
    assert (plan.out, plan.grid, plan.block) == ((12, 18), (2, 2), (16, 8))


def test_the_right_kernel_passes(capsys):
    assert try_puzzle(check_nhwc_rows, make())
    assert capsys.readouterr().out.startswith("✓ nhwc_cells: correct on 6 launches")


UNWRITTEN = "Some cells were never written: one thread per cell of X, `k, n = cuda.grid(2)`"
PADDING_UNWRITTEN = ("The cells whose tap falls in the padding were never written: they must be 0, so write\n"
                     "  X[n, k] = float32(0) there (the check fills X with NaN before the launch: a skipped cell stays NaN).")


@pytest.mark.parametrize("mistake, said", [
    (dict(masked=False), "is in the padding of the"),
    (dict(order="cpq"), "NCHW's order k = (c, p, q)"),
    (dict(nchw_x=True), "not x[b, c, h, v], NCHW's order"),
    (dict(step=False), "The stride (2) is missing"),
    (dict(shift=False), "The padding shift is missing"),
    (dict(extra=0), "is past the batch of 1: the rows are n = (b·Ho + h)·Wo + w, and this layer has\n  Ho = 5, Wo = 7"),
    (dict(extra=2), "this layer has Ho = 5, Wo = 7"),
    (dict(from_x=True), "Ho = 6, Wo = 10: Ho = (H"),
    (dict(swapped=True), UNWRITTEN),
    (dict(grid_short=True), UNWRITTEN),  # the grid misses cells inside the image too: the old message
    (dict(zeroed=False), PADDING_UNWRITTEN),
])
def test_each_mistake_is_named(mistake, said, capsys):
    assert not try_puzzle(check_nhwc_rows, make(**mistake))
    printed = capsys.readouterr()
    assert printed.out.startswith("✗ Not yet: ") and said in printed.out, printed.out
    assert "Traceback" not in printed.out + printed.err


def test_a_padding_cell_left_unzeroed_is_named():
    @cuda.jit
    def clamped(X, x, R, S, stride, padding):  # reads the nearest pixel instead of a padding zero
        k, n = cuda.grid(2)
        B, H, W, C = x.shape
        Ho, Wo = (H + 2 * padding - R) // stride + 1, (W + 2 * padding - S) // stride + 1
        if n < X.shape[0] and k < X.shape[1]:
            b, ho, wo = n // (Ho * Wo), n // Wo % Ho, n % Wo
            p, q, c = k // (S * C), k // C % S, k % C
            h = min(max(ho * stride + p - padding, 0), H - 1)
            v = min(max(wo * stride + q - padding, 0), W - 1)
            X[n, k] = x[b, h, v, c]

    with pytest.raises(CheckFailed, match="Every wrong cell is a tap in the padding"):
        check_nhwc_rows(clamped)


def test_a_guard_on_the_wrong_axes_speaks_of_the_checks_not_of_hidden_tests():
    """A lecture's puzzle has no hidden tests, and this one runs stride 3 too: "the hidden tests use strides of 1
    and 2" was wrong twice over."""
    @cuda.jit
    def guard_swapped(X, x, R, S, stride, padding):
        k, n = cuda.grid(2)
        B, H, W, C = x.shape
        Ho, Wo = (H + 2 * padding - R) // stride + 1, (W + 2 * padding - S) // stride + 1
        if k < X.shape[0] and n < X.shape[1]:
            b, ho, wo = n // (Ho * Wo), n // Wo % Ho, n % Wo
            p, q, c = k // (S * C), k // C % S, k % C
            h, v = ho * stride + p - padding, wo * stride + q - padding
            X[n, k] = x[b, h, v, c] if 0 <= h < H and 0 <= v < W else float32(0)

    with pytest.raises(CheckFailed) as failed:
        check_nhwc_rows(guard_swapped)
    message = str(failed.value)
    assert "A thread past the end of `X` needs a guard. If it has one, the index it computed is wrong" in message
    assert "hidden tests" not in message and "other strides and paddings" in message
