"""gpucourse.grading.conv: plans, messages that name the wrong pixel and channel, and budgets that tell kernels apart.

At the end, assignment 4's plausible wrong answers run against the solution notebook's own test cells (as
`test_wrong_answers` does for the other assignments) and must lose the mark with a message that says why.
"""

from dataclasses import replace

import nbformat
import numpy as np
import pytest
from numba import cuda, float32

from conftest import ROOT
from gpucourse import simulated
from gpucourse.grading import (CheckFailed, check_conv, check_conv_function, coalesced, depthwise_pixels,
                               filter_gradients, float32_only, gemm_tiles, halo_tile_reads, im2col_columns,
                               input_gradients, output_tiles, pooled_tiles, reads_per_thread)
from gpucourse.grading.conv import element_name
from gpucourse.kernels import conv as cv

TILE = 16
PATCH = (TILE - 1) * 2 + 5


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


def conv_spec(x, w, stride, padding):
    return cv.conv2d_reference(x, w, stride, padding)


def columns_spec(x, R, S, stride, padding):
    return cv.im2col_reference(x, R, S, stride, padding).T


def depthwise_spec(x, k, stride, padding):
    C = x.shape[3]
    filters = np.zeros((C, C) + k.shape[:2])
    filters[np.arange(C), np.arange(C)] = k.transpose(2, 0, 1)  # channel c sees only channel c
    return cv.conv2d_reference(x, filters.transpose(0, 2, 3, 1), stride, padding, layout="NHWC")


# ---------------------------------------------------------------- kernels under test


def output_pixel(clamp: bool = False):
    """One thread per output pixel of one channel (the plan of `output_tiles`): the direct convolution.

    With ``clamp``, a tap outside the image reads the nearest edge pixel instead of counting as 0.
    """

    @cuda.jit
    def conv(y, x, w, stride, padding):
        v, h = cuda.grid(2)
        M, H, W = w.shape[0], x.shape[2], x.shape[3]
        b, m = cuda.blockIdx.z // M, cuda.blockIdx.z % M
        if h < y.shape[2] and v < y.shape[3]:
            acc = float32(0)
            for c in range(x.shape[1]):
                for p in range(w.shape[2]):
                    for q in range(w.shape[3]):
                        i, j = h * stride + p - padding, v * stride + q - padding
                        if clamp:
                            i, j = min(max(i, 0), H - 1), min(max(j, 0), W - 1)
                        if 0 <= i < H and 0 <= j < W:
                            acc += x[b, c, i, j] * w[m, c, p, q]
            y[b, m, h, v] = acc

    return conv


