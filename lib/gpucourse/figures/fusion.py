"""Pictures of module 5, fusion: online softmax step by step, bytes moved, memory against N.

`online_softmax_steps` walks one row in blocks, as `softmax_online` and flash
attention do, keeping the running maximum ``m`` and the running sum ``l`` of
``exp(x - m)``; when a block raises the maximum, the old sum is rescaled by
``exp(m_old - m_new)``. Masked entries are ``-inf``: a row that is all ``-inf``
keeps ``m = -inf`` and ``l = 0`` (no ``-inf - -inf``), and `online_softmax`
gives it zeros. `draw_online_step` draws one step, `online_softmax_stepper`
puts the steps behind a slider.

`bytes_per_launch` reads the global traffic of every launch in a
``gpucourse.trace()`` (32-byte sectors, so a warp's broadcast read counts once);
`array_bytes` that of one array; `draw_bytes_moved` stacks it per pipeline. `draw_memory_against_n` plots
measured bytes (largest allocation, traffic) against N on log-log axes, with
the formulas they should follow.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..simulator.errors import UnknownArray
from ..simulator.viewer import explorer, figure_view

SECTOR_BYTES = 32
ONLINE_STEP_FONT = 10  # pt: the smallest text of `draw_online_step`, 13 px or more on a slide


# -- online softmax, one row --------------------------------------------------------------------------------
@dataclass(frozen=True)
class OnlineStep:
    """What one block of a row does to the running maximum ``m`` and sum ``l``.

    ``scale = exp(m_old - m_new)`` multiplies the old sum (1 when the maximum did not move, 0 while
    everything seen so far was masked); ``l_new = l_old * scale + added``, where
    ``added = sum(exp(x - m_new))`` over the block.
    """

    block: int
    start: int
    stop: int
    block_max: float
    m_old: float
    m_new: float
    scale: float
    l_old: float
    added: float
    l_new: float


def _exp_minus(x, m):
    """``exp(x - m)`` with ``exp(-inf - -inf) = 0``: masked entries add nothing, even to an all-masked row."""
    x = np.asarray(x, np.float64)
    if m == -np.inf:
        return np.zeros_like(x)
    return np.exp(x - m)


def online_softmax_steps(row, block: int) -> list[OnlineStep]:
    """The steps of the online softmax over ``row`` (1-D, may hold ``-inf``), ``block`` entries at a time."""
    row = np.asarray(row, np.float64)
    if row.ndim != 1 or row.size == 0:
        raise ValueError(f"row is a non-empty 1-D array, not one of shape {row.shape}")
    if block < 1:
        raise ValueError(f"block is a positive number of entries, not {block}")
    if np.isnan(row).any() or (row == np.inf).any():
        raise ValueError("row holds NaN or +inf: softmax is undefined there (mask with -inf instead)")
    steps, m, l = [], -np.inf, 0.0
    for k, start in enumerate(range(0, row.size, block)):
        values = row[start:start + block]
        block_max = float(values.max())
        m_new = max(m, block_max)
        scale = 1.0 if m_new == -np.inf else float(np.exp(m - m_new))
        added = float(_exp_minus(values, m_new).sum())
        steps.append(OnlineStep(k, start, start + values.size, block_max, m, m_new, scale, l, added,
                                l * scale + added))
        m, l = m_new, l * scale + added
    return steps


def online_softmax(row, block: int) -> np.ndarray:
    """Softmax of ``row`` from its online steps: ``exp(x - m) / l`` at the end; zeros for an all-``-inf`` row."""
    last = online_softmax_steps(row, block)[-1]
    if last.l_new == 0:
        return np.zeros(len(row))
    return _exp_minus(row, last.m_new) / last.l_new


def _shown(value: float) -> str:
    return "-inf" if value == -np.inf else f"{value:.4g}"


def draw_online_step(row, block: int, step: int):
    """Step ``step`` of the online softmax of ``row``: the blocks seen, m before and after, and l.

    Top: the row (grey: not read yet; blue: read; orange: this block; crosses: ``-inf``) with the old
    and new running maximum. Bottom: ``exp(x - m_new)`` for every entry read so far; their sum is
    ``l``. When m rises, the bars of the earlier blocks shrink by ``exp(m_old - m_new)``, the rescale
    the old sum gets. Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    row = np.asarray(row, np.float64)
    steps = online_softmax_steps(row, block)
    if not 0 <= step < len(steps):
        raise ValueError(f"step is 0 to {len(steps) - 1} for {row.size} entries in blocks of {block}, not {step}")
    s = steps[step]
    index = np.arange(row.size)
    finite = np.isfinite(row)
    colours = np.array([(0.82, 0.82, 0.82)] * row.size)
    colours[:s.start] = (0.45, 0.62, 0.85)
    colours[s.start:s.stop] = (0.90, 0.50, 0.10)
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(10, 5.0), sharex=True, height_ratios=(3, 2))
    top.bar(index[finite], row[finite], color=colours[finite], width=0.8)
    top.plot(index[~finite], np.zeros((~finite).sum()), "x", color="0.25", ms=8, mew=2, label="-inf (masked)",
             transform=top.get_xaxis_transform(), clip_on=False)  # on the axis's floor: -inf has no height
    top.axhline(0, color="0.3", lw=0.6)
    for edge in range(0, row.size + 1, block):
        for ax in (top, bottom):
            ax.axvline(edge - 0.5, color="0.6", lw=0.8, ls=":")
    if s.m_old != -np.inf:
        top.axhline(s.m_old, color="0.35", ls="--", lw=1.2, label=f"m_old = {_shown(s.m_old)}")
    if s.m_new != -np.inf:
        top.axhline(s.m_new, color=(0.75, 0.1, 0.1), lw=1.5, label=f"m_new = {_shown(s.m_new)}")
    top.set_ylabel("x")
    top.legend(fontsize=ONLINE_STEP_FONT, loc="upper left", bbox_to_anchor=(1.01, 1))
    top.set_title(f"block {s.block} (of 0..{len(steps) - 1}): entries {s.start}..{s.stop - 1}, block max "
                  f"{_shown(s.block_max)}", fontsize=ONLINE_STEP_FONT, loc="left")

    if s.start and s.m_old != -np.inf and s.scale < 1:
        bottom.bar(index[:s.start], _exp_minus(row[:s.start], s.m_old), width=0.8, fill=False,
                   edgecolor="0.45", ls="--", label="earlier blocks,\nbefore the rescale")
    bottom.bar(index[:s.stop], _exp_minus(row[:s.stop], s.m_new), color=colours[:s.stop], width=0.8)
    bottom.set_ylim(0, 1.08)
    bottom.set_ylabel("exp(x - m_new)")
    bottom.set_xlabel("entry of the row")
    bottom.set_xlim(-0.7, row.size - 0.3)
    bottom.xaxis.set_major_locator(MaxNLocator(integer=True))
    if bottom.get_legend_handles_labels()[0]:
        bottom.legend(fontsize=ONLINE_STEP_FONT, loc="lower left", bbox_to_anchor=(1.01, 0))
    text = (f"rescale = exp(m_old - m_new)\n        = {s.scale:.4g}\n"
            f"l = l_old x rescale + block's sum\n"
            f"  = {s.l_old:.4g} x {s.scale:.4g} + {s.added:.4g}\n"
            f"  = {s.l_new:.4g}")
    bottom.text(1.01, 1.02, text, transform=bottom.transAxes, fontsize=ONLINE_STEP_FONT, va="top", family="monospace")
    fig.suptitle("Online softmax: one pass keeps the running max m and the running sum l of exp(x - m)",
                 fontsize=ONLINE_STEP_FONT + 1)
    fig.subplots_adjust(left=0.07, right=0.70, top=0.88, bottom=0.1, hspace=0.12)
    return fig


