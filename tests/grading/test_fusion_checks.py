"""Module 5's checks: right kernels pass, wrong ones fail with a message that names the row (and block of keys)."""

import functools
import math
import re

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import simulated, trace
from gpucourse.grading import CheckFailed
from gpucourse.grading import fusion as gf
from gpucourse.grading.reduction import writes_each_element_once
from gpucourse.kernels import fusion as fu

FULL = 0xFFFFFFFF
BQ, BKEYS, MAX_D = 16, 16, 32


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


def softmax_spec(x):
    return fu.softmax_reference(x)


def fails(pattern, check, *args, **kwargs):
    with pytest.raises(CheckFailed, match=pattern) as caught:
        check(*args, quiet=True, **kwargs)
    return str(caught.value)


@cuda.jit
def softmax_per_row(y, x):  # one warp per row, no max subtracted: overflows on large rows
    lane = cuda.threadIdx.x
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if row < x.shape[0]:
        total = float32(0)
        for c in range(lane, x.shape[1], 32):
            total += math.exp(x[row, c])
        for offset in (16, 8, 4, 2, 1):
            total += cuda.shfl_xor_sync(FULL, total, offset)
        for c in range(lane, x.shape[1], 32):
            y[row, c] = math.exp(x[row, c]) / total


@cuda.jit
def softmax_of_four_warps(y, x):  # one warp per row, the block's 4 warps written in: right only with 4
    lane = cuda.threadIdx.x
    row = cuda.blockIdx.x * 4 + cuda.threadIdx.y
    if row < x.shape[0]:
        top = float32(-math.inf)
        for c in range(lane, x.shape[1], 32):
            top = max(top, x[row, c])
        for offset in (16, 8, 4, 2, 1):
            top = max(top, cuda.shfl_xor_sync(FULL, top, offset))
        total = float32(0)
        for c in range(lane, x.shape[1], 32):
            total += math.exp(x[row, c] - top)
        for offset in (16, 8, 4, 2, 1):
            total += cuda.shfl_xor_sync(FULL, total, offset)
        for c in range(lane, x.shape[1], 32):
            y[row, c] = math.exp(x[row, c] - top) / total


@pytest.mark.parametrize("warps", [[1, 4], [4, 1], [4, 2]])
def test_a_kernel_right_with_one_block_shape_only_is_told_to_read_blockdim(warps):
    plans = gf.warp_rows([(9, 40)], warps=warps)
    message = fails("rows are wrong", gf.check_row_kernel, softmax_of_four_warps, softmax_spec, plans, special=False)
    assert "With block=(32, 4) the result is right, with block=(32, " in message
    assert "Read it from cuda.blockDim.x and cuda.blockDim.y" in message
    gf.check_row_kernel(softmax_of_four_warps, softmax_spec, gf.warp_rows([(9, 40)], warps=[4]), special=False,
                        quiet=True)
    message = fails("rows are wrong", gf.check_row_kernel, softmax_per_row, softmax_spec, plans)  # wrong everywhere
    assert "With block=" not in message


def make_warp_softmax(shuffle_down: bool = False, wrong_where_row_0_starts_positive: bool = False):
    """One warp per row, read from cuda.blockDim.y; wrong with ``shuffle_down`` (the max and the sum end in lane 0
    alone) or ``wrong_where_row_0_starts_positive`` (a bug of the data, not of the block's shape)."""

    @cuda.jit
    def warp_softmax(y, x):
        lane = cuda.threadIdx.x
        row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
        if row < x.shape[0]:
            top = float32(-math.inf)
            for c in range(lane, x.shape[1], 32):
                top = max(top, x[row, c])
            for offset in (16, 8, 4, 2, 1):
                top = max(top, cuda.shfl_down_sync(FULL, top, offset) if shuffle_down else
                          cuda.shfl_xor_sync(FULL, top, offset))
            total = float32(0)
            for c in range(lane, x.shape[1], 32):
                total += math.exp(x[row, c] - top)
            for offset in (16, 8, 4, 2, 1):
                total += (cuda.shfl_down_sync(FULL, total, offset) if shuffle_down else
                          cuda.shfl_xor_sync(FULL, total, offset))
            wrong = wrong_where_row_0_starts_positive and row == 0 and x[0, 0] > 0
            for c in range(lane, x.shape[1], 32):
                y[row, c] = float32(0) if wrong else math.exp(x[row, c] - top) / total

    return warp_softmax


