"""Pictures of module 6, precision: formats bit by bit, spacing against magnitude, dot-product error, mma fragments,
tile copies.

The formats and their arithmetic (`bits`, `ulp`, `round_to`) are the library's, in
`gpucourse.kernels.precision`. `describe` writes one line for a number in one format (its bits, the value
stored, the rounding error); `format_widget` shows those lines for every format as you type; `limits` gives a
format's smallest subnormal, smallest normal and largest value; `draw_spacing` plots the ulp over each
format's range.

`dot_errors` measures the relative error of fp16 dot products against their length for four ways of
accumulating, rounding with NumPy as the GPU's instructions do (`hfma`: ``round16(acc + a*b)``, one rounding;
`fma.rn.f32`): the sum is formed in float64 and rounded once, which is exact unless a term is some 2^30 times
smaller than the sum (then it is rounded twice, a negligible effect on these statistics). `draw_dot_errors`
plots them. `draw_fragments` draws which lane of a warp holds
which elements of A, B and C in one ``mma.sync`` (the library's `fragment_layout` by default), and
`fragment_viewer` does so for one lane at a time, chosen with a slider. `draw_copy_pipelines` draws one step
of the tensor-core GEMM's tile copy through registers (`gemm_tensor_core_tiled`) beside its ``cp.async`` copy
(`gemm_tensor_core_async`): what the warp issues, what is in flight, which registers wait.
"""

from __future__ import annotations

import numpy as np

from gpucourse.kernels.precision import FORMATS, bits, fragment_layout, ulp
from ..simulator.viewer import explorer, figure_view

NAMES = {"fp32": "fp32", "fp16": "fp16", "bf16": "bf16", "fp8_e4m3": "fp8 E4M3", "fp8_e5m2": "fp8 E5M2"}
COLOURS = {name: f"C{k}" for k, name in enumerate(FORMATS)}  # one colour per format, in every figure of module 6


def _format(fmt: str):
    if fmt not in FORMATS:
        raise ValueError(f"no format named {fmt!r}: use one of {', '.join(FORMATS)}")
    return FORMATS[fmt]


def limits(fmt: str) -> tuple[float, float, float]:
    """The smallest subnormal, the smallest normal and the largest finite value of ``fmt``."""
    f = _format(fmt)
    return 2.0 ** (f.min_exponent - f.mantissa_bits), 2.0 ** f.min_exponent, f.max_finite


def describe(value: float, fmt: str) -> str:
    """One line: ``value``'s bits in ``fmt`` as sign | exponent | mantissa, the value stored and the rounding error."""
    _format(fmt)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"describe needs a real number, got {value!r}") from None
    b = bits(value, fmt)
    head = f"{NAMES[fmt]:>9}  {str(b):<34}"
    if np.isnan(b.value) or np.isinf(b.value):
        return f"{head} {'NaN' if np.isnan(b.value) else 'inf'} (out of range)"
    kind = "zero" if b.value == 0 else "subnormal" if set(b.exponent) == {"0"} else "normal"
    error = b.value - value
    relative = f", {abs(error / value):.2g} relative" if value else ""
    return f"{head} stores {b.value:<.10g} ({kind}), error {error:+.3g}{relative}"


def format_widget(value: float = 0.1, formats=tuple(FORMATS)):
    """Type a number, see its bits, the value stored and the rounding error in each format. Returns the widget."""
    import html  # noqa: PLC0415

    import ipywidgets as widgets  # noqa: PLC0415

    box = widgets.Text(value=str(value), description="number", continuous_update=False)
    out = widgets.HTML()

    def show(_=None):
        try:
            number = float(box.value)
        except ValueError:
            lines = [f"{box.value!r} is not a number: type one like 0.1, 65504 or 1e-8"]
        else:
            lines = [f"{'':>9}  {'sign exponent mantissa':<34} value {number!r}"]
            lines += [describe(number, name) for name in formats]
        out.value = "<pre>" + html.escape("\n".join(lines)) + "</pre>"

    box.observe(show, "value")
    show()
    return explorer(box, out)


