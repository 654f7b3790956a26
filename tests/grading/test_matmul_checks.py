"""gpucourse.grading.matmul: launch plans and budgets that tell a tiled, coalesced, coarsened kernel from a naive one."""

import math

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import simulated, trace
from gpucourse.course import try_puzzle
from gpucourse.grading import (CheckFailed, case, check_block_step, check_matrix_kernel, check_transposed_product,
                               coalesced, coarsened_grid,
                               conflict_free_shared_memory, float32_only, matmul_tiles, no_local_memory, no_shared_memory,
                               reads_each_element_once, reads_per_thread, tiled_reads, transpose_tiles, warp_per_row,
                               warp_reads_its_row, writes_each_element_once, register_tiles, shared_reads_per_fma)
from gpucourse.kernels import matmul as mm
from gpucourse.simulator import BudgetExceeded

TILE = 32
PADDED = TILE + 1
COARSEN = 4


@pytest.fixture(autouse=True)
def on_the_simulator():
    """Races and bank conflicts are the simulator's: run there on a GPU machine too."""
    with simulated():
        yield


def transpose_spec(a):
    return a.T


def matmul_spec(A, B):
    return A @ B


def matvec_spec(A, x):
    return A @ x


def weight_grad_spec(G, X):
    return np.einsum("zmn,zmk->nk", G, X)


# ---------------------------------------------------------------- kernels under test