def online_softmax_stepper(row, block: int):
    """A slider over the blocks of ``row`` that redraws `draw_online_step`."""
    import ipywidgets as widgets

    steps = online_softmax_steps(row, block)
    step = widgets.IntSlider(0, 0, len(steps) - 1, description="block")
    return explorer(step, figure_view(lambda: draw_online_step(row, block, step.value), (step,)))


# -- bytes moved, from a trace --------------------------------------------------------------------------------
@dataclass(frozen=True)
class Traffic:
    """Global memory bytes one launch read and wrote (32-byte sectors, as the memory system moves them)."""

    kernel: str
    read: int
    written: int

    @property
    def total(self) -> int:
        return self.read + self.written


def bytes_per_launch(recorded) -> list[Traffic]:
    """The global traffic of each launch in ``recorded`` (what ``with gpucourse.trace() as t`` gives)."""
    found = []
    for launch in recorded.launches:
        moved = {"read": 0, "write": 0}
        for array in launch.arrays.values():
            if array.space == "global":
                for kind in moved:
                    moved[kind] += array.instructions[kind].sectors * SECTOR_BYTES
        found.append(Traffic(launch.kernel, moved["read"], moved["write"]))
    if not found:
        raise ValueError("the trace holds no launch: run the kernels inside `with gpucourse.trace() as t:`")
    return found


