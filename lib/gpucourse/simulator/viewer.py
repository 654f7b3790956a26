"""Pictures of a trace: which threads of a block read and wrote which cells, between two barriers.

`show_trace` draws one barrier phase of one block (any number of threads):
each array is a grid of cells, 1-D arrays wrapped into rows of 32 (one row is
one pass over the 32 shared memory banks). `trace_viewer` wraps it in widgets
to step through blocks, phases and threads.

`figure_view` is the one way the course's widgets show a figure that sliders redraw, here and in
`gpucourse.figures`: an image widget whose picture is replaced, never an ``Output`` widget that captures
a ``display`` (whose every use flushes the kernel's output streams and clears output, and waits on the
kernel's output thread: the viewer cells that stalled on a GPU machine and once on the CPU did that).
It needs no widget front end: without one, the first picture is drawn and nothing waits. `explorer` is the box a
widget cell shows: its display data carries the picture too, as a PNG, so that a page with no widgets (an exported
notebook, a slide deck, a viewer on the web) shows the figure where it would show the widget's name.
"""

from __future__ import annotations

import io

import numpy as np

from .trace import LaunchTrace, Trace

ROW = 32
TEXT_LIMIT = 512  # cells; above this the figure shows colours only
LABEL_FONT, TITLE_FONT = 12, 11  # pt, at most: a cell's label, an array's title (readable on a 1280 x 720 slide)
LEAST_LABEL = 9.5  # pt: 13.2 px at 100 dpi, the course's smallest text on a slide; a label that small does not fit is
# left out (the cell keeps its colour), never drawn smaller (three-digit labels were 9 pt, 10.9 px on lecture 3's slide)
SLIDE_WIDE, SLIDE_TALL = 11.4, 4.7  # in: the most a figure's tight box may take to fit a slide's figure box (11.8 x
# 5 in at 100 dpi, less savefig's padding) unscaled, its titles and labels at their sizes (figures.threads too)


def _launch(trace) -> LaunchTrace:
    return trace.last if isinstance(trace, Trace) else trace


