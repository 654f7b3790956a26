"""The index explorer: thread_map's mapping and counts, and that the figure and widget build."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from gpucourse.figures import draw_launch, index_explorer, thread_map  # noqa: E402
from on_a_slide import SMALLEST_TEXT, smallest_text  # noqa: E402


def by_index(tmap):
    return {t.index: t for t in tmap.threads}


def test_1d_launch_with_a_tail():
    tmap = thread_map(3, 4, 10)
    assert (tmap.total, tmap.in_bounds, tmap.tail, tmap.uncovered) == (12, 10, 2, 0)
    threads = by_index(tmap)
    t = threads[(6, 0)]
    assert (t.block, t.thread, t.element, t.in_bounds) == ((1, 0), (2, 0), (0, 6), True)
    assert [x for (x, _), t in threads.items() if not t.in_bounds] == [10, 11]
    assert threads[(11, 0)].element == (0, 11)  # past the right edge of the row
    assert tmap.summary() == (
        "3 blocks of 4 threads = 12 threads over 10 elements: 10 in bounds, 2 tail threads need a guard"
    )


def test_1d_launch_too_small():
    tmap = thread_map((2,), (4,), (11,))
    assert (tmap.total, tmap.in_bounds, tmap.tail, tmap.uncovered) == (8, 8, 0, 3)
    assert "3 elements not covered" in tmap.summary()


def test_1d_launch_walks_a_2d_array_in_row_major_order():
    tmap = thread_map(2, 8, (3, 5))
    assert (tmap.in_bounds, tmap.tail, tmap.uncovered) == (15, 1, 0)
    threads = by_index(tmap)
    assert threads[(7, 0)].element == (1, 2)
    assert threads[(15, 0)].element == (3, 0) and not threads[(15, 0)].in_bounds


def test_2d_launch_on_a_non_square_array():
    tmap = thread_map((2, 3), (4, 4), (5, 7))  # x covers 8 columns, y covers 12 rows
    assert (tmap.total, tmap.in_bounds, tmap.tail, tmap.uncovered) == (96, 35, 61, 0)
    threads = by_index(tmap)
    t = threads[(6, 1)]  # x along columns, y along rows
    assert (t.block, t.thread, t.element, t.in_bounds) == ((1, 0), (2, 1), (1, 6), True)
    assert not threads[(7, 0)].in_bounds  # column 7 is past the last column
    assert not threads[(0, 5)].in_bounds  # row 5 is past the last row
    assert {t.element for t in tmap.threads if t.in_bounds} == {(r, c) for r in range(5) for c in range(7)}


def test_2d_launch_too_small_in_one_direction():
    tmap = thread_map((1, 3), (4, 2), (6, 6))  # 4 columns of 6, 6 rows of 6
    assert (tmap.total, tmap.in_bounds, tmap.tail, tmap.uncovered) == (24, 24, 0, 12)


def test_2d_launch_over_a_1d_array_uses_one_row():
    tmap = thread_map((1, 1), (4, 2), 3)
    assert (tmap.in_bounds, tmap.tail) == (3, 5)


@pytest.mark.parametrize("bad", [0, (2, 0), (1, 2, 3)])
def test_rejects_bad_sizes(bad):
    with pytest.raises(ValueError):
        thread_map(bad, 4, 10)


@pytest.mark.parametrize(
    "grid, block, shape",
    [(3, 4, 10), (2, 8, (3, 7)), ((2, 3), (4, 4), (5, 7)), ((1, 1), (4, 4), (6, 10)), ((2, 2), (16, 16), (32, 32))],
)
def test_draw_launch_builds(grid, block, shape):
    fig = draw_launch(grid, block, shape)
    assert fig.axes[0].get_title() == thread_map(grid, block, shape).summary()
    plt.close(fig)


@pytest.mark.parametrize("shape, numbered", [((6, 10), True), ((20, 37), False)])
def test_the_legend_names_numbers_only_where_cells_show_them(shape, numbered):
    ax = draw_launch((3, 2), (16, 16) if shape == (20, 37) else (4, 4), shape).axes[0]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert ("numbers = cuda.grid(2): x,y" in labels) == numbered == bool(ax.texts)
    plt.close("all")


def test_index_explorer_builds_and_redraws():
    widget = index_explorer()
    controls, summary, _ = widget.children
    assert "192 threads over a 10 x 13 array: 130 in bounds, 62 tail threads" in summary.value
    mode = controls.children[0].children[0]
    mode.value = "1-D"
    assert "2 blocks of 8 threads = 16 threads over 13 elements" in summary.value
    cols = controls.children[2].children[1]
    cols.value = 37  # section 5's array: the explorer reaches it
    assert "over 37 elements" in summary.value
    plt.close("all")


def _launches_the_sliders_allow(count: int):
    """The index explorer's first launch, lecture 1's and the cheat sheet's, the sliders' corners, and ``count``
    launches drawn at random within the sliders' ranges (1-D: grid x 1-8, block x 1-32, 1-64 elements; 2-D: also
    grid y 1-8, block y 1-16, 1-32 rows)."""
    import numpy as np

    rng = np.random.default_rng(1)
    fixed = [((2, 3), (8, 4), (10, 13)), ((3, 2), (4, 4), (6, 10)), ((2, 2), (4, 4), (5, 7)), (2, 8, 13),
             ((8, 8), (32, 16), (32, 64)), ((1, 1), (1, 1), (1, 1)), ((8, 8), (1, 1), (32, 64)), ((1, 1), (32, 16), (1, 1)),
             (8, 32, 64), (1, 1, 1), (8, 1, 64), (1, 32, 1), ((4, 4), (8, 4), (20, 37)), (8, 8, 64)]
    drawn = []
    for _ in range(count):
        if rng.random() < 0.3:
            drawn.append((int(rng.integers(1, 9)), int(rng.integers(1, 33)), int(rng.integers(1, 65))))
        else:
            drawn.append(((int(rng.integers(1, 9)), int(rng.integers(1, 9))), (int(rng.integers(1, 33)),
                          int(rng.integers(1, 17))), (int(rng.integers(1, 33)), int(rng.integers(1, 65)))))
    return fixed + drawn


@pytest.mark.parametrize("grid, block, shape", _launches_the_sliders_allow(16))
def test_every_text_of_a_launch_reads_on_a_slide_and_labels_stay_in_their_cells(grid, block, shape):
    """Each text at least 13 px on a slide, at any launch the explorer's sliders reach (the cells' labels were 9 pt,
    scaled to 9.4 px on a slide at the explorer's first launch, 11.5 px at the cheat sheet's): a cell's label within
    its cell, a block's first thread's label within its block's first row, none over another."""
    fig = draw_launch(grid, block, shape)
    assert smallest_text(fig)[0] >= SMALLEST_TEXT, (smallest_text(fig), grid, block, shape)
    ax = fig.axes[0]
    renderer = fig.canvas.get_renderer()
    origin, corner = ax.transData.transform((0, 0)), ax.transData.transform((1, 1))
    cell_w, cell_h = abs(corner[0] - origin[0]), abs(corner[1] - origin[1])  # px
    boxes = [text.get_window_extent(renderer) for text in ax.texts]
    for text, box in zip(ax.texts, boxes):
        assert box.height < cell_h, (text.get_text(), box.height, cell_h)
        room = cell_w if text.get_ha() == "center" else cell_w * thread_map(grid, block, shape).block[0]
        assert box.width < room, (text.get_text(), box.width, room)
    assert not any(a.overlaps(b) for k, a in enumerate(boxes) for b in boxes[k + 1:])
    plt.close(fig)


def test_the_explorer_labels_every_cell_of_its_first_launch_and_lecture_1s():
    """Both small enough for a label in every cell at a slide's size (cells wider than tall where the label needs)."""
    for launch, cells in ((((2, 3), (8, 4), (10, 13)), 16 * 12), (((3, 2), (4, 4), (6, 10)), 12 * 8)):
        fig = draw_launch(*launch)
        assert len(fig.axes[0].texts) == cells
        plt.close(fig)
