"""Module 4's reference convolutions: any shape, stride and padding, both layouts, within their budgets."""

import itertools
import re

import numpy as np
import pytest
from numba import types

from gpucourse import simulated, trace
from gpucourse.kernels import conv as cv
from gpucourse.run.ptx import compile_for_gpu

rng = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


# (B, C, H, W, M, R, S, stride, padding): odd sizes, non-square images and filters, more than one
# block of pixels (N > 64) and of filters (M > 64), K not a multiple of the tile step
SHAPES = [
    (2, 3, 7, 9, 5, 3, 3, 1, 1),
    (1, 4, 10, 7, 70, 3, 2, 2, 2),
    (3, 1, 5, 5, 2, 1, 1, 1, 0),
    (1, 5, 11, 13, 3, 5, 5, 2, 0),
    (2, 17, 6, 8, 9, 3, 3, 1, 2),
    (1, 2, 4, 4, 1, 4, 4, 1, 0),
]


def operands(B, C, H, W, M, R, S):
    x = (rng.standard_normal((B, C, H, W)) * rng.uniform(0.5, 2)).astype(np.float32)
    w = (rng.standard_normal((M, C, R, S)) * rng.uniform(0.5, 2)).astype(np.float32)
    return x, w


def nhwc(x, w):
    return np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.ascontiguousarray(w.transpose(0, 2, 3, 1))


def loops(x, w, stride, padding):
    """The definition, term by term (tiny inputs only)."""
    B, C, H, W = x.shape
    M, _, R, S = w.shape
    Ho, Wo = (H + 2 * padding - R) // stride + 1, (W + 2 * padding - S) // stride + 1
    y = np.zeros((B, M, Ho, Wo))
    for b, m, h, v, c, p, q in itertools.product(range(B), range(M), range(Ho), range(Wo), range(C), range(R), range(S)):
        i, j = h * stride + p - padding, v * stride + q - padding
        if 0 <= i < H and 0 <= j < W:
            y[b, m, h, v] += float(x[b, c, i, j]) * float(w[m, c, p, q])
    return y


def close(got, expected, K):
    np.testing.assert_allclose(got, expected, rtol=1e-5, atol=1e-5 * np.sqrt(K))


def test_the_references_follow_the_definition():
    x, w = operands(2, 3, 5, 6, 4, 3, 2)
    for stride, padding in [(1, 0), (2, 1), (1, 2), (3, 2)]:
        expected = loops(x, w, stride, padding)
        np.testing.assert_allclose(cv.conv2d_reference(x, w, stride, padding), expected, rtol=1e-12, atol=1e-12)
        cols = cv.im2col_reference(x, 3, 2, stride, padding)
        flat = (cols @ w.reshape(4, -1).T.astype(np.float64)).reshape(2, *expected.shape[2:], 4)
        np.testing.assert_allclose(flat.transpose(0, 3, 1, 2), expected, rtol=1e-12, atol=1e-12)
        np.testing.assert_allclose(cv.conv2d_reference(*nhwc(x, w), stride, padding, layout="NHWC"),
                                   expected.transpose(0, 2, 3, 1), rtol=1e-12, atol=1e-12)
    assert [cv.output_size(56, 3, 1, 1), cv.output_size(56, 3, 2, 1), cv.output_size(7, 3, 1, 0, dilation=2),
            cv.output_size(224, 7, 2, 3)] == [56, 28, 3, 112]


@pytest.mark.parametrize("name", list(cv.KERNELS))
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_kernels_on_any_shape_stride_and_padding(name, shape):
    *sizes, stride, padding = shape
    x, w = operands(*sizes)
    kernel = cv.KERNELS[name]
    expected = cv.conv2d_reference(x, w, stride, padding)
    if cv.layout_of(kernel) == "NHWC":
        x, w = nhwc(x, w)
        expected = expected.transpose(0, 2, 3, 1)
    y = np.full(expected.shape, np.nan, np.float32)  # poisoned: an output never written shows
    cv.launch_conv(kernel, y, x, w, stride, padding)
    close(y, expected, w[0].size)
    close(cv.conv2d(x, w, stride, padding, kernel=kernel), expected, w[0].size)