def draw_spacing(formats=tuple(FORMATS), axes=None):
    """Left: the spacing (ulp) against magnitude over each format's whole range, smallest subnormal to largest
    value (log-log). Right: the relative spacing ulp / |x| near 1, where the fp16 and fp8 formats live."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    whole, near = axes
    for name in formats:
        smallest, normal, largest = limits(name)
        f = _format(name)
        x = np.geomspace(smallest, largest, 6000)
        gap = ulp(x, name)
        colour = COLOURS[name]
        whole.step(x, gap, where="post", color=colour, lw=1.5,
                   label=f"{NAMES[name]}: {1 + f.exponent_bits + f.mantissa_bits} bits")
        ends = np.array([normal, largest])
        whole.plot(ends, ulp(ends, name), "o", color=colour, ms=4)
        near.step(x, gap / x, where="post", color=colour, lw=1.5)
        near.plot(ends, ulp(ends, name) / ends, "o", color=colour, ms=4)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("|x|")
        ax.grid(True, which="major", alpha=0.3)
    for axis in (whole.xaxis, whole.yaxis):  # powers of 2 whose exponents are multiples of 32, as formats' ranges are
        axis.set_major_locator(plt.FixedLocator([2.0 ** e for e in range(-160, 161, 32)]))
    whole.set_ylabel("gap to the next value (ulp)")
    whole.set_title("Whole range: dots at the smallest normal\nand the largest value", fontsize=10)
    whole.legend(fontsize=10, loc="upper left")
    near.set_xlim(2.0 ** -30, 2.0 ** 20)
    near.set_ylabel("relative gap, ulp / |x|")
    near.set_title("Relative gap: flat over the normals (precision),\nrising in the subnormals", fontsize=10)
    return axes


# -- dot products ----------------------------------------------------------------------------------------
def _round16(x):
    with np.errstate(over="ignore"):  # past 65504: inf, as on the GPU
        return x.astype(np.float16).astype(np.float64)  # NumPy rounds float64 to fp16 once, to even: round_to


def _round32(x):
    return x.astype(np.float32).astype(np.float64)


def _pairwise16(terms):
    """fp16 pairwise (tree) sums of the rows of ``terms`` (length a power of two), each addition rounded."""
    while terms.shape[-1] > 1:
        terms = _round16(terms[..., 0::2] + terms[..., 1::2])
    return terms[..., 0]


ACCUMULATIONS = ("fp16 accumulator", "fp16 storage, fp32 accumulator", "fp16 pairwise", "fp16 Kahan")
ACCUMULATION_COLOURS = dict(zip(ACCUMULATIONS, (COLOURS["fp16"], COLOURS["fp32"], f"C{len(FORMATS)}",
                                                f"C{len(FORMATS) + 1}")))  # the last two: no format's colour


def dot_errors(max_log2: int = 14, trials: int = 8, seed: int = 0) -> tuple[np.ndarray, dict]:
    """Relative errors of dot products of fp16 vectors (entries uniform in [0, 1)) of lengths 2, 4, ... 2^max_log2.

    The four `ACCUMULATIONS`: a running fp16 sum with ``hfma`` (``acc = round16(acc + a*b)``); fp16 inputs
    with a float32 accumulator (``fma.rn.f32``); fp16 pairwise sums of fp16-rounded products; Kahan's
    compensated sum in fp16. The truth is the float64 dot product of the same fp16 inputs (exact products).
    Returns the lengths and {accumulation: median relative error over ``trials`` per length}.
    """
    if not 1 <= max_log2 <= 16:
        raise ValueError(f"max_log2 is between 1 and 16 (fp16 sums of up to 65536 terms), not {max_log2}")
    if trials < 1:
        raise ValueError(f"trials is a positive number of random vectors, not {trials}")
    rng = np.random.default_rng(seed)
    n = 2 ** max_log2
    a, b = (_round16(rng.random((trials, n))) for _ in range(2))
    products = a * b  # exact in float64: 11 x 11 bits
    lengths = 2 ** np.arange(1, max_log2 + 1)
    exact = np.cumsum(products, axis=1)[:, lengths - 1]  # exact: at most 22 + 16 bits
    fp16 = np.zeros(trials)
    fp32 = np.zeros(trials)
    kahan = np.zeros(trials)
    carry = np.zeros(trials)
    running = {name: np.empty((trials, lengths.size)) for name in ACCUMULATIONS}
    wanted = {int(k) - 1: j for j, k in enumerate(lengths)}
    for i in range(n):
        fp16 = _round16(fp16 + products[:, i])
        fp32 = _round32(fp32 + products[:, i])
        y = _round16(_round16(products[:, i]) - carry)
        t = _round16(kahan + y)
        carry = _round16(_round16(t - kahan) - y)
        kahan = t
        if i in wanted:
            j = wanted[i]
            running["fp16 accumulator"][:, j], running["fp16 storage, fp32 accumulator"][:, j] = fp16, fp32
            running["fp16 Kahan"][:, j] = kahan
    for j, k in enumerate(lengths):
        running["fp16 pairwise"][:, j] = _pairwise16(_round16(products[:, :k]))
    errors = {name: np.median(np.abs(values - exact) / exact, axis=0) for name, values in running.items()}
    return lengths, errors


def draw_dot_errors(lengths, errors: dict, ax=None):
    """`dot_errors`' result on log-log axes, with fp16's and fp32's unit roundoff for scale."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    if ax is None:
        _, ax = plt.subplots(figsize=(8, 4.5))
    for name, values in errors.items():
        values = np.asarray(values, float)
        ax.loglog(lengths, np.where(values > 0, values, np.nan), "o-", ms=3, label=name, base=2,  # 0: exact
                  color=ACCUMULATION_COLOURS.get(name))
    for name, u in (("fp16", 2.0 ** -11), ("fp32", 2.0 ** -24)):
        ax.axhline(u, color="0.5", lw=0.8, ls="--")
        ax.text(lengths[0], u * 1.3, f"{name} unit roundoff $2^{{{int(np.log2(u))}}}$", fontsize=10, color="0.4")
    ax.set_xlabel("length of the dot product")
    ax.set_ylabel("relative error (median)")
    ax.set_title("fp16 inputs, four ways to add the products", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=10)
    return ax


