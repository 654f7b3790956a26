"""The reduction trees and block scans of module 2, worked out in NumPy, and their figures."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpucourse.figures import (additions, blelloch_steps, draw_reduction_trees, draw_scan,  # noqa: E402
                                    hillis_steele_steps, reduction_levels)
from on_a_slide import SMALLEST_TEXT, smallest_text  # noqa: E402

rng = np.random.default_rng(7)


@pytest.mark.parametrize("addressing", ["interleaved", "compact", "sequential"])
@pytest.mark.parametrize("n", [2, 16, 256])
def test_every_tree_sums_into_cell_0(addressing, n):
    values = rng.integers(-9, 10, n)
    levels = reduction_levels(values, addressing)
    assert len(levels) == n.bit_length() - 1
    assert levels[-1].values[0] == values.sum()
    assert additions(levels) == n - 1
    for level in levels:   # no cell is read and written in one level: the adds of a level are independent
        written = [dst for _, dst, _ in level.adds]
        read = [src for _, _, src in level.adds]
        assert len(set(written)) == len(written) and not set(written) & set(read)


def test_which_threads_work():
    levels = {a: reduction_levels(np.arange(16), a) for a in ("interleaved", "compact", "sequential")}
    assert [t for t, _, _ in levels["interleaved"][1].adds] == [0, 4, 8, 12]    # scattered threads
    assert [t for t, _, _ in levels["compact"][1].adds] == [0, 1, 2, 3]         # the first threads ...
    assert [d for _, d, _ in levels["compact"][1].adds] == [0, 4, 8, 12]        # ... on scattered cells
    assert levels["sequential"][1].adds == [(0, 0, 4), (1, 1, 5), (2, 2, 6), (3, 3, 7)]


@pytest.mark.parametrize("n", [2, 8, 16, 1024])
def test_scans_match_cumsum(n):
    values = rng.integers(-9, 10, n)
    assert np.array_equal(hillis_steele_steps(values)[-1].values, np.cumsum(values))
    assert np.array_equal(blelloch_steps(values)[-1].values, np.r_[0, np.cumsum(values)[:-1]])
    assert additions(blelloch_steps(values)) == 2 * (n - 1)
    log = n.bit_length() - 1
    assert additions(hillis_steele_steps(values)) == n * log - (n - 1)


def test_figures_build_and_refuse_other_sizes():
    values = rng.integers(0, 10, 16)
    for fig in (draw_reduction_trees(values), draw_scan(values[:8]), draw_scan(values[:8], "hillis-steele")):
        plt.close(fig)
    with pytest.raises(ValueError, match="power of two"):
        reduction_levels(np.arange(12), "sequential")
    with pytest.raises(ValueError, match="addressing"):
        reduction_levels(np.arange(8), "diagonal")
    with pytest.raises(ValueError, match="method"):
        draw_scan(values, "sklansky")


@pytest.mark.parametrize("draw", [lambda v: draw_reduction_trees(v), lambda v: draw_scan(v[:8])], ids=["trees", "scan"])
def test_text_reads_on_a_slide(draw):
    """Lecture 2b's two trees side by side were 1474 px wide: their 9 pt labels 10 px on a slide."""
    fig = draw(rng.integers(0, 10, 16))
    assert smallest_text(fig)[0] >= SMALLEST_TEXT, smallest_text(fig)
    plt.close(fig)
