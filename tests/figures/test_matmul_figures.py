"""Module 3's pictures, checked against the simulator's trace of the reference kernels."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpucourse import simulated, trace  # noqa: E402
from gpucourse.figures import matmul as mf  # noqa: E402
from gpucourse.kernels import matmul as mm  # noqa: E402
from on_a_slide import SMALLEST_TEXT, smallest_text  # noqa: E402

rng = np.random.default_rng(11)


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


def traced(kernel, M, K, N):
    A = rng.standard_normal((1, M, K)).astype(np.float32)
    B = rng.standard_normal((1, K, N)).astype(np.float32)
    C = np.full((1, M, N), np.nan, np.float32)
    with trace() as t:
        mm.launch(kernel, C, A, B)
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)
    return t


@pytest.mark.parametrize("mapping, kernel", [("rows", mm.matmul_naive), ("columns", mm.matmul_coalesced)])
def test_warp_sectors_are_the_trace_sectors(mapping, kernel):
    size = 32  # full warps and rows aligned to sectors: every warp costs what warp 0 costs
    t = traced(kernel, size, size, size)
    c, a, b = mf.warp_elements(mapping, k=3)
    assert len(c) == 32 and len(np.unique(c, axis=0)) == 32
    assert t.sectors_per_request("A") == mf.sectors(a, size)
    assert t.sectors_per_request("B") == mf.sectors(b, size)
    assert t.sectors_per_request("C", "write") == mf.sectors(c, size)


def test_warp_elements_of_the_two_mappings():
    c, a, b = mf.warp_elements("rows", k=5)
    assert set(map(tuple, c)) == {(r, col) for r in range(16) for col in range(2)}
    assert (a[:, 1] == 5).all() and (b[:, 0] == 5).all()
    assert mf.sectors(a, 64) == 16 and mf.sectors(b, 64) == 1
    c, a, b = mf.warp_elements("columns", k=5)
    assert mf.sectors(a, 64) == 2 and mf.sectors(b, 64) == 2 and mf.sectors(c, 64) == 4
    with pytest.raises(ValueError, match="mapping is one of"):
        mf.warp_elements("diagonal", k=0)


@pytest.mark.parametrize("kernel, BM, BN", [(mm.matmul_naive, 1, 1), (mm.matmul_tiled, mm.TILE, mm.TILE),
                                            (mm.matmul_register_tiled, mm.BM, mm.BN)])
def test_blocked_reads_count_what_the_kernels_read(kernel, BM, BN):
    M, K, N = 37, 29, 70
    t = traced(kernel, M, K, N)
    reads_a, reads_b = mf.blocked_reads(M, N, K, BM, BN)
    assert t.reads_per_element("A").sum() == reads_a
    assert t.reads_per_element("B").sum() == reads_b


def test_intensity_grows_with_the_tile():
    assert mf.blocked_intensity(1, 1) == 0.25  # 2 FLOPs per 8 bytes
    assert mf.blocked_intensity(16, 16) == 4 and mf.blocked_intensity(64, 64) == 16
    assert mf.blocked_intensity(128, 64) == pytest.approx(2 * 128 * 64 / (4 * 192))
    big = 4096
    assert mf.matmul_intensity(big, big, big, 64, 64) == pytest.approx(16, rel=0.01)  # C's writes: a small extra


def test_tiled_steps_match_the_tiles_the_block_reads():
    M, K, N = 40, 40, 45
    t = traced(mm.matmul_tiled, M, K, N)
    steps = mf.tiled_steps(M, N, K, mm.TILE, block=(1, 2))
    assert len(steps) == 3 and t.barriers((1, 2)) == 2 * len(steps)
    for step in steps:
        expected_a = np.zeros((1, M, K), bool)
        expected_a[0, slice(*step.rows), slice(*step.ks)] = True
        expected_b = np.zeros((1, K, N), bool)
        expected_b[0, slice(*step.ks), slice(*step.cols)] = True
        loads = 2 * step.step  # phase 2s loads, phase 2s + 1 computes
        assert np.array_equal(t.touched("A", (1, 2), loads), expected_a)
        assert np.array_equal(t.touched("B", (1, 2), loads), expected_b)
        assert not t.touched("A", (1, 2), loads + 1).any()
        assert t.touched("tile_a", (1, 2), loads + 1).all()  # the whole tile is read after the barrier
        assert t.touched("tile_a", (1, 2), loads, "write").all()
    with pytest.raises(ValueError, match="outside C"):
        mf.tiled_steps(M, N, K, mm.TILE, block=(3, 0))


def test_figures_build():
    for fig in (mf.draw_warp_mapping(), mf.draw_blocking_intensity({"naive": 1, "tiled": 16}),
                mf.draw_tiled_steps(40, 45, 40, 16, block=(2, 2)), mf.draw_tiled_steps(40, 45, 40, steps=[1])):
        assert fig.axes
        plt.close(fig)
    titles = [ax.get_title() for ax in mf.draw_tiled_steps(40, 45, 40, 16).axes]
    assert titles == ["step 0: k = 0..15", "step 1: k = 16..31", "step 2: k = 32..39 (+ 8 zeros)"]
    plt.close("all")


def test_the_zeros_past_k_stay_clear_of_c():
    """The last step's tiles reach 8 columns past A and 8 rows past B: the gap before C holds them."""
    ax = mf.draw_tiled_steps(40, 45, 40, 16, steps=[2]).axes[0]
    # C, M x N, under B, K x N (both 40 x 45 here)
    c = max((p.get_bbox() for p in ax.patches if (p.get_width(), p.get_height()) == (45, 40)), key=lambda b: b.y0)
    tiles = [p.get_bbox() for p in ax.patches if p.get_hatch()]  # the whole tiles of A and B, hatched past the edge
    assert len(tiles) == 2 and all(b.x1 < c.x0 or b.y1 < c.y0 for b in tiles)
    plt.close("all")