# -- mma fragments ---------------------------------------------------------------------------------------
def draw_fragments(layout: dict | None = None, lanes=None, axes=None):
    """Which lane holds which elements of A, B and C in one ``mma.sync``.

    ``layout`` maps a matrix name to an int array ``(32, elements, 2)``: the (row, column) of each element each
    lane holds; by default the library's `fragment_layout` of ``mma.sync.m16n8k8``. Each cell shows
    ``lane:element``; ``lanes`` (default all) picks the lanes whose cells are coloured, the rest are grey.
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415

    if layout is None:
        places = fragment_layout()
        layout = {"A": places["a"], "B": places["b"], "C and D": places["c"]}
    shown = set(range(32) if lanes is None else lanes)
    own_figure = axes is None
    if own_figure:
        widths = [int(np.asarray(p)[..., 1].max()) + 1 for p in layout.values()]
        _, axes = plt.subplots(1, len(layout), figsize=(3.2 * len(layout) + 1, 5.2),
                               gridspec_kw={"width_ratios": widths})
    colours = plt.get_cmap("tab20")
    axes = np.atleast_1d(axes)
    for ax, (name, places) in zip(axes, layout.items()):
        places = np.asarray(places)
        if places.ndim != 3 or places.shape[0] != 32 or places.shape[2] != 2:
            raise ValueError(f"layout[{name!r}] is (32 lanes, elements, 2) (row, column) pairs, not shape {places.shape}")
        rows, cols = places[..., 0].max() + 1, places[..., 1].max() + 1
        ax.set_xlim(-0.5, cols - 0.5)
        ax.set_ylim(rows - 0.5, -0.5)
        for lane in range(32):
            for element, (r, c) in enumerate(places[lane]):
                colour = colours(lane % 20) if lane in shown else (0.92, 0.92, 0.92)
                ax.add_patch(plt.Rectangle((c - 0.5, r - 0.5), 1, 1, facecolor=colour, edgecolor="white"))
                ax.text(c, r, f"{lane}:{element}", ha="center", va="center", fontsize=10)
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        ax.set_xlabel("column", fontsize=10)
        ax.set_ylabel("row", fontsize=10)
        ax.tick_params(labelsize=10)
        ax.set_title(f"{name} ({rows} x {cols}): {places.shape[1]} per lane", fontsize=11)
        ax.set_aspect(0.55)  # cells wider than tall, the same in every matrix: room for a label such as "31:3"
    if own_figure:
        axes[0].figure.tight_layout()
    return axes


def fragment_viewer(layout: dict | None = None):
    """A slider over the 32 lanes: `draw_fragments` with the chosen lane's cells in colour."""
    import ipywidgets as widgets  # noqa: PLC0415

    lane = widgets.IntSlider(0, 0, 31, description="lane")
    return explorer(lane, figure_view(lambda: draw_fragments(layout, lanes=[lane.value])[0].figure, (lane,)))


