"""Pictures of module 3, matrix multiplication, worked out in NumPy.

`warp_elements` lists the elements of C, A and B that the 32 threads of one
warp touch at one step ``k`` of the naive kernels, with ``threadIdx.x`` along
the rows of C (`matmul_naive`) or along its columns (`matmul_coalesced`);
`sectors` counts the 32-byte sectors that costs; `draw_warp_mapping` draws it.

`blocked_reads` and `blocked_intensity` count the global memory reads of a
matmul computed in ``BM x BN`` tiles of C (each block reads a strip of A and a
strip of B); `draw_blocking_intensity` plots FLOPs per byte against the tile
size, with a device's ridge.

`tiled_steps` and `draw_tiled_steps` show which tiles of A and B one block of
`matmul_tiled` loads at each step along K; `tiled_steps_viewer` puts them
behind sliders. `micro_tile_cells` and `draw_micro_tiles` show which outputs a
thread of a register-tiled block owns, with strided or contiguous columns.
The tests and lecture 3 check these pictures against the simulator with
`LaunchTrace.touched`.
"""

from __future__ import annotations

import textwrap
from dataclasses import dataclass

import numpy as np

from ..simulator.viewer import explorer, figure_view
from .roofline import H100_SXM, Device

WARP = 32
SECTOR_FLOATS = 8  # float32 values in a 32-byte sector
MAPPINGS = ("rows", "columns")
MAX_THREADS_PER_BLOCK = 1024  # every GPU the course supports
REGISTER_FILE_BYTES = 256 * 1024  # per SM: 64K 32-bit registers (V100 to H100)
SECTOR_LINE = "0.35"  # the colour of a 32-byte sector's boundary
WARP_MAPPING_FONT = 12  # pt: ticks and labels of `draw_warp_mapping`, 13 px or more on a slide


# -- one warp of the naive kernels ------------------------------------------------------------------------
def warp_elements(mapping: str, k: int, block=(16, 16), warp: int = 0):
    """(C, A, B) cells, each an int array of (row, col) pairs, that warp ``warp`` of block (0, 0) touches at step ``k``.

    ``mapping`` ``"rows"``: ``threadIdx.x`` runs along the rows of C, ``threadIdx.y`` along its columns
    (`matmul_naive`); ``"columns"``: the other way round (`matmul_coalesced`). A warp is 32
    consecutive threads, ``threadIdx.x`` fastest.
    """
    if mapping not in MAPPINGS:
        raise ValueError(f"mapping is one of {MAPPINGS}, not {mapping!r}")
    bx, by = block
    lanes = np.arange(warp * WARP, min((warp + 1) * WARP, bx * by))
    tx, ty = lanes % bx, lanes // bx
    row, col = (tx, ty) if mapping == "rows" else (ty, tx)
    c = np.stack([row, col], axis=1)
    a = np.stack([row, np.full_like(row, k)], axis=1)
    b = np.stack([np.full_like(col, k), col], axis=1)
    return c, a, b


