"""Module 4's pictures: im2col cells and warp loads, checked against NumPy and the simulator's trace."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numpy.lib.stride_tricks import sliding_window_view  # noqa: E402

from gpucourse import simulated, trace  # noqa: E402
from gpucourse.figures import conv as cf  # noqa: E402
from gpucourse.kernels import conv  # noqa: E402
from on_a_slide import SMALLEST_TEXT, smallest_text  # noqa: E402

rng = np.random.default_rng(4)
GEOMETRIES = [(2, 5, 5, 3, 3, 1, 1), (3, 7, 6, 3, 2, 2, 0), (1, 9, 8, 5, 5, 2, 2), (4, 4, 4, 1, 1, 1, 0)]


def windows(x, R, S, stride, padding):
    """im2col of one image (C, H, W) by NumPy's sliding windows: (Ho Wo, C R S)."""
    padded = np.pad(x, ((0, 0), (padding, padding), (padding, padding)))
    view = sliding_window_view(padded, (R, S), axis=(1, 2))[:, ::stride, ::stride]  # (C, Ho, Wo, R, S)
    return view.transpose(1, 2, 0, 3, 4).reshape(view.shape[1] * view.shape[2], -1)


@pytest.mark.parametrize("C, H, W, R, S, stride, padding", GEOMETRIES)
def test_im2col_indices_pick_the_windows(C, H, W, R, S, stride, padding):
    x = rng.standard_normal((C, H, W))
    cells = cf.im2col_indices(C, H, W, R, S, stride, padding)
    picked = np.where(cells == cf.PADDING, 0.0, x.ravel()[np.maximum(cells, 0)])
    np.testing.assert_array_equal(picked, windows(x, R, S, stride, padding))
    assert cells.shape == (conv.output_size(H, R, stride, padding) * conv.output_size(W, S, stride, padding), C * R * S)


def test_im2col_bytes_of_a_resnet_layer():
    data, matrix = cf.im2col_bytes((32, 64, 56, 56), 3, 3, padding=1)
    assert data == 32 * 64 * 56 * 56 * 4 and matrix == 9 * data  # same size out: every input 9 times
    data, matrix = cf.im2col_bytes((1, 3, 8, 8), 2, 2, stride=2)
    assert matrix == data  # 2 x 2 windows, stride 2: each input exactly once
    with pytest.raises(ValueError, match="does not fit"):
        cf.im2col_bytes((1, 3, 4, 4), 7, 7)
    with pytest.raises(ValueError, match="stride must be at least 1"):
        cf.im2col_indices(1, 4, 4, 3, 3, stride=0)


@pytest.mark.parametrize("C, H, W, R, S, stride, padding", GEOMETRIES)
def test_loader_offsets_address_the_im2col_cells(C, H, W, R, S, stride, padding):
    B = 2
    x = rng.standard_normal((B, C, H, W))
    matrix = np.concatenate([windows(image, R, S, stride, padding) for image in x])  # (B Ho Wo, C R S)
    pixels = rng.integers(0, matrix.shape[0], 64)
    taps = rng.integers(0, matrix.shape[1], 64)
    offsets = cf.loader_offsets("NCHW", x.shape, R, S, pixels, taps, stride, padding)
    loaded = np.where(offsets == cf.PADDING, 0.0, x.ravel()[np.maximum(offsets, 0)])
    np.testing.assert_array_equal(loaded, matrix[pixels, taps])
    # NHWC: the same cells, with taps ordered (p, q, c)
    x_nhwc = x.transpose(0, 2, 3, 1)
    c, pq = np.divmod(taps, R * S)
    offsets = cf.loader_offsets("NHWC", x_nhwc.shape, R, S, pixels, pq * C + c, stride, padding)
    loaded = np.where(offsets == cf.PADDING, 0.0, x_nhwc.ravel()[np.maximum(offsets, 0)])
    np.testing.assert_array_equal(loaded, matrix[pixels, taps])
    with pytest.raises(ValueError, match="layout is one of"):
        cf.loader_offsets("CHWN", x.shape, R, S, pixels, taps)


