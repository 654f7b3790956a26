"""The roofline: how fast a kernel can be, from its FLOPs per byte and the device's two peaks.

A kernel that does ``flops`` operations and moves ``bytes`` to and from memory
needs at least ``max(flops / peak_flops, bytes / bandwidth)`` seconds, so it
reaches at most ``min(peak_flops, intensity * bandwidth)`` FLOP/s, where
``intensity = flops / bytes``. Below the device's *ridge*, ``peak_flops /
bandwidth`` FLOP per byte, memory bounds it; above, arithmetic does.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np


@dataclass(frozen=True)
class Device:
    name: str
    peak_flops: float  # FLOP/s
    bandwidth: float  # bytes/s
    source: str = ""
    multiprocessors: int = 0  # SMs, each with its share of peak_flops (0: not known)

    @property
    def ridge(self) -> float:
        """FLOPs per byte a kernel needs before arithmetic, not memory, limits it."""
        return self.peak_flops / self.bandwidth


H100_SXM = Device(
    "H100 SXM", 67e12, 3.35e12,
    "NVIDIA H100 Tensor Core GPU data sheet, SXM form factor: FP32 67 teraFLOPS, GPU memory bandwidth 3.35 TB/s",
    132,
)

H200_SXM = Device(
    "H200 SXM", 67e12, 4.8e12,
    "NVIDIA H200 Tensor Core GPU data sheet, SXM form factor: FP32 67 teraFLOPS, GPU memory bandwidth 4.8 TB/s "
    "(the H100's chip with 141 GB of HBM3e)",
    132,
)

T4 = Device(
    "T4", 8.1e12, 320e9,
    "NVIDIA T4 Tensor Core GPU data sheet: single-precision 8.1 TFLOPS, GPU memory bandwidth 320 GB/s",
    40,
)
A100_SXM = Device(
    "A100 SXM 80GB", 19.5e12, 2.039e12,
    "NVIDIA A100 Tensor Core GPU data sheet, 80GB SXM: FP32 19.5 TFLOPS, GPU memory bandwidth 2,039 GB/s",
    108,
)
DEVICES = {"T4": T4, "A100": A100_SXM, "H100": H100_SXM, "H200": H200_SXM}
# The same devices when the FLOPs are FP16 tensor-core math (dense, FP32 accumulation), same memory.
TENSOR_FP16 = {
    "T4": Device("T4, FP16 tensor cores", 65e12, T4.bandwidth,
                 "NVIDIA T4 data sheet: mixed precision (FP16/FP32) 65 TFLOPS"),
    "A100": Device("A100 SXM 80GB, FP16 tensor cores", 312e12, A100_SXM.bandwidth,
                   "NVIDIA A100 data sheet: FP16 Tensor Core 312 TFLOPS (624 with sparsity)"),
    "H100": Device("H100 SXM, FP16 tensor cores", 989e12, H100_SXM.bandwidth,
                   "NVIDIA H100 data sheet, SXM: FP16 Tensor Core 1,979 TFLOPS with sparsity, 989 dense"),
    "H200": Device("H200 SXM, FP16 tensor cores", 989e12, H200_SXM.bandwidth,
                   "NVIDIA H200 data sheet, SXM: FP16 Tensor Core 1,979 TFLOPS with sparsity, 989 dense"),
}


def intensity(flops: float, bytes_moved: float) -> float:
    """Arithmetic intensity: FLOPs per byte moved to or from memory."""
    return flops / bytes_moved


def attainable(intensity_, device: Device = H100_SXM):
    """The most FLOP/s a kernel of this intensity can reach on ``device``: min(peak, intensity x bandwidth)."""
    return np.minimum(device.peak_flops, np.asarray(intensity_, float) * device.bandwidth)


def seconds_at_least(flops: float, bytes_moved: float, device: Device = H100_SXM) -> float:
    """The time no kernel can beat: the slower of its arithmetic and its memory traffic at peak."""
    return max(flops / device.peak_flops, bytes_moved / device.bandwidth)


LEGEND_FONT = 11  # pt: a legend, label or note readable on a 1280 x 720 slide


def draw_roofline(kernels: dict[str, float], device: Device = H100_SXM, ax=None, measured=None):
    """The roof of ``device`` on log-log axes, with each kernel (name -> FLOPs per byte) on it. Returns the figure.

    ``measured`` (name -> (FLOPs per byte, TFLOP/s)) adds points a GPU measured; one at a kernel's intensity takes
    the kernel's colour. The legend sits under the axes, one line per point, in a font readable on a slide. Kernels
    whose markers would overlap are set apart along the roof, a measured point that would cover a marker is moved
    to its right, and each note goes where it covers no marker or line.
    """
    import matplotlib.pyplot as plt
    from matplotlib.transforms import offset_copy

    measured = measured or {}
    if ax is None:  # the legend under the axes grows with the points: the axes shrink so the whole stays slide-sized
        _, ax = plt.subplots(figsize=(9, max(2.8, 4.4 - 0.2 * (len(kernels) + len(measured)))))
    points = list(kernels.values()) + [i for i, _ in measured.values()]
    low = min([device.ridge / 1000] + [i / 2 for i in points])
    high = max([device.ridge * 30] + [i * 2 for i in points])
    peak, ridge = device.peak_flops / 1e12, device.ridge
    bottom = attainable(low, device) / 1e12 / 2
    x = np.geomspace(low, high, 400)
    ax.loglog(x, attainable(x, device) / 1e12, color="black", lw=2, label=f"{device.name} roof")
    ax.axvspan(low, ridge, color=(0.85, 0.91, 0.99), zorder=0)
    ax.axvline(ridge, color="0.4", ls=":", lw=1)
    ax.set_xlim(low, high)
    ax.set_ylim(bottom, peak * 4)
    markers, size, measured_size = "osD^v<>", 8, 11
    shifts = _along_the_roof(ax, list(kernels.values()), device, size)
    colour_at, placed = {}, []  # a kernel's colour at its intensity; the markers' centres, in pixels
    for k, ((name, i), (dx, dy)) in enumerate(zip(kernels.items(), shifts)):
        reach = float(attainable(i, device))
        transform = offset_copy(ax.transData, fig=ax.figure, x=dx, y=dy, units="points")
        line, = ax.plot(i, reach / 1e12, markers[k % len(markers)], ms=size, label=f"{name}: {i:.3g} FLOP/byte, "
                        f"at most {reach / 1e12:.2f} TFLOP/s ({reach / device.peak_flops:.1%} of peak)",
                        transform=transform)
        colour_at[i] = line.get_color()
        placed.append(transform.transform((i, reach / 1e12)))
    px = ax.figure.dpi / 72  # pixels per point
    for k, (name, (i, tflops)) in enumerate(measured.items()):
        here = ax.transData.transform((i, tflops))
        dx = _to_the_right(here, placed, (size + measured_size) / 2 * px + 2 * px)
        style = {"color": colour_at[i]} if i in colour_at else {}  # measured at a kernel's intensity: its colour
        ax.plot(i, tflops, "x*+"[k % 3], ms=measured_size, mew=2, label=f"{name}: measured {tflops:g} TFLOP/s",
                transform=offset_copy(ax.transData, fig=ax.figure, x=dx / px, units="points"), **style)
        placed.append(here + (dx, 0))
    taken = []
    _note(ax, "memory-bound: judged in bytes/s", [(low * 1.3, peak, "left", 8)], taken)
    _note(ax, f"sloped roof: intensity x bandwidth ({device.bandwidth / 1e12:.2f} TB/s)",
          [(low * 1.3, peak * 0.55, "left", 0)], taken)
    _note(ax, "compute-bound: FLOP/s", [(ridge * 1.3, peak, "left", 8), (high / 1.3, peak, "right", 8),
                                        (ridge * 1.3, peak, "left", -10), (high / 1.3, peak, "right", -10)], taken)
    _note(ax, f"ridge: {ridge:.0f} FLOP/byte", [(ridge * 1.1, bottom * 1.5, "left", 0),
                                                 (ridge / 1.1, bottom * 1.5, "right", 0)], taken)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)", fontsize=LEGEND_FONT)
    ax.set_ylabel("attainable TFLOP/s (FP32)", fontsize=LEGEND_FONT)
    ax.tick_params(labelsize=LEGEND_FONT - 1)
    ax.set_title(f"Roofline of the {device.name}, from its data sheet", fontsize=LEGEND_FONT + 1)
    ax.legend(fontsize=LEGEND_FONT, loc="upper left", bbox_to_anchor=(0, -0.16), frameon=False)
    ax.grid(True, which="major", color="0.9")
    return ax.figure


def _to_the_right(here, placed, apart: float) -> float:
    """Pixels to move a marker centred at ``here`` to the right until it is ``apart`` pixels from each of ``placed``
    (centres) across or along: a measured point, moved on the screen only, clear of the markers drawn before it."""
    shift = 0.0
    for x, y in sorted(map(tuple, placed)):  # left to right: a move clears a marker, and meets only those further right
        if abs(y - here[1]) < apart and abs(x - here[0] - shift) < apart:
            shift = x + apart - here[0]
    return shift


def _along_the_roof(ax, intensities: list[float], device: Device, size: float) -> list[tuple[float, float]]:
    """Offsets in points for markers of ``size`` points on the roof at ``intensities``: one that would overlap an
    earlier one moves along the roof, to the right, until it is 1.2 markers away from every earlier one."""
    px = ax.figure.dpi / 72  # pixels per point
    placed, shifts = [], []
    for i in intensities:
        here, ahead = ax.transData.transform([(i, attainable(i, device) / 1e12),
                                              (i * 1.01, attainable(i * 1.01, device) / 1e12)])
        step = (ahead - here) / np.hypot(*(ahead - here)) * 1.2 * size * px / 4
        shift = np.zeros(2)
        while any(np.hypot(*(here + shift - other)) < 1.2 * size * px for other in placed):
            shift += step
        placed.append(here + shift)
        shifts.append(tuple(shift / px))
    return shifts


def _note(ax, text: str, places: list[tuple[float, float, str, float]], taken: list) -> None:
    """``text`` at the first of ``places`` (x, y in data coordinates, ha, and points above (below, if negative)
    that spot) where its box, 5 px wider, meets no marker or line of ``ax`` and no box of ``taken`` (the notes
    before it, which it joins); else at the first."""
    from matplotlib.transforms import Bbox

    boxes, paths = list(taken), []
    for line in ax.get_lines():
        transform = line.get_transform()
        if line.get_linestyle() not in ("None", ""):
            paths.append(transform.transform_path(line.get_path()))
        if line.get_marker() not in ("None", "", None):
            r = (line.get_markersize() / 2 + line.get_markeredgewidth()) * ax.figure.dpi / 72
            boxes += [Bbox.from_bounds(x - r, y - r, 2 * r, 2 * r) for x, y in transform.transform(line.get_xydata())]
    label = ax.annotate(text, places[0][:2], xytext=(0, 0), textcoords="offset points", fontsize=LEGEND_FONT - 1,
                        color="0.25")
    for x, y, ha, up in places + places[:1]:  # the first again where none is clear
        label.xy = (x, y)
        label.set_position((0, up))
        label.set_horizontalalignment(ha)
        label.set_verticalalignment("bottom" if up >= 0 else "top")
        box = label.get_window_extent().padded(5)
        if not any(box.overlaps(b) for b in boxes) and not any(p.intersects_bbox(box, filled=False) for p in paths):
            break
    taken.append(box)


# -- a prediction from the simulator's trace, for lectures where no GPU run is recorded ----------------------------
SECTOR_BYTES = 32
PREDICTION_LABEL = "Prediction, not a measurement"


@dataclass(frozen=True)
class LaunchBound:
    """One traced launch's time on ``device`` if every sector its warps request came from DRAM: its global memory
    traffic at peak bandwidth or its FLOPs at the peak of the SMs its ``blocks`` can fill, whichever is slower.

    A grid of fewer blocks than SMs leaves the others idle: an SM's FP32 units are its own. DRAM bandwidth is
    shared, and a few SMs can draw much of it, so it is not scaled."""

    kernel: str
    sectors: int  # 32-byte sectors of global memory the launch's warps read, wrote or updated atomically
    flops: float
    device: Device
    blocks: int = 0  # the grid's blocks (0: not known, every SM counted)

    @property
    def bytes_moved(self) -> int:
        return self.sectors * SECTOR_BYTES

    @property
    def multiprocessors_used(self) -> int:
        """SMs the grid can keep busy: its blocks, at most the device's SMs (0 where either is not known)."""
        return min(self.blocks, self.device.multiprocessors) if self.blocks and self.device.multiprocessors else 0

    @property
    def filled(self) -> Device:
        """The device as this grid sees it: the FP32 peak of the SMs it fills, all of the bandwidth."""
        used = self.multiprocessors_used
        return replace(self.device, peak_flops=self.device.peak_flops * used / self.device.multiprocessors) if used \
            else self.device

    @property
    def seconds(self) -> float:
        return seconds_at_least(self.flops, self.bytes_moved, self.filled)

    @property
    def bound_by(self) -> str:
        return "memory" if self.bytes_moved / self.device.bandwidth >= self.flops / self.filled.peak_flops else "FLOPs"