@pytest.mark.parametrize("shape", SHAPES[:4], ids=str)
def test_im2col_kernel_and_conv_through_gemm(shape):
    *sizes, stride, padding = shape
    x, w = operands(*sizes)
    R, S = w.shape[2:]
    cols = cv.im2col_matrix(x, R, S, stride, padding).copy_to_host()
    np.testing.assert_array_equal(cols, cv.im2col_reference(x, R, S, stride, padding).astype(np.float32))
    expected = cv.conv2d_reference(x, w, stride, padding)
    close(cv.conv_im2col(x, w, stride, padding), expected, w[0].size)
    close(cv.conv_im2col(x, w, stride, padding, gemm=cv.mm.matmul_register_tiled), expected, w[0].size)
    close(cv.conv_im2col(x.tolist(), w.tolist(), stride, padding), expected, w[0].size)  # lists, as NumPy takes them


def test_output_size_refuses_a_stride_or_padding_that_makes_no_convolution():
    for stride, padding, said in ((0, 0, "stride must be at least 1 and padding at least 0, got stride=0, padding=0"),
                                  (1, -1, "stride must be at least 1 and padding at least 0, got stride=1, padding=-1"),
                                  (1.5, 0, "stride and padding must be ints, got 1.5 and 0")):
        with pytest.raises(ValueError, match=re.escape(said)):
            cv.output_size(5, 3, stride, padding)


def traced(kernel, B=2, C=8, H=12, W=16, M=40, R=3, S=3, stride=1, padding=1):
    x, w = operands(B, C, H, W, M, R, S)
    expected = cv.conv2d_reference(x, w, stride, padding)
    if kernel is cv.conv_implicit_gemm_nhwc:
        x, w = nhwc(x, w)
        expected = expected.transpose(0, 2, 3, 1)
    with trace() as t:
        y = cv.conv2d(x, w, stride, padding, kernel=kernel)
    close(y, expected, C * R * S)
    return t.last


def test_direct_reads_every_term_from_global_memory():
    t = traced(cv.conv_direct)
    assert t.reads_per_thread("x").max() == 8 * 3 * 3  # an inner pixel: C*R*S inputs
    assert t.reads_per_element("x").max() == 40 * 9  # an inner input: once per filter and tap
    assert t.sectors_per_request("y", "write") == 4  # a warp writes 32 neighbouring outputs