def array_bytes(recorded, name: str, kind: str = "read") -> int:
    """Global bytes (32-byte sectors) of ``kind`` on the array called ``name``, over all launches in ``recorded``."""
    if kind not in ("read", "write"):
        raise ValueError(f"kind is 'read' or 'write', not {kind!r}")
    found = [launch.arrays[name] for launch in recorded.launches if name in launch.arrays]
    if not found:
        known = sorted({n for launch in recorded.launches for n in launch.arrays})
        raise UnknownArray(f"no launch in the trace touched an array called {name!r} (they touched {known})")
    return sum(a.instructions[kind].sectors * SECTOR_BYTES for a in found if a.space == "global")


def total_bytes(recorded) -> int:
    """All global bytes read and written by the launches in ``recorded``."""
    return sum(t.total for t in bytes_per_launch(recorded))


def _kib(n: float) -> str:
    return f"{n / 1024:.0f} KiB" if n >= 10 * 1024 else f"{n / 1024:.1f} KiB"


def _in_bytes(n: float, _position=None) -> str:
    """An axis tick in B, KiB, MiB or GiB."""
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(n) < 1024 or unit == "GiB":
            return f"{n:.3g} {unit}"
        n /= 1024


def draw_bytes_moved(pipelines: dict[str, list[Traffic]], title: str = "Global memory traffic", ax=None):
    """One horizontal bar per pipeline (name -> its launches' `Traffic`), a segment per launch.

    Each segment is split into bytes read (solid) and written (hatched), with its kernel's name where
    the name fits and differs from the pipeline's; the total is printed at the end of the bar. Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.patches import Patch

    if ax is None:
        _, ax = plt.subplots(figsize=(10, 1.2 + 0.7 * len(pipelines)))
    palette = plt.get_cmap("tab10")(np.arange(10))
    kernels = list(dict.fromkeys(t.kernel for launches in pipelines.values() for t in launches))
    colour = {k: palette[i % 10] for i, k in enumerate(kernels)}
    names = list(pipelines)
    widest = max(sum(t.total for t in launches) for launches in pipelines.values()) / 1024
    inside = []  # (label, its segment's start and end): the kernel's name on its bytes read
    for y, name in enumerate(names):
        left = 0.0
        for t in pipelines[name]:
            read, written = t.read / 1024, t.written / 1024
            ax.barh(y, read, left=left, color=colour[t.kernel], edgecolor="white", height=0.6)
            ax.barh(y, written, left=left + read, color=colour[t.kernel], edgecolor="white", height=0.6,
                    hatch="///", alpha=0.75)
            if t.kernel != name:  # a pipeline of one kernel already has its name on the axis
                inside.append((ax.text(left + read / 2, y, t.kernel, ha="center", va="center", fontsize=10,
                                       color="white", fontweight="bold"), left, left + read))
            left += read + written
        ax.text(left + widest * 0.01, y, _kib(left * 1024), va="center", fontsize=10)
    ax.set_yticks(range(len(names)), names, fontsize=10)
    ax.invert_yaxis()
    ax.set_xlim(0, widest * 1.15)
    ax.set_xlabel("KiB moved to and from global memory (32-byte sectors)")
    ax.set_title(title, fontsize=10, loc="left")
    ax.legend(handles=[Patch(color=colour[k], label=k) for k in kernels]
              + [Patch(facecolor="white", edgecolor="0.3", hatch="///", label="hatched: written")],
              fontsize=10, loc="upper left", bbox_to_anchor=(1.01, 1), frameon=False)
    ax.figure.tight_layout()
    renderer = ax.figure.canvas.get_renderer()
    for label, start, stop in inside:  # a name wider than its segment would run over its neighbours: the legend has it
        (x0, _), (x1, _) = ax.transData.transform([(start, 0), (stop, 0)])
        if label.get_window_extent(renderer).width > 0.9 * (x1 - x0):
            label.remove()
    return ax.figure


# -- memory against N -----------------------------------------------------------------------------------------
def slope(ns, values) -> float:
    """The slope of ``log(values)`` against ``log(ns)``: 1 for linear growth, 2 for quadratic."""
    return float(np.polyfit(np.log(np.asarray(ns, float)), np.log(np.asarray(values, float)), 1)[0])


def _alike(series: dict[str, tuple]) -> dict[str, list[str]]:
    """Each series' group: the series (in order) with the same N and the same bytes as it, within 2%."""
    groups: list[list[str]] = []
    for name, (ns, measured) in series.items():
        for group in groups:
            other_ns, other = series[group[0]]
            if list(ns) == list(other_ns) and np.allclose(measured, other, rtol=0.02):
                group.append(name)
                break
        else:
            groups.append([name])
    return {name: group for group in groups for name in group}


