"""Pictures of module 4, convolution as GEMM, worked out in NumPy.

`im2col_indices` says which input element each cell of the im2col matrix holds
(one row per output pixel, columns ordered (c, p, q) like
`gpucourse.kernels.conv.im2col_reference`); `im2col_bytes` measures its
blow-up. `draw_im2col` draws one output pixel's patch becoming a row of that
matrix and the filters becoming its columns; `im2col_viewer` puts the pixel
behind sliders.

`draw_read_counts` draws how often a kernel read each pixel of a plane (from a
trace); `draw_spread` draws a gradient plane spread by the stride and padded, what
the transposed convolution of the backward pass slides its filters over.

`warp_cells` picks the im2col cells one warp of an implicit-GEMM tile loader
copies; `loader_offsets` gives the addresses of the input it reads for them,
straight from an NCHW or NHWC input; `sectors` counts the 32-byte sectors that
costs, and `draw_layout_loads` draws both layouts one above the other. The
tests check these against the simulator's trace of the library's kernels.
"""

from __future__ import annotations

import textwrap

import numpy as np

from ..kernels.conv import output_shape, output_size
from ..simulator.viewer import explorer, figure_view
from .matmul import SECTOR_FLOATS, WARP, _matrix_cells, _plural

LAYOUTS = ("NCHW", "NHWC")
PADDING = -1  # an im2col cell that lies in the zero padding, not in the input
PADDING_LABEL = "·"  # how a figure labels such a cell (a zero): not "0", which is also the input's first index
# `draw_im2col`'s cells, in inches: wide enough for a two-digit label at CELL_FONT, low enough that 25 rows of im2col
# fit a slide's figure box (500 px) unscaled
CELL_WIDTH, CELL_HEIGHT, CELL_FONT = 0.25, 0.16, 10
# the filters' colours: tab10's blue, green, purple, pink, olive and cyan, none near the patch's orange or the greys
FILTER_COLOURS = ((0.12, 0.47, 0.71), (0.17, 0.63, 0.17), (0.58, 0.40, 0.74), (0.89, 0.47, 0.76), (0.74, 0.74, 0.13),
                  (0.09, 0.75, 0.81))


def _check_geometry(H, W, R, S, stride, padding):
    output_shape((1, 1, H, W), (1, 1, R, S), stride, padding)  # a ValueError that says what to fix


# -- im2col -----------------------------------------------------------------------------------------------
def im2col_indices(C: int, H: int, W: int, R: int, S: int, stride: int = 1, padding: int = 0) -> np.ndarray:
    """Flat index ``c H W + h W + w`` of the input element in each im2col cell, `PADDING` (-1) for a zero.

    Shape ``(Ho Wo, C R S)``: row ``ho Wo + wo`` is output pixel (ho, wo), column ``c R S + p S + q``
    the filter tap (c, p, q), as in ``im2col_reference`` for a batch of one.
    """
    _check_geometry(H, W, R, S, stride, padding)
    Ho, Wo = output_size(H, R, stride, padding), output_size(W, S, stride, padding)
    ho, wo, c, p, q = np.ix_(range(Ho), range(Wo), range(C), range(R), range(S))
    h, w = ho * stride + p - padding, wo * stride + q - padding
    inside = (h >= 0) & (h < H) & (w >= 0) & (w < W)
    flat = np.where(inside, (c * H + h) * W + w, PADDING)
    return flat.reshape(Ho * Wo, C * R * S)


def im2col_bytes(shape, R: int, S: int, stride: int = 1, padding: int = 0, itemsize: int = 4) -> tuple[int, int]:
    """(bytes of an NCHW input of ``shape`` (B, C, H, W), bytes of its im2col matrix (B Ho Wo, C R S))."""
    B, C, H, W = shape
    _check_geometry(H, W, R, S, stride, padding)
    rows = B * output_size(H, R, stride, padding) * output_size(W, S, stride, padding)
    return B * C * H * W * itemsize, rows * C * R * S * itemsize


def _grid(ax, values, origin, colours, labels=True):
    """Cells of ``values`` (ints, -1 for padding) drawn at ``origin``, filled with ``colours`` (an RGB per cell)."""
    from matplotlib.patches import Rectangle

    x0, y0 = origin
    rows, cols = values.shape
    for r in range(rows):
        for c in range(cols):
            ax.add_patch(Rectangle((x0 + c, y0 + r), 1, 1, facecolor=colours[r, c], edgecolor="white", lw=0.6))
            if labels:
                text = PADDING_LABEL if values[r, c] == PADDING else str(values[r, c])
                ax.text(x0 + c + 0.5, y0 + r + 0.5, text, ha="center", va="center", fontsize=CELL_FONT,
                        color="0.55" if values[r, c] == PADDING else "0.1")