def transpose_through_shared_memory(width, across=True):
    """A tiled transpose whose tile rows hold ``width`` elements: TILE (conflicts) or PADDED (none); without
    ``across``, the tile read as it was written (tile[ty, tx]): tiles in place, not transposed inside."""

    @cuda.jit
    def transpose(out, a):
        tile = cuda.shared.array((TILE, width), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row0, col0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
        if row0 + ty < a.shape[0] and col0 + tx < a.shape[1]:
            tile[ty, tx] = a[row0 + ty, col0 + tx]
        cuda.syncthreads()
        if col0 + ty < out.shape[0] and row0 + tx < out.shape[1]:
            out[col0 + ty, row0 + tx] = tile[tx, ty] if across else tile[ty, tx]

    return transpose


transpose_padded = transpose_through_shared_memory(PADDED)
transpose_unpadded = transpose_through_shared_memory(TILE)


@cuda.jit
def transpose_naive(out, a):
    c, r = cuda.grid(2)
    if r < a.shape[0] and c < a.shape[1]:
        out[c, r] = a[r, c]


@cuda.jit
def matvec_shuffles(y, A, x):
    lane = cuda.threadIdx.x
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if row < A.shape[0]:
        value = float32(0)
        for c in range(lane, A.shape[1], 32):
            value += A[row, c] * x[c]
        offset = 16
        while offset > 0:
            value += cuda.shfl_down_sync(0xFFFFFFFF, value, offset)
            offset //= 2
        if lane == 0:
            y[row] = value


@cuda.jit
def matvec_swapped(y, A, x):  # lane and row swapped: the lanes of one warp take different rows
    lane = cuda.threadIdx.y
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.x
    if row < A.shape[0]:
        value = float32(0)
        for c in range(lane, A.shape[1], 32):
            value += A[row, c] * x[c]
        offset = 16
        while offset > 0:
            value += cuda.shfl_down_sync(0xFFFFFFFF, value, offset)
            offset //= 2
        if lane == 0:
            y[row] = value


@cuda.jit
def matvec_lane_zero(y, A, x):
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if row < A.shape[0] and cuda.threadIdx.x == 0:
        value = float32(0)
        for c in range(A.shape[1]):
            value += A[row, c] * x[c]
        y[row] = value


@cuda.jit
def matvec_shared_tree(y, A, x):
    partial = cuda.shared.array((32, 32), float32)
    lane, w = cuda.threadIdx.x, cuda.threadIdx.y
    row = cuda.blockIdx.x * cuda.blockDim.y + w
    value = float32(0)
    if row < A.shape[0]:
        for c in range(lane, A.shape[1], 32):
            value += A[row, c] * x[c]
    partial[w, lane] = value
    cuda.syncthreads()
    stride = 16
    while stride > 0:
        if lane < stride:
            partial[w, lane] += partial[w, lane + stride]
        cuda.syncthreads()
        stride //= 2
    if lane == 0 and row < A.shape[0]:
        y[row] = partial[w, 0]


def weight_grad(step, reuse):
    """Each thread's COARSEN columns ``first + j * step``: step 32 (strided) or 1 (neighbours, with first * 4)."""

    @cuda.jit
    def kernel(dW, G, X):
        acc = cuda.local.array(COARSEN, float32)
        for j in range(COARSEN):
            acc[j] = float32(0)
        n = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
        t = cuda.blockIdx.x * 32 + cuda.threadIdx.x
        first = (t // 32) * 32 * COARSEN + t % 32 if step == 32 else t * COARSEN
        if n < dW.shape[0]:
            for z in range(G.shape[0]):
                for m in range(G.shape[1]):
                    g = G[z, m, n]
                    for j in range(COARSEN):
                        k = first + j * step
                        if k < dW.shape[1]:
                            acc[j] += (g if reuse else G[z, m, n]) * X[z, m, k]
            for j in range(COARSEN):
                k = first + j * step
                if k < dW.shape[1]:
                    dW[n, k] = acc[j]

    return kernel


weight_grad_strided = weight_grad(32, reuse=True)
weight_grad_neighbours = weight_grad(1, reuse=True)
weight_grad_rereads = weight_grad(32, reuse=False)


@cuda.jit
def weight_grad_in_dw(dW, G, X):  # right and strided, but its sums live in dW: a read and a write per term
    n = cuda.blockIdx.y * cuda.blockDim.y + cuda.threadIdx.y
    t = cuda.blockIdx.x * 32 + cuda.threadIdx.x
    first = (t // 32) * 32 * COARSEN + t % 32
    if n < dW.shape[0]:
        for j in range(COARSEN):
            if first + j * 32 < dW.shape[1]:
                dW[n, first + j * 32] = float32(0)
        for z in range(G.shape[0]):
            for m in range(G.shape[1]):
                g = G[z, m, n]
                for j in range(COARSEN):
                    k = first + j * 32
                    if k < dW.shape[1]:
                        dW[n, k] += g * X[z, m, k]


# ---------------------------------------------------------------- launch plans


def test_launch_plans_fix_grid_block_and_shapes():
    (t,) = transpose_tiles([(40, 72)], tile=32)
    assert t.grid == (3, 2) and t.block == (32, 32) and t.inputs == ((40, 72),) and t.out == (72, 40)
    nn, nt = matmul_tiles([(3, 1, 37, 50, 29)], tile=16) + matmul_tiles([(1, 2, 5, 7, 40)], transpose_b=True)
    assert nn.grid == (2, 3, 3) and nn.block == (16, 16) and nn.inputs == ((3, 37, 50), (1, 50, 29))
    assert nn.out == (3, 37, 29)
    assert nt.grid == (2, 1, 2) and nt.inputs == ((1, 5, 7), (2, 40, 7)) and nt.out == (2, 5, 40)
    with pytest.raises(ValueError, match="batches of 2 and 3 do not broadcast"):
        matmul_tiles([(2, 3, 4, 4, 4)])
    one, eight = warp_per_row([(37, 5)], warps=[1, 8])
    assert one.grid == (37,) and one.block == (32, 1) and eight.grid == (5,) and eight.block == (32, 8)
    assert one.inputs == ((37, 5), (5,)) and one.out == (37,)
    (c,) = coarsened_grid([(2, 30, 20, 200)], coarsen=4)
    assert c.grid == (2, 3) and c.block == (32, 8) and c.inputs == ((2, 30, 20), (2, 30, 200)) and c.out == (20, 200)


# ---------------------------------------------------------------- correctness


def test_matrix_products_pass_within_float32_rounding_that_grows_with_k(capsys):
    """The lecture's kernels sum in other orders than NumPy; K up to 1000 passes, a missing term does not."""
    plan = matmul_tiles([(1, 1, 1, 1, 1), (2, 1, 37, 50, 29), (1, 3, 20, 1000, 17)], tile=mm.TILE)
    check_matrix_kernel(mm.matmul_tiled, matmul_spec, plan)
    check_matrix_kernel(mm.matmul_coalesced, matmul_spec, plan, quiet=True)
    assert "✓ matmul_tiled: correct on 3 launches" in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=r"matmul_tiled gave a wrong result .* inputs \(1, 20, 1000\), "
                                          r"\(3, 1000, 17\) -> out \(3, 20, 17\)"):
        check_matrix_kernel(mm.matmul_tiled, lambda A, B: A[:, :, :-1] @ B[:, :-1, :], plan[2:])


def test_a_missing_barrier_is_a_data_race():
    @cuda.jit
    def transpose_without_barrier(out, a):
        tile = cuda.shared.array((TILE, PADDED), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        if ty < a.shape[0] and tx < a.shape[1]:
            tile[ty, tx] = a[ty, tx]
        if ty < out.shape[0] and tx < out.shape[1]:
            out[ty, tx] = tile[tx, ty]

    with pytest.raises(CheckFailed, match=r"data race on `tile\[.*no barrier orders them"):
        check_matrix_kernel(transpose_without_barrier, transpose_spec, transpose_tiles([(5, 3)]))


def test_a_transpose_write_that_is_wrong_on_whole_tiles_too_is_told_what_to_check():
    @cuda.jit
    def transpose_copied_in_place(out, a):  # neither moved nor transposed inside: out = a on a square
        tile = cuda.shared.array((TILE, PADDED), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        row0, col0 = cuda.blockIdx.y * TILE, cuda.blockIdx.x * TILE
        if row0 + ty < a.shape[0] and col0 + tx < a.shape[1]:
            tile[ty, tx] = a[row0 + ty, col0 + tx]
        cuda.syncthreads()
        if row0 + ty < out.shape[0] and col0 + tx < out.shape[1]:
            out[row0 + ty, col0 + tx] = tile[ty, tx]

    with pytest.raises(CheckFailed, match=r"which nothing has written .*\n  The write reads cells the copy left out\. "
                                          r"Check the write: it reads the tile across \(tile\[tx, ty\]\), its guard is "
                                          r"against out's shape and its block offsets are swapped from the copy's"):
        check_matrix_kernel(transpose_copied_in_place, transpose_spec, transpose_tiles([(5, 3)]))


# ---------------------------------------------------------------- budgets


def test_transpose_budgets_coalesced_both_ways_and_conflict_free():
    plan = transpose_tiles([(40, 72), (17, 24), (1, 1)])
    once_and_coalesced = [reads_each_element_once("a"), writes_each_element_once("out"),
                          coalesced("a"), coalesced("out", kind="write")]
    check_matrix_kernel(transpose_padded, transpose_spec, plan,
                        budget=once_and_coalesced + [conflict_free_shared_memory()], quiet=True)
    check_matrix_kernel(transpose_unpadded, transpose_spec, plan, budget=once_and_coalesced, quiet=True)
    with pytest.raises(CheckFailed) as failure:
        check_matrix_kernel(transpose_naive, transpose_spec, plan, budget=once_and_coalesced)
    message = str(failure.value)
    assert message.startswith("transpose_naive is correct but over its budget: warp writes of `out` touch 24.0")
    assert "\n  (with grid=(3, 2), block=(32, 32)" in message
    assert "warp writes of `out` touch 24.0 sectors" in message and "more than 4" in message
    with pytest.raises(CheckFailed, match="reads of shared array `tile` have 32-way bank conflicts"):
        check_matrix_kernel(transpose_unpadded, transpose_spec, plan, budget=conflict_free_shared_memory())
    with pytest.raises(CheckFailed, match="transpose_naive is correct but over its budget: uses no shared memory; stage the tiles in a shared array"):
        check_matrix_kernel(transpose_naive, transpose_spec, plan, budget=conflict_free_shared_memory())


def test_tiled_reads_pass_a_tiled_kernel_and_fail_a_naive_one():
    plan = matmul_tiles([(2, 1, 40, 80, 48)], tile=mm.TILE)
    budget = [tiled_reads("A", tile=mm.TILE), tiled_reads("B", tile=mm.TILE, axis=-2),
              coalesced("A", "B"), coalesced("C", kind="write"), conflict_free_shared_memory()]
    check_matrix_kernel(mm.matmul_tiled, matmul_spec, plan, budget=budget, quiet=True)
    with pytest.raises(CheckFailed) as failure:
        check_matrix_kernel(mm.matmul_coalesced, matmul_spec, plan, budget=budget)
    message = str(failure.value)
    assert "each thread may read `A` at most 5 times" in message and "read it 80 times" in message
    assert "a tiled kernel copies one element of `A` per tile of 16" in message
    check_matrix_kernel(mm.matmul_coalesced, matmul_spec, plan, budget=budget[2:4], quiet=True)  # coalesced, untiled


def test_warp_per_row_budget_and_shuffles_instead_of_shared_memory():
    plan = warp_per_row([(5, 96), (37, 40), (3, 8)], warps=[1, 4])
    budget = [warp_reads_its_row("A"), no_shared_memory()]
    check_matrix_kernel(matvec_shuffles, matvec_spec, plan, budget=budget, quiet=True)
    with pytest.raises(CheckFailed, match=r"each thread may read `A` at most 3 times, .* read it 96 times: "
                                          r"the 32 lanes of a warp share the 96 elements of its row"):
        check_matrix_kernel(matvec_lane_zero, matvec_spec, plan, budget=budget)
    with pytest.raises(CheckFailed, match=r"uses shared memory \(`partial`\); combine the values with warp shuffles"):
        check_matrix_kernel(matvec_shared_tree, matvec_spec, plan, budget=budget)


def test_a_warp_per_row_whose_lanes_split_at_a_shuffle_is_told_where_lane_and_row_come_from():
    with pytest.raises(CheckFailed) as failed:
        check_matrix_kernel(matvec_swapped, matvec_spec, warp_per_row([(5, 100), (37, 33)], warps=[1, 4]))
    message = str(failed.value)
    assert "is not executing this call" in message  # the simulator's fault, then what to change
    assert message.endswith("Take the row from threadIdx.y (row = blockIdx.x * blockDim.y + threadIdx.y) and the lane "
                            "from threadIdx.x (swapped, the lanes of one warp get different rows and some skip the "
                            "shuffles), and let only the row decide whether a warp skips (if row < A.shape[0]); a "
                            "lane with no column takes part with float32(0).")


def test_coarsened_threads_must_reuse_and_keep_columns_strided():
    plan = coarsened_grid([(2, 30, 20, 200), (1, 3, 5, 7)], coarsen=COARSEN)
    reuse = reads_per_thread("G", at_most=lambda shape: shape[0] * shape[1], why="once per (z, m)")
    both = [reuse, coalesced("G", "X"), coalesced("dW", kind="write")]
    check_matrix_kernel(weight_grad_strided, weight_grad_spec, plan, budget=both, quiet=True)
    with pytest.raises(CheckFailed, match=r"each thread may read `G` at most 60 times, but .* read it 300 times: "
                                          r"once per \(z, m\)"):
        check_matrix_kernel(weight_grad_rereads, weight_grad_spec, plan, budget=both)
    check_matrix_kernel(weight_grad_neighbours, weight_grad_spec, plan, budget=reuse, quiet=True)
    with pytest.raises(CheckFailed, match=r"warp reads of `X` touch 1[0-9.]+ sectors"):
        check_matrix_kernel(weight_grad_neighbours, weight_grad_spec, plan, budget=both)
    with pytest.raises(CheckFailed, match="each thread may read `X` at most 2 times"):
        check_matrix_kernel(weight_grad_strided, weight_grad_spec, plan, budget=reads_per_thread("X", at_most=2))
    in_registers = [writes_each_element_once("dW"), reads_per_thread("dW", 0, why="sums in registers")]
    check_matrix_kernel(weight_grad_strided, weight_grad_spec, plan, budget=[*both, *in_registers], quiet=True)
    check_matrix_kernel(weight_grad_in_dw, weight_grad_spec, plan, budget=both, quiet=True)  # what let it through
    with pytest.raises(CheckFailed, match=r"every element of `dW` should be written exactly 1 time, but "
                                          r"`dW\[0, 0\]` was written 61"):
        check_matrix_kernel(weight_grad_in_dw, weight_grad_spec, plan, budget=[*both, *in_registers])


def test_a_budget_naming_a_missing_array_says_to_keep_the_names():
    with pytest.raises(CheckFailed, match=r"touched no array called `W`.*\(dW, G, X\)"):
        check_matrix_kernel(weight_grad_strided, weight_grad_spec, coarsened_grid([(1, 3, 5, 7)], coarsen=COARSEN),
                            budget=reads_per_thread("W", at_most=1))


def test_float32_only_catches_a_float64_accumulator():
    @cuda.jit
    def row_sums(out, a):
        i = cuda.grid(1)
        if i < out.size:
            total = 0.0
            for k in range(a.shape[1]):
                total += a[i, k]
            out[i] = total

    @cuda.jit
    def row_sums_float32(out, a):
        i = cuda.grid(1)
        if i < out.size:
            total = float32(0)
            for k in range(a.shape[1]):
                total += a[i, k]
            out[i] = total

    plan = [case(1, 32, [(20, 30)], out=(20,))]
    check_matrix_kernel(row_sums_float32, lambda a: a.sum(1), plan, budget=float32_only(), quiet=True)
    with pytest.raises(CheckFailed, match="computes in float64 on the GPU"):
        check_matrix_kernel(row_sums, lambda a: a.sum(1), plan, budget=float32_only())



@cuda.jit
def prefix_sum_float64(out, a):
    i = cuda.grid(1)
    if i < out.size:
        total = 0.  # a float64: every addition below is a float64 addition on the GPU
        for k in range(i + 1):
            total += a[k]
        out[i] = total


@cuda.jit
def prefix_sum_float32(out, a):
    i = cuda.grid(1)
    if i < out.size:
        total = float32(0)
        for k in range(i + 1):
            total += a[k]
        out[i] = total


def test_float64_arithmetic_is_found_in_the_ptx():
    a = np.arange(40, dtype=np.float32)
    out = np.zeros_like(a)
    with trace() as t:
        prefix_sum_float32[2, 32](out, a)
    float32_only()(t.last)
    with trace() as t:
        prefix_sum_float64[2, 32](out, a)
    np.testing.assert_array_equal(out, np.cumsum(a))
    with pytest.raises(BudgetExceeded, match=r"computes in float64 on the GPU \(.*\.f64.*write float32\(0\)"):
        float32_only()(t.last)


@cuda.jit
def tile_steps_from_math_ceil(out, a):
    """Sums of a's rows in steps of 4, the steps counted in float64 (math.ceil(K / 4)); and with ``0.``, summed so."""
    i = cuda.grid(1)
    if i < out.size:
        total = float32(0)
        for t in range(math.ceil(a.shape[1] / 4)):
            for k in range(t * 4, min(t * 4 + 4, a.shape[1])):
                total += a[i, k]
        out[i] = total


@cuda.jit
def tile_steps_from_math_ceil_summed_in_float64(out, a):
    i = cuda.grid(1)
    if i < out.size:
        total = 0.
        for t in range(math.ceil(a.shape[1] / 4)):
            for k in range(t * 4, min(t * 4 + 4, a.shape[1])):
                total += a[i, k]
        out[i] = total


def test_float64_from_a_tile_count_is_named_and_the_rest_too():
    plan = [case(1, 32, [(20, 30)], out=(20,))]
    tile_count = r"`K / TILE` of two integers is a float64 .* count tiles with integers, \(K \+ TILE - 1\) // TILE\."
    with pytest.raises(CheckFailed, match="(?m)" + tile_count + "$"):  # the end of its line: the launch follows
        check_matrix_kernel(tile_steps_from_math_ceil, lambda a: a.sum(1), plan, budget=float32_only())
    with pytest.raises(CheckFailed, match=tile_count + r" For the other float64 operations: A literal such as `0\.`"):
        check_matrix_kernel(tile_steps_from_math_ceil_summed_in_float64, lambda a: a.sum(1), plan,
                            budget=float32_only())


# ---------------------------------------------------------------- register micro-tiles (Assignment 3, Exercise 5)

BM, BK, TM = 64, 16, 4
THREADS = BM // TM
BK_PADDED = BK + 1


def matmul_nt_spec(A, B):
    return A @ B.transpose(0, 2, 1)


def micro_tile_kernel(registers: bool, rotated=False, whole_tiles_only=False):
    """``C = A @ B.T``, a 4 x 4 micro-tile per thread: its values in registers, or every product read from the tiles;
    ``rotated``: the sums indexed at run time (acc[(i + k) % TM, j]: local memory); ``whole_tiles_only``: the loop
    over K stops before a last partial tile."""

    @cuda.jit
    def micro_tile(C, A, B):
        tile_a = cuda.shared.array((BM, BK), float32)
        tile_b = cuda.shared.array((BM, BK_PADDED), float32)
        acc = cuda.local.array((TM, TM), float32)
        a_values = cuda.local.array(TM, float32)
        b_values = cuda.local.array(TM, float32)
        tx, ty, z = cuda.threadIdx.x, cuda.threadIdx.y, cuda.blockIdx.z
        a = z if A.shape[0] > 1 else 0
        b = z if B.shape[0] > 1 else 0
        M, N, K = C.shape[1], C.shape[2], A.shape[2]
        row0, col0 = cuda.blockIdx.y * BM, cuda.blockIdx.x * BM
        for i in range(TM):
            for j in range(TM):
                acc[i, j] = float32(0)
        for k0 in range(0, K // BK * BK if whole_tiles_only else K, BK):
            for e in range(ty * THREADS + tx, BM * BK, THREADS * THREADS):
                r, c = e // BK, e % BK
                k = k0 + c
                tile_a[r, c] = A[a, row0 + r, k] if row0 + r < M and k < K else float32(0)
                tile_b[r, c] = B[b, col0 + r, k] if col0 + r < N and k < K else float32(0)
            cuda.syncthreads()
            for k in range(BK):
                if registers:
                    for i in range(TM):
                        a_values[i] = tile_a[ty + i * THREADS, k]
                    for j in range(TM):
                        b_values[j] = tile_b[tx + j * THREADS, k]
                    for i in range(TM):
                        for j in range(TM):
                            if rotated:  # the same sums, rotated by k: an index known only at run time
                                acc[(i + k) % TM, j] += a_values[(i + k) % TM] * b_values[j]
                            else:
                                acc[i, j] += a_values[i] * b_values[j]
                else:  # the same numbers, two shared reads per multiply-add
                    for i in range(TM):
                        for j in range(TM):
                            acc[i, j] += tile_a[ty + i * THREADS, k] * tile_b[tx + j * THREADS, k]
            cuda.syncthreads()
        for i in range(TM):
            for j in range(TM):
                row, col = row0 + ty + i * THREADS, col0 + tx + j * THREADS
                if row < M and col < N:
                    C[z, row, col] = acc[i, j]

    return micro_tile


@cuda.jit
def micro_tile_from_global(C, A, B):
    """Right numbers, 16 outputs per thread, no shared memory at all."""
    tx, ty, z = cuda.threadIdx.x, cuda.threadIdx.y, cuda.blockIdx.z
    a = z if A.shape[0] > 1 else 0
    b = z if B.shape[0] > 1 else 0
    for i in range(TM):
        for j in range(TM):
            row, col = cuda.blockIdx.y * BM + ty + i * THREADS, cuda.blockIdx.x * BM + tx + j * THREADS
            if row < C.shape[1] and col < C.shape[2]:
                acc = float32(0)
                for k in range(A.shape[2]):
                    acc += A[a, row, k] * B[b, col, k]
                C[z, row, col] = acc


def test_register_tiles_plan():
    (c,) = register_tiles([(2, 1, 70, 40, 130)], block_tile=BM, threads=THREADS)
    assert (c.grid, c.block) == ((3, 2, 2), (16, 16))
    assert c.inputs == ((2, 70, 40), (1, 130, 40)) and c.out == (2, 70, 130)
    with pytest.raises(ValueError, match="do not broadcast"):
        register_tiles([(2, 3, 4, 4, 4)])


def test_shared_reads_per_fma_passes_a_micro_tile_in_registers_and_rejects_two_reads_per_product():
    plan = register_tiles([(2, 1, 70, 40, 130), (1, 1, 5, 3, 7)], block_tile=BM, threads=THREADS)
    budget = shared_reads_per_fma(0.5, outputs_per_thread=TM * TM, step=BK)
    check_matrix_kernel(micro_tile_kernel(registers=True), matmul_nt_spec, plan, budget=budget, quiet=True)
    with pytest.raises(CheckFailed, match=r"read shared memory 1536 times for its 768 multiply-adds \(16 outputs x 48 "
                                          r"steps of k\), 2.00 reads per multiply-add, more than 0.5: at each k, load "
                                          r"the micro-tile's values"):
        check_matrix_kernel(micro_tile_kernel(registers=False), matmul_nt_spec, plan, budget=budget)
    with pytest.raises(CheckFailed, match="uses no shared memory; stage the tiles in shared arrays"):
        check_matrix_kernel(micro_tile_from_global, matmul_nt_spec, plan, budget=budget)
    copies = reads_per_thread("A", lambda shape: 4 * -(-shape[-1] // BK))
    check_matrix_kernel(micro_tile_kernel(registers=True), matmul_nt_spec, plan, budget=copies, quiet=True)
    with pytest.raises(CheckFailed, match=r"each thread may read `A` at most 12 times, but .* read it 640 times"):
        check_matrix_kernel(micro_tile_from_global, matmul_nt_spec, plan, budget=copies)


@cuda.jit
def matvec_float64_sum(y, A, x):
    """Assignment 3, Exercise 3 with the natural mistake: a running sum started at `0.`."""
    lane = cuda.threadIdx.x
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if row < A.shape[0]:
        value = 0.
        for c in range(lane, A.shape[1], 32):
            value += A[row, c] * x[c]
        offset = 16
        while offset > 0:
            value += cuda.shfl_down_sync(0xFFFFFFFF, value, offset)
            offset //= 2
        if lane == 0:
            y[row] = value


def test_float32_only_catches_a_warp_sum_started_at_a_float64_zero():
    plan = warp_per_row([(5, 100)], warps=[4])
    check_matrix_kernel(matvec_shuffles, matvec_spec, plan, budget=float32_only(), quiet=True)
    with pytest.raises(CheckFailed, match=r"computes in float64 on the GPU .* write float32\(0\)"):
        check_matrix_kernel(matvec_float64_sum, matvec_spec, plan, budget=float32_only())


def transposed_product(x_along_columns=True, zero=float32(0), guarded=True, short=0, in_memory=False):
    """``C = A.T @ B`` read in place, one thread per output (lecture 3's puzzle), or one of its wrong answers
    (``short``: its loop over k stops that many terms early; ``in_memory``: it adds each term to C itself)."""

    @cuda.jit
    def matmul_at_b(C, A, B):
        if x_along_columns:
            col, row = cuda.grid(2)
        else:
            row, col = cuda.grid(2)
        if not guarded or (row < C.shape[0] and col < C.shape[1]):
            if in_memory:
                C[row, col] = zero
                for k in range(A.shape[0]):
                    C[row, col] += A[k, row] * B[k, col]
                return
            acc = zero
            for k in range(A.shape[0] - short):
                acc += A[k, row] * B[k, col]
            C[row, col] = acc

    return matmul_at_b


def test_transposed_product_puzzle_wants_coalesced_writes_in_float32(capsys):
    assert try_puzzle(check_transposed_product, transposed_product())
    assert capsys.readouterr().out.startswith("✓ matmul_at_b: C = A.T @ B on 8 launches")
    wrong = {"warp writes of `C` touch 13.3 sectors": transposed_product(x_along_columns=False),
             "computes in float64 on the GPU": transposed_product(zero=0.),
             "needs a guard": transposed_product(guarded=False),
             "keep the running sum in a register": transposed_product(in_memory=True)}
    for message, kernel in wrong.items():
        assert not try_puzzle(check_transposed_product, kernel)
        assert message in capsys.readouterr().out


def block_step_2x4(mode="right"):
    """One block's step of k with a 2 x 4 micro-tile (lecture 3's second puzzle), or one of its wrong answers:
    ``"tiles"`` multiplies straight from the shared tiles, ``"contiguous"`` gives a thread neighbouring columns,
    ``"unset"`` never zeroes its sums."""

    @cuda.jit
    def block_step(C, A, B):
        tile_a = cuda.shared.array((32, 16), float32)
        tile_b = cuda.shared.array((16, 64), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        for e in range(ty * 16 + tx, 32 * 16, 256):
            tile_a[e // 16, e % 16] = A[e // 16, e % 16]
        for e in range(ty * 16 + tx, 16 * 64, 256):
            tile_b[e // 64, e % 64] = B[e // 64, e % 64]
        cuda.syncthreads()
        acc = cuda.local.array((2, 4), float32)
        a_values = cuda.local.array(2, float32)
        b_values = cuda.local.array(4, float32)
        for i in range(2):
            for j in range(4):
                if mode != "unset":
                    acc[i, j] = float32(0)
        for k in range(15 if mode == "short" else 16):
            for i in range(2):
                a_values[i] = tile_a[ty + 16 * i, k]
            for j in range(4):
                b_values[j] = tile_b[k, tx * 4 + j if mode == "contiguous" else tx + 16 * j]
            for i in range(2):
                for j in range(4):
                    if mode == "tiles":
                        acc[i, j] += tile_a[ty + 16 * i, k] * tile_b[k, tx + 16 * j]
                    else:
                        acc[i, j] += a_values[i] * b_values[j]
        for i in range(2):
            for j in range(4):
                C[ty + 16 * i, tx * 4 + j if mode == "contiguous" else tx + 16 * j] = acc[i, j]

    return block_step


def test_block_step_puzzle_wants_values_in_registers_and_strided_columns(capsys):
    assert try_puzzle(check_block_step, block_step_2x4(), 2, 4)
    assert capsys.readouterr().out.startswith("✓ block_step: C = A @ B; 0.75 shared reads per multiply-add")
    wrong = {"tiles": "2.75 reads per multiply-add, more than 0.75", "contiguous": "2-way bank conflicts",
             "unset": "which nothing has written"}
    for mode, message in wrong.items():
        assert not try_puzzle(check_block_step, block_step_2x4(mode), 2, 4)
        assert message in capsys.readouterr().out


def test_a_budget_on_a_kernel_the_simulator_could_not_trace_says_why():
    """A kernel built by exec from a string runs on numba's simulator, which keeps no trace: its budget cell gets
    a course message, not a RuntimeError from inside the trace."""
    from gpucourse.grading.core import check_budgets

    with trace() as recorded:
        pass  # nothing launched on the course simulator
    with pytest.raises(CheckFailed, match=r"kept no trace of it, .* Define it in a notebook cell or a \.py file"):
        check_budgets("pasted", "grid=(1,), block=(32,)", [coalesced("a")], recorded, ["out", "a"])


def test_a_micro_tile_in_local_memory_loses_the_registers_budget():
    plan = register_tiles([(2, 1, 70, 40, 130)], block_tile=BM, threads=THREADS)
    check_matrix_kernel(micro_tile_kernel(registers=True), matmul_nt_spec, plan, budget=no_local_memory(), quiet=True)
    with pytest.raises(CheckFailed, match=r"its PTX has \d+ ld.local and \d+ st.local: a per-thread array is in local "
                                          r"memory .*acc\[i, j\], not acc\[\(i \+ k\) % TM, j\]"):
        check_matrix_kernel(micro_tile_kernel(registers=True, rotated=True), matmul_nt_spec, plan,
                            budget=no_local_memory())


def test_a_product_over_the_first_tiles_of_k_and_an_untransposed_tile_are_named():
    plan = register_tiles([(1, 1, 40, 30, 37)], block_tile=BM, threads=THREADS)  # K = 30: one whole tile of 16, and 14
    with pytest.raises(CheckFailed, match=r"C is the product over the first 16 of the 30 terms of k: the loop over the "
                                          r"tiles of K stops early"):
        check_matrix_kernel(micro_tile_kernel(registers=True, whole_tiles_only=True), matmul_nt_spec, plan)
    with pytest.raises(CheckFailed, match=r"Each tile of out holds its tile of a, but not transposed inside: .* "
                                          r"tile\[tx, ty\]"):
        check_matrix_kernel(transpose_through_shared_memory(PADDED, across=False), transpose_spec,
                            transpose_tiles([(64, 96)], tile=TILE))


@cuda.jit
def relu_against_an_int(out, x):  # max(float32, int) is a float64 in numba
    i = cuda.grid(1)
    if i < out.size:
        out[i] = max(x[i], 0)


def test_a_max_against_an_integer_zero_is_named_among_the_float64_causes():
    from gpucourse.grading import check_kernel, one_block

    with pytest.raises(CheckFailed, match=r"computes in float64 on the GPU .* or taken with one in max or min "
                                          r"\(`max\(x, 0\)`\): write .* max\(x, float32\(0\)\)"):
        check_kernel(relu_against_an_int, lambda x: np.maximum(x, 0), one_block([100, 37]), budget=float32_only())


def test_a_loop_over_k_that_stops_early_in_an_untiled_puzzle_is_told_so_without_tiles(capsys):
    """Lecture 3's C = A.T @ B and 2 x 4 micro-tile puzzles have no tiles along K: a loop over k one term short was
    told that K // TILE rounds down to 0 (the A.T @ B puzzle on K = 1) or to loop over the tiles of K while k0 < K
    and fill the last tile with zeros (the one-step puzzle)."""
    assert not try_puzzle(check_transposed_product, transposed_product(short=1))
    out = capsys.readouterr().out
    assert "C is 0 everywhere: nothing was added to the sums." in out and "TILE" not in out, out
    assert not try_puzzle(check_block_step, block_step_2x4("short"), 2, 4)
    out = capsys.readouterr().out
    assert "C is the product over the first 15 of the 16 terms of k: the loop over k stops early" in out, out
    assert "tiles of K" not in out and "k0 < K" not in out, out
