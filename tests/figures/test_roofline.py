"""The roofline: attainable FLOP/s, the ridge, the data-sheet device, the figure."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpucourse.figures import (DEVICES, H100_SXM, Device, attainable, draw_roofline, intensity,  # noqa: E402
                               seconds_at_least)
from on_a_slide import SMALLEST_TEXT, smallest_text  # noqa: E402


def test_h100_numbers_from_the_data_sheet():
    assert H100_SXM.peak_flops == 67e12 and H100_SXM.bandwidth == 3.35e12
    assert H100_SXM.ridge == pytest.approx(20.0)
    assert "data sheet" in H100_SXM.source


def test_attainable_is_the_lower_roof():
    device = Device("toy", peak_flops=100.0, bandwidth=10.0)
    assert device.ridge == 10
    np.testing.assert_allclose(attainable([0.5, 10, 1000], device), [5, 100, 100])
    assert intensity(2, 8) == 0.25
    assert seconds_at_least(flops=100, bytes_moved=1000, device=device) == 100   # memory: 1000 B at 10 B/s
    assert seconds_at_least(flops=1e4, bytes_moved=10, device=device) == 100     # arithmetic


def test_figure_builds():
    fig = draw_roofline({"sum": 0.25, "matmul": 170.0})
    labels = [text.get_text() for text in fig.axes[0].get_legend().get_texts()]
    assert any(label.startswith("sum: 0.25 FLOP/byte") for label in labels)
    plt.close(fig)


@pytest.mark.parametrize("points", [2, 7])
def test_legend_is_readable_on_a_slide(points):
    """Scaled like a slide's figure (1180 x 500 px at most), the legend's text is at least 13 px tall."""
    kernels = {f"kernel {k}": 0.25 * 4**k for k in range(points)}
    fig = draw_roofline(kernels, measured={"cuBLAS": (683.0, 51.7)})
    texts = fig.axes[0].get_legend().get_texts()
    assert [t.get_text() for t in texts][-1] == "cuBLAS: measured 51.7 TFLOP/s" and len(texts) == points + 2
    assert smallest_text(fig, texts)[0] >= SMALLEST_TEXT
    plt.close(fig)


def marker_boxes_of(line):
    """The box of each of ``line``'s markers, in pixels."""
    from matplotlib.transforms import Bbox

    if line.get_marker() in ("None", "", None):
        return []
    r = line.get_markersize() / 2 * line.figure.dpi / 72
    return [Bbox.from_bounds(x - r, y - r, 2 * r, 2 * r) for x, y in line.get_transform().transform(line.get_xydata())]


def marker_boxes(ax):
    return [box for line in ax.get_lines() for box in marker_boxes_of(line)]


@pytest.mark.parametrize("kernels, device, measured", [
    ({"SGEMM 4096^3, each matrix once": 682.7, "register-tiled, every read from DRAM": 15.9}, DEVICES["H200"],
     {"register-tiled": (15.9, 11.39), "warp-tiled (top rung)": (31.5, 35.24), "cuBLAS fp32": (682.7, 51.42)}),
    ({"add_bias": 0.123, "relu": 0.125, "matmul_plain (16 x 16 tiles)": 2.87}, DEVICES["H100"], None),
    ({f"T = {T}": T / 4 for T in (1, 16, 32, 64, 128)} | {"every matrix moved once": 682.7}, DEVICES["H100"], None)],
    ids=["lecture 7", "lecture 5", "lecture 3"])
def test_no_note_or_marker_hides_another(kernels, device, measured):
    """Lecture 7's ridge label sat under a marker, lecture 5's relu marker on add_bias's, and lecture 7's cuBLAS
    point on the SGEMM point above it (a review of the figures)."""
    fig = draw_roofline(kernels, device, measured=measured)
    ax = fig.axes[0]
    model = ax.get_lines()[2:2 + len(kernels)]
    boxes = marker_boxes(ax)  # on the roof and measured
    notes = [text.get_window_extent() for text in ax.texts]
    assert len(notes) == 4 and len(boxes) == len(kernels) + len(measured or {})
    for k, box in enumerate(boxes + notes):
        assert not any(box.overlaps(other) for other in (boxes + notes)[k + 1:])
    for line, i in zip(model, kernels.values()):  # moved on the screen, along the roof, not in the data
        assert tuple(line.get_xydata()[0]) == (i, attainable(i, device) / 1e12)
    plt.close(fig)


def test_a_point_measured_at_a_kernels_intensity_has_its_colour():
    """Lecture 7's register-tiled kernel was an orange square on the roof and a green cross measured."""
    measured = {"register-tiled": (15.9, 11.39), "warp-tiled": (31.5, 35.24), "cuBLAS": (682.7, 51.42)}
    fig = draw_roofline({"SGEMM": 682.7, "register-tiled": 15.9}, DEVICES["H200"], measured=measured)
    sgemm, tiled, measured_tiled, warp_tiled, cublas = (line.get_color() for line in fig.axes[0].get_lines()[2:])
    assert (measured_tiled, cublas) == (tiled, sgemm) and warp_tiled not in (sgemm, tiled)
    plt.close(fig)