# -- feeding the tensor cores ------------------------------------------------------------------------------
STEP = 10  # the width of one step of 32 along K in `draw_copy_pipelines`: a schematic, not a time
COPY_PIPELINES = {  # (row, start, width, label): one step, in the order of its sm_90 SASS (benchmarks/README.md)
    "gemm_tensor_core_tiled: global -> registers -> shared": (
        ("warp issues", 0.0, 1.2, "LDG.128 x4\n(step s+1)"),
        ("warp issues", 1.2, 6.0, "mma loop on stage s: ldmatrix, LDS, HMMA"),
        ("warp issues", 7.2, 2.2, "PRMT x8\nSTS.128 x4"),
        ("warp issues", 9.4, 0.6, "BAR"),
        ("copy in flight", 1.2, 6.0, "global -> registers: must land by the PRMT and STS"),
        ("registers held", 0.0, 9.4, "16 registers per thread hold the 4 chunks from LDG to STS"),
    ),
    "gemm_tensor_core_async: cp.async, global -> shared": (
        ("warp issues", 0.0, 0.9, "wait\nBAR"),
        ("warp issues", 0.9, 2.2, "cp.async x4\n(step s+1)"),
        ("warp issues", 3.1, 6.9, "mma loop on stage s: ldmatrix, ldmatrix.trans, HMMA"),
        ("copy in flight", 3.1, 6.9, "global -> shared: must land by the next step's wait"),
    ),
}
PIPELINE_ROWS = ("warp issues", "copy in flight", "registers held")


def draw_copy_pipelines(pipelines: dict | None = None, axes=None):
    """One step of each kernel's pipeline (default `COPY_PIPELINES`) as bars in three rows: what the warp issues,
    how long the next step's copy may stay in flight before its data is needed, and the registers it holds.
    Widths are a schematic of the order, not of time (no step is timed); a dashed line marks the next step."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    pipelines = COPY_PIPELINES if pipelines is None else pipelines
    if axes is None:
        _, axes = plt.subplots(len(pipelines), 1, figsize=(11, 1.7 * len(pipelines) + 0.6), sharex=True)
    axes = np.atleast_1d(axes)
    colours = {"warp issues": "#9ecae1", "copy in flight": "#fdd0a2", "registers held": "#fcbba1"}
    for ax, (name, bars) in zip(axes, pipelines.items()):
        for row, start, width, label in bars:
            if row not in colours:
                raise ValueError(f"{name}: row {row!r} is not one of {PIPELINE_ROWS}")
            y = PIPELINE_ROWS.index(row)
            ax.add_patch(plt.Rectangle((start, y - 0.4), width, 0.8, facecolor=colours[row], edgecolor="0.3"))
            ax.text(start + width / 2, y, label, ha="center", va="center", fontsize=10)
        ax.axvline(STEP, color="0.3", ls="--", lw=1)
        ax.text(STEP + 0.1, -0.45, "next step", fontsize=10, va="top", color="0.3")
        ax.set_xlim(0, STEP + 1.2)
        ax.set_ylim(len(PIPELINE_ROWS) - 0.5, -0.5)
        ax.set_yticks(range(len(PIPELINE_ROWS)), PIPELINE_ROWS, fontsize=11)
        ax.set_xticks([])
        ax.set_title(name, fontsize=12, loc="left")
    return axes