def test_a_wrong_result_that_depends_on_the_data_gets_no_block_hint():
    """Seed 2 draws x[0, 0] > 0 for the first launch (block (32, 1)) and <= 0 for the second (block (32, 4)): the
    second is right, but so is not the first's data with the second's block (a student's review, 2026-12-02)."""
    message = fails("rows are wrong: 0", gf.check_row_kernel, make_warp_softmax(wrong_where_row_0_starts_positive=True),
                    softmax_spec,
                    gf.warp_rows([(9, 40)], warps=[1, 4]), seed=2, special=False)
    assert "With block=" not in message


def test_a_warp_that_shuffles_down_is_told_only_lane_0_holds_the_result():
    """A student's review (2026-12-02): only the first wrong element was shown."""
    message = fails("rows are wrong", gf.check_row_kernel, make_warp_softmax(shuffle_down=True), softmax_spec,
                    gf.warp_rows([(7, 96)], warps=[4]), special=False)
    assert ("the columns of each lane (c % 32) are the right softmax times a factor of that lane's own: the lanes did "
            "not all get the warp's max and sum. After shfl_down_sync only lane 0 holds them") in message


def test_row_check_passes_the_reference_and_names_the_overflowing_row():
    plans = gf.block_rows([(5, 70), (3, 300)], threads=[64])
    gf.check_row_kernel(fu.softmax_online, softmax_spec, plans, quiet=True,
                        budget=[gf.reads_per_element("x", exactly=2), writes_each_element_once("y")])
    message = fails(r"row 0 \(a fully masked row", gf.check_row_kernel, softmax_per_row, softmax_spec,
                    gf.warp_rows([(6, 40)], warps=[2]))
    assert "should be 0.0, got nan" in message and "rows are wrong: 0, 2" in message
    gf.check_row_kernel(softmax_per_row, softmax_spec, gf.warp_rows([(6, 40)], warps=[2]), special=False, quiet=True)
    fails(r"`x\[0, 0\]` was read 2 time.*: read the row once", gf.check_row_kernel, fu.softmax_online, softmax_spec, gf.block_rows([(3, 40)]),
          budget=gf.reads_per_element("x", exactly=1, why="read the row once"))


def layernorm_spec(x, gamma, beta):
    return (x - x.mean(axis=1, keepdims=True)) / np.sqrt(x.var(axis=1, keepdims=True) + 1e-5) * gamma + beta


@cuda.jit
def layernorm_sum_of_squares(y, x, gamma, beta):  # one thread per row, var = E[x^2] - E[x]^2 in float32
    row = cuda.grid(1)
    if row < x.shape[0]:
        n = x.shape[1]
        s, s2 = float32(0), float32(0)
        for c in range(n):
            s += x[row, c]
            s2 += x[row, c] * x[row, c]
        mean = s / float32(n)
        rstd = float32(1) / math.sqrt(max(s2 / float32(n) - mean * mean, float32(0)) + float32(1e-5))
        for c in range(n):
            y[row, c] = (x[row, c] - mean) * rstd * gamma[c] + beta[c]


def make_layernorm_shifted(eps_inside: bool = True):
    """The one-thread-per-row LayerNorm with the sums of x - x[row, 0] (exact enough); without ``eps_inside``,
    1 / (std + eps): right only for a row whose spread is far above eps."""

    @cuda.jit
    def layernorm(y, x, gamma, beta):
        row = cuda.grid(1)
        if row < x.shape[0]:
            n = x.shape[1]
            shift = x[row, 0]
            s, s2 = float32(0), float32(0)
            for c in range(n):
                v = x[row, c] - shift
                s += v
                s2 += v * v
            mean = s / float32(n)
            variance = max(s2 / float32(n) - mean * mean, float32(0))
            if eps_inside:
                rstd = float32(1) / math.sqrt(variance + float32(1e-5))
            else:
                rstd = float32(1) / (math.sqrt(variance) + float32(1e-5))
            for c in range(n):
                y[row, c] = (x[row, c] - shift - mean) * rstd * gamma[c] + beta[c]

    return layernorm