def draw_im2col(C: int = 2, H: int = 5, W: int = 5, M: int = 3, R: int = 3, S: int = 3, stride: int = 1,
                padding: int = 1, pixel=(1, 2)):
    """Output pixel ``pixel`` = (ho, wo): its patch in the input (left), the im2col row it becomes, the filters
    as columns, and the output row they make (right). Numbers are flat input indices; dots (`PADDING_LABEL`) are
    the padding's zeros.

    Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Rectangle

    cols = im2col_indices(C, H, W, R, S, stride, padding)
    Ho, Wo = output_size(H, R, stride, padding), output_size(W, S, stride, padding)
    ho, wo = pixel
    if not (0 <= ho < Ho and 0 <= wo < Wo):
        raise ValueError(f"pixel {tuple(pixel)} is outside the {Ho} x {Wo} output: 0 <= ho < {Ho}, 0 <= wo < {Wo}")
    row = ho * Wo + wo
    K = C * R * S
    pale, grey, patch = (0.93, 0.93, 0.93), (0.82, 0.82, 0.82), (0.98, 0.62, 0.25)
    filters = [FILTER_COLOURS[m % len(FILTER_COLOURS)] for m in range(M)]
    patch_padding = (0.96, 0.84, 0.72)  # the part of the patch in the padding: zeros

    # the input, one padded grid per channel, stacked
    Hp, Wp = H + 2 * padding, W + 2 * padding
    x_cols = Wp + 3  # where the im2col matrix starts, then the filters and y
    x_w = x_cols + K + 2
    x_y = x_w + M + 2
    height = max(Ho * Wo, C * (Hp + 1), K + 2) + 0.5
    # cells of a fixed size in inches, so that the labels (in points) fit them at any size
    fig, ax = plt.subplots(figsize=(CELL_WIDTH * (x_y + M + 9.5), CELL_HEIGHT * (height + 1.8) + 1.2))
    for c in range(C):
        h, w = np.mgrid[-padding:H + padding, -padding:W + padding]
        inside = (h >= 0) & (h < H) & (w >= 0) & (w < W)
        values = np.where(inside, (c * H + h) * W + w, PADDING)
        colours = np.where(inside[..., None], pale, grey)
        hs = slice(ho * stride, ho * stride + R)
        ws = slice(wo * stride, wo * stride + S)
        colours[hs, ws] = np.where(inside[hs, ws, None], patch, patch_padding)
        top = c * (Hp + 1)
        _grid(ax, values, (0, top), colours)
        ax.add_patch(Rectangle((padding, top + padding), W, H, fill=False, edgecolor="0.3", lw=1))
        ax.text(-0.4, top + Hp / 2, f"x[c={c}]", ha="right", va="center", fontsize=11)
    # im2col: Ho Wo x K
    colours = np.where((cols == PADDING)[..., None], grey, pale)
    colours[row] = np.where(cols[row, :, None] == PADDING, patch_padding, patch)
    _grid(ax, cols, (x_cols, 0), colours, labels=False)
    for k in range(K):
        value = cols[row, k]
        ax.text(x_cols + k + 0.5, row + 0.5, PADDING_LABEL if value == PADDING else str(value), ha="center",
                va="center", fontsize=CELL_FONT)
    ax.add_patch(Rectangle((x_cols, row), K, 1, fill=False, edgecolor="black", lw=1.4))
    ax.text(x_cols + K / 2, -0.8, f"im2col ({Ho * Wo} x {K}): one row per output pixel, columns (c, p, q)",
            ha="center", fontsize=11)
    # the filters as columns: K x M, then the output Ho Wo x M
    w_colours = np.array([[np.array(colour) * 0.45 + 0.55 for colour in filters]] * K)
    _grid(ax, np.zeros((K, M), int), (x_w, 0), w_colours, labels=False)
    ax.text(x_w + M / 2, K + 0.9, f"w as columns\n({K} x {M})", ha="center", va="top", fontsize=11)
    y_colours = np.tile(np.array(pale), (Ho * Wo, M, 1))
    y_colours[row] = filters
    _grid(ax, np.zeros((Ho * Wo, M), int), (x_y, 0), y_colours, labels=False)
    ax.text(x_y + M / 2, -0.8, f"y ({Ho * Wo} x {M})", ha="center", fontsize=11)
    ax.text(x_w - 1, row + 0.5, "@", ha="center", va="center", fontsize=14)
    ax.text(x_y - 1, row + 0.5, "=", ha="center", va="center", fontsize=14)
    ax.text(x_y + M + 0.4, row + 0.5, f"row {row}: pixel ({ho}, {wo})", ha="left", va="center", fontsize=11)
    ax.set_xlim(-3.5, x_y + M + 6)
    ax.set_ylim(height, -1.8)
    ax.set_aspect(CELL_HEIGHT / CELL_WIDTH)
    ax.axis("off")
    copies = np.bincount(cols[cols != PADDING], minlength=C * H * W)
    ax.set_title("\n".join(textwrap.wrap(
        f"{R} x {S} filters, stride {stride}, padding {padding}: output pixel ({ho}, {wo}) is its patch (orange, "
        f"{R * S} taps x {C} channels) times each filter. The im2col matrix holds {cols.size} cells for "
        f"{C * H * W} inputs: each input up to {copies.max()} times. Numbers are flat indices of x; "
        f"{PADDING_LABEL} is a zero of the padding.", 100)), fontsize=12)
    fig.tight_layout()
    return fig


def im2col_viewer(C: int = 2, H: int = 5, W: int = 5, M: int = 3, R: int = 3, S: int = 3, stride: int = 1,
                  padding: int = 1):
    """Sliders over the output pixel (ho, wo) of `draw_im2col`."""
    import ipywidgets as widgets

    Ho, Wo = output_size(H, R, stride, padding), output_size(W, S, stride, padding)
    ho = widgets.IntSlider(0, 0, Ho - 1, description="ho")
    wo = widgets.IntSlider(0, 0, Wo - 1, description="wo")
    image = figure_view(lambda: draw_im2col(C, H, W, M, R, S, stride, padding, (ho.value, wo.value)), (ho, wo))
    return explorer(widgets.HBox([ho, wo]), image)


# -- reads of a plane, and the backward pass's spread gradient -------------------------------------------
def draw_read_counts(counts, title: str = "reads of each pixel"):
    """A heat map of ``counts`` (H x W: how often a kernel read each pixel of one plane), each count written in
    its cell. Returns the figure."""
    import matplotlib.pyplot as plt

    counts = np.asarray(counts)
    fig, ax = plt.subplots(figsize=(6, 4))
    ax.imshow(counts, cmap="Blues", vmin=0)
    light = counts.max() * 0.55  # white text on the darker cells
    for (h, v), count in np.ndenumerate(counts):
        ax.text(v, h, count, ha="center", va="center", fontsize=10, color="white" if count > light else "black")
    ax.set_title(title, fontsize=12)
    ax.set_xlabel("w")
    ax.set_ylabel("h")
    return fig


def draw_spread(G, stride: int, padding: int, name: str = "G"):
    """Gradient plane ``G`` (Ho x Wo) with ``stride - 1`` zeros between its pixels and ``padding`` zeros around:
    what the transposed convolution slides its flipped filters over. Values in red (positive) and blue
    (negative), the zeros grey. Returns the figure."""
    import matplotlib.pyplot as plt

    G = np.asarray(G)
    spread = np.zeros(((G.shape[0] - 1) * stride + 1, (G.shape[1] - 1) * stride + 1), G.dtype)
    spread[::stride, ::stride] = G
    framed = np.pad(spread, padding)
    fig, ax = plt.subplots(figsize=(6, 4.2))
    limit = np.abs(framed).max()  # coolwarm centred on 0
    ax.imshow(np.where(framed == 0, np.nan, framed), cmap="coolwarm", vmin=-limit, vmax=limit)
    for (h, v), value in np.ndenumerate(framed):
        ax.text(v, h, "0" if value == 0 else f"{value:.1f}", ha="center", va="center", fontsize=10,
                color="0.6" if value == 0 else "white" if abs(value) > 0.4 * limit else "black")
    ax.set_title(f"{name} ({G.shape[0]} x {G.shape[1]}) spread by stride {stride}, "
                 f"padded: {framed.shape[0]} x {framed.shape[1]}", fontsize=12)
    return fig


# -- one warp of an implicit-GEMM tile loader ------------------------------------------------------------
def loader_offsets(layout: str, shape, R: int, S: int, pixels, taps, stride: int = 1, padding: int = 0) -> np.ndarray:
    """Flat offsets into the input ``x`` that lanes loading im2col cells (``pixels[i]``, ``taps[i]``) read.

    ``layout`` "NCHW": ``shape`` is (B, C, H, W) and tap ``k`` is (c, p, q), ``k = (c R + p) S + q``;
    "NHWC": ``shape`` is (B, H, W, C) and ``k = (p S + q) C + c``, the order of filters (M, R, S, C).
    ``pixels`` count output pixels over the batch, ``b Ho Wo + ho Wo + wo``. A lane whose cell lies in
    the padding loads nothing: `PADDING` (-1).
    """
    if layout not in LAYOUTS:
        raise ValueError(f"layout is one of {LAYOUTS}, not {layout!r}")
    B, C, H, W = shape if layout == "NCHW" else (shape[0], shape[3], shape[1], shape[2])
    _check_geometry(H, W, R, S, stride, padding)
    Ho, Wo = output_size(H, R, stride, padding), output_size(W, S, stride, padding)
    pixels, taps = np.asarray(pixels), np.asarray(taps)
    b, rest = np.divmod(pixels, Ho * Wo)
    ho, wo = np.divmod(rest, Wo)
    if layout == "NCHW":
        c, pq = np.divmod(taps, R * S)
        p, q = np.divmod(pq, S)
    else:
        pq, c = np.divmod(taps, C)
        p, q = np.divmod(pq, S)
    h, w = ho * stride + p - padding, wo * stride + q - padding
    inside = (h >= 0) & (h < H) & (w >= 0) & (w < W) & (b < B) & (c < C)
    flat = ((b * C + c) * H + h) * W + w if layout == "NCHW" else ((b * H + h) * W + w) * C + c
    return np.where(inside, flat, PADDING)


def warp_cells(along: str = "taps", block=(16, 16), warp: int = 0, pixel0: int = 0, tap0: int = 0):
    """(pixels, taps) of the im2col cells that the lanes of warp ``warp`` load, one cell per thread.

    ``threadIdx.x`` runs along the taps (``along="taps"``) or along the output pixels (``"pixels"``) of a
    ``block[0] x block[1]`` tile whose first cell is (``pixel0``, ``tap0``); a warp is 32 consecutive
    threads, ``threadIdx.x`` fastest.
    """
    if along not in ("taps", "pixels"):
        raise ValueError(f"along is 'taps' or 'pixels', not {along!r}")
    bx, by = block
    lanes = np.arange(warp * WARP, min((warp + 1) * WARP, bx * by))
    tx, ty = lanes % bx, lanes // bx
    pixels, taps = (ty, tx) if along == "taps" else (tx, ty)
    return pixel0 + pixels, tap0 + taps


def sectors(offsets) -> int:
    """32-byte sectors that loads of float32 elements at flat ``offsets`` touch (`PADDING` lanes load nothing)."""
    offsets = np.asarray(offsets)
    return len(np.unique(offsets[offsets != PADDING] // SECTOR_FLOATS))


def draw_layout_loads(shape, R: int, S: int, warps: dict, stride: int = 1, padding: int = 0):
    """One warp's load of im2col cells from an NCHW input of ``shape`` (B, C, H, W) and from its NHWC copy,
    one above the other. ``warps``: layout -> (pixels, taps) its lanes load (`warp_cells`).

    Memory is drawn one row per channel plane of H W floats (NCHW) or per image row of W C floats (NHWC):
    dark, the floats the warp loads; pale, the rest of their 32-byte sectors (vertical lines). Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    B, C, H, W = shape
    fig, axes = plt.subplots(len(warps), 1, figsize=(11, 2.2 + 0.13 * B * (C + H)), squeeze=False,
                             gridspec_kw={"height_ratios": [C if layout == "NCHW" else H for layout in warps]})
    for ax, (layout, (pixels, taps)) in zip(axes[:, 0], warps.items()):
        in_layout = shape if layout == "NCHW" else (B, H, W, C)
        offsets = loader_offsets(layout, in_layout, R, S, pixels, taps, stride, padding)
        loaded = np.unique(offsets[offsets != PADDING])
        width = H * W if layout == "NCHW" else W * C
        rows = B * C * H * W // width
        _matrix_cells(ax, (rows, width), np.stack(np.divmod(loaded, width), axis=1),
                      (0.16, 0.38, 0.78), (0.72, 0.82, 0.96),
                      f"{layout}: {np.count_nonzero(offsets != PADDING)} lanes load {len(loaded)} distinct floats, "
                      f"{_plural(sectors(offsets), 'sector')}")
        ax.set_aspect("auto")
        ax.set_ylabel("channel plane\n(b, c)" if layout == "NCHW" else "image row\n(b, h)", fontsize=11)
        every = -(-rows // 6)  # at most 6 row numbers: a slide keeps them 11 pt
        ax.set_yticks(np.arange(0, rows, every) + 0.5, range(0, rows, every))
        ax.set_xticks(range(0, width + 1, W if layout == "NCHW" else C))
        ax.tick_params(labelsize=11)
        ax.set_xlabel("h W + w" if layout == "NCHW" else "w C + c", fontsize=11)
    fig.legend(handles=[Patch(color=(0.16, 0.38, 0.78), label="dark: floats the warp loads"),
                        Patch(color=(0.72, 0.82, 0.96), label="pale: the rest of their 32-byte sectors")],
               loc="lower center", ncol=2, fontsize=11, frameon=False)
    fig.suptitle(f"One warp loads 32 cells of an im2col tile straight from the input:\n{R} x {S} filters, "
                 f"stride {stride}, padding {padding}, input (B, C, H, W) = {tuple(shape)}", fontsize=12)
    fig.tight_layout(rect=(0, 0.05, 1, 1))
    return fig
