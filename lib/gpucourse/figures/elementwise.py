"""Pictures of tensors as storage + shape + strides, for module 2.

`positions` gives the storage position of every element of a `Tensor`;
`draw_views` draws 2-D views of one storage as grids of cells labelled with
those positions (the same position, the same colour, in every view);
`warp_sectors` lists the 32-byte sectors one warp touches when thread ``i``
reads element ``i`` (row-major over the view's shape), and
`draw_warp_sectors` draws them on the storage, laid out in 128-byte lines.
"""

from __future__ import annotations

import numpy as np

from ..kernels import Tensor

SECTOR_BYTES = 32
WARP = 32


def positions(tensor: Tensor) -> np.ndarray:
    """The storage position of each element, as an int array of ``tensor.shape``."""
    index = np.indices(tensor.shape, dtype=np.int64)
    return tensor.offset + sum((index[k] * s for k, s in enumerate(tensor.strides)), np.zeros(tensor.shape, np.int64))


def warp_positions(tensor: Tensor, warp: int = 0) -> np.ndarray:
    """Storage positions that the threads of warp ``warp`` read, thread ``i`` taking element ``i`` in row-major order."""
    ordinals = np.arange(warp * WARP, min((warp + 1) * WARP, tensor.size))
    return positions(tensor).reshape(-1)[ordinals]