layernorm_shifted = make_layernorm_shifted()


def test_layernorm_with_eps_outside_the_root_fails_on_the_row_of_small_spread():
    fails(r"row 19 \(a row of spread 2e-3, whose variance is below EPS: EPS belongs inside the square root",
          gf.check_layernorm, make_layernorm_shifted(eps_inside=False), layernorm_spec,
          [gf.RowPlan((20, 64), (1,), (32,))])


def test_layernorm_check_tells_a_cancelling_variance_from_a_shifted_one():
    plans = [gf.RowPlan((20, 64), (1,), (32,))]
    message = fails(r"a row with a large mean next to a small spread", gf.check_layernorm, layernorm_sum_of_squares,
                    layernorm_spec, plans)
    assert "y[" in message
    gf.check_layernorm(layernorm_shifted, layernorm_spec, plans + [gf.RowPlan((3, 1), (1,), (32,))], quiet=True,
                       budget=gf.reads_per_element("x", at_most=3))
    fails(r"at most 2 time", gf.check_layernorm, layernorm_shifted, layernorm_spec, plans,
          budget=gf.reads_per_element("x", at_most=2))


def cross_entropy_spec(logits, labels):
    top = logits.max(axis=1, keepdims=True)
    lse = top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
    return np.where(labels == -100, 0.0, lse - logits[np.arange(len(labels)), np.clip(labels, 0, None)])


@cuda.jit
def cross_entropy_thread(loss, logits, labels):  # one thread per row; forgets the ignored label
    row = cuda.grid(1)
    if row < logits.shape[0]:
        top = float32(-math.inf)
        for c in range(logits.shape[1]):
            top = max(top, logits[row, c])
        total = float32(0)
        for c in range(logits.shape[1]):
            total += math.exp(logits[row, c] - top)
        loss[row] = top + math.log(total) - logits[row, max(labels[row], 0)]


def test_cross_entropy_check_names_the_ignored_row_and_counts_reads():
    plans = [gf.RowPlan((9, 50), (1,), (32,))]
    fails(r"row 0 \(its label is -100, the padding that is ignored", gf.check_cross_entropy, cross_entropy_thread,
          cross_entropy_spec, plans)


def gelu_spec(A, B, bias):
    z = A @ B + bias
    return np.maximum(z, 0)


@cuda.jit
def matmul_then_relu_in_place(C, A, B, bias):  # correct, but writes C twice and reads it back
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0)
        for k in range(A.shape[1]):
            acc += A[row, k] * B[k, col]
        C[row, col] = acc + bias[col]
        C[row, col] = max(C[row, col], float32(0))


@cuda.jit
def matmul_relu_whole_tiles_only(C, A, B, bias):  # the loop over tiles stops at K // 16: the partial tile is lost
    col, row = cuda.grid(2)
    if row < C.shape[0] and col < C.shape[1]:
        acc = float32(0)
        for t in range(A.shape[1] // 16):
            for k in range(t * 16, t * 16 + 16):
                acc += A[row, k] * B[k, col]
        C[row, col] = max(acc + bias[col], float32(0))


def test_a_gemm_that_leaves_out_the_last_partial_tile_of_k_is_told_so():
    """A student's review (2026-12-02): only the first wrong element was shown."""
    message = fails("rows are wrong", gf.check_gemm_epilogue, matmul_relu_whole_tiles_only, gelu_spec, [(20, 33, 17)])
    assert ("its output is the product over the first 32 of the K = 33 columns of A only: the loop over tiles stops "
            "at K // 16 and leaves out the last, partial tile") in message
    gf.check_gemm_epilogue(matmul_relu_whole_tiles_only, gelu_spec, [(20, 32, 17)], quiet=True)  # K a multiple of 16


def test_gelu_in_its_erf_form_is_named_only_where_the_spec_is_the_tanh_form():
    z = np.linspace(-4, 4, 12).reshape(2, 6)
    tanh_form = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
    erf_form = (0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))).astype(np.float32)
    tolerance = np.full(z.shape, 1e-5)
    hint = gf.gelu_diagnosis(z, tanh_form, tolerance)
    assert hint(1, erf_form[1]).startswith("its output is GELU's exact form, 0.5 z (1 + erf(z / sqrt(2))), but the "
                                           "exercise asks for its tanh form, gelu(z) = 0.5 z (1 + tanh(sqrt(2 / pi) "
                                           "(z + 0.044715 z^3)))")
    assert hint(1, erf_form[1] + 1e-3) == ""
    assert gf.gelu_diagnosis(z, np.maximum(z, 0), tolerance)(1, erf_form[1]) == ""  # a ReLU epilogue


