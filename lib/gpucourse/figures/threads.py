"""Which thread touches which element: the index explorer of module 1.

`thread_map` works out, for a 1-D or 2-D launch over a row-major array, the
indices of every thread and the element it touches, following the course's
convention: x (``threadIdx.x``, ``cuda.grid``'s first value) runs along
columns, the contiguous axis, and y along rows. A 1-D launch over a 2-D array
walks it in row-major order (element ``i`` is ``divmod(i, ncols)``).
`draw_launch` draws that map; `index_explorer` puts it under sliders.
"""

from __future__ import annotations

import sys

from dataclasses import dataclass

import numpy as np
from matplotlib import colormaps
from matplotlib.colors import to_rgba

from ..simulator.viewer import SLIDE_TALL, SLIDE_WIDE, explorer, figure_view

Pair = tuple[int, int]


@dataclass(frozen=True)
class Thread:
    """One thread: ``blockIdx``, ``threadIdx`` and ``cuda.grid`` values as (x, y) (y = 0 in a 1-D
    launch), the element it touches as (row, col), and whether that element is in the array."""

    block: Pair
    thread: Pair
    index: Pair
    element: Pair
    in_bounds: bool


@dataclass(frozen=True)
class ThreadMap:
    """Every thread of a launch over an array of ``shape`` rows x cols (a 1-D array is one row)."""

    ndim: int
    grid: Pair
    block: Pair
    shape: Pair
    threads: list[Thread]

    @property
    def total(self) -> int:
        return len(self.threads)

    @property
    def in_bounds(self) -> int:
        return sum(t.in_bounds for t in self.threads)

    @property
    def tail(self) -> int:
        """Threads past the array's edge: without a guard they read or write out of bounds."""
        return self.total - self.in_bounds

    @property
    def uncovered(self) -> int:
        """Elements no thread touches: the launch is too small."""
        return self.shape[0] * self.shape[1] - self.in_bounds

    def summary(self) -> str:
        rows, cols = self.shape
        if self.ndim == 1:
            launch = f"{self.grid[0]} blocks of {self.block[0]} threads"
            array = f"{cols} elements" if rows == 1 else f"a {rows} x {cols} array"
        else:
            launch = f"grid {self.grid} of blocks {self.block}"
            array = f"a {rows} x {cols} array"
        text = f"{launch} = {self.total} threads over {array}: {self.in_bounds} in bounds, "
        text += f"{self.tail} tail threads need a guard" if self.tail else "no tail threads"
        if self.uncovered:
            text += f", {self.uncovered} elements not covered (launch too small)"
        return text


def _sizes(value) -> tuple[int, ...]:
    values = tuple(int(v) for v in value) if isinstance(value, (tuple, list)) else (int(value),)
    if not 1 <= len(values) <= 2 or min(values) < 1:
        raise ValueError(f"expected an int or a tuple of 1 or 2 positive ints, got {value!r}")
    return values


def thread_map(grid, block, shape) -> ThreadMap:
    """Map ``kernel[grid, block]`` over an array of ``shape`` (int or tuple, 1-D or 2-D)."""
    grid, block, shape = _sizes(grid), _sizes(block), _sizes(shape)
    ndim = max(len(grid), len(block))
    (gx, gy), (bx, by) = grid + (1,) * (2 - len(grid)), block + (1,) * (2 - len(block))
    rows, cols = shape if len(shape) == 2 else (1, shape[0])
    flat = ndim == 1 and len(shape) == 2  # a 1-D launch walks a 2-D array row by row
    threads = []
    for block_y in range(gy):
        for block_x in range(gx):
            for thread_y in range(by):
                for thread_x in range(bx):
                    x, y = block_x * bx + thread_x, block_y * by + thread_y
                    row, col = divmod(x, cols) if flat else (y, x)
                    threads.append(Thread((block_x, block_y), (thread_x, thread_y), (x, y),
                                          (row, col), row < rows and col < cols))
    return ThreadMap(ndim, (gx, gy), (bx, by), (rows, cols), threads)


_TAIL, _TAIL_FILL, _HATCH, _UNCOVERED = "#b71c1c", "#f7c6c6", "#e57373", "#ffd400"
# tab20 without its reds (kept for tail threads), pale shades first: neighbouring blocks differ in hue.
_BLOCK_COLOURS = [c for i, c in enumerate(colormaps["tab20"].colors) if i not in (6, 7)]
_BLOCK_COLOURS = _BLOCK_COLOURS[1::2] + _BLOCK_COLOURS[0::2]


def _boundaries(a, b, along_x: bool):
    """Segments of cell edges between owners ``a`` and ``b`` that differ (one of them a block)."""
    r, c = np.nonzero((a != b) & (np.maximum(a, b) >= 0))
    start = np.stack([c, r], axis=1)
    return np.stack([start, start + ((1, 0) if along_x else (0, 1))], axis=1)