def _cell_grid(shape: tuple) -> tuple[int, int]:
    if len(shape) == 1:
        return (-(-shape[0] // ROW), min(shape[0], ROW)) if shape[0] > ROW else (1, shape[0])
    return int(np.prod(shape[:-1])), shape[-1]


def _accesses(launch: LaunchTrace, array, block: int, phase: int):
    """(writer thread or -1, reader count, kinds touched by ``thread``) per element, for one block and phase."""
    first_lane = block * launch.geometry.threads_per_block
    writer = np.full(array.size, -1, np.int64)
    readers = np.zeros(array.size, np.int64)
    touched_by: dict[int, list] = {}
    for kind, lanes, elements, blocks, phase_of, _site in array.events:
        keep = (blocks == block) & (phase_of == phase)
        if not keep.any():
            continue
        threads, cells = lanes[keep] - first_lane, elements[keep]
        if kind == "read":
            np.add.at(readers, cells, 1)
        else:
            writer[cells] = threads
        touched_by.setdefault(kind, []).append((threads, cells))
    return writer, readers, touched_by


def _touched(launch: LaunchTrace, array, block: int, phase: int) -> bool:
    return any(((blocks == block) & (phase_of == phase)).any() for _k, _l, _e, blocks, phase_of, _s in array.events)


def _labels(writer: np.ndarray, readers: np.ndarray) -> list[str]:
    """Every cell's label (`_accesses`): its writer's thread number, else "r" and how many threads read it."""
    return [str(w) if w >= 0 else (f"r{r}" if r else "") for w, r in zip(writer, readers)]


def show_trace(trace, block=0, phase: int = 0, thread=None, arrays=None, ax=None):
    """Draw what the threads of ``block`` did to each array in barrier phase ``phase``.

    Without ``thread``: a written cell is coloured by its writer and labelled with
    the writer's thread number (threadIdx.x + threadIdx.y * blockDim.x), a read
    cell shows how many threads read it. With ``thread`` (a number or
    ``(x, y)``): its reads are blue, its writes red, both purple.
    """
    import matplotlib.pyplot as plt

    launch = _launch(trace)
    b = launch.geometry.block_number(block)
    everyone = thread is None or (isinstance(thread, (int, np.integer)) and thread < 0)
    me = None if everyone else launch.geometry.thread_number(thread)
    if arrays is None:
        arrays = [n for n, a in launch.arrays.items() if a.space != "local" and _touched(launch, a, b, phase)]
    shown = [(n, launch.array(n)) for n in arrays]
    accesses = {n: _accesses(launch, a, b, phase) for n, a in shown}  # (writer, readers, touched_by) of each
    if ax is None:
        columns = min(len(shown), 3) or 1
        rows = -(-len(shown) // columns) or 1
        grids = [_cell_grid(a.shape) for _, a in shown] or [(1, 1)]
        tallest = max(r / c for r, c in grids)
        width = min(max(3.6, 0.24 * max(c for _, c in grids) + 0.8), 8.0)  # room for labels, within a page
        label_widths = [c * _label_room(max(map(len, _labels(*accesses[n][:2])), default=0)) / 72 + 0.9
                        for (r, c), (n, _) in zip(grids, shown) if r * c <= TEXT_LIMIT and everyone]
        wide = max([width, *label_widths])  # three-digit labels need cells wider than square ones
        fig, axes = plt.subplots(rows, columns, squeeze=False, figsize=(
            min(SLIDE_WIDE, wide * columns), min(SLIDE_TALL, 0.6 + rows * (0.3 + width * min(tallest, 1.5)))))
        for extra in axes.ravel()[len(shown):]:
            extra.axis("off")
        axes = axes.ravel()
    else:
        if len(shown) != 1:
            raise ValueError(f"ax= draws one array; pick it with arrays=[name] (this phase touches {arrays})")
        fig, axes = ax.figure, [ax]
    palette = plt.get_cmap("tab20")(np.arange(20))
    labelled = []  # (axis, columns, one label per element): drawn once the layout has sized the cells
    for axis, (name, array) in zip(axes, shown):
        rows, columns = _cell_grid(array.shape)
        writer, readers, touched_by = accesses[name]
        cells = rows * columns
        colour = np.ones((cells, 4))
        colour[array.size:] = (0.55, 0.55, 0.55, 1)  # a wrapped 1-D array's last row: no element there
        if me is None:
            read_only = (readers > 0) & (writer < 0)
            colour[: array.size][read_only] = (0.82, 0.88, 0.97, 1)
            written = writer >= 0
            colour[: array.size][written] = palette[writer[written] % 20] * (1, 1, 1, 0.85)
        else:
            reads = np.zeros(array.size, bool)
            writes = np.zeros(array.size, bool)
            for kind, parts in touched_by.items():
                for threads, elements in parts:
                    target = reads if kind == "read" else writes
                    target[elements[threads == me]] = True
            any_access = (readers > 0) | (writer >= 0)
            colour[: array.size][any_access] = (0.93, 0.93, 0.93, 1)
            colour[: array.size][reads] = (0.35, 0.55, 0.95, 1)
            colour[: array.size][writes] = (0.9, 0.3, 0.3, 1)
            colour[: array.size][reads & writes] = (0.6, 0.3, 0.8, 1)
        axis.imshow(colour.reshape(rows, columns, 4), aspect="equal", interpolation="nearest")  # `_label_font` may widen
        if cells <= TEXT_LIMIT and me is None:
            labelled.append((axis, columns, _labels(writer, readers)))
        axis.set_xticks(np.arange(-0.5, columns, 1), minor=True)
        axis.set_yticks(np.arange(-0.5, rows, 1), minor=True)
        axis.grid(which="minor", color="white" if cells > TEXT_LIMIT else "0.75", linewidth=0.5)
        axis.tick_params(which="both", length=0, labelsize=TITLE_FONT)
        axis.set_xticks(range(0, columns, max(1, columns // 8)))
        axis.set_yticks(range(0, rows, max(1, rows // 8)))
        axis.set_title(f"{array.space} {name} {array.shape}", fontsize=TITLE_FONT, loc="left")
    # no "=" in the title: at its size the glyph's two strokes blur into one that reads as bold
    named = f"{tuple(thread)}, number {me}" if isinstance(thread, (tuple, list)) else f"{me}"
    who = "all threads" if me is None else f"thread {named} (reads blue, writes red)"
    gx, gy, _ = launch.geometry.grid
    fig.suptitle(f"{launch.kernel}: block ({b % gx}, {b // gx % gy}, {b // (gx * gy)}), phase {phase} "
                 f"(after {phase} barrier{'s' if phase != 1 else ''}), {who}", fontsize=TITLE_FONT + 1)
    fig.tight_layout()
    for axis, columns, labels in labelled:
        size = _label_font(axis, columns, max(map(len, labels)))
        for e, label in enumerate(labels):
            if label and size:
                axis.text(e % columns, e // columns, label, ha="center", va="center", fontsize=size)
    return fig


def _label_room(characters: int) -> float:
    """The width (pt) of a cell that holds a label of ``characters`` digits at `LEAST_LABEL` (`_label_font`)."""
    return 1.02 * 0.64 * max(characters, 1) * LEAST_LABEL / 0.8  # a little over, against rounding


def _label_font(axis, columns: int, characters: int) -> float | None:
    """The font size (pt) that fits ``characters`` across one of ``axis``'s ``columns`` cells, at most `LABEL_FONT`;
    None where that is under `LEAST_LABEL`. A cell is square, or wider where its label needs it and the axis' box
    leaves room (a 16 x 16 tile of three-digit labels)."""
    figure = axis.figure
    rows = axis.get_images()[0].get_array().shape[0]
    box = axis.get_position(original=True)  # the box tight_layout gave the axis, before its aspect shrank it
    box_w, box_h = box.width * figure.get_figwidth() * 72, box.height * figure.get_figheight() * 72  # pt
    tall = min(box_w / columns, box_h / rows)
    wide = min(box_w / columns, max(tall, _label_room(characters)))
    axis.set_aspect(tall / wide)
    axis.apply_aspect()  # the final box
    cell = axis.get_position().width * figure.get_figwidth() * 72 / columns  # pt
    height = axis.get_position().height * figure.get_figheight() * 72 / rows
    size = min(LABEL_FONT, 0.7 * height, 0.8 * cell / (0.64 * max(characters, 1)))  # a digit is about 0.64 em
    return size if size >= LEAST_LABEL else None


def figure_view(draw, controls, before=None):
    """An image widget showing ``draw()`` (a matplotlib figure), drawn again when a control's value changes.

    ``before()``, if given, runs first at each redraw (to adjust a control's range, say).
    """
    import ipywidgets as widgets
    import matplotlib.pyplot as plt

    image = widgets.Image(format="png")

    def redraw(_=None):
        if before is not None:
            before()
        figure = draw()
        png = io.BytesIO()
        figure.savefig(png, format="png", bbox_inches="tight")
        plt.close(figure)
        image.value = png.getvalue()

    for control in controls:
        control.observe(redraw, names="value")
    redraw()
    return image


def explorer(*rows):
    """A `VBox` of ``rows`` (controls, text, a `figure_view` image or an `HTML` view) whose display data also holds
    what it first shows: the picture of its last image, as a PNG, else its last HTML view. A page without widgets
    shows that, a widget front end the live box."""
    import base64

    import ipywidgets as widgets

    box = widgets.VBox(list(rows))
    pictures = [row for row in rows if isinstance(row, widgets.Image)]
    views = [row for row in rows if isinstance(row, widgets.HTML)]
    live = box._repr_mimebundle_

    def with_picture(**options):
        still = ({"image/png": base64.b64encode(pictures[-1].value).decode("ascii")} if pictures
                 else {"text/html": views[-1].value})
        return {**live(**options), **still}

    box._repr_mimebundle_ = with_picture
    return box


def trace_viewer(trace):
    """Widgets to step through the blocks, barrier phases and threads of a traced launch."""
    import ipywidgets as widgets

    launch = _launch(trace)
    g = launch.geometry
    block = widgets.IntSlider(0, 0, g.blocks - 1, description="block")
    phase = widgets.IntSlider(0, 0, launch.barriers(0), description="phase")
    thread = widgets.IntSlider(-1, -1, g.threads_per_block - 1, description="thread")

    def draw():
        return show_trace(launch, block.value, phase.value, None if thread.value < 0 else thread.value)

    def phases():
        phase.max = launch.barriers(block.value)

    image = figure_view(draw, (block, phase, thread), before=phases)
    note = widgets.HTML("thread -1 shows every thread; a number is threadIdx.x + threadIdx.y * blockDim.x")
    return explorer(widgets.HBox([block, phase, thread]), note, image)