def test_gemm_epilogue_check_and_traffic_budget():
    shapes = [(20, 33, 17), (1, 5, 40)]
    gf.check_gemm_epilogue(fu.matmul_bias_relu, gelu_spec, shapes, quiet=True,
                           budget=gf.global_traffic("C", reads=0, writes=1))
    gf.check_gemm_epilogue(matmul_then_relu_in_place, gelu_spec, shapes, quiet=True)
    message = fails(r"`C` \(340 elements\) was read 340 times in global memory, more than 0 \(0 per element\): "
                    "keep it in a register", gf.check_gemm_epilogue, matmul_then_relu_in_place, gelu_spec, shapes,
                    budget=gf.global_traffic("C", reads=0, writes=1, why="keep it in a register"))
    assert "correct but over its budget" in message


@functools.cache  # each variant compiled once
def flash_kernel(rescale=True, keep=True, tiles=True, skip=True, big_shared=False, mask=True, early_exit=False,
                 forget=False):
    """The assignment's flash attention, or a broken variant of it."""

    @cuda.jit
    def flash(O, Q, K, V):
        k_tile = cuda.shared.array((BKEYS, MAX_D), float32)
        v_tile = cuda.shared.array((BKEYS, MAX_D), float32)
        waste = cuda.shared.array((64, 64), float32)
        q = cuda.local.array(MAX_D, float32)
        acc = cuda.local.array(MAX_D, float32)
        s = cuda.local.array(BKEYS, float32)
        t = cuda.threadIdx.x
        first = cuda.blockIdx.x * BQ
        i = first + t
        N, d = Q.shape
        if big_shared:
            waste[t, 0] = float32(0)
        if early_exit and i >= N:
            return
        scale = float32(1) / math.sqrt(float32(d))
        for c in range(d):
            q[c] = Q[i, c] * scale if i < N else float32(0)
            acc[c] = float32(0)
        m, l = float32(-math.inf), float32(0)
        for j0 in range(0, min(N, first + BQ) if skip else N, BKEYS):
            for e in range(t, BKEYS * d, BQ):
                j, c = e // d, e % d
                k_tile[j, c] = K[j0 + j, c] if j0 + j < N else float32(0)
                v_tile[j, c] = V[j0 + j, c] if j0 + j < N else float32(0)
            cuda.syncthreads()
            top = float32(-math.inf) if forget else m  # forget: the new max is the tile's alone
            for j in range(BKEYS):
                score = float32(-math.inf)
                if (j0 + j <= i or not mask) and j0 + j < N:
                    score = float32(0)
                    for c in range(d):
                        score += q[c] * (k_tile[j, c] if tiles else K[j0 + j, c])
                s[j] = score
                top = max(top, score)
            if top != float32(-math.inf):
                factor = math.exp(m - top) if rescale else float32(1)
                if not keep:
                    factor = float32(0)
                l *= factor
                for c in range(d):
                    acc[c] *= factor
                for j in range(BKEYS):
                    p = math.exp(s[j] - top)
                    l += p
                    for c in range(d):
                        acc[c] += p * v_tile[j, c]
                m = top
            cuda.syncthreads()
        if i < N:
            for c in range(d):
                O[i, c] = acc[c] / l

    return flash


SHAPES = [(40, 16), (45, 32)]  # N * N larger than a tile of 16 x 32
BUDGETS = [gf.kv_reads_per_query_block(BQ, BKEYS), gf.memory_independent_of_n(),
           gf.reads_per_element("Q", exactly=1), writes_each_element_once("O")]