@cuda.jit
def conv_halo_tile(y, x, w, stride, padding):
    patch = cuda.shared.array((PATCH, PATCH), float32)
    tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
    M, R, S = w.shape[0], w.shape[2], w.shape[3]
    b, m = cuda.blockIdx.z // M, cuda.blockIdx.z % M
    top, left = cuda.blockIdx.y * TILE * stride - padding, cuda.blockIdx.x * TILE * stride - padding
    width = (TILE - 1) * stride + S
    acc = float32(0)
    for c in range(x.shape[1]):
        for e in range(ty * TILE + tx, ((TILE - 1) * stride + R) * width, TILE * TILE):
            i, j = top + e // width, left + e % width
            inside = 0 <= i < x.shape[2] and 0 <= j < x.shape[3]
            patch[e // width, e % width] = x[b, c, i, j] if inside else float32(0)
        cuda.syncthreads()
        for p in range(R):
            for q in range(S):
                acc += patch[ty * stride + p, tx * stride + q] * w[m, c, p, q]
        cuda.syncthreads()
    h, v = cuda.blockIdx.y * TILE + ty, cuda.blockIdx.x * TILE + tx
    if h < y.shape[2] and v < y.shape[3]:
        y[b, m, h, v] = acc


def im2col_along(columns: bool):
    """im2col into (C*R*S, B*Ho*Wo) with threadIdx.x along its columns (coalesced writes) or its rows."""

    @cuda.jit
    def im2col(cols, x, R, S, stride, padding):
        B, C, H, W = x.shape
        Ho, Wo = (H + 2 * padding - R) // stride + 1, (W + 2 * padding - S) // stride + 1
        first, second = cuda.grid(2)
        n, k = (first, second) if columns else (second, first)
        if n < cols.shape[1] and k < cols.shape[0]:
            b, h, v = n // (Ho * Wo), n // Wo % Ho, n % Wo
            i, j = h * stride + k // S % R - padding, v * stride + k % S - padding
            cols[k, n] = x[b, k // (R * S), i, j] if 0 <= i < H and 0 <= j < W else float32(0)

    return im2col


def depthwise_along(channels: bool):
    """Depthwise NHWC with threadIdx.x along the channels (coalesced) or along the output pixels."""

    @cuda.jit
    def depthwise(y, x, k, stride, padding):
        first, second = cuda.grid(2)
        c, n = (first, second) if channels else (second, first)
        B, H, W, C = x.shape
        Ho, Wo = y.shape[1], y.shape[2]
        if c < C and n < B * Ho * Wo:
            b, h, v = n // (Ho * Wo), n // Wo % Ho, n % Wo
            acc = float32(0)
            for p in range(k.shape[0]):
                for q in range(k.shape[1]):
                    i, j = h * stride + p - padding, v * stride + q - padding
                    if 0 <= i < H and 0 <= j < W:
                        acc += x[b, i, j, c] * k[p, q, c]
            y[b, h, v, c] = acc

    return depthwise


# ---------------------------------------------------------------- plans and messages


def test_plans_cover_the_outputs_with_their_launches():
    im2col, = im2col_columns([(2, 3, 7, 9, 3, 2)], stride=2, padding=1, block=(32, 8))
    assert im2col.out == (18, 2 * 4 * 5) and im2col.grid == (2, 3) and im2col.scalars == (3, 2, 2, 1)
    gemm, = gemm_tiles([(2, 20, 6, 7, 27)], tile=16)
    assert gemm.inputs == ((20, 27), (27, 84)) and gemm.out == (2, 20, 6, 7) and gemm.grid == (6, 2)
    tiles, = output_tiles([(2, 3, 37, 21, 4, 5, 5)], stride=2, padding=2)
    assert tiles.out == (2, 4, 19, 11) and tiles.grid == (1, 2, 8)
    pooled, = pooled_tiles([(1, 2, 9, 11, 3, 3, 3)], padding=1, tile=4)
    assert pooled.out == (1, 3, 4, 5) and pooled.grid == (2, 1, 3) and pooled.inputs[2] == (3,)
    depthwise, = depthwise_pixels([(2, 7, 9, 40, 3, 3)], stride=2, block=(32, 4))
    assert depthwise.out == (2, 3, 4, 40) and depthwise.grid == (2, 6)
    dw, = filter_gradients([(2, 3, 7, 9, 5, 3, 2)], padding=1)
    assert dw.inputs == ((2, 5, 7, 10), (2, 3, 7, 9)) and dw.out == (5, 3, 3, 2) and dw.spec_scalars == (3, 2, 1, 1)
    dx, = input_gradients([(2, 3, 8, 9, 5, 3, 3)], stride=2, padding=1)
    assert dx.inputs == ((2, 5, 4, 5), (5, 3, 3, 3)) and dx.grid == (1, 1, 6) and dx.spec_scalars == (8, 9, 2, 1)
    with pytest.raises(ValueError, match="a 5x5 filter does not fit in a 3x9 image with padding 0"):
        output_tiles([(1, 1, 3, 9, 1, 5, 5)])


def test_a_correct_kernel_passes_on_odd_shapes_strides_and_paddings(capsys):
    conv = output_pixel()
    for stride, padding in [(1, 0), (2, 1), (2, 2)]:
        check_conv(conv, conv_spec, output_tiles([(2, 3, 9, 7, 5, 3, 3), (1, 2, 11, 6, 3, 2, 4)], stride, padding,
                                                 tile=8))
    check_conv(im2col_along(columns=True), columns_spec, im2col_columns([(2, 3, 7, 9, 3, 3)], 2, 2))
    check_conv(depthwise_along(channels=True), depthwise_spec, depthwise_pixels([(2, 7, 9, 40, 3, 3)], 2, 1))
    assert capsys.readouterr().out.count("✓") == 5


def test_a_wrong_output_is_named_by_image_pixel_and_channel():
    with pytest.raises(CheckFailed) as failed:
        check_conv(output_pixel(clamp=True), conv_spec, output_tiles([(2, 3, 9, 7, 5, 3, 3)], stride=1, padding=1, tile=8))
    message = str(failed.value)
    assert "out[0, 0, 0, 0] (image b=0, output pixel h=0, w=0, channel m=0) should be" in message
    assert "every wrong output's window overlaps the padding" in message


def test_a_missing_write_says_it_was_never_written():
    @cuda.jit
    def skips_the_last_channel(y, x, w, stride, padding):
        v, h = cuda.grid(2)
        M = w.shape[0]
        b, m = cuda.blockIdx.z // M, cuda.blockIdx.z % M
        if h < y.shape[2] and v < y.shape[3] and m < M - 1:
            acc = float32(0)
            for c in range(x.shape[1]):
                for p in range(w.shape[2]):
                    for q in range(w.shape[3]):
                        acc += x[b, c, h * stride + p, v * stride + q] * w[m, c, p, q]
            y[b, m, h, v] = acc

    with pytest.raises(CheckFailed, match=r"out\[0, 2, 0, 0\] \(image b=0, output pixel h=0, w=0, channel m=2\) "
                                          r"should be .*never written") as failed:
        check_conv(skips_the_last_channel, conv_spec, output_tiles([(1, 2, 6, 6, 3, 3, 3)]))
    assert "overlaps the padding" not in str(failed.value)


def test_outputs_never_written_are_not_blamed_on_the_padding():
    """Outputs left unwritten (the NaN poison, or a denormal of device memory nothing wrote) whose windows all
    overlap the padding are said to be unwritten, with the usual causes, not padding read wrong."""
    unwritten = r"\n  they were never written: usually a grid too small to cover the output .*an index that skips them"
    with pytest.raises(CheckFailed, match=r"got nan \(never written.*\n  128 of 1152 elements are wrong" + unwritten) \
            as failed:  # threadIdx.x along the pixels: 32 of 36
        check_conv(depthwise_along(channels=False), depthwise_spec,
                   depthwise_pixels([(1, 9, 9, 32, 3, 3)], stride=2, padding=2, block=(32, 4)))
    assert "overlaps the padding" not in str(failed.value)

    def last_pixels_left_as_allocated(x, w, s, p):
        y = conv_spec(x, w, s, p).astype(np.float32)
        y.reshape(-1)[-2:] = np.float32(5.6e-42)  # what unwritten device memory reads back as, often
        return y

    with pytest.raises(CheckFailed, match=r"got 5\.\d+e-42 \(a denormal: memory nothing wrote, as cuda.device_array "
                                          r"leaves it\)\n  2 of 60 elements are wrong" + unwritten) as failed:
        check_conv_function(last_pixels_left_as_allocated, conv_spec, [(1, 2, 6, 5, 2, 3, 3)], padding=1)
    assert "overlaps the padding" not in str(failed.value)


def test_other_layouts_are_named_in_their_own_terms():
    nhwc, = depthwise_pixels([(1, 4, 5, 3, 3, 3)], padding=1)
    kase, = filter_gradients([(1, 2, 5, 5, 3, 3, 3)])
    assert element_name(nhwc, (0, 1, 2, 3)) == "image b=0, output pixel h=1, w=2, channel c=3"  # depthwise: c
    assert element_name(kase, (2, 1, 0, 2)) == "filter m=2, channel c=1, tap p=0, q=2"
    columns, = im2col_columns([(2, 3, 5, 6, 3, 2)], padding=1)  # Ho, Wo = 5, 7
    assert element_name(columns, (13, 40)) == ("row k=13 (channel c=2, filter tap p=0, q=1), "
                                               "column n=40 (image b=1, output pixel h=0, w=5)")
    inputs, = input_gradients([(1, 2, 5, 5, 3, 3, 3)])
    assert element_name(inputs, (0, 1, 4, 3)) == "image b=0, input pixel h=4, w=3, channel c=1"


def test_a_host_function_is_checked_and_its_errors_explained(capsys):
    check_conv_function(lambda x, w, s, p: cv.conv2d(x, w, s, p, kernel=cv.conv_direct), conv_spec,
                        [(2, 3, 9, 7, 5, 3, 3)], stride=2, padding=1)
    assert "✓ <lambda>: correct on 1 call" in capsys.readouterr().out

    def transposed(x, w, s, p):
        return conv_spec(x, w, s, p).transpose(0, 1, 3, 2)

    with pytest.raises(CheckFailed, match=r"transposed\(x of shape \(1, 2, 6, 5\), w of shape \(3, 2, 3, 3\), "
                                          r"stride=1, padding=0\) returned an array of shape \(1, 3, 3, 4\), "
                                          r"not \(1, 3, 4, 3\)"):
        check_conv_function(transposed, conv_spec, [(1, 2, 6, 5, 3, 3, 3)])

    def unwritten(x, w, s, p):
        raise NotImplementedError()

    with pytest.raises(CheckFailed, match=r"unwritten is not written yet"):
        check_conv_function(unwritten, conv_spec, [(1, 2, 6, 5, 3, 3, 3)])

    def broken(x, w, s, p):
        return x[5]

    with pytest.raises(CheckFailed, match=r"broken failed with broken\(x of shape \(1, 2, 6, 5\), .*\):\n  IndexError"):
        check_conv_function(broken, conv_spec, [(1, 2, 6, 5, 3, 3, 3)])

    def off_by_one(x, w, s, p):
        y = cv.conv2d_reference(x, w, s, p)
        y[0, 1, 2, 0] += 1
        return y

    with pytest.raises(CheckFailed, match=r"out\[0, 1, 2, 0\] \(image b=0, output pixel h=2, w=0, channel m=1\)"):
        check_conv_function(off_by_one, conv_spec, [(1, 2, 6, 5, 3, 3, 3)])


# ---------------------------------------------------------------- budgets


def test_the_halo_budget_tells_a_tiled_convolution_from_a_direct_one():
    for stride, padding in [(1, 1), (2, 2)]:
        plan = output_tiles([(2, 3, 37, 21, 2, 5, 5)], stride, padding, tile=TILE)
        check_conv(conv_halo_tile, conv_spec, plan, budget=halo_tile_reads("x", tile=TILE, stride=stride))
        with pytest.raises(CheckFailed, match=r"(?s)correct but over its budget.*read `x` 75 times, more than (6|15): per "
                                              "channel the block's 256 threads copy"):
            check_conv(output_pixel(), conv_spec, plan, budget=halo_tile_reads("x", tile=TILE, stride=stride))


def test_coalescing_budgets_tell_which_axis_threadIdx_x_runs_along():
    plan = im2col_columns([(2, 3, 8, 8, 3, 3)], padding=1)
    check_conv(im2col_along(columns=True), columns_spec, plan, budget=coalesced("cols", kind="write"))
    along_rows = [replace(plan[0], grid=(1, 16))]  # 32 x 8 threads over 27 rows and 128 columns
    with pytest.raises(CheckFailed, match="over its budget"):
        check_conv(im2col_along(columns=False), columns_spec, along_rows, budget=coalesced("cols", kind="write"))
    plan = depthwise_pixels([(2, 7, 9, 64, 3, 3)], stride=2, padding=1)
    check_conv(depthwise_along(channels=True), depthwise_spec, plan, budget=coalesced("x", "k"))
    along_pixels = [replace(plan[0], grid=(2, 8))]  # 32 x 8 threads over 40 pixels and 64 channels
    with pytest.raises(CheckFailed, match="over its budget"):
        check_conv(depthwise_along(channels=False), depthwise_spec, along_pixels, budget=coalesced("x"))


def test_a_float64_literal_in_a_fused_kernel_is_caught():
    def fused(zero):
        @cuda.jit
        def conv_bias_relu_pool(out, x, w, bias, stride, padding):
            v, h = cuda.grid(2)
            M = w.shape[0]
            b, m = cuda.blockIdx.z // M, cuda.blockIdx.z % M
            if h < out.shape[2] and v < out.shape[3]:
                best = zero
                for d in range(4):
                    acc = bias[m]
                    for c in range(x.shape[1]):
                        for p in range(w.shape[2]):
                            for q in range(w.shape[3]):
                                i = (2 * h + d // 2) * stride + p - padding
                                j = (2 * v + d % 2) * stride + q - padding
                                if 0 <= i < x.shape[2] and 0 <= j < x.shape[3]:
                                    acc += x[b, c, i, j] * w[m, c, p, q]
                    best = max(best, acc)
                out[b, m, h, v] = best

        return conv_bias_relu_pool

    def spec(x, w, bias, stride, padding):
        y = np.maximum(conv_spec(x, w, stride, padding) + bias[:, None, None], 0)
        B, M, Ho, Wo = y.shape
        return y[:, :, :Ho // 2 * 2, :Wo // 2 * 2].reshape(B, M, Ho // 2, 2, Wo // 2, 2).max(axis=(3, 5))

    plan = pooled_tiles([(2, 3, 9, 11, 4, 3, 3)], stride=1, padding=1, tile=4)
    check_conv(fused(float32(0)), spec, plan, budget=float32_only())
    with pytest.raises(CheckFailed, match="computes in float64"):
        check_conv(fused(0.0), spec, plan, budget=float32_only())


def test_the_gradients_plans_match_their_specs_and_a_read_budget():
    @cuda.jit
    def every_tap(dx, dy, w, stride, padding):  # reads dy at every tap, multiplies the misses by 0
        j, i = cuda.grid(2)
        B, C, H, W = dx.shape
        b, c = cuda.blockIdx.z // C, cuda.blockIdx.z % C
        if i < H and j < W:
            acc = float32(0)
            for p in range(w.shape[2]):
                for q in range(w.shape[3]):
                    hs, vs = i + padding - p, j + padding - q
                    h, v = max(hs, 0) // stride, max(vs, 0) // stride
                    hit = hs >= 0 and vs >= 0 and hs % stride == 0 and vs % stride == 0
                    for m in range(w.shape[0]):
                        value = dy[b, m, min(h, dy.shape[2] - 1), min(v, dy.shape[3] - 1)]
                        if hit and h < dy.shape[2] and v < dy.shape[3]:
                            acc += value * w[m, c, p, q]
            dx[b, c, i, j] = acc

    def input_grad_spec(dy, w, H, W, stride, padding):
        # the adjoint of the convolution: <conv(x), dy> = <x, dx> for every x, so dx = J^T dy
        B, M = dy.shape[:2]
        C = w.shape[1]
        basis = np.eye(B * C * H * W).reshape(-1, B, C, H, W)
        columns = np.stack([conv_spec(e, w, stride, padding).ravel() for e in basis], axis=1)
        return (columns.T @ dy.ravel()).reshape(B, C, H, W)

    plan = input_gradients([(1, 2, 7, 6, 3, 3, 3)], stride=2, padding=1, tile=4)
    check_conv(every_tap, input_grad_spec, plan)
    with pytest.raises(CheckFailed, match=r"may read `dy` at most 12 times, but .* read it 27 times"):
        check_conv(every_tap, input_grad_spec, plan, budget=reads_per_thread("dy", at_most=lambda s: s[1] * 4))


# ---------------------------------------------------------------- what a student's typical mistakes are told


def test_a_matrix_product_is_described_without_a_filter():
    kase, = gemm_tiles([(1, 4, 3, 5, 7)])
    assert kase.describe() == "grid=(1, 1), block=(16, 16), inputs (4, 7), (7, 15) -> out (1, 4, 3, 5)"
    conv, = output_tiles([(1, 2, 5, 5, 3, 3, 3)], padding=1)
    assert conv.describe().endswith("(3x3 filter, stride 1, padding 1)")


def test_an_index_past_the_output_says_what_the_guard_does_not_fix():
    @cuda.jit
    def swaps_r_and_s(dw, dy, x, stride, padding):  # splits k with R where S belongs: right only when R == S
        kk, m = cuda.grid(2)
        M, C, R, S = dw.shape
        if m < M and kk < C * R * S:
            c, p, q = kk // (R * S), kk // R % S, kk % R
            acc = float32(0)
            for b in range(x.shape[0]):
                for h in range(dy.shape[2]):
                    for v in range(dy.shape[3]):
                        i, j = h * stride + p - padding, v * stride + q - padding
                        if 0 <= i < x.shape[2] and 0 <= j < x.shape[3]:
                            acc += dy[b, m, h, v] * x[b, c, i, j]
            dw[m, c, p, q] = acc

    def weight_grad_spec(dy, x, R, S, stride, padding):
        M, C = dy.shape[1], x.shape[1]
        dY = dy.transpose(1, 0, 2, 3).reshape(M, -1)
        return (dY @ columns_spec(x, R, S, stride, padding).T).reshape(M, C, R, S)

    check_conv(swaps_r_and_s, weight_grad_spec, filter_gradients([(1, 2, 5, 5, 3, 3, 3)], padding=1), quiet=True)
    with pytest.raises(CheckFailed) as failed:
        check_conv(swaps_r_and_s, weight_grad_spec, filter_gradients([(1, 2, 6, 5, 3, 3, 2)]))
    message = str(failed.value)
    assert "needs a guard. If it has one, the index it computed is wrong" in message
    assert "p = k // S % R, q = k % S (a swap shows only when R ≠ S)" in message
    assert "filters that are not square" in message


def test_a_thread_that_returns_before_the_barrier_is_told_to_copy_its_share():
    @cuda.jit
    def returns_early(y, x, w, stride, padding):
        patch = cuda.shared.array((PATCH, PATCH), float32)
        tx, ty = cuda.threadIdx.x, cuda.threadIdx.y
        M, R, S = w.shape[0], w.shape[2], w.shape[3]
        b, m = cuda.blockIdx.z // M, cuda.blockIdx.z % M
        h, v = cuda.blockIdx.y * TILE + ty, cuda.blockIdx.x * TILE + tx
        if h >= y.shape[2] or v >= y.shape[3]:
            return
        top, left = cuda.blockIdx.y * TILE * stride - padding, cuda.blockIdx.x * TILE * stride - padding
        width = (TILE - 1) * stride + S
        acc = float32(0)
        for c in range(x.shape[1]):
            for e in range(ty * TILE + tx, ((TILE - 1) * stride + R) * width, TILE * TILE):
                i, j = top + e // width, left + e % width
                inside = 0 <= i < x.shape[2] and 0 <= j < x.shape[3]
                patch[e // width, e % width] = x[b, c, i, j] if inside else float32(0)
            cuda.syncthreads()
            for p in range(R):
                for q in range(S):
                    acc += patch[ty * stride + p, tx * stride + q] * w[m, c, p, q]
            cuda.syncthreads()
        y[b, m, h, v] = acc

    returned = (r"which nothing has written \(shared memory[^\n]*had returned before this read, at line \d+ "
                r"\(`if h >= y.shape\[2\] or v >= y.shape\[3\]: return`\)[^\n]*guard the work, not the barrier")
    with pytest.raises(CheckFailed, match=returned) as failed:
        check_conv(returns_early, conv_spec, output_tiles([(1, 2, 7, 9, 2, 3, 3)], padding=1, tile=TILE))
    assert "guard only the final store" not in str(failed.value)  # the simulator's line says it: not twice


def make_conv1d(guard_taps, first_tap, step=2, taps=99, zero=float32(0)):
    @cuda.jit
    def conv1d(y, x, w):
        o = cuda.grid(1)
        if o < y.size:
            total = zero
            for t in range(min(w.size, taps)):
                i = step * o + first_tap + t
                if (0 <= i < x.size) or not guard_taps:
                    total += w[t] * x[min(max(i, 0), x.size - 1)]
            y[o] = total

    return conv1d


def test_conv1d_puzzle_catches_padding_mistakes(capsys):
    from gpucourse.course import try_puzzle
    from gpucourse.grading.conv import check_conv1d

    assert try_puzzle(check_conv1d, make_conv1d(True, -1))
    assert capsys.readouterr().out.startswith("✓ conv1d: correct on 8 launches")
    for wrong in (make_conv1d(False, -1), make_conv1d(True, 0)):  # edge taps clamped instead of zero; no padding
        with pytest.raises(CheckFailed, match="conv1d gave a wrong result"):
            check_conv1d(wrong)


def test_conv1d_puzzle_asks_for_float32_and_names_y(capsys):
    from gpucourse.course import try_puzzle
    from gpucourse.grading.conv import check_conv1d

    with pytest.raises(CheckFailed, match=r"conv1d is correct but over its budget: computes in float64"):
        check_conv1d(make_conv1d(True, -1, zero=0.))

    @cuda.jit
    def unguarded(y, x, w):  # every thread of the block writes
        o = cuda.grid(1)
        total = float32(0)
        for t in range(w.size):
            i = 2 * o - 1 + t
            if 0 <= i < x.size:
                total += w[t] * x[i]
        y[o] = total

    @cuda.jit
    def reads_the_padding(y, x, w):  # taps outside x read
        o = cuda.grid(1)
        if o < y.size:
            total = float32(0)
            for t in range(w.size):
                total += w[t] * x[2 * o - 1 + t]
            y[o] = total

    assert not try_puzzle(check_conv1d, unguarded)
    assert "A thread past the end of `y` needs a guard." in capsys.readouterr().out
    with pytest.raises(CheckFailed, match=r"Either this thread has no element of `y` and needs a guard, or the index it "
                                          r"computed into `x` is wrong"):
        check_conv1d(reads_the_padding)


@pytest.mark.parametrize("mistake, said", [
    (dict(first_tap=-1, step=1), "It looks as if the stride is missing"),
    (dict(first_tap=0), "It looks as if the padding shift is missing"),
    (dict(first_tap=-1, taps=3), "It looks as if only 3 taps are summed"),
])
def test_conv1d_puzzle_names_the_mistake(mistake, said):
    from gpucourse.grading.conv import check_conv1d

    with pytest.raises(CheckFailed, match=said):
        check_conv1d(make_conv1d(True, **mistake))


def loader_tables(B, C, H, W, R, S, stride, padding):
    Ho, Wo = (H + 2 * padding - R) // stride + 1, (W + 2 * padding - S) // stride + 1
    b, h, v = np.unravel_index(np.arange(B * Ho * Wo), (B, Ho, Wo))
    c, p, q = np.unravel_index(np.arange(C * R * S), (C, R, S))
    pixel_h, pixel_w = h * stride - padding, v * stride - padding
    return b * C * H * W + pixel_h * W + pixel_w, pixel_h, pixel_w, c * H * W + p * W + q, p, q


@cuda.jit
def loader_kernel(cols, x, pixel_base, pixel_h, pixel_w, tap_offset, tap_h, tap_w, H, W):
    n, k = cuda.grid(2)
    if n < cols.shape[1] and k < cols.shape[0]:
        i, j = pixel_h[n] + tap_h[k], pixel_w[n] + tap_w[k]
        cols[k, n] = x[pixel_base[n] + tap_offset[k]] if 0 <= i < H and 0 <= j < W else float32(0)


@cuda.jit
def loader_unmasked(cols, x, pixel_base, pixel_h, pixel_w, tap_offset, tap_h, tap_w, H, W):
    n, k = cuda.grid(2)
    if n < cols.shape[1] and k < cols.shape[0]:
        cols[k, n] = x[min(max(pixel_base[n] + tap_offset[k], 0), x.size - 1)]  # padding read as a neighbour


@cuda.jit
def loader_dividing(cols, x, pixel_base, pixel_h, pixel_w, tap_offset, tap_h, tap_w, H, W):
    # right, from the pixel's tables, but the tap's (c, p, q) worked out again by division
    n, k = cuda.grid(2)
    if n < cols.shape[1] and k < cols.shape[0]:
        S, R = tap_w[tap_w.size - 1] + 1, tap_h[tap_h.size - 1] + 1
        c, p, q = k // (R * S), k // S % R, k % S
        i, j = pixel_h[n] + p, pixel_w[n] + q
        cols[k, n] = x[pixel_base[n] + c * H * W + p * W + q] if 0 <= i < H and 0 <= j < W else float32(0)


def test_loader_from_tables_within_its_integer_budget():
    from gpucourse.grading.conv import check_loader

    shapes = [(2, 3, 7, 9, 3, 3), (1, 2, 5, 4, 2, 3)]
    check_loader(loader_kernel, loader_tables, shapes, stride=2, padding=1, quiet=True)
    check_loader(loader_kernel, loader_tables, [(1, 1, 6, 6, 1, 1)], block=(64, 4), quiet=True)
    with pytest.raises(CheckFailed, match=r"loader_unmasked gave a wrong result"):
        check_loader(loader_unmasked, loader_tables, shapes, stride=2, padding=1)
    with pytest.raises(CheckFailed, match=r"loader_dividing is correct but over its budget: \d+ integer "
                                          r"instructions per element \([1-9]\d* divisions"):
        check_loader(loader_dividing, loader_tables, shapes, stride=2, padding=1)
    with pytest.raises(CheckFailed, match=r"`pixel_base` should be a 1-D integer array of 70 entries, got float32"):
        check_loader(loader_kernel, lambda *g: [t.astype(np.float32) for t in loader_tables(*g)], shapes, stride=1)


# ---------------------------------------------------------------- assignment 4: wrong answers lose the mark

SOLUTION = ROOT / "solutions" / "04_conv_as_gemm" / "conv_as_gemm.ipynb"
FLOAT64 = r"computes in float64 on the GPU \(.*\.f64.* in its PTX\)"
INPUT_GRAD_LOOPS = ("""        for p in range(R):
            hs = i + padding - p  # h * stride, if this tap reaches row i
            if hs >= 0 and hs % stride == 0 and hs // stride < Ho:
                for q in range(S):
                    vs = j + padding - q
                    if vs >= 0 and vs % stride == 0 and vs // stride < Wo:
                        for m in range(M):
                            acc += dy[b, m, hs // stride, vs // stride] * w[m, c, p, q]
""", """        for m in range(M):
            for h in range(Ho):
                for v in range(Wo):
                    p, q = i + padding - h * stride, j + padding - v * stride
                    if 0 <= p < R and 0 <= q < S:
                        acc += dy[b, m, h, v] * w[m, c, p, q]
""")
SQUARE_PATCH = ("rows, width = (TILE - 1) * stride + R, (TILE - 1) * stride + S",
                "rows, width = (TILE - 1) * stride + R, (TILE - 1) * stride + R")
DEPTHWISE_LOOPS_SWAPPED = [("for p in range(k.shape[0]):", "for p in range(k.shape[1]):"),
                           ("for q in range(k.shape[1]):", "for q in range(k.shape[0]):")]
HO_SHORT = ("Ho = (H + 2 * padding - R) // stride + 1", "Ho = (H + 2 * padding - R) // stride")
GEMM_TILE_UNWRITTEN = (r"(?s)\A(?!.*patch).*which nothing has written .*\n  The block copied `tile_\w\[[0-9:, ]+\]` "
                       r"\(what its threads wrote\) and reads `tile_\w\[\d+, \d+\]`, past it\. Every step copies both "
                       r"tiles whole, 0 past the edge of the matrix .*a load under an `if` with no `else`")

# (answer cell, test cell, the student's changes to the solution's answer, what the failure says)
WRONG_ANSWERS = {
    "an input gradient that scans every output pixel for the taps that reach": (
        "input_grad_kernel", "test_input_grad_reads", [INPUT_GRAD_LOOPS],
        r"its loops ran more than 80 iterations \(R = 3, S = 3, Ho = 8, Wo = 7, M = 4; .*a scan over every output "
        r"pixel \(h, v\) of dy takes M·Ho·Wo"),
    "a weight gradient that walks the taps in NHWC's order": (
        "weight_grad_kernel", "test_weight_grad_coalesced",
        [("c, p, q = kk // (R * S), kk // S % R, kk % S", "p, q, c = kk // (S * C), kk // C % S, kk % C")],
        r"warp writes of `dw` touch [0-9.]+ sectors of 32 bytes each on average, more than 4"),
    "a GEMM summed from 0.0": ("gemm_nchw_kernel", "test_gemm_nchw_tiled", [("acc = float32(0)", "acc = 0.0")], FLOAT64),
    "a tiled convolution summed from 0.0": (
        "conv_tiled_kernel", "test_conv_tiled_halo", [("acc = float32(0)", "acc = 0.0")], FLOAT64),
    "a weight gradient summed from 0.0": (
        "weight_grad_kernel", "test_weight_grad_coalesced", [("acc = float32(0)", "acc = 0.0")], FLOAT64),
    "an input gradient summed from 0.0": (
        "input_grad_kernel", "test_input_grad_reads", [("acc = float32(0)", "acc = 0.0")], FLOAT64),
    "an im2col that splits k with R and S swapped (right when R = S)": (
        "im2col_kernel", "test_im2col_coalesced",
        [("c, p, q = k // (R * S), k // S % R, k % S", "c, p, q = k // (R * S), k // R % S, k % R")],
        r"im2col_kernel gave a wrong result .*\(3x2 filter, stride 2, padding 1\)"),
    "a tiled convolution that copies a square patch (right, but more copies, when R > S)": (
        "conv_tiled_kernel", "test_conv_tiled_halo", [SQUARE_PATCH],
        r"(?s)read `x` 10 times, more than 8.*\(3x1 filter, stride 2, padding 1\)"),
    "a depthwise convolution with the filter's loops swapped (coalescing budget)": (
        "depthwise_kernel", "test_depthwise_coalesced", DEPTHWISE_LOOPS_SWAPPED, r"out of bounds for `k` of shape \(3, 2, 32\)"),
    "a depthwise convolution with the filter's loops swapped (float32 budget)": (
        "depthwise_kernel", "test_depthwise_float32", DEPTHWISE_LOOPS_SWAPPED, r"out of bounds for `k` of shape \(2, 3, 5\)"),
    "a patch without the stride (a visible test at stride 2)": (
        "conv_tiled_kernel", "test_conv_tiled",
        [("rows, width = (TILE - 1) * stride + R, (TILE - 1) * stride + S", "rows, width = TILE - 1 + R, TILE - 1 + S")],
        r"reads `patch\[0, 18\]`, which nothing has written.*\n  The block copied `patch\[0:18, 0:17\]` .* the patch it "
        r"copies is smaller than what its threads read. .* 33 x 32 here"),
    "an im2col whose Ho leaves out the + 1": (
        "im2col_kernel", "test_im2col", [HO_SHORT],
        r"no element of `cols`.*\n  Image b = 1 is past the batch of 1: the columns are n = \(b·Ho \+ h\)·Wo \+ v, and "
        r"this layer has\n  Ho = 5, Wo = 6: Ho = \(H \+ 2·padding − R\) // stride \+ 1"),
    "an im2col whose Ho and Wo leave out the stride": (
        "im2col_kernel", "test_im2col",
        [("Ho = (H + 2 * padding - R) // stride + 1", "Ho = H + 2 * padding - R + 1"),
         ("Wo = (W + 2 * padding - S) // stride + 1", "Wo = W + 2 * padding - S + 1")],
        r"The columns are split as if Ho = \d+, Wo = 8; this layer has Ho = 5, Wo = 4"),
    "a GEMM that writes NCHW with Ho and Wo swapped": (
        "gemm_nchw_kernel", "test_gemm_nchw", [("Ho, Wo = y.shape[2], y.shape[3]", "Wo, Ho = y.shape[2], y.shape[3]")],
        r"A thread past the end of `y` needs a guard.*\n  Here Ho = 3 and Wo = 5: y.shape\[2\] and y.shape\[3\]"),
    "conv_im2col whose im2col kernel splits with a wrong Ho": (
        "im2col_kernel", "test_conv_im2col", [HO_SHORT],
        r"conv_im2col failed .*\n.*\n.*\n  Either this thread has no element of `cols` .*\n  Image b = 2 is past the "
        r"batch of 2: the output pixels are n = \(b·Ho \+ h\)·Wo \+ v"),
    "conv_im2col that copies the filters without flattening them": (
        "conv_im2col", "test_conv_im2col", [("cuda.to_device(w.reshape(M, K))", "cuda.to_device(w)")],
        r"in kernel `gemm_nchw_kernel`, `M, K = w.shape` needs a 2-D w, got a 4-D one: pass w.reshape\(M, C\*R\*S\)"),
    "a GEMM that loads its tiles under an if, with no else": (
        "gemm_nchw_kernel", "test_gemm_nchw",
        [("        tile_w[ty, tx] = w[m, k0 + tx] if m < M and k0 + tx < K else float32(0)\n"
          "        tile_c[ty, tx] = cols[k0 + ty, n] if k0 + ty < K and n < N else float32(0)\n",
          "        if m < M and k0 + tx < K:\n            tile_w[ty, tx] = w[m, k0 + tx]\n"
          "        if k0 + ty < K and n < N:\n            tile_c[ty, tx] = cols[k0 + ty, n]\n")],
        GEMM_TILE_UNWRITTEN),
    "a GEMM whose threads past the edge return before the barriers": (
        "gemm_nchw_kernel", "test_gemm_nchw",
        [("    acc = float32(0)\n", "    if m >= M or n >= N:\n        return\n    acc = float32(0)\n")],
        GEMM_TILE_UNWRITTEN),
    "conv_im2col written while im2col_kernel is still the stub": (
        "im2col_kernel", "test_conv_im2col",
        [("    B, C, H, W = x.shape\n    Wo", "    raise NotImplementedError()\n    B, C, H, W = x.shape\n    Wo")],
        r"\Aim2col_kernel is not written yet \(conv_im2col calls it\): replace its "
        r"`raise NotImplementedError\(\)` with your code and run its cell\.\Z"),
    "a tiled convolution that copies its patch in two loops stepping by blockDim": (
        "conv_tiled_kernel", "test_conv_tiled_halo",
        [("        for e in range(ty * TILE + tx, rows * width, TILE * TILE):\n"
          "            i, j = top + e // width, left + e % width\n"
          "            patch[e // width, e % width] = x[b, c, i, j] if 0 <= i < H and 0 <= j < W else float32(0)\n",
          "        for r in range(ty, rows, cuda.blockDim.y):\n"
          "            for q in range(tx, width, cuda.blockDim.x):\n"
          "                i, j = top + r, left + q\n"
          "                patch[r, q] = x[b, c, i, j] if 0 <= i < H and 0 <= j < W else float32(0)\n")],
        r"read `x` 12 times, more than 6: per channel the block's 256 threads copy the 324 inputs of its tile and halo "
        r"into shared memory once, 2 each\. Two loops over the patch's rows and columns, stepping by blockDim, share "
        r"them unevenly: a thread gets up to 2 of its 18 rows and 2 of its 18 columns, 4 inputs per channel \(3 "
        r"channels here\)\. The flat copy spreads them"),
    "a convolution that returns the spec's answer": (
        "conv_im2col", "test_conv_im2col",
        [("    B, C, H, W = x.shape\n", "    return conv_spec(x, w, stride, padding).astype(np.float32)\n"
                                      "    B, C, H, W = x.shape\n")],
        r"launched no kernel: it computed y on the host \(with NumPy, or by calling a spec\)\. The exercise computes "
        r"it on the device: launch `im2col_kernel` and `gemm_nchw_kernel`\.$"),
    "a convolution whose product is NumPy's": (
        "conv_im2col", "test_conv_im2col",
        [("    y = cuda.device_array((B, M, Ho, Wo), np.float32)\n", ""),
         ("    gemm_nchw_kernel[(math.ceil(N / TILE), math.ceil(M / TILE)), (TILE, TILE)]"
          "(y, cuda.to_device(w.reshape(M, K)), cols)\n    return y.copy_to_host()",
          "    return gemm_nchw_spec(w.reshape(M, K), cols.copy_to_host(), B, Ho, Wo).astype(np.float32)")],
        r"launched `im2col_kernel` but not `gemm_nchw_kernel`: the exercise computes y with `im2col_kernel` and "
        r"`gemm_nchw_kernel`, each launched on the device"),
    "loader tables with Ho off by one": (
        "loader_kernel", "test_loader",
        [("Ho, Wo = (H + 2 * padding - R) // stride + 1,", "Ho, Wo = (H + 2 * padding - R) // stride,")],
        r"`pixel_base` should be a 1-D integer array of 30 entries, got int64 of shape \(24,\)\n  One entry per output "
        r"pixel, B·Ho·Wo = 1·5·6: Ho = \(H"),
}


@pytest.fixture(scope="module")
def assignment_4():
    from test_wrong_answers import cells_of

    return cells_of(nbformat.read(SOLUTION, as_version=4))


def run_test_cell(assignment_4, answer: str, test: str, changes, tmp_path) -> None:
    """The solution's setup and answers, ``answer`` with ``changes``, then test cell ``test``, as nbgrader runs it."""
    from test_wrong_answers import run

    setup, answers, tests = assignment_4
    namespace = {}
    with simulated():
        for k, cell in enumerate(setup):
            run(cell, namespace, tmp_path / f"setup_{k}.py")
        for name, source in answers.items():
            if name == answer:
                for old, new in changes:
                    assert source.count(old) == 1, f"the solution of {answer} changed: update this wrong answer ({old!r})"
                    source = source.replace(old, new)
            run(source, namespace, tmp_path / f"answer_{name}.py")
        run(tests[test], namespace, tmp_path / "test.py")


@pytest.mark.parametrize("wrong", WRONG_ANSWERS)
def test_a_plausible_wrong_answer_of_assignment_4_loses_the_mark(wrong, assignment_4, tmp_path):
    answer, test, changes, message = WRONG_ANSWERS[wrong]
    with pytest.raises(CheckFailed, match=message):
        run_test_cell(assignment_4, answer, test, changes, tmp_path)


# Other right answers that must keep the marks: the input gradient's loops in another order, or over the output
# pixels that reach, found from ranges instead of tests
OTHER_INPUT_GRADIENTS = {
    "filters outermost": """        for m in range(M):
            for p in range(R):
                for q in range(S):
                    hs, vs = i + padding - p, j + padding - q
                    if hs >= 0 and vs >= 0 and hs % stride == 0 and vs % stride == 0:
                        if hs // stride < Ho and vs // stride < Wo:
                            acc += dy[b, m, hs // stride, vs // stride] * w[m, c, p, q]
""",
    "the output pixels that reach, as ranges": """        h0, h1 = max(0, (i + padding - R) // stride + 1), min(Ho, (i + padding) // stride + 1)
        v0, v1 = max(0, (j + padding - S) // stride + 1), min(Wo, (j + padding) // stride + 1)
        for h in range(h0, h1):
            for v in range(v0, v1):
                for m in range(M):
                    acc += dy[b, m, h, v] * w[m, c, i + padding - h * stride, j + padding - v * stride]
""",
}


@pytest.mark.parametrize("test", ["test_im2col_coalesced", "test_gemm_nchw_tiled", "test_conv_im2col",
                                  "test_conv_tiled", "test_conv_tiled_halo", "test_weight_grad_coalesced",
                                  "test_input_grad_reads"])
def test_the_solution_keeps_the_marks_of_the_changed_cells(test, assignment_4, tmp_path, capsys):
    run_test_cell(assignment_4, "", test, [], tmp_path)
    assert "✓" in capsys.readouterr().out


@pytest.mark.parametrize("loops", OTHER_INPUT_GRADIENTS)
@pytest.mark.parametrize("test", ["test_input_grad", "test_input_grad_reads"])
def test_other_right_input_gradients_keep_the_marks(loops, test, assignment_4, tmp_path, capsys):
    run_test_cell(assignment_4, "input_grad_kernel", test, [(INPUT_GRAD_LOOPS[0], OTHER_INPUT_GRADIENTS[loops])],
                  tmp_path)
    assert "✓" in capsys.readouterr().out



def test_a_host_function_must_launch_its_kernels(capsys):
    """Assignment 4's conv_im2col kept its 2 points when it returned the spec's answer, or an im2col and a product
    made with NumPy: a right y must come from the device, from the kernels the exercise names."""

    def on_the_host(x, w, s, p):
        return conv_spec(x, w, s, p).astype(np.float32)

    with pytest.raises(CheckFailed, match=r"on_the_host\(x of shape \(1, 2, 6, 5\), .*\) launched no kernel: it "
                                          r"computed y on the host \(with NumPy, or by calling a spec\)\. .*launch "
                                          r"`conv_direct`\.$"):
        check_conv_function(on_the_host, conv_spec, [(1, 2, 6, 5, 3, 3, 3)], padding=1, kernels=[cv.conv_direct])

    def direct(x, w, s, p):
        return cv.conv2d(x, w, s, p, kernel=cv.conv_direct)

    with pytest.raises(CheckFailed, match=r"launched `conv_direct` but not `im2col_kernel`: the exercise computes y "
                                          r"with `conv_direct` and `im2col_kernel`"):
        check_conv_function(direct, conv_spec, [(1, 2, 6, 5, 3, 3, 3)], padding=1,
                            kernels=[cv.conv_direct, "im2col_kernel"])
    check_conv_function(direct, conv_spec, [(1, 2, 6, 5, 3, 3, 3)], padding=1, kernels=[cv.conv_direct])
    assert "✓ direct: correct on 1 call" in capsys.readouterr().out