def draw_memory_against_n(panels: dict[str, dict[str, tuple]], formulas: dict[str, dict[str, object]] | None = None,
                          span=(64, 1024), note: str = "points: measured on the simulator; lines: the formulas"):
    """Log-log panels of bytes against N: measured points, and formula lines over ``span``.

    ``panels``: panel title -> {series name -> (ns, bytes measured)}. ``formulas``: panel title ->
    {series name -> a function of N giving bytes}, drawn as lines of the series' colour through
    N = s, 1.5 s, 2 s, 3 s, ... (s = ``span[0]``); the legend shows each series' measured slope
    (1: linear, 2: quadratic). Series of a panel with the same points (within 2%) are drawn side by side
    and the formula lines of all but the first dashed, so that none hides another.
    ``note``: the figure's caption. Returns the figure.
    """
    import matplotlib.pyplot as plt
    from matplotlib.transforms import offset_copy

    formulas = formulas or {}
    fig, axes = plt.subplots(1, len(panels), figsize=(5.2 * len(panels), 4.4), squeeze=False)
    palette = plt.get_cmap("tab10")(np.arange(10))
    names = list(dict.fromkeys(n for series in panels.values() for n in series))
    colour = {n: palette[i % 10] for i, n in enumerate(names)}
    line = [n for k in range(int(np.log2(span[1] / span[0])) + 1) for n in (span[0] * 2 ** k, span[0] * 3 * 2 ** k // 2)
            if n <= span[1]]
    markers, size = "osD^v<>", 7
    for ax, (title, series) in zip(axes[0], panels.items()):
        alike = _alike(series)
        for name, (ns, measured) in series.items():
            label = f"{name}: slope {slope(ns, measured):.2f}" if len(ns) > 1 else name
            group = alike[name]
            if group[0] != name:
                label += f", same as {group[0]}"
            shift = (group.index(name) - (len(group) - 1) / 2) * 1.3 * size  # points: centres a marker apart
            ax.plot(ns, measured, markers[names.index(name) % len(markers)], color=colour[name], ms=size,
                    label=label, transform=offset_copy(ax.transData, fig=fig, x=shift, units="points"))
            formula = formulas.get(title, {}).get(name)
            if formula is not None:
                ax.plot(line, [formula(n) for n in line], color=colour[name], lw=1.2, alpha=0.7,
                        ls="-" if group[0] == name else "--")
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.yaxis.set_major_formatter(_in_bytes)
        ax.set_xlim(span[0] / 1.2, span[1] * 1.2)
        ticks = [2 ** k for k in range(int(np.ceil(np.log2(span[0]))), int(np.log2(span[1])) + 1)]
        ax.set_xticks(ticks, [str(t) for t in ticks])
        ax.set_xlabel("N (sequence length)")
        ax.set_ylabel("bytes")
        ax.set_title(title, fontsize=10, loc="left")
        ax.grid(True, which="major", color="0.9")
        ax.legend(fontsize=10, loc="upper left")
    fig.suptitle(note, fontsize=10)
    fig.tight_layout()
    return fig