def test_attention_check_passes_flash_and_names_the_query_row_and_block_of_keys():
    gf.check_attention(flash_kernel(), SHAPES, block_rows=BQ, key_block=BKEYS, quiet=True, budget=BUDGETS)
    message = fails(r"is wrong: O\[", gf.check_attention, flash_kernel(keep=False), SHAPES, block_rows=BQ,
                    key_block=BKEYS)
    assert re.search(r"row (1[6-9]|[2-3]\d)", message)  # the first row with a second block of keys
    assert "attention over the block of keys 16 to" in message and "rescale the running sum" in message
    fails(r"the keys of query row \d+ are 0 to \d+, in 2 blocks of 16: check the running max, the rescale",
          gf.check_attention, flash_kernel(rescale=False), SHAPES, block_rows=BQ,
                    key_block=BKEYS)


def test_a_running_max_that_forgets_earlier_tiles_fails_on_the_large_row_with_the_overflow_named():
    message = fails(r"row 37 \(key 15, the last of its tile, scores 100 above its other keys: .*one that forgets "
                    r"earlier tiles, would miss it\) is wrong.*\n  2 of 40 rows are wrong: 37, 39",
                    gf.check_attention, flash_kernel(forget=True),
                    SHAPES, block_rows=BQ, key_block=BKEYS)
    assert "NaN or infinite: a rescale exp2(m_old - m_new) overflowed" in message
    assert "m_new = max(m_old, the tile's max)" in message


def test_attention_budgets_catch_global_reads_unskipped_tiles_and_big_buffers():
    fails(r"row \d+ of `K` was read up to \d+ times per element, more than \d+", gf.check_attention,
          flash_kernel(tiles=False), SHAPES, block_rows=BQ, key_block=BKEYS, budget=BUDGETS)
    fails(r"the causal mask hides it from the blocks before it: skip those tiles", gf.check_attention,
          flash_kernel(skip=False), SHAPES, block_rows=BQ, key_block=BKEYS, budget=BUDGETS)
    gf.check_attention(flash_kernel(skip=False), SHAPES, block_rows=BQ, key_block=BKEYS, quiet=True,
                       budget=gf.kv_reads_per_query_block(BQ, BKEYS, causal=False))
    fails(r"`waste` has 4096 elements, as many as the N x N = 1600 scores", gf.check_attention,
          flash_kernel(big_shared=True), SHAPES, block_rows=BQ, key_block=BKEYS, budget=gf.memory_independent_of_n())
    fails(r"bytes of shared memory per block, more than 1024", gf.check_attention, flash_kernel(), SHAPES,
          block_rows=BQ, key_block=BKEYS, budget=gf.memory_independent_of_n(limit_bytes=1024))


def test_global_bytes_adds_up_every_launch():
    x = np.random.default_rng(0).standard_normal((4, 50)).astype(np.float32)
    with trace() as t:
        fu.softmax_naive(x)
    # row_max reads x, writes m; exp_and_sum reads x, writes e and l, and each of its 128 threads reads m[row];
    # divide reads e, writes y, and each thread reads l[row]
    rows, elements, threads = 4, 4 * 50, 128
    assert gf.global_bytes(t) == 4 * (elements + rows + 2 * elements + rows + threads * rows
                                      + 2 * elements + threads * rows)
    assert gf.global_bytes(t[0]) == 4 * (elements + rows)


# ---------------------------------------------------------------- what a student's typical mistakes are told


@cuda.jit
def softmax_online_without_rescale(y, x):  # one warp per row; forgets exp(m_old - m_new) when the max grows
    lane = cuda.threadIdx.x
    row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
    if row < x.shape[0]:
        m, l = float32(-math.inf), float32(0)
        for c in range(lane, x.shape[1], 32):
            value = x[row, c]
            if value > m:
                l, m = l + float32(1), value
            elif value > float32(-math.inf):
                l += math.exp(value - m)
        for offset in (16, 8, 4, 2, 1):
            m_other, l_other = cuda.shfl_xor_sync(FULL, m, offset), cuda.shfl_xor_sync(FULL, l, offset)
            top = max(m, m_other)
            if top > float32(-math.inf):
                l, m = l * math.exp(m - top) + l_other * math.exp(m_other - top), top
        m = m if m > float32(-math.inf) else float32(0)
        for c in range(lane, x.shape[1], 32):
            y[row, c] = math.exp(x[row, c] - m) / l if l > float32(0) else float32(0)