def test_viewer_builds():
    pytest.importorskip("ipywidgets")
    viewer = mf.tiled_steps_viewer(40, 45, 40)
    sliders = viewer.children[0].children
    assert [s.max for s in sliders] == [2, 2, 2]
    sliders[2].value = 2
    image = viewer.children[1]
    drawn = int.from_bytes(image.value[16:20], "big")  # the PNG's width in pixels
    assert drawn <= int(image.layout.max_width.removesuffix("px")) < 1.5 * drawn  # not stretched to the cell
    plt.close("all")


def test_micro_tiles_are_what_the_register_tiled_kernel_writes():
    t = traced(mm.matmul_register_tiled, 70, 20, 80)
    last = t.barriers((0, 0))
    for thread in [(0, 0), (5, 3), (15, 15)]:
        rows, cols = mf.micro_tile_cells(*thread, mm.TM, mm.TN, mm.THREADS_N)
        expected = np.zeros((1, 70, 80), bool)
        expected[0][np.ix_(rows, cols)] = True
        assert np.array_equal(t.touched("C", (0, 0), last, "write", thread=thread), expected)
    everyone = [mf.micro_tile_cells(tx, ty) for tx in range(16) for ty in range(16)]
    for contiguous in (False, True):
        owners = np.zeros((64, 64), int)
        for tx in range(16):
            for ty in range(16):
                rows, cols = mf.micro_tile_cells(tx, ty, contiguous=contiguous)
                owners[np.ix_(rows, cols)] += 1
        assert (owners == 1).all()  # every output of the block's tile has exactly one owner
    assert everyone[0] == ([0, 16, 32, 48], [0, 16, 32, 48])
    assert mf.micro_tile_cells(1, 0, contiguous=True) == ([0, 16, 32, 48], [4, 5, 6, 7])
    fig = mf.draw_micro_tiles()
    assert len(fig.axes) == 2
    plt.close(fig)


@pytest.mark.parametrize("draw", [
    lambda: mf.draw_warp_mapping(size=32, k=5),
    lambda: mf.draw_blocking_intensity({"naive: no reuse": 1, "matmul_tiled": 16, "one output per thread, 1024 "
                                        "threads": 32, "matmul_register_tiled": 64, "128 x 128 tiles": 128}),
    lambda: mf.draw_micro_tiles()], ids=["warp mapping", "blocking", "micro-tiles"])
def test_text_reads_on_a_slide(draw):
    """Lecture 3's figures as it draws them (the warp mapping's ticks were 8 px on a slide, the notes 11)."""
    fig = draw()
    assert smallest_text(fig)[0] >= SMALLEST_TEXT, smallest_text(fig)
    plt.close(fig)


def test_the_warp_mapping_names_its_axes_and_sector_lines():
    fig = mf.draw_warp_mapping()
    assert {ax.get_xlabel() for ax in fig.axes} == {"column"} and {ax.get_ylabel() for ax in fig.axes} == {"row", ""}
    assert "sector boundary" in " ".join(t.get_text() for t in fig.legends[0].get_texts())
    plt.close(fig)
