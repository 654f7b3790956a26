"""The roofline: how fast a kernel can be, from its FLOPs per byte and the device's two peaks.

A kernel that does ``flops`` operations and moves ``bytes`` to and from memory
needs at least ``max(flops / peak_flops, bytes / bandwidth)`` seconds, so it
reaches at most ``min(peak_flops, intensity * bandwidth)`` FLOP/s, where
``intensity = flops / bytes``. Below the device's *ridge*, ``peak_flops /
bandwidth`` FLOP per byte, memory bounds it; above, arithmetic does.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Device:
    name: str
    peak_flops: float  # FLOP/s
    bandwidth: float  # bytes/s
    source: str = ""

    @property
    def ridge(self) -> float:
        """FLOPs per byte a kernel needs before arithmetic, not memory, limits it."""
        return self.peak_flops / self.bandwidth


H100_SXM = Device(
    "H100 SXM", 67e12, 3.35e12,
    "NVIDIA H100 Tensor Core GPU data sheet, SXM form factor: FP32 67 teraFLOPS, GPU memory bandwidth 3.35 TB/s",
)

T4 = Device(
    "T4", 8.1e12, 320e9,
    "NVIDIA T4 Tensor Core GPU data sheet: single-precision 8.1 TFLOPS, GPU memory bandwidth 320 GB/s",
)
A100_SXM = Device(
    "A100 SXM 80GB", 19.5e12, 2.039e12,
    "NVIDIA A100 Tensor Core GPU data sheet, 80GB SXM: FP32 19.5 TFLOPS, GPU memory bandwidth 2,039 GB/s",
)
DEVICES = {"T4": T4, "A100": A100_SXM, "H100": H100_SXM}


def intensity(flops: float, bytes_moved: float) -> float:
    """Arithmetic intensity: FLOPs per byte moved to or from memory."""
    return flops / bytes_moved


def attainable(intensity_, device: Device = H100_SXM):
    """The most FLOP/s a kernel of this intensity can reach on ``device``: min(peak, intensity x bandwidth)."""
    return np.minimum(device.peak_flops, np.asarray(intensity_, float) * device.bandwidth)


def seconds_at_least(flops: float, bytes_moved: float, device: Device = H100_SXM) -> float:
    """The time no kernel can beat: the slower of its arithmetic and its memory traffic at peak."""
    return max(flops / device.peak_flops, bytes_moved / device.bandwidth)


def draw_roofline(kernels: dict[str, float], device: Device = H100_SXM, ax=None):
    """The roof of ``device`` on log-log axes, with each kernel (name -> FLOPs per byte) on it. Returns the figure."""
    import matplotlib.pyplot as plt

    if ax is None:
        _, ax = plt.subplots(figsize=(7.5, 4.6))
    low = min([device.ridge / 1000] + [i / 2 for i in kernels.values()])
    high = max([device.ridge * 30] + [i * 2 for i in kernels.values()])
    x = np.geomspace(low, high, 400)
    ax.loglog(x, attainable(x, device) / 1e12, color="black", lw=2, label=f"{device.name} roof")
    ax.axvspan(low, device.ridge, color=(0.85, 0.91, 0.99), zorder=0)
    ax.axvline(device.ridge, color="0.4", ls=":", lw=1)
    ax.text(device.ridge * 1.1, device.peak_flops / 1e12 * 0.5, f"ridge: {device.ridge:.0f} FLOP/byte",
            fontsize=8, color="0.3")
    ax.text(low * 1.3, device.peak_flops / 1e12 * 1.25, "memory-bound: judged in bytes/s", fontsize=8, color="0.25")
    ax.text(device.ridge * 1.3, device.peak_flops / 1e12 * 1.25, "compute-bound: FLOP/s", fontsize=8, color="0.25")
    ax.text(low * 1.3, device.peak_flops / 1e12 * 0.55, f"sloped roof: intensity x bandwidth ({device.bandwidth / 1e12:.2f} TB/s)",
            fontsize=8, color="0.25")
    markers = "osD^v<>"
    for k, (name, i) in enumerate(kernels.items()):
        reach = float(attainable(i, device))
        ax.plot(i, reach / 1e12, markers[k % len(markers)], ms=7, label=f"{name}: {i:.3g} FLOP/byte, "
                f"at most {reach / 1e12:.2f} TFLOP/s ({reach / device.peak_flops:.1%} of peak)")
    ax.set_xlim(low, high)
    ax.set_ylim(attainable(low, device) / 1e12 / 2, device.peak_flops / 1e12 * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per byte moved)")
    ax.set_ylabel("attainable TFLOP/s (FP32)")
    ax.set_title(f"Roofline of the {device.name}, from its data sheet", fontsize=10)
    ax.legend(fontsize=7, loc="lower right")
    ax.grid(True, which="major", color="0.9")
    return ax.figure