def test_a_softmax_with_a_wrong_sum_is_named_by_an_ordinary_row_and_told_to_rescale():
    message = fails(r"row [3-9] is wrong", gf.check_row_kernel, softmax_online_without_rescale, softmax_spec,
                    gf.warp_rows([(7, 100)], warps=[1]))
    assert "the row is the right softmax times" in message and "rescale the sum so far by exp(m_old - m_new)" in message


@cuda.jit
def layernorm_merging_empty_states(y, x, gamma, beta):  # one warp per row; Welford without the n = 0 case
    row, lane = cuda.blockIdx.x, cuda.threadIdx.x
    n, mean, m2 = float32(0), float32(0), float32(0)
    for c in range(lane, x.shape[1], 32):
        n += float32(1)
        delta = x[row, c] - mean
        mean += delta / n
        m2 += delta * (x[row, c] - mean)
    for offset in (16, 8, 4, 2, 1):
        n_b, mean_b = cuda.shfl_xor_sync(FULL, n, offset), cuda.shfl_xor_sync(FULL, mean, offset)
        m2_b = cuda.shfl_xor_sync(FULL, m2, offset)
        total = n + n_b
        delta = mean_b - mean
        n, mean, m2 = total, mean + delta * (n_b / total), m2 + m2_b + delta * delta * (n * n_b / total)
    for c in range(lane, x.shape[1], 32):
        y[row, c] = (x[row, c] - mean) / math.sqrt(m2 / n + float32(1e-5)) * gamma[c] + beta[c]


def test_layernorm_nan_in_a_short_row_points_at_the_empty_state():
    message = fails(r"got nan", gf.check_layernorm, layernorm_merging_empty_states, layernorm_spec,
                    [gf.RowPlan((3, 5), (3,), (32,))])
    assert "a row of 5 columns leaves some of the 32 threads without a column" in message
    assert "when n is 0, return the other state unchanged" in message


def cross_entropy_picking(column_of_lane_0: bool, guard_empty: bool = True, from_label_lane: bool = False):
    """One warp per row; the label's logit from lane 0 (not from lane label % 32), or not subtracted at all.

    With ``from_label_lane`` it is fetched from the right lane. Without ``guard_empty``, a lane or a merge that has
    seen only -inf computes exp(-inf - -inf) = NaN.
    """

    @cuda.jit
    def cross_entropy(loss, logits, labels):
        lane = cuda.threadIdx.x
        row = cuda.blockIdx.x * cuda.blockDim.y + cuda.threadIdx.y
        if row < logits.shape[0]:
            label = labels[row]
            m, l, picked = float32(-math.inf), float32(0), float32(0)
            for c in range(lane, logits.shape[1], 32):
                value = logits[row, c]
                if c == label or (column_of_lane_0 and c == lane):
                    picked = value
                if value > m:
                    l, m = l * math.exp(m - value) + float32(1), value
                elif value > -math.inf or not guard_empty:
                    l += math.exp(value - m)
            for offset in (16, 8, 4, 2, 1):
                m_other, l_other = cuda.shfl_xor_sync(FULL, m, offset), cuda.shfl_xor_sync(FULL, l, offset)
                top = max(m, m_other)
                if top > -math.inf or not guard_empty:
                    l, m = l * math.exp(m - top) + l_other * math.exp(m_other - top), top
            picked = cuda.shfl_sync(FULL, picked, label % 32 if from_label_lane else 0)
            if lane == 0:
                loss[row] = float32(0) if label == -100 else (m - picked) + math.log(l)

    return cross_entropy


def test_cross_entropy_says_which_logit_was_subtracted():
    plans = gf.warp_rows([(9, 100)], warps=[1])
    message = fails(r"row [2-8] is wrong", gf.check_cross_entropy, cross_entropy_picking(False), cross_entropy_spec,
                    plans)
    assert "the loss is logsumexp alone: the logit of the label (column" in message
    message = fails(r"row [2-8] is wrong", gf.check_cross_entropy, cross_entropy_picking(True), cross_entropy_spec,
                    plans)
    assert re.search(r"the loss subtracts the logit of column \d+, not of the label, column \d+: fetch it from the "
                     r"lane that read column \d+, lane \d+ % 32", message)


