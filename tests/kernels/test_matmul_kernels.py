"""Module 3's reference matmul kernels: any shapes, broadcast batches, race-free, within budgets."""

import numpy as np
import pytest

from gpucourse import simulated, trace
from gpucourse.kernels import matmul as mm


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


rng = np.random.default_rng(7)

SHAPES = [  # (batch of A, batch of B, M, K, N): none a multiple of a tile but one
    (1, 1, 64, 64, 64),
    (3, 1, 37, 50, 29),
    (1, 2, 5, 70, 3),
    (2, 2, 1, 1, 1),
    (1, 1, 130, 33, 67),
]


def operands(b1, b2, M, K, N):
    A = rng.standard_normal((b1, M, K)).astype(np.float32) * rng.uniform(0.5, 2)
    B = rng.standard_normal((b2, K, N)).astype(np.float32) * rng.uniform(0.5, 2)
    return A, B


@pytest.mark.parametrize("kernel", mm.KERNELS, ids=lambda k: k.py_func.__name__)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_matmul_any_shape_and_batch(kernel, shape):
    A, B = operands(*shape)
    C = np.full(mm.output_shape(A, B), np.nan, np.float32)
    mm.launch(kernel, C, A, B)
    expected = np.matmul(A.astype(np.float64), B.astype(np.float64))
    np.testing.assert_allclose(C, expected, rtol=1e-4, atol=1e-4 * np.sqrt(shape[3]))


def traced(kernel, M=48, K=80, N=40):
    A, B = operands(1, 1, M, K, N)
    C = np.full((1, M, N), np.nan, np.float32)
    with trace() as t:
        mm.launch(kernel, C, A, B)
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-3)
    return t


def test_naive_reads_each_row_of_a_for_every_column_and_does_not_coalesce():
    t = traced(mm.matmul_naive)
    t.assert_reads_per_element("A", exactly=40)  # every element of A once per column of C
    assert t.sectors_per_request("A") == 16 and t.sectors_per_request("C", "write") == 16  # a warp: 16 rows
    coalesced = traced(mm.matmul_coalesced)
    assert coalesced.sectors_per_request("B") <= 2 and coalesced.sectors_per_request("C", "write") <= 4
    coalesced.assert_reads_per_thread("A", at_most=80)


def test_tiling_divides_global_reads_by_the_tile():
    t = traced(mm.matmul_tiled)
    t.assert_reads_per_thread("A", at_most=-(-80 // mm.TILE))  # one element per tile
    t.assert_reads_per_element("A", exactly=-(-40 // mm.TILE))  # once per block column
    t.assert_reads_per_element("B", exactly=-(-48 // mm.TILE))
    t.assert_no_bank_conflicts()
    assert t.barriers(0) == 2 * -(-80 // mm.TILE)


def test_register_tiling_reads_each_input_once_per_block_tile():
    t = traced(mm.matmul_register_tiled, M=70, K=40, N=130)
    t.assert_reads_per_element("A", exactly=-(-130 // mm.BN))
    t.assert_reads_per_element("B", exactly=-(-70 // mm.BM))
    assert t.bank_conflicts("tile_a", "read") == t.bank_conflicts("tile_b", "read") == 1
    assert t.sectors_per_request("A") <= 4 and t.sectors_per_request("B") <= 4
    shared_reads = t.reads_per_thread("tile_a") + t.reads_per_thread("tile_b")
    assert shared_reads.max() == -(-40 // mm.BK) * mm.BK * (mm.TM + mm.TN)  # TM + TN reads per k for TM * TN FMAs


def test_matmul_takes_matrices_and_explains_bad_shapes():
    A, B = rng.standard_normal((5, 7)), rng.standard_normal((7, 3))
    np.testing.assert_allclose(mm.matmul(A, B, mm.matmul_tiled), A @ B, rtol=1e-4, atol=1e-4)
    with pytest.raises(ValueError, match=r"A's columns \(7\) must equal B's rows \(5\)"):
        mm.output_shape(np.zeros((1, 5, 7)), np.zeros((1, 5, 3)))
    with pytest.raises(ValueError, match="batches of 2 and 3 do not broadcast"):
        mm.output_shape(np.zeros((2, 5, 7)), np.zeros((3, 7, 3)))
    A3, B3 = A[None].astype(np.float32), B[None].astype(np.float32)
    with pytest.raises(ValueError, match=r"C has shape \(1, 3, 5\); A of \(1, 5, 7\) times B of \(1, 7, 3\) gives "
                                         r"\(1, 5, 3\)"):
        mm.launch(mm.matmul_tiled, np.zeros((1, 3, 5), np.float32), A3, B3)  # transposed C: would leave it half-written
    np.testing.assert_array_equal(mm.matmul([[1, 2]], [[3], [4]]), [[11]])  # lists, as NumPy takes them
    assert mm.matmul(np.zeros((0, 7)), B).shape == (0, 3)  # no rows: an empty product, no launch
    with pytest.raises(ValueError, match=r"matmul multiplies matrices \(2-D\) or batches of them \(3-D\), got 1-D "
                                         r"and 1-D: write a vector v as a matrix of one row, v\[None\]"):
        mm.matmul(np.ones(3), np.ones(3))
