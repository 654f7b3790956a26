"""Lecture 3's tile-copy puzzle (`check_tile_copies`): the right copies pass; no zeros past an edge, swapped
indices, a copy of the wrong element, a missing barrier and a loop that skips the last partial tile are each named."""

import pytest
from numba import cuda, float32

from gpucourse.grading import CheckFailed, check_tile_copies

TILE = 16


def every_tile(K):
    return (K + TILE - 1) // TILE


def full_tiles(K):  # the last, partial tile skipped
    return K // TILE


def make(copy_a, copy_b, steps=every_tile, first_barrier=True, second_barrier=True, zeroed=False):
    """The lecture's frame with the student's ``steps(K)``, ``copy_a(tile_a, A, row, k, tx, ty)`` and
    ``copy_b(tile_b, B, k, col, tx, ty)``; ``zeroed``: both tiles set to zero once, before the loop."""
    copy_a, copy_b, steps = cuda.jit(device=True)(copy_a), cuda.jit(device=True)(copy_b), cuda.jit(device=True)(steps)

    @cuda.jit
    def tiled_matmul(C, A, B):
        tile_a = cuda.shared.array((TILE, TILE), float32)
        tile_b = cuda.shared.array((TILE, TILE), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        col, row = cuda.grid(2)
        M, K, N = A.shape[0], A.shape[1], B.shape[1]
        acc = float32(0)
        if zeroed:
            tile_a[ty, tx] = float32(0)
            tile_b[ty, tx] = float32(0)
        for step in range(steps(K)):
            copy_a(tile_a, A, row, step * TILE + tx, tx, ty)
            copy_b(tile_b, B, step * TILE + ty, col, tx, ty)
            if first_barrier:
                cuda.syncthreads()
            for j in range(TILE):
                acc += tile_a[ty, j] * tile_b[j, tx]
            if second_barrier:
                cuda.syncthreads()
        if row < M and col < N:
            C[row, col] = acc
    return tiled_matmul


def copy_a(tile_a, A, row, k, tx, ty):
    tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0)


def copy_b(tile_b, B, k, col, tx, ty):
    tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0)


def unguarded_a(tile_a, A, row, k, tx, ty):
    tile_a[ty, tx] = A[row, k]


def no_zeros_a(tile_a, A, row, k, tx, ty):  # past the edge the cell keeps what it held
    if row < A.shape[0] and k < A.shape[1]:
        tile_a[ty, tx] = A[row, k]


def no_zeros_b(tile_b, B, k, col, tx, ty):
    if k < B.shape[0] and col < B.shape[1]:
        tile_b[ty, tx] = B[k, col]


def swapped_a(tile_a, A, row, k, tx, ty):
    tile_a[ty, tx] = A[k, row] if row < A.shape[0] and k < A.shape[1] else float32(0)


def swapped_b(tile_b, B, k, col, tx, ty):
    tile_b[ty, tx] = B[col, k] if k < B.shape[0] and col < B.shape[1] else float32(0)


def test_the_right_copies_pass(capsys):
    check_tile_copies(make(copy_a, copy_b))
    assert capsys.readouterr().out.startswith("✓ tiled_matmul: C = A @ B on 4 shapes")


def test_zeros_in_one_tile_are_enough_along_k():
    # stale values of A past K meet zeros of B: the products add nothing (the tiles were zeroed once before)
    check_tile_copies(make(no_zeros_a, copy_b, zeroed=True))


@pytest.mark.parametrize("kernel, said", [
    (make(copy_a, copy_b, steps=lambda K: 0), "C is all zeros: acc never grew (not written yet?)"),
    (make(unguarded_a, copy_b), "it writes float32(0) there instead of reading"),
    (make(no_zeros_a, no_zeros_b), "which nothing has written"),
    (make(no_zeros_a, no_zeros_b, zeroed=True), "not what the previous step left there"),
    (make(swapped_a, copy_b), "C is A.T @ B: A's indices are swapped"),
    (make(copy_a, swapped_b), "C is A @ B.T: B's indices are swapped"),
    (make(copy_a, copy_b, steps=full_tiles), "the loop skips the last tile, which is partial (K = 40"),
    (make(copy_a, copy_b, second_barrier=False), "one after the multiply-adds"),
    (make(copy_a, copy_b, first_barrier=False), "Two barriers per step"),
], ids=["not written", "no guard", "no zeros", "stale tiles", "A swapped", "B swapped", "last tile skipped", "second barrier",
        "first barrier"])