# Every text of the drawing is FONT pt, and the drawing (its tight box, the padding `savefig` adds, a notebook's
# ``bbox_inches="tight"``) fits a 1280 x 720 slide's figure box (1180 x 500 px at 100 dpi) unscaled: FONT pt is
# then 13.9 px on a slide, above the course's 13 px floor (labels were 9 pt, and scaled down to 9.4 px at the
# explorer's first launch). Cells that cannot hold their labels at FONT go unlabelled rather than smaller.
FONT = 10  # pt
BIGGEST_CELL = 0.5  # in


def _text_width(characters: int) -> float:
    """Inches a label of ``characters`` digits and commas takes at `FONT`, a little room either side included."""
    return (0.62 * characters + 0.6) * FONT / 72


_TEXT_HEIGHT = 1.3 * FONT / 72  # in: a line of text at `FONT`, with room above and below


def _tick_step(cell: float, room: float) -> int:
    """Every how many cells a tick label goes, so that neighbouring ones, ``room`` inches each, do not touch."""
    return next(step for step in (1, 2, 4, 8, 16, 32, 64, 128, 256) if step * cell >= room or step == 256)


def _ticks(axis_set, n: int, step: int):
    axis_set(np.arange(n) + 0.5, [str(i) if i % step == 0 else "" for i in range(n)], fontsize=FONT)


def _cells(width: int, height: int, label: float, run: float, title_lines: int) -> tuple[float, float, str]:
    """(width, height) of a cell in inches and what the cells show: "each" (every cell its thread's index), "first"
    (the first cell of each block, ``run`` cells wide at least, its first thread's), or "none". A cell is square
    unless its label needs it wider; the grid fits the figure's room with its ticks, title and legend."""
    room_w = SLIDE_WIDE - 0.9  # the row label and its ticks
    room_h = SLIDE_TALL - (0.55 + 0.2 * title_lines) - 0.6  # the column ticks, label and title; a two-row legend
    tall = min(BIGGEST_CELL, room_h / height)
    wide = min(room_w / width, max(tall, label))
    if wide >= label and tall >= _TEXT_HEIGHT:
        return wide, tall, "each"
    wide = min(room_w / width, max(tall, label / run))
    if wide * run >= label and tall >= _TEXT_HEIGHT:
        return wide, tall, "first"
    return min(room_w / width, tall), tall, "none"