def warp_sectors(tensor: Tensor, warp: int = 0) -> np.ndarray:
    """The 32-byte sectors (numbered from the start of the storage) that warp ``warp`` touches."""
    return np.unique(warp_positions(tensor, warp) * tensor.storage.itemsize // SECTOR_BYTES)


def _colours(n: int) -> np.ndarray:
    """``n`` pale, distinct colours, one per storage position."""
    from matplotlib import colormaps

    base = colormaps["turbo"](np.linspace(0.08, 0.92, max(n, 1)))
    return 0.5 * base + 0.5


def _cells(ax, labels: np.ndarray, colours: np.ndarray, fontsize: float) -> None:
    rows, cols = labels.shape
    ax.imshow(colours, extent=(0, cols, rows, 0), interpolation="nearest")
    ax.vlines(range(cols + 1), 0, rows, colors="white", lw=1.5)
    ax.hlines(range(rows + 1), 0, cols, colors="white", lw=1.5)
    for r in range(rows):
        for c in range(cols):
            ax.text(c + 0.5, r + 0.5, str(labels[r, c]), ha="center", va="center", fontsize=fontsize)
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_xticks(np.arange(cols) + 0.5, [str(c) for c in range(cols)], fontsize=10)
    ax.set_yticks(np.arange(rows) + 0.5, [str(r) for r in range(rows)], fontsize=10)
    ax.tick_params(length=0, top=True, labeltop=True, bottom=False, labelbottom=False)
    ax.set_frame_on(False)


def _as_2d(tensor: Tensor) -> np.ndarray:
    if tensor.ndim > 2:
        raise ValueError(f"draw_views draws 1-D and 2-D tensors, not shape {tensor.shape}")
    return positions(tensor).reshape((1,) * (2 - tensor.ndim) + tuple(tensor.shape))


def draw_views(views: dict[str, Tensor]):
    """Draw the storage, then each view as a grid of cells labelled with the storage position they read.

    All views must share one storage. Returns the figure.
    """
    import matplotlib.pyplot as plt

    storages = {id(t.storage) for t in views.values()}
    if len(storages) != 1:
        raise ValueError("draw_views draws views of one storage; these tensors have different storages")
    storage = next(iter(views.values())).storage
    n = storage.size
    colours = _colours(n)
    grids = [_as_2d(t) for t in views.values()]
    titles = [f"{name}\nshape {t.shape}\nstrides {t.strides}, offset {t.offset}" for name, t in views.items()]
    cell, gap, margin, title = 0.42, 0.35, 0.35, 0.75      # inches
    slots = [max(g.shape[1] * cell, 0.075 * max(map(len, text.splitlines()))) for g, text in zip(grids, titles)]
    width = max(n * cell, sum(slots) + gap * (len(grids) - 1)) + 2 * margin
    tallest = max(g.shape[0] for g in grids) * cell
    height = margin + tallest + title + 0.3 + cell + 0.55
    fig = plt.figure(figsize=(width, height))

    def axes(left, bottom, w, h):
        return fig.add_axes((left / width, bottom / height, w / width, h / height))

    top = axes(margin, height - 0.55 - cell, n * cell, cell)
    strip = np.arange(n).reshape(1, n)
    _cells(top, strip, colours[strip], fontsize=10)
    top.set_yticks([])
    top.set_title(f"storage: {n} elements, position 0 .. {n - 1}", fontsize=10, loc="left")
    left = margin
    for grid, text, slot in zip(grids, titles, slots):
        rows, cols = grid.shape
        ax = axes(left, margin + tallest - rows * cell, cols * cell, rows * cell)
        _cells(ax, grid, colours[grid], fontsize=10)
        ax.set_title(text, fontsize=10, loc="left")
        left += slot + gap
    return fig


def draw_warp_sectors(views: dict[str, Tensor], warp: int = 0, max_lines: int = 64):
    """For each view, the storage in lines of 128 bytes: the elements warp ``warp`` reads, and their sectors.

    Dark cells are the elements the warp's 32 threads read; shaded cells are the rest of the
    32-byte sectors those reads bring in. Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    fig, axes = plt.subplots(1, len(views), figsize=(4.2 * len(views), 5.2), squeeze=False)
    for ax, (name, tensor) in zip(axes[0], views.items()):
        item = tensor.storage.itemsize
        per_line = 4 * SECTOR_BYTES // item   # elements in 128 bytes
        per_sector = SECTOR_BYTES // item
        read = warp_positions(tensor, warp)
        sectors = warp_sectors(tensor, warp)
        lines = int(read.max()) // per_line + 1
        if lines > max_lines:
            raise ValueError(f"warp {warp} of {name} reaches line {lines} of the storage; draw a smaller tensor")
        lines = max(lines, min(max_lines, -(-tensor.storage.size // per_line)))
        image = np.ones((lines * per_line, 4))
        image[: tensor.storage.size] = (0.93, 0.93, 0.93, 1)
        for s in sectors:
            image[s * per_sector:(s + 1) * per_sector] = (0.99, 0.80, 0.55, 1)
        image[read] = (0.80, 0.33, 0.05, 1)
        ax.imshow(image.reshape(lines, per_line, 4), extent=(0, per_line, lines, 0), interpolation="nearest")
        ax.vlines(range(0, per_line + 1, per_sector), 0, lines, colors="0.3", lw=1.2)
        ax.hlines(range(lines + 1), 0, per_line, colors="white", lw=0.5)
        ax.set_xticks(range(0, per_line + 1, per_sector), [f"{b}" for b in range(0, 4 * SECTOR_BYTES + 1, SECTOR_BYTES)],
                      fontsize=10)
        ax.set_yticks(range(0, lines, max(1, lines // 8)))
        ax.tick_params(labelsize=10, length=0)
        ax.set_xlabel("byte within a 128-byte line (4 sectors)", fontsize=10)
        ax.set_ylabel("line of the storage", fontsize=10)
        ax.set_title(f"{name}: strides {tensor.strides}\n{len(read)} threads, {len(sectors)} sectors "
                     f"= {len(sectors) * SECTOR_BYTES} bytes moved for {len(read) * item} read", fontsize=10,
                     loc="left")
    fig.legend(handles=[Patch(color=(0.80, 0.33, 0.05), label="element a thread reads"),
                        Patch(color=(0.99, 0.80, 0.55), label="rest of a sector brought in")],
               loc="lower center", ncol=2, fontsize=10, frameon=False)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig
