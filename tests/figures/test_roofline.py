"""The roofline: attainable FLOP/s, the ridge, the data-sheet device, the figure."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpucourse.figures import H100_SXM, Device, attainable, draw_roofline, intensity, seconds_at_least  # noqa: E402


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
    renderer = fig.canvas.get_renderer()
    box = fig.get_tightbbox(renderer)  # inches, what a notebook shows (bbox_inches="tight")
    scale = min(1, 1180 / (box.width * fig.dpi), 500 / (box.height * fig.dpi))
    texts = fig.axes[0].get_legend().get_texts()
    assert [t.get_text() for t in texts][-1] == "cuBLAS: measured 51.7 TFLOP/s" and len(texts) == points + 2
    assert min(t.get_fontsize() for t in texts) * fig.dpi / 72 * scale >= 13
    plt.close(fig)