def sectors(cells, row_length: int) -> int:
    """32-byte sectors touched when float32 ``cells`` (row, col) of a row-major matrix are accessed at once.

    ``row_length``: the matrix's number of columns (a multiple of 8 keeps rows aligned to sectors).
    """
    cells = np.asarray(cells)
    flat = cells[:, 0] * row_length + cells[:, 1]
    return len(np.unique(flat // SECTOR_FLOATS))


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def _matrix_cells(ax, shape, cells, colour, pale, title, fontsize=10):
    rows, cols = shape
    image = np.ones((rows, cols, 3)) * 0.94
    flat = np.unique((cells[:, 0] * cols + cells[:, 1]) // SECTOR_FLOATS)
    for s in flat:
        r, c0 = divmod(int(s) * SECTOR_FLOATS, cols)
        image[r, c0:c0 + SECTOR_FLOATS] = pale
    image[cells[:, 0], cells[:, 1]] = colour
    ax.imshow(image, extent=(0, cols, rows, 0), interpolation="nearest")
    ax.vlines(range(0, cols + 1, SECTOR_FLOATS), 0, rows, colors=SECTOR_LINE, lw=0.9)
    ax.hlines(range(rows + 1), 0, cols, colors="white", lw=0.4)
    ax.set_xticks(range(0, cols + 1, SECTOR_FLOATS))
    ax.set_yticks(range(0, rows, SECTOR_FLOATS))  # not the bottom edge, whose label would meet the x axis's 0
    ax.tick_params(labelsize=fontsize, length=0)
    ax.set_title(title, fontsize=fontsize + 2, loc="left")


def draw_warp_mapping(size: int = 32, k: int = 5, block=(16, 16)):
    """Warp 0 of both naive mappings on ``size x size`` matrices: its outputs in C, its reads of A and B at step ``k``.

    Dark cells are the elements the warp touches; pale cells the rest of the 32-byte
    sectors that brings in; vertical lines are sector boundaries (8 floats). Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    names = {"rows": "matmul_naive: threadIdx.x along the rows of C",
             "columns": "matmul_coalesced: threadIdx.x along the columns of C"}
    fig = plt.figure(figsize=(10.5, 6.1), layout="constrained")
    for panel, mapping in zip(fig.subfigures(2, 1), MAPPINGS):
        axes = panel.subplots(1, 3)
        c, a, b = warp_elements(mapping, k, block)
        _matrix_cells(axes[0], (size, size), a, (0.16, 0.38, 0.78), (0.72, 0.82, 0.96),
                      f"A, column {k}: {len(np.unique(a, axis=0))} elements,\n{_plural(sectors(a, size), 'sector')}",
                      WARP_MAPPING_FONT)
        _matrix_cells(axes[1], (size, size), b, (0.13, 0.55, 0.25), (0.72, 0.90, 0.74),
                      f"B, row {k}: {len(np.unique(b, axis=0))} elements,\n{_plural(sectors(b, size), 'sector')}",
                      WARP_MAPPING_FONT)
        _matrix_cells(axes[2], (size, size), c, (0.85, 0.40, 0.05), (0.99, 0.82, 0.60),
                      f"C: the warp's 32 outputs,\n{sectors(c, size)} sectors", WARP_MAPPING_FONT)
        axes[0].set_ylabel("row", fontsize=WARP_MAPPING_FONT)
        for ax in axes:
            ax.set_xlabel("column", fontsize=WARP_MAPPING_FONT)
        panel.suptitle(names[mapping], fontsize=WARP_MAPPING_FONT + 1, x=0.02, ha="left", fontweight="bold")
    fig.legend(handles=[Patch(color="0.35", label="dark: elements the warp touches"),
                        Patch(color=(0.85, 0.85, 0.85), label="pale: the rest of their 32-byte sectors"),
                        Line2D([], [], color=SECTOR_LINE, lw=0.9, label="line: a sector boundary")],
               loc="outside lower center", ncol=3, fontsize=WARP_MAPPING_FONT, frameon=False)
    fig.suptitle(f"Warp 0 (threads 0-31 of a {block[0]} x {block[1]} block) at step k = {k}",
                 fontsize=WARP_MAPPING_FONT + 2)
    return fig


# -- blocking and arithmetic intensity ------------------------------------------------------------------
def blocked_reads(M: int, N: int, K: int, BM: int, BN: int) -> tuple[int, int]:
    """Global reads of A and of B (elements) when each block computes a ``BM x BN`` tile of C.

    A block reads its BM rows of A (all K columns) and its BN columns of B, once each:
    every element of A is read once per block column, ``ceil(N / BN)`` times, every
    element of B ``ceil(M / BM)`` times. ``BM = BN = 1`` is the naive kernel.
    """
    return M * K * -(-N // BN), K * N * -(-M // BM)


def blocked_intensity(BM: int, BN: int, itemsize: int = 4) -> float:
    """FLOPs per byte read from global memory with ``BM x BN`` tiles, for large matrices.

    Per step along K a block reads ``BM + BN`` values for ``BM * BN`` multiply-adds
    (2 FLOPs each): ``2 BM BN / (itemsize (BM + BN))``, ``T / 4`` for square float32 tiles.
    """
    return 2 * BM * BN / (itemsize * (BM + BN))


def matmul_intensity(M: int, N: int, K: int, BM: int, BN: int, itemsize: int = 4) -> float:
    """FLOPs per byte for a whole ``(M, K) @ (K, N)`` product in ``BM x BN`` tiles: reads of A and B, writes of C."""
    reads_a, reads_b = blocked_reads(M, N, K, BM, BN)
    return 2 * M * N * K / (itemsize * (reads_a + reads_b + M * N))


def draw_blocking_intensity(points: dict[str, int] | None = None, device: Device = H100_SXM, ax=None):
    """FLOPs per byte of global memory reads against the side T of a square tile of C, with ``device``'s ridge.

    ``points``: name -> tile side, marked on the line. Returns the figure.
    """
    import matplotlib.pyplot as plt

    if points is None:
        points = {"naive: no reuse": 1, "matmul_tiled": 16, "matmul_register_tiled": 64}
    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.6))
    sides = np.geomspace(1, 1024, 200)
    one_per_thread = np.sqrt(MAX_THREADS_PER_BLOCK)
    in_registers = np.sqrt(REGISTER_FILE_BYTES / 4)
    ax.axvspan(one_per_thread, in_registers, color=(0.90, 0.95, 0.88), zorder=0)
    ax.axvspan(in_registers, 1024, color=(0.97, 0.88, 0.88), zorder=0)
    ax.loglog(sides, [blocked_intensity(t, t) for t in sides], color="black", lw=2,
              label="a T x T tile of C per block: T / 4 FLOP per byte")
    ax.axhline(device.ridge, color="0.35", ls="--", lw=1.2)
    ax.text(1.15, device.ridge * 1.12, f"ridge of the {device.name} (FP32): {device.ridge:.0f} FLOP/byte",
            fontsize=10, color="0.25")
    ax.text(one_per_thread * 1.1, 0.3, f"more than {MAX_THREADS_PER_BLOCK}\noutputs: several\n"
            "per thread\n(register tiling)", fontsize=10, color=(0.2, 0.45, 0.15))
    ax.text(in_registers * 1.08, 0.3, "C's tile\nexceeds the\nregister file\nof an SM\n(256 KiB)",
            fontsize=10, color=(0.6, 0.15, 0.15))
    markers = "osD^v<>"
    for i, (name, side) in enumerate(points.items()):
        value = blocked_intensity(side, side)
        ax.plot(side, value, markers[i % len(markers)], ms=8, label=f"{name}: T = {side}, {value:.3g} FLOP/byte")
    ax.set_xscale("log", base=2)
    ax.set_xticks([1, 4, 16, 64, 256, 1024], ["1", "4", "16", "64", "256", "1024"])
    ax.set_xlim(0.8, 1024)
    ax.set_ylim(0.1, 1000)
    ax.set_xlabel("T, side of the tile of C a block computes")
    ax.set_ylabel("FLOP per byte read from global memory")
    ax.set_title("Blocking: every value a block reads is used T times", fontsize=10)
    ax.legend(fontsize=10, loc="upper left", bbox_to_anchor=(1.01, 1))  # beside the axes: it would cover the ridge
    ax.grid(True, which="major", color="0.88")
    return ax.figure


# -- the tiles of matmul_tiled, step by step ----------------------------------------------------------------
@dataclass(frozen=True)
class TileStep:
    """Step ``step`` of one block of `matmul_tiled`: C's tile, and the tiles of A and B it loads.

    Ranges are half-open ``(start, stop)`` in the tile's full extent; the parts past the
    matrices' edges are loaded as zeros.
    """

    step: int
    rows: tuple[int, int]  # rows of C and A
    cols: tuple[int, int]  # columns of C and B
    ks: tuple[int, int]  # columns of A and rows of B


def tiled_steps(M: int, N: int, K: int, tile: int = 16, block=(0, 0)) -> list[TileStep]:
    """The steps along K of block ``block`` = (blockIdx.x, blockIdx.y) of `matmul_tiled` (x along columns of C)."""
    bx, by = block
    if not (0 <= by * tile < M and 0 <= bx * tile < N):
        raise ValueError(f"block {block} is outside C ({M} x {N}) with {tile} x {tile} tiles")
    rows, cols = (by * tile, (by + 1) * tile), (bx * tile, (bx + 1) * tile)
    return [TileStep(s, rows, cols, (start, start + tile)) for s, start in enumerate(range(0, K, tile))]


def _clip(span, size):
    return span[0], min(span[1], size)


def _gap(M, N, K, tile):
    """Space between A and C, and between B and C: the zeros a last tile loads past K, then a margin."""
    return (-K) % tile + max(2, (M + N + K) // 30)


def _draw_step(ax, M, N, K, tile, step: TileStep, steps: int):
    from matplotlib.patches import Rectangle

    gap = _gap(M, N, K, tile)
    x_right, y_low = K + gap, K + gap  # B above C, A left of C

    def box(x, y, w, h, **style):
        ax.add_patch(Rectangle((x, y), w, h, **style))

    def matrix(x, y, w, h, name, label_at):
        box(x, y, w, h, facecolor="0.95", edgecolor="0.3", lw=1)
        for t in range(tile, w, tile):
            ax.plot([x + t, x + t], [y, y + h], color="0.78", lw=0.6)
        for t in range(tile, h, tile):
            ax.plot([x, x + w], [y + t, y + t], color="0.78", lw=0.6)
        ax.text(*label_at, f"{name} ({h} x {w})", ha="center", va="center", fontsize=10, color="0.3")

    def tile_box(x, y, span_x, span_y, size_x, size_y, colour):
        (x0, _), (y0, _) = span_x, span_y
        box(x + x0, y + y0, tile, tile, facecolor="none", edgecolor=colour, lw=1.2, ls="--", hatch="///",
            alpha=0.6)  # the whole tile: the part past the edge is loaded as zeros
        cx, cy = _clip(span_x, size_x), _clip(span_y, size_y)
        if cx[1] > cx[0] and cy[1] > cy[0]:
            box(x + cx[0], y + cy[0], cx[1] - cx[0], cy[1] - cy[0], facecolor=colour, edgecolor=colour, lw=1.2)

    # A: M x K at the bottom left; B: K x N at the top right; C: M x N at the bottom right
    matrix(0, y_low, K, M, "A", (K / 2, y_low - gap / 2 - 1))
    matrix(x_right, 0, N, K, "B", (K / 2, K / 2))
    matrix(x_right, y_low, N, M, "C", (x_right + N / 2, y_low + M + gap / 2 + 1))
    r0, r1 = _clip(step.rows, M)
    c0, c1 = _clip(step.cols, N)
    box(0, y_low + r0, K, r1 - r0, facecolor=(0.80, 0.87, 0.97), edgecolor="none")  # the block's strip of A
    box(x_right + c0, 0, c1 - c0, K, facecolor=(0.80, 0.93, 0.82), edgecolor="none")  # ... and of B
    tile_box(0, y_low, step.ks, step.rows, K, M, (0.16, 0.38, 0.78))
    tile_box(x_right, 0, step.cols, step.ks, N, K, (0.13, 0.55, 0.25))
    done = (step.step + 1) / steps
    box(x_right + c0, y_low + r0, c1 - c0, r1 - r0, facecolor=(0.85, 0.40, 0.05), alpha=0.25 + 0.75 * done,
        edgecolor=(0.85, 0.40, 0.05))
    ax.set_xlim(-1, x_right + N + tile + 1)
    ax.set_ylim(y_low + M + tile + gap + 1, -1)
    ax.set_aspect("equal")
    ax.axis("off")
    k0, k1 = step.ks
    ax.set_title(f"step {step.step}: k = {k0}..{min(k1, K) - 1}" + (f" (+ {k1 - K} zeros)" if k1 > K else ""),
                 fontsize=10)


def draw_tiled_steps(M: int, N: int, K: int, tile: int = 16, block=(0, 0), steps=None):
    """Each step of one block of `matmul_tiled`: the tiles of A (blue) and B (green) it loads into shared memory.

    A is drawn left of C and B above it, so a tile of A and a tile of B meet at C's tile
    (orange, darker as its sums grow). Hatched: the part of a tile past the edge, loaded
    as zeros. ``steps``: which steps to draw (all by default). Returns the figure.
    """
    import matplotlib.pyplot as plt

    all_steps = tiled_steps(M, N, K, tile, block)
    chosen = all_steps if steps is None else [all_steps[s] for s in steps]
    gap = _gap(M, N, K, tile)
    aspect = (K + M + 2 * gap + tile + 2) / (K + N + gap + tile + 2)  # height / width of one step
    per_width = 3.0 if len(chosen) > 1 else 4.5
    fig, axes = plt.subplots(1, len(chosen), figsize=(per_width * len(chosen) + 0.4, per_width * aspect + 0.9),
                             squeeze=False)
    for ax, step in zip(axes[0], chosen):
        _draw_step(ax, M, N, K, tile, step, len(all_steps))
    title = (f"matmul_tiled, block {tuple(block)}, {tile} x {tile} tiles. Every step: each thread loads one element "
             f"of each tile, syncthreads(), {tile} multiply-adds per thread from shared memory, syncthreads()")
    lines = textwrap.wrap(title, width=int(fig.get_figwidth() * 12))
    fig.suptitle("\n".join(lines), fontsize=10)
    fig.tight_layout(rect=(0, 0, 1, 1 - 0.045 * len(lines) * 4 / fig.get_figheight()))
    return fig


def tiled_steps_viewer(M: int, N: int, K: int, tile: int = 16, block: tuple[int, int] = (0, 0), step: int = 0):
    """Sliders over the blocks and steps of `matmul_tiled` on an ``(M, K) @ (K, N)`` product, opening on ``block``
    (blockIdx.x, blockIdx.y) at ``step`` (the picture a page without widgets shows)."""
    import ipywidgets as widgets

    bx = widgets.IntSlider(block[0], 0, -(-N // tile) - 1, description="blockIdx.x")
    by = widgets.IntSlider(block[1], 0, -(-M // tile) - 1, description="blockIdx.y")
    k_step = widgets.IntSlider(step, 0, -(-K // tile) - 1, description="step")
    image = figure_view(lambda: draw_tiled_steps(M, N, K, tile, (bx.value, by.value), steps=[k_step.value]),
                        (bx, by, k_step))
    image.layout.max_width = "520px"  # about its drawn size: JupyterLab would stretch it to the cell's width
    return explorer(widgets.HBox([bx, by, k_step]), image)


# -- micro-tiles of register tiling ----------------------------------------------------------------------
def micro_tile_cells(tx: int, ty: int, TM: int = 4, TN: int = 4, threads: int = 16, contiguous: bool = False):
    """The (rows, cols) of the block's tile of C that thread (tx, ty) owns, each a sorted list.

    Rows are always ``ty, ty + threads, ...``. Columns: ``tx, tx + threads, ...`` (strided,
    `matmul_register_tiled`) or ``TN tx ... TN tx + TN - 1`` (``contiguous``).
    """
    rows = [ty + i * threads for i in range(TM)]
    cols = [tx * TN + j for j in range(TN)] if contiguous else [tx + j * threads for j in range(TN)]
    return rows, cols


def draw_micro_tiles(TM: int = 4, TN: int = 4, threads: int = 16, shown=((0, 0), (1, 0), (2, 0), (3, 0))):
    """A block's ``threads TM x threads TN`` tile of C: the cells that the ``shown`` threads own,
    with strided columns (left) and contiguous columns (right). Returns the figure."""
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    rows, cols = threads * TM, threads * TN
    palette = plt.get_cmap("tab10")(np.arange(10))
    fig, axes = plt.subplots(1, 2, figsize=(11, 5.6))
    for ax, contiguous in zip(axes, (False, True)):
        image = np.ones((rows, cols, 4))
        image[:, :, :3] = 0.95
        for n, (tx, ty) in enumerate(shown):
            r, c = micro_tile_cells(tx, ty, TM, TN, threads, contiguous)
            image[np.ix_(r, c)] = palette[n % 10]
        ax.imshow(image, extent=(0, cols, rows, 0), interpolation="nearest")
        ax.vlines(range(0, cols + 1, SECTOR_FLOATS), 0, rows, colors="0.6", lw=0.5)
        ax.hlines(range(0, rows + 1, threads), 0, cols, colors="0.6", lw=0.5)
        ax.set_xticks(range(0, cols + 1, threads))
        ax.set_yticks(range(0, rows + 1, threads))
        ax.tick_params(labelsize=11, length=0)
        rule = f"{TN} tx + j" if contiguous else f"tx + {threads} j"
        ax.set_title(f"{'contiguous' if contiguous else 'strided'} columns: thread (tx, ty) owns\n"
                     f"rows ty + {threads} i, columns {rule}", fontsize=12, loc="left")
    fig.legend(handles=[Patch(color=palette[n % 10], label=f"thread {t}") for n, t in enumerate(shown)],
               loc="lower center", ncol=len(shown), fontsize=12, frameon=False)
    fig.suptitle(f"Who owns which outputs: a {rows} x {cols} tile of C, {threads} x {threads} threads, "
                 f"{TM} x {TN} each\n(vertical lines: 32-byte sectors; horizontal lines: every {threads} rows, "
                 f"one per i of ty + {threads} i)", fontsize=13)
    fig.tight_layout(rect=(0, 0.07, 1, 0.92))
    return fig