def test_implicit_gemm_reads_like_the_tiled_gemm_and_allocates_nothing():
    t = traced(cv.conv_implicit_gemm, M=70)  # two blocks of filters
    assert {name for name, a in t.arrays.items() if a.space == "global"} == {"y", "x", "w"}  # no im2col matrix
    # an inner input element is in R*S rows of the im2col matrix, each read once per block of filters
    assert t.reads_per_element("x").max() == 9 * 2
    N = 2 * 12 * 16
    t.assert_reads_per_element("w", exactly=-(-N // cv.BP))  # the weights: once per block of pixels
    t.assert_no_bank_conflicts()
    shared = t.reads_per_thread("tile_x") + t.reads_per_thread("tile_w")
    assert shared.max() == -(-72 // cv.BK) * cv.BK * (cv.TP + cv.TF)  # TP + TF shared reads per k for TP * TF FMAs
    assert t.barriers(0) == 2 * -(-72 // cv.BK)


def test_im2col_copies_each_input_once_per_tap():
    x, w = operands(2, 8, 12, 16, 40, 3, 3)
    with trace() as t:
        cv.conv_im2col(x, w, 1, 1)
    first, gemm = t.launches
    assert list(first.arrays) == ["cols", "x"] and first.arrays["cols"].shape == (2 * 12 * 16, 72)
    assert first.reads_per_element("x").max() == 9 and first.sectors_per_request("cols", "write") <= 4
    cols = cv.im2col_matrix(x, 3, 3, 1, 1)
    assert cols.nbytes == 9 * x.nbytes  # 'same' padding: R*S times the input
    assert "cols" not in traced(cv.conv_implicit_gemm).arrays


def test_nhwc_loads_coalesce_at_any_stride_nchw_only_at_stride_one():
    sizes = dict(B=1, C=32, H=9, W=40, M=16)
    nchw_1, nchw_2 = traced(cv.conv_implicit_gemm, **sizes), traced(cv.conv_implicit_gemm, stride=2, **sizes)
    nhwc_2 = traced(cv.conv_implicit_gemm_nhwc, stride=2, **sizes)
    assert nchw_1.sectors_per_request("x") < 5 < nchw_2.sectors_per_request("x")  # stride 2: every other word
    assert nhwc_2.sectors_per_request("x") <= 4  # a warp: 16 neighbouring channels of two pixels
    nhwc_2.assert_no_bank_conflicts()  # the [k, filter] tile padded by 2: its rows start 2 banks apart


@pytest.mark.parametrize("x_shape, w_shape, stride, padding, message", [
    ((1, 3, 8, 8), (4, 2, 3, 3), 1, 0, r"x has 3 channels and w filters of 2"),
    ((1, 3, 8), (4, 3, 3, 3), 1, 0, r"must be 4-D"),
    ((1, 3, 2, 8), (4, 3, 3, 3), 1, 0, r"a 3x3 filter does not fit in a 2x8 image with padding 0"),
    ((1, 3, 8, 8), (4, 3, 3, 3), 0, 0, r"stride must be at least 1"),
    ((1, 3, 8, 8), (4, 3, 3, 3), 1.5, 0, r"stride and padding must be ints"),
])
def test_bad_arguments_are_explained(x_shape, w_shape, stride, padding, message):
    with pytest.raises(ValueError, match=message):
        cv.conv2d(np.zeros(x_shape, np.float32), np.zeros(w_shape, np.float32), stride, padding)


def test_launch_conv_checks_the_output_and_the_kernel():
    x, w = operands(1, 2, 5, 5, 3, 3, 3)
    with pytest.raises(ValueError, match=r"y has shape \(1, 3, 5, 5\); this convolution gives \(1, 3, 3, 3\)"):
        cv.launch_conv(cv.conv_direct, np.zeros((1, 3, 5, 5), np.float32), x, w)
    with pytest.raises(ValueError, match="launch_conv launches direct, implicit_gemm, implicit_gemm_nhwc, implicit"):
        cv.launch_conv(cv.im2col, np.zeros((1, 3, 3, 3), np.float32), x, w)


def test_warp_tiled_other_tiles_and_its_compiled_code():
    """Another tile shape, 16-byte loads of 8 (4, 12) channels with 6 filters (not a multiple of 4), and 16-byte
    stores of 8 filters where the last tile of pixels is partial (its lanes past the end skip the store); PTX: vector
    loads, no local memory."""
    kernel = cv.make_implicit_gemm_warp_tiled(64, 64, 8, 32, 32, 4)
    for sizes in [(2, 8, 9, 6, 6, 3, 3), (1, 4, 5, 7, 8, 3, 3), (1, 12, 6, 5, 7, 3, 2)]:  # 12: c steps by 8 mod 12
        x, w = nhwc(*operands(*sizes))
        expected = cv.conv2d_reference(x, w, 1, 1, "NHWC")
        y = np.full(expected.shape, np.nan, np.float32)
        cv.launch_conv(kernel, y, x, w, 1, 1)
        close(y, expected, w[0].size)
    with pytest.raises(ValueError, match=r"make_implicit_gemm_warp_tiled\(64, 64, 6, 32, 32, 4\): BK = 6"):
        cv.make_implicit_gemm_warp_tiled(64, 64, 6, 32, 32, 4)
    array4 = types.Array(types.float32, 4, "C")
    ptx = compile_for_gpu(cv.conv_implicit_gemm_warp_tiled, (array4,) * 3 + (types.int64,) * 2)
    assert "ld.global.v4.f32" in ptx and "ld.shared.v4.f32" in ptx and "st.global.v4.f32" in ptx
    assert not re.search(r"\b(ld|st)\.local\b", ptx)
    assert re.findall(r"\.shared \.align (\d+)", ptx) == ["16", "16"]  # both tiles, for their 16-byte loads
