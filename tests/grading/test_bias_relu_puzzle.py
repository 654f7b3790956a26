"""Lecture 5's bias-and-ReLU puzzle (`check_bias_relu`): one pass passes; the bias by row, the ReLU before the
bias, a second pass over Y and a second read of C are each named."""

import pytest
from numba import cuda, float32

from gpucourse.grading import CheckFailed, check_bias_relu


@cuda.jit
def bias_relu(Y, C, bias):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        Y[row, col] = max(C[row, col] + bias[col], float32(0))


@cuda.jit
def writes_c(Y, C, bias):  # the ReLU in place, in the input
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        C[row, col] = max(C[row, col] + bias[col], float32(0))
        Y[row, col] = C[row, col]


@cuda.jit
def bias_by_row(Y, C, bias):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        Y[row, col] = max(C[row, col] + bias[row], float32(0))


@cuda.jit
def relu_first(Y, C, bias):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        Y[row, col] = max(C[row, col], float32(0)) + bias[col]


@cuda.jit
def two_passes(Y, C, bias):  # add_bias then relu, on Y
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        Y[row, col] = C[row, col] + bias[col]
        Y[row, col] = max(Y[row, col], float32(0))


@cuda.jit
def rereads_c(Y, C, bias):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        Y[row, col] = C[row, col] + bias[col] if C[row, col] + bias[col] > 0 else float32(0)


@cuda.jit
def not_written(Y, C, bias):
    col, row = cuda.grid(2)


def test_one_pass_passes(capsys):
    check_bias_relu(bias_relu)
    assert capsys.readouterr().out.startswith("✓ bias_relu: Y = relu(C + bias) on 8 launches, in one pass")


@pytest.mark.parametrize("kernel, said", [
    (not_written, "no element of this row was written (not written yet?)"),
    (bias_by_row, "the bias is indexed by the row"),
    (relu_first, "the row is relu(C) + bias: the ReLU comes after the bias"),
    (two_passes, "`Y` (2310 elements) was read 2310 times in global memory, more than 0"),
    (rereads_c, "`C` (2310 elements) was read 3510 times in global memory, more than 2310 (1 per element)"),
])
def test_wrong_answers_are_named(kernel, said):
    with pytest.raises(CheckFailed) as failed:
        check_bias_relu(kernel)
    assert said in str(failed.value)


def test_bias_by_row_past_the_columns_is_named():
    @cuda.jit
    def bias_by_row_first(Y, C, bias):  # right on the first shape, more rows than columns in the second
        col, row = cuda.grid(2)
        if row < C.shape[0] and col < C.shape[1]:
            Y[row, col] = max(C[row, col] + (bias[col] if C.shape[0] < C.shape[1] else bias[row]), float32(0))

    with pytest.raises(CheckFailed) as failed:
        check_bias_relu(bias_by_row_first)
    assert "index it by the column, bias[col]" in str(failed.value)
    assert "Either this thread" not in str(failed.value)


@cuda.jit
def relu_with_a_float64_zero(Y, C, bias):
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        Y[row, col] = max(C[row, col] + bias[col], 0.0)


def test_a_relu_against_a_float64_zero_is_told_it_computes_in_float64():
    with pytest.raises(CheckFailed, match="computes in float64"):
        check_bias_relu(relu_with_a_float64_zero)


def test_a_kernel_that_writes_its_input_is_told_the_name_of_its_output():
    with pytest.raises(CheckFailed, match=r"writes_c changed its input `C` with .*: a kernel must only write to its "
                                          r"output, `Y`\."):
        check_bias_relu(writes_c)


@pytest.mark.parametrize("kernel", [bias_by_row, relu_first])
def test_a_kernel_wrong_with_every_block_is_not_told_it_assumes_its_block(kernel):
    """The 1 x 1 input, where bias[row] is bias[col] and most ReLUs change nothing, is right with any block: it
    says nothing about the block shape, and the hint that the kernel assumes one sent students after the wrong bug."""
    with pytest.raises(CheckFailed) as failed:
        check_bias_relu(kernel)
    assert "With block=" not in str(failed.value) and "cuda.blockDim" not in str(failed.value)