def test_warp_cells_and_their_sectors():
    pixels, taps = cf.warp_cells("taps", pixel0=9)
    assert list(taps) == list(range(16)) * 2 and list(pixels) == [9] * 16 + [10] * 16
    pixels, taps = cf.warp_cells("pixels", block=(32, 8), warp=1)
    assert list(pixels) == list(range(32)) and set(taps) == {1}
    with pytest.raises(ValueError, match="along is"):
        cf.warp_cells("rows")
    # 8 channels, lanes along the taps: NHWC reads whole pixels, NCHW three floats per image row
    pixels, taps = cf.warp_cells("taps", pixel0=9)
    nhwc = cf.loader_offsets("NHWC", (1, 8, 8, 8), 3, 3, pixels, taps, padding=1)
    nchw = cf.loader_offsets("NCHW", (1, 8, 8, 8), 3, 3, pixels, taps, padding=1)
    assert cf.sectors(nhwc) == 3 and cf.sectors(nchw) == 6
    assert cf.sectors([cf.PADDING, 0, 7, 8]) == 2


@pytest.mark.parametrize("stride, padding", [(1, 1), (2, 0), (2, 2)])
def test_warp_cells_are_what_the_implicit_gemm_loaders_read(stride, padding):
    """Warp 0 of block (0, 0), its copies of the first step along k: NCHW along pixels, NHWC along taps."""
    B, C, H, W, M, R, S = 2, 5, 9, 11, 6, 3, 3
    x = rng.standard_normal((B, C, H, W)).astype(np.float32)
    w = rng.standard_normal((M, C, R, S)).astype(np.float32)
    loads = conv.BK * conv.BP // (conv.THREADS * conv.THREADS)  # each thread copies `loads` cells per step
    warps_apart = conv.THREADS * conv.THREADS // cf.WARP
    for layout, kernel, along, tile in (("NCHW", conv.conv_implicit_gemm, "pixels", (conv.BP, conv.BK)),
                                        ("NHWC", conv.conv_implicit_gemm_nhwc, "taps", (conv.BK, conv.BP))):
        xl, wl = (x, w) if layout == "NCHW" else (x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy())
        with simulated(), trace() as t:
            y = conv.conv2d(xl, wl, stride, padding, kernel)
        np.testing.assert_allclose(y, conv.conv2d_reference(xl, wl, stride, padding, layout), rtol=1e-4, atol=1e-4)
        read = np.zeros(x.size, bool)
        for thread in range(cf.WARP):
            tid = (thread % conv.THREADS, thread // conv.THREADS)
            read |= t.last.touched("x", block=0, phase=0, thread=tid).ravel()
        expected = np.zeros(x.size, bool)
        for load in range(loads):
            pixels, taps = cf.warp_cells(along, tile, warp=load * warps_apart)
            offsets = cf.loader_offsets(layout, xl.shape, R, S, pixels, taps, stride, padding)
            expected[offsets[offsets != cf.PADDING]] = True
        assert expected.any() and np.array_equal(read, expected), layout


def test_figures_build():
    fig = cf.draw_im2col()
    assert "up to 9 times" in fig.axes[0].get_title()
    plt.close(fig)
    fig = cf.draw_im2col(C=1, H=6, W=7, M=2, stride=2, padding=0, pixel=(1, 2))
    assert "each input up to 4 times" in fig.axes[0].get_title()
    plt.close(fig)
    with pytest.raises(ValueError, match="outside the 5 x 5 output"):
        cf.draw_im2col(pixel=(5, 0))
    fig = cf.draw_layout_loads((1, 8, 8, 8), 3, 3, {layout: cf.warp_cells("taps", pixel0=9) for layout in cf.LAYOUTS},
                               padding=1)
    assert [ax.get_title(loc="left") for ax in fig.axes] == [
        "NCHW: 32 lanes load 22 distinct floats, 6 sectors", "NHWC: 32 lanes load 24 distinct floats, 3 sectors"]
    plt.close(fig)


def test_viewer_builds():
    pytest.importorskip("ipywidgets")
    viewer = cf.im2col_viewer(C=1, H=6, W=7, stride=2, padding=0)
    sliders = viewer.children[0].children
    assert [s.max for s in sliders] == [1, 2]
    sliders[1].value = 2
    plt.close("all")


def test_read_counts_and_the_spread_gradient_draw():
    counts = np.arange(12).reshape(3, 4)
    fig = cf.draw_read_counts(counts, "reads of x[0, 0]")
    (ax,) = fig.axes
    assert len(ax.images) == 1 and [t.get_text() for t in ax.texts] == [str(c) for c in range(12)]
    assert ax.get_title() == "reads of x[0, 0]"
    plt.close(fig)
    G = np.array([[1.5, -2.0, 0.5], [-0.25, 3.0, 1.0]], np.float32)  # 2 x 3, stride 2, padding 1: 5 x 7
    fig = cf.draw_spread(G, stride=2, padding=1, name="G[0, 0]")
    (ax,) = fig.axes
    texts = [t.get_text() for t in ax.texts]
    assert len(texts) == 5 * 7 and texts.count("0") == 5 * 7 - G.size
    assert texts[1 * 7 + 1:1 * 7 + 6] == ["1.5", "0", "-2.0", "0", "0.5"]  # row 1: G's first row, spread
    assert ax.get_title() == "G[0, 0] (2 x 3) spread by stride 2, padded: 5 x 7"
    plt.close(fig)


@pytest.mark.parametrize("pixel", [(1, 2), (0, 0)])
def test_im2col_reads_on_a_slide_and_orange_is_the_patch_alone(pixel):
    """Lecture 4's im2col figure (and its viewer's first picture): its numbers were 8 px on a slide, and filter 1
    was orange like the patch."""
    from matplotlib.colors import rgb_to_hsv

    fig = cf.draw_im2col(C=2, H=5, W=5, M=3, R=3, S=3, stride=1, padding=1, pixel=pixel)
    assert smallest_text(fig)[0] >= SMALLEST_TEXT, smallest_text(fig)
    orange = rgb_to_hsv((0.98, 0.62, 0.25))[0]
    hues = [rgb_to_hsv(p.get_facecolor()[:3]) for p in fig.axes[0].patches if p.get_fill()]
    orange_cells = sum(abs(hue - orange) < 0.05 and saturation > 0.2 for hue, saturation, _ in hues)
    assert orange_cells == 2 * 2 * 3 * 3  # the patch in x (in the input or its padding) and in im2col's row, no more
    plt.close(fig)


@pytest.mark.parametrize("stride", [1, 2])
def test_layout_loads_and_spread_read_on_a_slide(stride):
    """Lecture 4's layout figure was 10.5 px on a slide (22 rows of 0.22 inch each) and the spread gradient 12.5."""
    warps = {"NCHW": cf.warp_cells("pixels", block=(conv.BP, conv.BK), pixel0=2 * 16, tap0=4),
             "NHWC": cf.warp_cells("taps", block=(conv.BK, conv.BP), pixel0=2 * 16 + 4)}
    fig = cf.draw_layout_loads((1, 8, 12, 16), 3, 3, warps, stride=stride, padding=1)
    assert smallest_text(fig)[0] >= SMALLEST_TEXT, smallest_text(fig)
    plt.close(fig)
    fig = cf.draw_spread(np.ones((3, 3), np.float32), stride=stride, padding=2, name="G[0, 0]")
    assert smallest_text(fig)[0] >= SMALLEST_TEXT, smallest_text(fig)
    plt.close(fig)