def _device(device) -> Device:
    if isinstance(device, Device):
        return device
    if device not in DEVICES:
        raise ValueError(f"no data-sheet figures for a device named {device!r}: use one of {', '.join(DEVICES)} "
                         "(gpucourse.figures.DEVICES) or a gpucourse.figures.Device")
    return DEVICES[device]


def launch_bound(launch, flops: float = 0, device="H100") -> LaunchBound:
    """`LaunchBound` of ``launch``, one launch of a trace (``with gpucourse.trace() as t: ...``, then ``t.last``
    or ``t[k]``), doing ``flops`` operations, on ``device`` (a name of `DEVICES` or a `Device`)."""
    if not hasattr(launch, "arrays"):
        raise TypeError(f"launch_bound needs one traced launch (t.last or t[k] of `with gpucourse.trace() as t:`), "
                        f"got {type(launch).__name__}")
    sectors = sum(stats.sectors for array in launch.arrays.values() if array.space == "global"
                  for stats in array.instructions.values())
    return LaunchBound(launch.kernel, int(sectors), float(flops), _device(device), launch.geometry.blocks)


def show_prediction(launches: dict, flops=0, useful_bytes=None, devices=("T4", "H100"), measure: str = "",
                    scaled: tuple[float, str] | None = None):
    """A labelled prediction of time, in a notebook, for traced launches (``{label: t[k]}``) on each device.

    Bytes moved are the trace's 32-byte sectors x 32, as if every sector the warps request came from DRAM;
    ``flops`` (a number, or one per label) the launch's arithmetic. A launch that requests each sector once
    cannot beat the time shown; one that requests sectors again can, where L1 and L2 serve the repeats. The
    speed shown is ``useful_bytes`` (GB/s) or FLOPs (TFLOP/s) over that time; a grid of fewer blocks than SMs
    gets its SMs' share of the FLOPs. ``measure`` names the command that records real numbers.
    ``scaled=(factor, size)`` multiplies bytes, FLOPs, blocks and useful bytes by ``factor``: the same launch at
    ``size`` (the one a GPU cell times), for launches whose traffic grows in proportion. Returns IPython Markdown.
    """
    from IPython.display import Markdown  # noqa: PLC0415

    devices = [_device(d) for d in devices]
    factor, size = scaled or (1, "")

    def per(value, label):
        return factor * (value.get(label, 0) if isinstance(value, dict) else value)

    speed = "GB/s" if useful_bytes is not None else "TFLOP/s"
    header = ["launch", "bytes moved", "FLOPs"] + [f"{d.name}: {what}" for d in devices for what in ("time", speed)]
    rows, unfilled = [], {d.name: [] for d in devices}
    for label, launch in launches.items():
        traced = launch_bound(launch)
        blocks = round(factor * traced.blocks)
        bounds = [LaunchBound(traced.kernel, round(factor * traced.sectors), per(flops, label), d, blocks)
                  for d in devices]
        for b, d in zip(bounds, devices):
            if 0 < b.multiprocessors_used < d.multiprocessors:
                unfilled[d.name].append(f"`{label}` {b.multiprocessors_used}")
        cells = [f"`{label}`", f"{bounds[0].bytes_moved:,}", f"{bounds[0].flops:,.0f}"]
        for b in bounds:
            rate = per(useful_bytes, label) / b.seconds / 1e9 if useful_bytes is not None else b.flops / b.seconds / 1e12
            cells += [f"{b.seconds * 1e6:.3g} µs ({b.bound_by})", f"{rate:,.0f}" if rate >= 100 else f"{rate:.3g}"]
        rows.append("| " + " | ".join(cells) + " |")
    sources = "; ".join(f"{d.name}: {d.peak_flops / 1e12:g} TFLOP/s FP32, {d.bandwidth / 1e9:g} GB/s "
                        f"({d.source.split(':')[0]})" for d in devices)  # the data sheet's name, not its figures again
    text = "\n".join([
        f"**{PREDICTION_LABEL}** (no recorded GPU run here): each traced launch's time "
        + (f"scaled {factor:,.0f}x to {size}, the size a GPU times" if scaled else "at its traced size")
        + " if every 32-byte sector its warps request came from DRAM at peak bandwidth, or its FLOPs at peak "
        "FP32, whichever is slower; no launch overhead. Only where L1 or L2 serve sectors requested again can a "
        "GPU beat it.",
        "",
        "| " + " | ".join(header) + " |",
        "|" + "---|" * 3 + "---:|" * (2 * len(devices)),
        *rows,
        "",
        f"Data sheets: {sources}." + (f" `{measure}` on a GPU records measured numbers." if measure else ""),
    ])
    small = [f"{', '.join(grids)} of the {d.name}'s {d.multiprocessors}" for d in devices if (grids := unfilled[d.name])]
    if small:  # an SM's FP32 units are its own: a small grid gets its blocks' share of the peak
        text += f"\n\nSMs a grid fills, FLOPs priced at their share of the peak: {'; '.join(small)}."
    return Markdown(text)