def test_a_cross_entropy_that_merges_empty_states_is_shown_the_masked_row():
    message = fails(r"row 2 \(a masked vocabulary: some logits are -inf \(the label's is not\), so a lane may hold "
                    r"only -inf, the empty state\)", gf.check_cross_entropy,
                    cross_entropy_picking(False, guard_empty=False, from_label_lane=True), cross_entropy_spec,
                    gf.warp_rows([(9, 100)], warps=[1]))
    assert "got nan" in message and "exp(-inf - -inf)" in message and "1 of 9 rows are wrong: 2" in message
    gf.check_cross_entropy(cross_entropy_picking(False, from_label_lane=True), cross_entropy_spec,
                           gf.warp_rows([(9, 100), (40, 33)], warps=[1, 4]), quiet=True)


def test_a_cross_entropy_taken_as_the_log_of_a_softmax_is_told_its_probability_underflowed():
    x = np.array([[30000.0, 29000.0, 1.0]], np.float32)
    diagnose = gf.picked_diagnosis(x, np.array([1], np.int32), np.array([1000.0]), np.array([1e-2]), -100)
    assert diagnose(0, np.array([np.inf], np.float32)).startswith(
        "the label's logit is 1000 below the row's max, so its probability exp(picked - m) / l is 0 in float32")


def test_attention_without_the_causal_mask_is_told_so():
    message = fails(r"row 0 is wrong", gf.check_attention, flash_kernel(mask=False), [(40, 16)], block_rows=BQ,
                    key_block=BKEYS)
    assert "its output is attention over keys 0 to 15, but query 0 sees only keys 0 to 0: the causal mask is " \
           "missing" in message
    ones = np.ones((3, 4), np.float32)
    assert gf.attention_diagnosis(ones, ones, ones, True, 16)(1, np.zeros(4)).startswith(
        "its output is all 0, though query 1 sees keys 0 to 1: every p = exp2(s - m) of it was 0, or never added to l")
    assert "are 0 to 1, in 1 block of 16: check" in gf.attention_diagnosis(ones, ones, ones, True, 16)(1, np.ones(4) / 3)


def test_a_thread_that_returns_before_the_barrier_is_told_to_copy_its_share():
    message = fails(r"which nothing has written \(shared memory", gf.check_attention, flash_kernel(early_exit=True),
                    [(20, 16)], block_rows=BQ, key_block=BKEYS)
    assert "had returned before this read, at line" in message  # the simulator names the threads and the line
    assert "guard the work, not the barrier" in message
    assert "guard only the final store" not in message  # the same advice is not given twice


def test_a_softmax_row_of_zeros_is_told_its_sum_was_zero_nan_or_infinite():
    diagnose = gf.proportional_diagnosis(np.array([[0.25, 0.75], [0.5, 0.5]]))
    assert diagnose(1, np.zeros(2, np.float32)).startswith("the whole row is 0: the sum l it is divided by was 0, NaN")
    assert "times 2" in diagnose(0, np.array([0.5, 1.5], np.float32))
    one_column = gf.proportional_diagnosis(np.array([[1.0]]))  # a row of one value: 1.0 expected
    assert one_column(0, np.zeros(1, np.float32)).startswith("the whole row is 0")
    assert "exp(m_old - m_new), at most 1" in one_column(0, np.zeros(1, np.float32))


@cuda.jit
def softmax_never_rescaled(y, x):  # lecture 5's one-pass puzzle with the sum never rescaled: right on 1 column
    r = cuda.grid(1)
    if r < x.shape[0]:
        m, l = float32(-math.inf), float32(0)
        for j in range(x.shape[1]):
            m = max(m, x[r, j])
            if m > float32(-math.inf):
                l += math.exp(x[r, j] - m)
        for j in range(x.shape[1]):
            y[r, j] = math.exp(x[r, j] - fu.safe_max(m)) * fu.reciprocal(l)


def test_a_kernel_right_only_on_a_smaller_input_is_not_told_it_assumes_its_block():
    """Lecture 5's puzzle plans: a row of 1 column (block 8) needs no rescale, so it passes; the rows of 33 then
    fail with both blocks, and the block is not what is wrong."""
    plans = gf.thread_rows([(3, 1), (40, 33), (9, 200)], threads=(32, 8))
    message = fails("rows are wrong", gf.check_row_kernel, softmax_never_rescaled, softmax_spec, plans)
    assert "the right softmax times" in message
    assert "With block=" not in message
