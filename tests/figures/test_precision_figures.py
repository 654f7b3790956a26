"""Module 6's pictures: a number described in each format, limits, fp16 dot-product errors by hand, the figures."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpucourse.figures import precision as fp  # noqa: E402
from gpucourse.kernels.precision import fragment_layout, round_to  # noqa: E402
from on_a_slide import SMALLEST_TEXT, smallest_text  # noqa: E402

DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16, "fp8_e4m3": ml_dtypes.float8_e4m3fn,
          "fp8_e5m2": ml_dtypes.float8_e5m2}


def test_limits_are_the_dtypes_limits():
    assert fp.limits("fp16") == (2.0 ** -24, 2.0 ** -14, 65504)
    for name, dtype in DTYPES.items():
        info = ml_dtypes.finfo(dtype)
        assert fp.limits(name) == (float(info.smallest_subnormal), float(info.smallest_normal), float(info.max))


@pytest.mark.parametrize("value, name, expected", [
    (0.1, "fp16", "fp16  0 01011 1001100110"), (1e-6, "fp16", "(subnormal)"), (1e-9, "fp16", "stores 0 (zero)"),
    (256 * 256, "fp16", "0 11111 0000000000                 inf (out of range)"), (-0.0, "bf16", "stores -0 (zero)"),
    (500, "fp8_e4m3", "NaN (out of range)"), (6e4, "fp8_e5m2", "stores 57344 (normal), error -2.66e+03"),
    (65504, "fp16", "stores 65504 (normal), error +0, 0 relative"), (1 / 3, "fp32", "stores 0.3333333433"),
])
def test_describe(value, name, expected):
    assert expected in fp.describe(value, name)


def test_describe_gives_the_rounding_error_of_the_stored_value():
    for value in np.random.default_rng(61).standard_normal(50) * 1e3:
        line = fp.describe(value, "fp16")
        stored = float(np.float16(value))
        assert f"stores {stored:<.10g} " in line and f"error {stored - value:+.3g}," in line


def test_the_widget_answers_what_is_typed():
    box, out = fp.format_widget(1.0).children
    assert "stores 1 (normal), error +0" in out.value and out.value.count("\n") == len(fp.FORMATS)
    box.value = "65520"
    assert "fp16  0 11111 0000000000" in out.value and "stores 65520" in out.value
    box.value = "one"
    assert "&#x27;one&#x27; is not a number" in out.value


@pytest.mark.parametrize("call, message", [
    (lambda: fp.describe(1, "fp64"), "no format named 'fp64'"), (lambda: fp.describe("x", "fp16"), "real number"),
    (lambda: fp.limits("e4m3"), "use one of"),
    (lambda: fp.dot_errors(max_log2=17), "between 1 and 16"), (lambda: fp.dot_errors(trials=0), "positive"),
    (lambda: fp.draw_fragments({"A": np.zeros((16, 4, 2), int)}), r"\(32 lanes"),
])
def test_bad_arguments_are_named(call, message):
    with pytest.raises((ValueError, TypeError), match=message):
        call()
    plt.close("all")


def test_dot_errors_rank_the_accumulations():
    lengths, errors = fp.dot_errors(max_log2=13, trials=5, seed=3)
    assert list(lengths) == [2 ** k for k in range(1, 14)] and set(errors) == set(fp.ACCUMULATIONS)
    fp16, fp32 = errors["fp16 accumulator"], errors["fp16 storage, fp32 accumulator"]
    assert fp16[-1] > 0.2, "past 2048 a running fp16 sum of products in [0, 1) stops growing"
    assert (fp32 < 2.0 ** -18).all() and (fp32[3:] < fp16[3:] / 100).all()
    for compensated in ("fp16 pairwise", "fp16 Kahan"):
        assert (errors[compensated] < 2.0 ** -10).all() and errors[compensated][-1] < fp16[-1] / 100


def test_dot_errors_follow_one_sequence_by_hand():
    # the running fp16 sum of length 2^k is the sum of the first 2^k products, each step rounded once
    lengths, errors = fp.dot_errors(max_log2=5, trials=1, seed=9)
    r = np.random.default_rng(9)
    a, b = (r.random((1, 32)).astype(np.float16).astype(np.float64) for _ in range(2))
    acc = np.float16(0)
    for i in range(32):
        acc = np.float16(float(acc) + a[0, i] * b[0, i])
    exact = float(a[0] @ b[0])
    assert errors["fp16 accumulator"][-1] == pytest.approx(abs(float(acc) - exact) / exact, rel=1e-12)


def test_figures_build():
    axes = fp.draw_spacing()
    assert len(axes[0].lines) == 2 * len(fp.FORMATS)
    lengths, errors = fp.dot_errors(max_log2=6, trials=2)
    ax = fp.draw_dot_errors(lengths, errors)
    assert [line.get_label() for line in ax.lines[:4]] == list(fp.ACCUMULATIONS)
    spacing = {line.get_label().split(":")[0]: line.get_color() for line in axes[0].lines[::2]}
    accumulators = {line.get_label(): line.get_color() for line in ax.lines[:4]}
    assert accumulators["fp16 accumulator"] == spacing["fp16"]  # one colour per format, in both figures
    assert accumulators["fp16 storage, fp32 accumulator"] == spacing["fp32"]
    places = np.stack(np.meshgrid(np.arange(8), np.arange(4), indexing="ij"), -1).reshape(32, 1, 2)
    axes = fp.draw_fragments({"M": places}, lanes=[0, 1])
    assert len(axes[0].texts) == 32 and axes[0].texts[5].get_text() == "5:0"
    plt.close("all")


def test_the_fragment_picture_puts_each_lane_where_the_layout_says():
    axes = fp.draw_fragments(lanes=range(4))
    for ax, (name, places) in zip(axes, fragment_layout().items()):
        cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in ax.texts}
        assert len(cells) == len(ax.texts) == places.shape[0] * places.shape[1], name
        for lane, element in ((0, 0), (5, 1), (31, places.shape[1] - 1)):
            assert cells[tuple(places[lane, element])] == f"{lane}:{element}"
    plt.close("all")


def test_the_dot_products_round_as_the_library_does():
    # dot_errors rounds with NumPy's casts for speed: the same once-rounding as round_to, ties and subnormals included
    r = np.random.default_rng(62)
    x = np.r_[r.standard_normal(5000) * 2.0 ** r.integers(-30, 16, 5000), 1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11,
              2049.0, 2051.0, 2.0 ** -25, 3 * 2.0 ** -26, 1 + 2.0 ** -11 + 2.0 ** -40, 1 + 2.0 ** -24]
    np.testing.assert_array_equal(fp._round16(x), round_to(x, "fp16"))
    np.testing.assert_array_equal(fp._round32(x), round_to(x, "fp32"))


def test_the_fragment_viewer_redraws_for_the_chosen_lane(monkeypatch):
    drawn = []
    monkeypatch.setattr(fp, "draw_fragments", lambda layout, lanes: drawn.append(lanes) or [plt.figure().gca()])
    slider, _ = fp.fragment_viewer().children
    slider.value = 17
    assert drawn == [[0], [17]]
    plt.close("all")


def test_the_copy_pipelines_show_what_each_kernel_issues():
    tiled, pipelined = fp.draw_copy_pipelines()
    labels = [[t.get_text() for t in ax.texts] for ax in (tiled, pipelined)]
    assert any("STS" in text for text in labels[0]) and not any("STS" in text or "PRMT" in text for text in labels[1])
    bars = {name: {row: [(start, width) for r, start, width, _ in rows if r == row] for row in fp.PIPELINE_ROWS}
            for name, rows in fp.COPY_PIPELINES.items()}
    (_, old), (_, new) = bars.items()
    assert old["registers held"] and not new["registers held"]  # cp.async stages nothing in registers
    assert new["copy in flight"][0][1] > old["copy in flight"][0][1]  # its copy may take longer to land
    for rows in bars.values():  # the warp's issues tile the step: one after another, from 0 to the next step
        ends = np.cumsum([0] + [width for _, width in rows["warp issues"]])
        assert [start for start, _ in rows["warp issues"]] == pytest.approx(ends[:-1]) and ends[-1] == fp.STEP
    assert len(tiled.patches) == 6 and len(pipelined.patches) == 4
    with pytest.raises(ValueError, match="row 'cache'"):
        fp.draw_copy_pipelines({"x": (("cache", 0, 1, "?"),)})
    plt.close("all")


@pytest.mark.parametrize("draw", [lambda: fp.draw_spacing()[0].figure,
                                  lambda: fp.draw_dot_errors(*fp.dot_errors(max_log2=8, trials=2)).figure],
                         ids=["spacing", "dot errors"])
def test_text_reads_on_a_slide(draw):
    """Lecture 6's legends and notes were 8 pt, 11 px on a slide."""
    fig = draw()
    fig.tight_layout()
    assert smallest_text(fig)[0] >= SMALLEST_TEXT, smallest_text(fig)
    plt.close(fig)