def draw_launch(grid, block, shape, ax=None):
    """Draw the array coloured by block, each cell labelled with its thread's ``cuda.grid`` index.

    Tail threads appear as hatched red cells past the array's edge; elements no thread
    covers are yellow. Every text is `FONT` pt and the drawing fits a slide unscaled; where a cell cannot hold its
    label at that size, only the first cell of each block is labelled (with its first thread's index, across the
    block's first cells), or none (the ticks still count rows and columns). Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.collections import LineCollection, PatchCollection
    from matplotlib.patches import Patch, Rectangle

    tmap = thread_map(grid, block, shape)
    rows, cols = tmap.shape
    where = np.array([t.element for t in tmap.threads])
    tail = np.array([not t.in_bounds for t in tmap.threads])
    height, width = np.maximum(where.max(axis=0) + 1, (rows, cols))

    def label(t):
        return str(t.index[0]) if tmap.ndim == 1 else f"{t.index[0]},{t.index[1]}"

    needed = _text_width(max(len(label(t)) for t in tmap.threads))
    run = tmap.block[0] if tmap.ndim == 2 or rows == 1 else min(tmap.block[0], cols)  # a block's first cells in a row
    if ax is None:
        title_lines = 3  # at most, in the narrowest figure; a shorter title leaves room the tight box drops
        wide, tall, shown = _cells(width, height, needed, run, title_lines)
        figure_width = max(6.5, width * wide + 0.9)
        figure_height = (0.55 + 0.2 * title_lines) + height * tall + 0.6
        fig = plt.figure(figsize=(figure_width, figure_height))
        ax = fig.add_axes([(figure_width - width * wide) / 2 / figure_width, 0.6 / figure_height,
                           width * wide / figure_width, height * tall / figure_height])
        aspect = "auto"  # the axes are the grid's size: a cell wider than tall where its label needs it
    else:
        box = ax.get_position().transformed(ax.figure.transFigure).transformed(ax.figure.dpi_scale_trans.inverted())
        wide = tall = min(box.width / width, box.height / height)
        shown = "each" if wide >= needed and tall >= _TEXT_HEIGHT else "first" if wide * run >= needed and \
            tall >= _TEXT_HEIGHT else "none"
        aspect = "equal"

    owner = np.full((height, width), -1)
    owner[where[:, 0], where[:, 1]] = [t.block[1] * tmap.grid[0] + t.block[0] for t in tmap.threads]
    palette = np.array([to_rgba(c) for c in _BLOCK_COLOURS])
    image = np.ones((height, width, 4))
    image[owner >= 0] = palette[owner[owner >= 0] % len(palette)]
    image[where[tail, 0], where[tail, 1]] = to_rgba(_TAIL_FILL)
    image[:rows, :cols][owner[:rows, :cols] < 0] = to_rgba(_UNCOVERED)
    ax.imshow(image, extent=(0, width, height, 0), interpolation="nearest", aspect=aspect)

    # Hatch the tail threads, one rectangle per run of them along a row.
    is_tail = np.zeros((height, width + 2), dtype=int)
    is_tail[where[tail, 0], where[tail, 1] + 1] = 1
    starts, ends = np.nonzero(np.diff(is_tail) == 1), np.nonzero(np.diff(is_tail) == -1)
    runs = [Rectangle((c0, r), c1 - c0, 1) for r, c0, c1 in zip(starts[0], starts[1], ends[1])]
    ax.add_collection(PatchCollection(runs, facecolor="none", edgecolor=_HATCH, hatch="//", lw=0))

    # Thin white lines between cells, dark ones between blocks, a black frame for the array.
    ax.vlines(range(width + 1), 0, height, colors="white", lw=0.6)
    ax.hlines(range(height + 1), 0, width, colors="white", lw=0.6)
    padded = np.pad(owner, 1, constant_values=-1)
    edges = np.concatenate([_boundaries(padded[1:-1, :-1], padded[1:-1, 1:], along_x=False),
                            _boundaries(padded[:-1, 1:-1], padded[1:, 1:-1], along_x=True)])
    ax.add_collection(LineCollection(edges, colors="0.25", lw=1.2))
    ax.add_patch(Rectangle((0, 0), cols, rows, fill=False, edgecolor="black", lw=2.5))

    for t in tmap.threads:
        colour = _TAIL if not t.in_bounds else "black"
        row, col = t.element
        if shown == "each":
            ax.text(col + 0.5, row + 0.5, label(t), ha="center", va="center", fontsize=FONT, color=colour)
        elif shown == "first" and t.thread == (0, 0) and (width - col) * wide >= needed:
            ax.text(col + 0.15, row + 0.5, label(t), ha="left", va="center", fontsize=FONT, color=colour)

    ax.set_xlim(0, width)
    ax.set_ylim(height, 0)
    _ticks(ax.set_xticks, width, _tick_step(wide, _text_width(len(str(width - 1)))))
    _ticks(ax.set_yticks, height, _tick_step(tall, _TEXT_HEIGHT))
    ax.tick_params(length=0, top=True, labeltop=True, bottom=False, labelbottom=False)
    ax.set_xlabel("col (x)", fontsize=FONT)
    ax.xaxis.set_label_position("top")
    ax.set_ylabel("row (y)" if tmap.ndim == 2 else "row", fontsize=FONT)
    ax.set_title(tmap.summary(), fontsize=FONT, wrap=True)
    legend = [Patch(facecolor=_BLOCK_COLOURS[0], label="colour = block")]
    index = "cuda.grid(1)" if tmap.ndim == 1 else "cuda.grid(2): x,y"
    if shown == "each":
        legend.append(Patch(facecolor="white", edgecolor="0.6", label="number = cuda.grid(1)" if tmap.ndim == 1 else
                            "numbers = cuda.grid(2): x,y"))
    elif shown == "first":
        legend.append(Patch(facecolor="white", edgecolor="0.6", label=f"a block's first thread: {index}"))
    if tmap.tail:
        legend.append(Patch(facecolor=_TAIL_FILL, edgecolor=_HATCH, hatch="//", label="tail thread: needs a guard"))
    if tmap.uncovered:
        legend.append(Patch(facecolor=_UNCOVERED, label="element no thread covers"))
    ax.legend(handles=legend, loc="upper center", bbox_to_anchor=(0.5, -0.02), ncol=2, fontsize=FONT, frameon=False)
    ax.set_frame_on(False)
    return ax.figure


def index_explorer():
    """Sliders for the launch and the array; redraws `draw_launch` and the summary. Returns the widget."""
    import ipywidgets as w

    if "google.colab" in sys.modules:  # Colab shows ipywidgets 8 only with its custom widget manager
        from google.colab import output

        output.enable_custom_widget_manager()

    def slider(description, value, high):
        return w.IntSlider(value=value, min=1, max=high, description=description, continuous_update=False,
                           style={"description_width": "7em"})

    mode = w.ToggleButtons(options=["1-D", "2-D"], value="2-D", description="launch")
    # it opens on a launch that none of the lecture's questions asks about; 37 columns fit (section 5's array)
    gx, gy = slider("grid x (blocks)", 2, 8), slider("grid y (blocks)", 3, 8)
    bx, by = slider("block x (threads)", 8, 32), slider("block y (threads)", 4, 16)
    rows, cols = slider("array rows", 10, 32), slider("array cols", 13, 64)
    summary = w.HTML()

    def launch():
        one_d = mode.value == "1-D"
        if one_d:
            return gx.value, bx.value, cols.value
        return (gx.value, gy.value), (bx.value, by.value), (rows.value, cols.value)

    def controls_and_summary():
        one_d = mode.value == "1-D"
        for widget in (gy, by, rows):
            widget.disabled = one_d
        cols.description = "elements" if one_d else "array cols"
        summary.value = f"<b>{thread_map(*launch()).summary()}</b>"

    figure = figure_view(lambda: draw_launch(*launch()), (mode, gx, gy, bx, by, rows, cols), before=controls_and_summary)
    controls = w.HBox([w.VBox([mode, gx, gy]), w.VBox([bx, by]), w.VBox([rows, cols])])
    return explorer(controls, summary, figure)
