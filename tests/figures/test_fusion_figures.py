"""Module 5's pictures: the online softmax steps against NumPy, bytes from a trace, the figures build."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
from numba import cuda  # noqa: E402

from gpucourse import simulated, trace  # noqa: E402
from gpucourse.figures import fusion as ff  # noqa: E402
from on_a_slide import SMALLEST_TEXT, smallest_text  # noqa: E402

rng = np.random.default_rng(51)


def softmax64(row):
    row = np.asarray(row, np.float64)
    e = np.exp(row - row.max())
    return e / e.sum()


@pytest.mark.parametrize("size, block", [(1, 1), (17, 1), (17, 4), (40, 7), (33, 32), (20, 64)])
def test_online_softmax_is_softmax(size, block):
    row = rng.standard_normal(size) * 3
    np.testing.assert_allclose(ff.online_softmax(row, block), softmax64(row), rtol=1e-12, atol=1e-15)


def test_every_step_keeps_the_max_and_the_sum_of_what_it_read():
    row = rng.standard_normal(50) * 4
    row[[3, 20, 21]] = -np.inf
    steps = ff.online_softmax_steps(row, 8)
    assert [s.start for s in steps] == list(range(0, 50, 8)) and steps[-1].stop == 50
    for s in steps:
        seen = row[:s.stop]
        assert s.m_new == seen.max()
        assert s.l_new == pytest.approx(np.exp(seen - s.m_new).sum(), rel=1e-12)
        assert s.scale == pytest.approx(np.exp(s.m_old - s.m_new) if s.block else 0.0)
    assert any(s.scale < 1 for s in steps[1:]), "the data should make the maximum rise at least once"
    assert all(s.scale == 1 for s in steps[1:] if s.block_max <= s.m_old)


def test_large_values_and_masked_entries():
    row = np.array([1000.0, 1001.0, -np.inf, 999.0, 1003.0, -np.inf, 998.0])
    with np.errstate(over="raise"):
        got = ff.online_softmax(row, 2)
    finite = np.isfinite(row)
    expected = np.zeros(row.size)
    expected[finite] = softmax64(row[finite])
    np.testing.assert_allclose(got, expected, rtol=1e-12)
    assert got[2] == got[5] == 0


def test_a_fully_masked_row_gives_zeros_and_a_masked_first_block_rescales_by_zero():
    assert (ff.online_softmax(np.full(9, -np.inf), 4) == 0).all()
    steps = ff.online_softmax_steps(np.full(9, -np.inf), 4)
    assert all(s.m_new == -np.inf and s.l_new == 0 and s.scale == 1 for s in steps)
    row = np.r_[np.full(4, -np.inf), rng.standard_normal(5)]
    first, second = ff.online_softmax_steps(row, 4)[:2]
    assert first.l_new == 0 and second.scale == 0
    np.testing.assert_allclose(ff.online_softmax(row, 4)[4:], softmax64(row[4:]), rtol=1e-12)


@pytest.mark.parametrize("row, block, message", [
    (np.zeros((2, 3)), 2, "1-D"), (np.zeros(0), 2, "non-empty"), (np.ones(4), 0, "positive"),
    (np.array([1.0, np.nan]), 2, "NaN"), (np.array([1.0, np.inf]), 2, r"\+inf"),
])
def test_bad_rows_are_named(row, block, message):
    with pytest.raises(ValueError, match=message):
        ff.online_softmax_steps(row, block)


@cuda.jit
def scale_rows(out, x, factor):
    # One thread per element of a row-major matrix; every thread of a row reads the row's factor.
    i = cuda.grid(1)
    if i < x.size:
        row = i // x.shape[1]
        out[row, i % x.shape[1]] = x[row, i % x.shape[1]] * factor[row]


def test_bytes_per_launch_counts_sectors_of_global_memory():
    rows, cols = 3, 64                                        # a row is 8 sectors; a warp covers half a row
    x = rng.standard_normal((rows, cols)).astype(np.float32)
    factor = rng.standard_normal(rows).astype(np.float32)
    out, twice = np.full_like(x, np.nan), np.full_like(x, np.nan)
    with simulated(), trace() as t:
        scale_rows[-(-x.size // 96), 96](out, x, factor)
        scale_rows[1, 256](twice, out, factor)
    np.testing.assert_allclose(twice, x * factor[:, None] ** 2, rtol=1e-6)
    first, second = ff.bytes_per_launch(t)
    warps = x.size // 32
    assert first == ff.Traffic("scale_rows", x.nbytes + warps * 32, x.nbytes)   # the factor: one sector per warp
    assert second.total == first.total == ff.total_bytes(t) // 2
    assert ff.array_bytes(t, "factor") == 2 * warps * 32 and ff.array_bytes(t, "out", "write") == 2 * x.nbytes
    assert ff.array_bytes(t, "x") == 2 * x.nbytes and ff.array_bytes(t, "x", "write") == 0
    with pytest.raises(KeyError, match="touched"):
        ff.array_bytes(t, "y")
    with pytest.raises(ValueError, match="no launch"), simulated(), trace() as empty:
        ff.bytes_per_launch(empty)


def test_slope():
    ns = np.array([64, 128, 256, 512])
    assert ff.slope(ns, 3 * ns) == pytest.approx(1)
    assert ff.slope(ns, 4 * ns**2 + 0 * ns) == pytest.approx(2)


def test_figures_build():
    row = np.r_[rng.standard_normal(12), -np.inf, 6.0, rng.standard_normal(5)]
    fig = ff.draw_online_step(row, 5, 2)
    assert "block 2 (of 0..3)" in fig.axes[0].get_title(loc="left")
    assert "l = l_old x rescale" in fig.axes[1].texts[0].get_text()
    with pytest.raises(ValueError, match="step is 0 to 3"):
        ff.draw_online_step(row, 5, 4)
    traffic = {"three": [ff.Traffic("a", 4096, 1024), ff.Traffic("b", 2048, 2048)],
               "one": [ff.Traffic("ab", 4096, 1024)]}
    fig = ff.draw_bytes_moved(traffic)
    assert [t.get_text() for t in fig.axes[0].get_yticklabels()] == ["three", "one"]
    fig = ff.draw_bytes_moved({"three": traffic["three"], "ab": [ff.Traffic("ab", 4096, 1024)],
                               "narrow": [ff.Traffic("a name much too long for its segment", 64, 0),
                                          ff.Traffic("b", 8192, 0)]})
    assert [t.get_text() for t in fig.axes[0].texts if "KiB" not in t.get_text()] == ["a", "b", "b"]  # no repeat
    ns = [64, 128, 256]
    fig = ff.draw_memory_against_n({"largest": {"naive": (ns, [4 * n * n for n in ns])}},
                                   {"largest": {"naive": lambda n: 4 * n * n}}, span=(64, 256), note="caption")
    assert "slope 2.00" in fig.axes[0].get_legend().get_texts()[0].get_text()
    formula = fig.axes[0].lines[-1]
    assert list(formula.get_xdata()) == [64, 96, 128, 192, 256]        # s, 1.5 s, 2 s, 3 s, 4 s
    assert list(formula.get_ydata()) == [4 * n * n for n in (64, 96, 128, 192, 256)]
    assert fig._suptitle.get_text() == "caption"
    plt.close("all")


def test_series_with_the_same_points_are_drawn_side_by_side():
    """Lecture 5's largest allocations of row-fused and flash are equal (4 N d): flash's markers hid row-fused's."""
    ns = [64, 128, 256]
    fused = (ns, [4 * n * 16 for n in ns])
    fig = ff.draw_memory_against_n({"largest": {"naive": (ns, [4 * n * n for n in ns]), "row-fused": fused,
                                                "flash": fused}},
                                   {"largest": {"row-fused": lambda n: 64 * n, "flash": lambda n: 64 * n}})
    ax = fig.axes[0]
    points = [line for line in ax.lines if line.get_marker() not in ("None", "")]
    naive, row_fused, flash = (line.get_transform().transform(line.get_xydata()) for line in points)
    size = points[0].get_markersize() * fig.dpi / 72
    assert np.all(flash[:, 0] - row_fused[:, 0] >= size) and np.allclose(flash[:, 1], row_fused[:, 1])
    assert np.allclose(naive, points[0].axes.transData.transform(points[0].get_xydata()))  # alone: where it is
    assert [line.get_linestyle() for line in ax.lines if line.get_marker() in ("None", "")] == ["-", "--"]
    assert [t.get_text() for t in ax.get_legend().get_texts()][2] == "flash: slope 1.00, same as row-fused"
    plt.close(fig)


def test_stepper_builds():
    pytest.importorskip("ipywidgets")
    stepper = ff.online_softmax_stepper(rng.standard_normal(10), 3)
    slider = stepper.children[0]
    assert slider.max == 3
    slider.value = 3
    plt.close("all")


def test_online_step_reads_on_a_slide_and_a_masked_entry_sits_on_the_axis():
    """Lecture 5's online softmax step: legends were 10 px on a slide; the masked entry's cross sat at the row's
    lowest value, where it read as one."""
    row = np.r_[rng.standard_normal(3), -np.inf, rng.standard_normal(9), 4.5, rng.standard_normal(6)]
    fig = ff.draw_online_step(row, block=6, step=2)
    assert smallest_text(fig)[0] >= SMALLEST_TEXT, smallest_text(fig)
    top = fig.axes[0]
    masked = next(line for line in top.get_lines() if line.get_label() == "-inf (masked)")
    (x, y), = masked.get_transform().transform(masked.get_xydata())
    assert x == pytest.approx(top.transData.transform((3, 0))[0]) and y == pytest.approx(top.bbox.y0)
    plt.close(fig)