def test_wrong_copies_are_named(kernel, said):
    with pytest.raises(CheckFailed) as failed:
        check_tile_copies(kernel)
    message = str(failed.value)
    assert said in message
    assert "Traceback" not in message and "Either this thread" not in message
    if "barrier" in said:
        assert "data race on `tile_a" in message


def copy_b_down_columns(tile_b, B, k, col, tx, ty):
    """The right tile, but thread (tx, ty) copies B[k0 + tx, c0 + ty]: a warp reads down columns of B."""
    k, col = k - ty + tx, col - tx + ty
    tile_b[tx, ty] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0)


def test_a_tile_copied_down_the_columns_of_b_is_right_but_not_coalesced():
    with pytest.raises(CheckFailed, match=r"warp reads of `B` touch .* sectors"):
        check_tile_copies(make(copy_a, copy_b_down_columns))


def a_along_ty(tile_a, A, row, k, tx, ty):  # A[row, start + ty]
    k = k - tx + ty
    tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0)


def b_along_tx(tile_b, B, k, col, tx, ty):  # B[start + tx, col]
    k = k - ty + tx
    tile_b[ty, tx] = B[k, col] if k < B.shape[0] and col < B.shape[1] else float32(0)


def a_from_step(tile_a, A, row, k, tx, ty):  # A[row, step + tx]: the step's number, not its first k
    k = (k - tx) // TILE + tx
    tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0)


def a_shifted(tile_a, A, row, k, tx, ty):  # A[row, start + tx + 1]: no copy the check knows
    k = k + 1
    tile_a[ty, tx] = A[row, k] if row < A.shape[0] and k < A.shape[1] else float32(0)


def test_a_copy_of_an_element_the_check_cannot_name_gets_what_each_copy_reads():
    with pytest.raises(CheckFailed, match=r"\n  Check the copies: Thread \(tx, ty\) copies A\[row, start \+ tx\] "
                                          r"into tile_a\[ty, tx\] and B\[start \+ ty, col\] into tile_b\[ty, tx\], "
                                          r"float32\(0\) where the element lies past the edge\.$"):
        check_tile_copies(make(a_shifted, copy_b))


@pytest.mark.parametrize("kernel, wrong", [
    (make(a_along_ty, copy_b), "tile_a[ty, tx] = A[row, start + ty]: that copy reads the wrong element"),
    (make(copy_a, b_along_tx), "tile_b[ty, tx] = B[start + tx, col]: that copy reads the wrong element"),
    (make(a_from_step, copy_b), "tile_a[ty, tx] = A[row, step + tx]: that copy reads the wrong element"),
    (make(a_along_ty, b_along_tx), "tile_a[ty, tx] = A[row, start + ty] and tile_b[ty, tx] = B[start + tx, col]: "
                                   "both copies read the wrong one"),
], ids=["A along ty", "B along tx", "A from step", "both"])
def test_a_copy_of_the_wrong_element_is_named_not_blamed_on_the_partial_tile(kernel, wrong):
    with pytest.raises(CheckFailed) as failed:
        check_tile_copies(kernel)
    message = str(failed.value)
    assert f"C is what the loop gives with {wrong}. Thread (tx, ty) copies A[row, start + tx] into tile_a[ty, tx] " \
           "and B[start + ty, col] into tile_b[ty, tx]" in message
    assert "is not a multiple of" not in message


@cuda.jit
def tiled_matmul_float64_zero(C, A, B):  # the puzzle written out, zeros past the edges as `else 0.`
    # (not `make`'s device functions: there LLVM folds the float64 round trip away, and no float64 is left to find)
    tile_a = cuda.shared.array((TILE, TILE), float32)
    tile_b = cuda.shared.array((TILE, TILE), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    col, row = cuda.grid(2)
    M, K, N = A.shape[0], A.shape[1], B.shape[1]
    acc = float32(0)
    for step in range((K + TILE - 1) // TILE):
        start = step * TILE
        tile_a[ty, tx] = A[row, start + tx] if row < M and start + tx < K else 0.
        tile_b[ty, tx] = B[start + ty, col] if start + ty < K and col < N else 0.
        cuda.syncthreads()
        for j in range(TILE):
            acc += tile_a[ty, j] * tile_b[j, tx]
        cuda.syncthreads()
    if row < M and col < N:
        C[row, col] = acc


def test_a_float64_zero_past_the_edge_is_refused():
    """Lecture 3's tile-copy puzzle: `else 0.` made every copy convert to float64 and back (cvt.f64 and
    cvt.rn.f32.f64 in its PTX), and passed."""
    with pytest.raises(CheckFailed, match=r"computes in float64 on the GPU \(2 cvt.f64, 2 cvt.rn.f32.f64"):
        check_tile_copies(tiled_matmul_float64_zero)
