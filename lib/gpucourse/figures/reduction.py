"""Trees of module 2, worked out in NumPy and drawn: a block's sum, and a block's scan.

`reduction_levels` lists, level by level, which thread adds which pair of
shared-memory cells in the interleaved, compact interleaved and sequential
trees of the sum ladder (`gpucourse.kernels.reduction`); `draw_reduction_trees`
draws them. `blelloch_steps` and `hillis_steele_steps` are the two block scans
of the lecture, step by step on a small array; `draw_scan` draws either.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

ADDRESSINGS = ("interleaved", "compact", "sequential")


@dataclass
class Level:
    """One step of a tree: ``(thread, destination, source)`` additions, and the values after it."""

    label: str
    adds: list[tuple[int, int, int]]
    values: np.ndarray
    copies: list[tuple[int, int]] = field(default_factory=list)   # (destination, source): a move, no add
    zeroed: list[int] = field(default_factory=list)   # cells set to 0


def _check_power_of_two(n: int) -> None:
    if n < 2 or n & (n - 1):
        raise ValueError(f"the trees are drawn for a power of two of elements, not {n}")


def reduction_levels(values, addressing: str) -> list[Level]:
    """The block tree of the sum ladder on ``values`` (one per thread), level by level.

    ``interleaved``: thread ``t`` adds when ``t % (2 * stride) == 0`` (stride 1, 2, 4, ...);
    ``compact``: thread ``t`` adds cell ``2 * stride * t + stride`` into ``2 * stride * t``;
    ``sequential``: thread ``t < stride`` adds cell ``t + stride`` (stride n/2, n/4, ..., 1).
    """
    values = np.array(values)
    n = len(values)
    _check_power_of_two(n)
    if addressing not in ADDRESSINGS:
        raise ValueError(f"addressing is one of {ADDRESSINGS}, not {addressing!r}")
    strides = [1 << k for k in range(n.bit_length() - 1)]
    if addressing == "sequential":
        strides = strides[::-1]
    levels = []
    for stride in strides:
        if addressing == "interleaved":
            adds = [(t, t, t + stride) for t in range(n) if t % (2 * stride) == 0]
        elif addressing == "compact":
            adds = [(t, 2 * stride * t, 2 * stride * t + stride) for t in range(n) if 2 * stride * t < n]
        else:
            adds = [(t, t, t + stride) for t in range(stride)]
        for _, dst, src in adds:
            values[dst] += values[src]
        levels.append(Level(f"stride {stride}", adds, values.copy()))
    return levels


def hillis_steele_steps(values) -> list[Level]:
    """Inclusive scan, Hillis and Steele: at offset 1, 2, 4, ... every cell ``i >= offset`` adds cell ``i - offset``."""
    values = np.array(values)
    n = len(values)
    _check_power_of_two(n)
    levels, offset = [], 1
    while offset < n:
        adds = [(i, i, i - offset) for i in range(offset, n)]
        values = values + np.r_[np.zeros(offset, values.dtype), values[:-offset]]
        levels.append(Level(f"offset {offset}", adds, values.copy()))
        offset *= 2
    return levels


def blelloch_steps(values) -> list[Level]:
    """Exclusive scan, Blelloch: an up-sweep (a sum tree), the last cell cleared, then a down-sweep.

    Up-sweep at stride 1, 2, 4, ...: cell ``k + 2 * stride - 1`` adds cell ``k + stride - 1``.
    Down-sweep at stride n/2, ..., 1: the left cell ``k + stride - 1`` takes the right cell's value,
    and the right cell ``k + 2 * stride - 1`` adds the left cell's old value.
    The adds of a level are numbered by the thread that would do them.
    """
    values = np.array(values)
    n = len(values)
    _check_power_of_two(n)
    levels = []
    stride = 1
    while stride < n:
        adds = []
        for t, k in enumerate(range(0, n, 2 * stride)):
            left, right = k + stride - 1, k + 2 * stride - 1
            values[right] += values[left]
            adds.append((t, right, left))
        levels.append(Level(f"up, stride {stride}", adds, values.copy()))
        stride *= 2
    values[n - 1] = 0
    levels.append(Level("clear last", [], values.copy(), zeroed=[n - 1]))
    stride = n // 2
    while stride >= 1:
        adds, copies = [], []
        for t, k in enumerate(range(0, n, 2 * stride)):
            left, right = k + stride - 1, k + 2 * stride - 1
            old = values[left]
            values[left] = values[right]
            values[right] += old
            adds.append((t, right, left))
            copies.append((left, right))
        levels.append(Level(f"down, stride {stride}", adds, values.copy(), copies))
        stride //= 2
    return levels


def additions(levels: list[Level]) -> int:
    return sum(len(level.adds) for level in levels)


_ADD, _COPY, _ZERO, _IDLE = (0.36, 0.58, 0.90), (0.36, 0.75, 0.45), (0.93, 0.55, 0.25), (0.95, 0.95, 0.95)
CELL_TOP, CELL_HEIGHT, LABEL_Y = 0.05, 0.55, 0.72   # within a row of height 1


def _arrow(ax, x0, y0, x1, y1, colour, dashed=False):
    ax.annotate("", xy=(x1, y1), xytext=(x0, y0),
                arrowprops=dict(arrowstyle="->", color=colour, lw=0.8, ls="--" if dashed else "-", shrinkA=0, shrinkB=0))


def _draw_levels(ax, start, levels: list[Level], title: str, thread_labels: bool) -> None:
    from matplotlib.patches import Rectangle

    n = len(start)
    rows = [np.asarray(start)] + [level.values for level in levels]
    ax.set_xlim(-0.1, n + 0.1)
    ax.set_ylim(len(rows) - 0.1, -0.1)
    below = CELL_TOP + CELL_HEIGHT   # where arrows leave a cell of the row above
    for r, row in enumerate(rows):
        level = levels[r - 1] if r else None
        written = {dst for _, dst, _ in level.adds} if level else set()
        moved = {dst for dst, _ in level.copies} if level else set()
        zeroed = set(level.zeroed) if level else set()
        for c in range(n):
            colour = _ADD if c in written else _COPY if c in moved else _ZERO if c in zeroed else _IDLE
            ax.add_patch(Rectangle((c + 0.06, r + CELL_TOP), 0.88, CELL_HEIGHT, facecolor=colour, edgecolor="none"))
            ax.text(c + 0.5, r + CELL_TOP + CELL_HEIGHT / 2, f"{row[c]:g}", ha="center", va="center", fontsize=10,
                    color="white" if c in written | moved | zeroed else "black")
        if level is None:
            continue
        top = r + CELL_TOP
        for t, dst, src in level.adds:
            _arrow(ax, src + 0.5, r - 1 + below, dst + 0.5, top, "0.25")
            _arrow(ax, dst + 0.5, r - 1 + below, dst + 0.5, top, "0.6")
            if thread_labels:
                ax.text(dst + 0.5, r + LABEL_Y, f"t{t}", ha="center", va="center", fontsize=10, color="0.2", zorder=4,
                        bbox=dict(facecolor="white", edgecolor="none", pad=0.6))  # over the arrows that cross it
        for dst, src in level.copies:
            _arrow(ax, src + 0.5, r - 1 + below, dst + 0.5, top, _COPY, dashed=True)
    ax.set_yticks(np.arange(len(rows)) + CELL_TOP + CELL_HEIGHT / 2,
                  ["input"] + [level.label for level in levels], fontsize=10)
    ax.set_xticks(np.arange(n) + 0.5, [str(c) for c in range(n)], fontsize=10)
    ax.tick_params(length=0, top=True, labeltop=True, bottom=False, labelbottom=False)
    ax.set_frame_on(False)
    ax.set_title(title, fontsize=11, loc="left")


def draw_reduction_trees(values, addressings=("interleaved", "sequential")):
    """One panel per addressing: each row a level, blue cells written by the thread named under them."""
    import matplotlib.pyplot as plt

    n = len(values)
    # input + log2(n) levels + title; 16 cells per panel side by side fit a slide's width at 10 pt
    size = (0.32 * n * len(addressings) + 1.6, 0.62 * (n.bit_length() + 1) + 0.6)
    fig, axes = plt.subplots(1, len(addressings), figsize=size, squeeze=False)
    for ax, addressing in zip(axes[0], addressings):
        levels = reduction_levels(values, addressing)
        first = ", ".join(str(t) for t, _, _ in levels[0].adds[:4])
        _draw_levels(ax, values, levels, f"{addressing} addressing: first level by threads {first}, …", True)
    fig.tight_layout()
    return fig


def draw_scan(values, method: str = "blelloch"):
    """The levels of a block scan (``blelloch`` or ``hillis-steele``): blue cells add, green cells copy, orange is cleared."""
    import matplotlib.pyplot as plt

    steps = {"blelloch": blelloch_steps, "hillis-steele": hillis_steele_steps}
    if method not in steps:
        raise ValueError(f"method is one of {sorted(steps)}, not {method!r}")
    levels = steps[method](values)
    n = len(values)
    fig, ax = plt.subplots(figsize=(0.55 * n + 1.8, 0.56 * (len(levels) + 1) + 0.6))  # a Blelloch scan: 500 px
    kind = "exclusive" if method == "blelloch" else "inclusive"
    name = {"blelloch": "Blelloch", "hillis-steele": "Hillis-Steele"}[method]
    _draw_levels(ax, values, levels, f"{name} scan ({kind}): {additions(levels)} additions for {n} elements",
                 method == "blelloch")
    fig.tight_layout()
    return fig
