"""Pictures of module 6, precision: formats bit by bit, spacing against magnitude, dot-product error, mma fragments.

A binary floating-point format with ``e`` exponent bits and ``m`` mantissa bits stores
``(-1)^s * 1.f * 2^(E - bias)`` (``bias = 2^(e-1) - 1``) for a normal number and
``(-1)^s * 0.f * 2^(1 - bias)`` for a subnormal (``E = 0``). `Format` holds one, `FORMATS` the five the lecture
shows. `encode` rounds a real number to a format exactly (to nearest, ties to even, once, from float64) and
splits the stored value into its sign, exponent and mantissa bits; `format_widget` shows that for every format
as you type. `spacing` is the gap between neighbouring values (an ulp) at a magnitude, `draw_spacing` plots it
over each format's range.

`dot_errors` measures the relative error of fp16 dot products against their length for four ways of
accumulating, rounding with NumPy exactly as the GPU's instructions do (`hfma`: ``round16(acc + a*b)``, one
rounding; `fma.rn.f32`), and `draw_dot_errors` plots them. `draw_fragments` draws which lane of a warp holds
which elements of A, B and C in one ``mma.sync`` (from a layout such as the library's).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Format:
    """A binary floating-point format: ``exponent`` and ``mantissa`` bits after the sign bit.

    ``infinity`` is False for fp8 E4M3 (OCP's ``e4m3fn``), whose all-ones exponent still holds numbers: it has
    no inf, a single NaN bit pattern per sign, and overflow gives NaN.
    """

    name: str
    exponent: int
    mantissa: int
    infinity: bool = True

    @property
    def bias(self) -> int:
        return 2 ** (self.exponent - 1) - 1

    @property
    def min_exponent(self) -> int:
        """The exponent of the smallest normal number (and of the subnormals' spacing)."""
        return 1 - self.bias

    @property
    def max_exponent(self) -> int:
        return self.bias if self.infinity else self.bias + 1

    @property
    def max(self) -> float:
        """The largest finite value."""
        top = 2 - 2.0 ** -self.mantissa if self.infinity else 2 - 2.0 ** (1 - self.mantissa)  # E4M3: S.1111.111 is NaN
        return top * 2.0 ** self.max_exponent

    @property
    def min_normal(self) -> float:
        return 2.0 ** self.min_exponent

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (self.min_exponent - self.mantissa)

    @property
    def bits(self) -> int:
        return 1 + self.exponent + self.mantissa


FP32 = Format("fp32", 8, 23)
FP16 = Format("fp16", 5, 10)
BF16 = Format("bf16", 8, 7)
E4M3 = Format("fp8 E4M3", 4, 3, infinity=False)
E5M2 = Format("fp8 E5M2", 5, 2)
FORMATS = {"fp32": FP32, "fp16": FP16, "bf16": BF16, "e4m3": E4M3, "e5m2": E5M2}


def _format(fmt) -> Format:
    if isinstance(fmt, Format):
        return fmt
    if fmt not in FORMATS:
        raise ValueError(f"no format named {fmt!r}: use one of {', '.join(FORMATS)} or a gpucourse Format")
    return FORMATS[fmt]


def _exponent_of(a: np.ndarray, f: Format) -> np.ndarray:
    """floor(log2 a) for a > 0, clamped below at the format's smallest normal exponent (the subnormals' one)."""
    _, k = np.frexp(a)  # a = mantissa * 2^k, mantissa in [0.5, 1): exact
    return np.maximum(k - 1, f.min_exponent)


def round_to_format(x, fmt) -> np.ndarray:
    """``x`` rounded once to the nearest value of ``fmt`` (ties to even), as float64; inf (NaN for E4M3) past the
    largest value plus half a step. Exact: every step is a power-of-two scaling or NumPy's round-half-even."""
    f = _format(fmt)
    x = np.asarray(x, np.float64)
    a = np.abs(x)
    with np.errstate(invalid="ignore", over="ignore"):
        quantum = np.ldexp(1.0, _exponent_of(np.where(a > 0, a, 1.0), f) - f.mantissa)
        r = np.rint(a / quantum) * quantum
        r = np.where(np.isfinite(a), r, a)
        r = np.where(r > f.max, np.inf if f.infinity else np.nan, r)
    return np.copysign(r, x)


def spacing(x, fmt) -> np.ndarray:
    """The gap between the value of ``fmt`` nearest to ``|x|`` and the next one up (an ulp), as float64."""
    f = _format(fmt)
    a = np.abs(round_to_format(x, f))
    with np.errstate(invalid="ignore"):
        gap = np.ldexp(1.0, _exponent_of(np.where(a > 0, a, f.min_normal), f) - f.mantissa)  # at 0: a subnormal step
    return np.where(np.isfinite(a), gap, np.nan)


@dataclass(frozen=True)
class Encoding:
    """A number as ``fmt`` stores it: bit strings, the value stored, and the rounding error ``stored - value``."""

    format: Format
    value: float
    sign: str
    exponent: str
    mantissa: str
    stored: float

    @property
    def error(self) -> float:
        return self.stored - self.value if np.isfinite(self.stored) else np.nan

    @property
    def relative_error(self) -> float:
        return abs(self.error / self.value) if self.value else 0.0

    @property
    def kind(self) -> str:
        if np.isnan(self.stored):
            return "NaN"
        if np.isinf(self.stored):
            return "inf"
        if self.stored == 0:
            return "zero"
        return "subnormal" if set(self.exponent) == {"0"} else "normal"


def encode(value: float, fmt) -> Encoding:
    """``value`` rounded to ``fmt`` (`round_to_format`) and split into sign, exponent and mantissa bits."""
    f = _format(fmt)
    try:
        value = float(value)
    except (TypeError, ValueError):
        raise TypeError(f"encode needs a real number, got {value!r}") from None
    stored = float(round_to_format(value, f))
    sign = "1" if np.signbit(stored) else "0"
    ones = "1" * f.exponent
    if np.isnan(stored):
        exponent, mantissa = ones, "1" * f.mantissa if not f.infinity else "1" + "0" * (f.mantissa - 1)
    elif np.isinf(stored):
        exponent, mantissa = ones, "0" * f.mantissa
    elif stored == 0:
        exponent, mantissa = "0" * f.exponent, "0" * f.mantissa
    else:
        a = abs(stored)
        e = int(_exponent_of(np.float64(a), f))
        normal = a >= f.min_normal
        field = int(round(a / 2.0 ** (e - f.mantissa))) - (2 ** f.mantissa if normal else 0)
        exponent = format(e + f.bias if normal else 0, f"0{f.exponent}b")
        mantissa = format(field, f"0{f.mantissa}b")
    return Encoding(f, value, sign, exponent, mantissa, stored)


def describe(encoding: Encoding) -> str:
    """One line: the bits grouped as sign | exponent | mantissa, the value stored and the error."""
    e = encoding
    bits = f"{e.sign} {e.exponent} {e.mantissa}"
    if e.kind in ("NaN", "inf"):
        return f"{e.format.name:>9}  {bits:<34} {e.kind} (out of range)"
    return (f"{e.format.name:>9}  {bits:<34} stores {e.stored:<.10g} ({e.kind}), "
            f"error {e.error:+.3g} ({e.relative_error:.2g} relative)")


def format_widget(value: float = 0.1, formats=("fp32", "fp16", "bf16", "e4m3", "e5m2")):
    """Type a number, see its bits, the value stored and the rounding error in each format."""
    import ipywidgets as widgets  # noqa: PLC0415
    from IPython.display import display  # noqa: PLC0415

    box = widgets.Text(value=str(value), description="number", continuous_update=False)
    out = widgets.Output(layout={"font_family": "monospace"})

    def show(_=None):
        out.clear_output()
        with out:
            try:
                number = float(box.value)
            except ValueError:
                print(f"{box.value!r} is not a number: type one like 0.1, 65504 or 1e-8")
                return
            print(f"{'':>9}  {'sign exponent mantissa':<34} value {number!r}")
            for name in formats:
                print(describe(encode(number, name)))

    box.observe(show, "value")
    show()
    display(widgets.VBox([box, out]))
    return box


def draw_spacing(formats=("fp32", "fp16", "bf16", "e4m3", "e5m2"), axes=None):
    """Left: the spacing (ulp) against magnitude over each format's whole range, smallest subnormal to largest
    value (log-log). Right: the relative spacing ulp / |x| near 1, where the fp16 and fp8 formats live."""
    import matplotlib.pyplot as plt  # noqa: PLC0415

    if axes is None:
        _, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    whole, near = axes
    for name in formats:
        f = _format(name)
        x = np.geomspace(f.min_subnormal, f.max, 6000)
        gap = spacing(x, f)
        line, = whole.step(x, gap, where="post", label=f"{f.name}: {f.bits} bits", lw=1.5)
        colour = line.get_color()
        whole.plot([f.min_normal, f.max], spacing([f.min_normal, f.max], f), "o", color=colour, ms=4)
        near.step(x, gap / x, where="post", color=colour, lw=1.5)
        near.plot([f.min_normal, f.max], spacing([f.min_normal, f.max], f) / [f.min_normal, f.max], "o",
                  color=colour, ms=4)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_yscale("log", base=2)
        ax.set_xlabel("|x|")
        ax.grid(True, which="major", alpha=0.3)
    whole.set_ylabel("gap to the next value (ulp)")
    whole.set_title("Whole range: dots at the smallest normal and the largest value", fontsize=9)
    whole.legend(fontsize=8, loc="upper left")
    near.set_xlim(2.0 ** -30, 2.0 ** 20)
    near.set_ylabel("relative gap, ulp / |x|")
    near.set_title("Relative gap: flat over the normals (precision), rising in the subnormals", fontsize=9)
    return axes


# -- dot products ----------------------------------------------------------------------------------------
def _round16(x):
    return np.asarray(x, np.float64).astype(np.float16).astype(np.float64)  # NumPy rounds float64 once, to even


def _round32(x):
    return np.asarray(x, np.float64).astype(np.float32).astype(np.float64)


def _pairwise16(terms):
    """fp16 pairwise (tree) sums of the rows of ``terms`` (length a power of two), each addition rounded."""
    while terms.shape[-1] > 1:
        terms = _round16(terms[..., 0::2] + terms[..., 1::2])
    return terms[..., 0]


ACCUMULATIONS = ("fp16 accumulator", "fp16 storage, fp32 accumulator", "fp16 pairwise", "fp16 Kahan")


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
        ax.loglog(lengths, np.where(values > 0, values, np.nan), "o-", ms=3, label=name, base=2)  # 0: exact
    for name, u in (("fp16", 2.0 ** -11), ("fp32", 2.0 ** -24)):
        ax.axhline(u, color="0.5", lw=0.8, ls="--")
        ax.text(lengths[0], u * 1.3, f"{name} unit roundoff $2^{{{int(np.log2(u))}}}$", fontsize=8, color="0.4")
    ax.set_xlabel("length of the dot product")
    ax.set_ylabel("relative error (median)")
    ax.set_title("fp16 inputs, four ways to add the products", fontsize=10)
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=8)
    return ax


# -- mma fragments ---------------------------------------------------------------------------------------
def draw_fragments(layout: dict, lanes=None, axes=None):
    """Which lane holds which elements of A, B and C in one ``mma.sync``.

    ``layout`` maps a matrix name to an int array ``(32, elements, 2)``: the (row, column) of each element each
    lane holds (the library's fragment layout). Each cell shows ``lane:element``; ``lanes`` (default all)
    picks the lanes whose cells are coloured, the rest are grey.
    """
    import matplotlib.pyplot as plt  # noqa: PLC0415

    shown = set(range(32) if lanes is None else lanes)
    if axes is None:
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
                ax.text(c, r, f"{lane}:{element}", ha="center", va="center", fontsize=6.5)
        ax.set_xticks(range(cols))
        ax.set_yticks(range(rows))
        ax.tick_params(labelsize=7)
        ax.set_title(f"{name} ({rows} x {cols}): {places.shape[1]} per lane", fontsize=9)
        ax.set_aspect("equal")
    return axes
