"""Module 6's pictures: exact rounding to each format against NumPy and ml_dtypes, the bits, spacing, dot errors."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import ml_dtypes  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpucourse.figures import precision as fp  # noqa: E402

rng = np.random.default_rng(61)
DTYPES = {"fp32": np.float32, "fp16": np.float16, "bf16": ml_dtypes.bfloat16, "e4m3": ml_dtypes.float8_e4m3fn,
          "e5m2": ml_dtypes.float8_e5m2}
UINTS = {8: np.uint8, 16: np.uint16, 32: np.uint32}


def awkward_float32(n):
    """float32 values over every format's range and past it, with subnormals, ties, zeros, infinities and NaN."""
    magnitudes = 2.0 ** rng.uniform(-150, 130, n) * rng.choice([-1, 1], n)
    ties = np.array([1 + 2.0 ** -11, 1 + 3 * 2.0 ** -11, 1 + 2.0 ** -8, 2049.0, 2051.0, 464.0, 61440.0, 65520.0,
                     2.0 ** -25, 3 * 2.0 ** -26, 2.0 ** -10, 0.0, -0.0, np.inf, -np.inf, np.nan])
    with np.errstate(over="ignore"):
        return np.r_[magnitudes, ties, -ties].astype(np.float32)


@pytest.mark.parametrize("name", list(fp.FORMATS))
def test_rounding_float32_matches_the_dtypes(name):
    # ml_dtypes and NumPy round a float32 once, to nearest even: the same as the exact rounding from float64
    x = awkward_float32(4000)
    with np.errstate(over="ignore"):
        expected = x.astype(DTYPES[name]).astype(np.float64)
    got = fp.round_to_format(x, name)
    np.testing.assert_array_equal(got, expected)
    assert (np.signbit(got) == np.signbit(expected))[~np.isnan(got)].all()


def test_rounding_float64_rounds_once():
    # 1 + 2^-11 + 2^-40 is above fp16's tie: rounding to float32 first would land on the tie and go to even (down)
    assert fp.round_to_format(1 + 2.0 ** -11 + 2.0 ** -40, "bf16") == 1
    assert fp.round_to_format(1 + 2.0 ** -11 + 2.0 ** -40, "fp16") == 1 + 2.0 ** -10
    x = rng.standard_normal(3000) * 2.0 ** rng.integers(-30, 15, 3000)
    np.testing.assert_array_equal(fp.round_to_format(x, "fp16"), x.astype(np.float16).astype(np.float64))
    np.testing.assert_array_equal(fp.round_to_format(x, "fp32"), x.astype(np.float32).astype(np.float64))


@pytest.mark.parametrize("name", list(fp.FORMATS))
def test_bits_are_the_dtypes_bits(name):
    f = fp.FORMATS[name]
    for value in awkward_float32(300):
        e = fp.encode(float(value), name)
        assert len(e.sign) == 1 and len(e.exponent) == f.exponent and len(e.mantissa) == f.mantissa
        if np.isnan(e.stored):
            assert e.kind == "NaN" and np.isnan(np.float32(value).astype(DTYPES[name]))
            continue
        with np.errstate(over="ignore"):
            stored = np.array([value]).astype(DTYPES[name])
        word = format(int(stored.view(UINTS[f.bits])[0]), f"0{f.bits}b")
        assert e.sign + e.exponent + e.mantissa == word, (name, value)
        assert e.stored == float(stored[0])


def test_limits_and_kinds():
    assert (fp.FP16.max, fp.FP16.min_normal, fp.FP16.min_subnormal) == (65504, 2.0 ** -14, 2.0 ** -24)
    assert (fp.E4M3.max, fp.E5M2.max, fp.BF16.min_normal) == (448, 57344, 2.0 ** -126)
    for name, dtype in DTYPES.items():
        assert fp.FORMATS[name].max == float(ml_dtypes.finfo(dtype).max)
        assert fp.FORMATS[name].min_subnormal == float(ml_dtypes.finfo(dtype).smallest_subnormal)
    assert [fp.encode(v, "fp16").kind for v in (1.0, 1e-6, 1e-9, 7e4)] == ["normal", "subnormal", "zero", "inf"]
    assert fp.encode(500, "e4m3").kind == "NaN" and fp.encode(6e4, "e5m2").stored == 57344 and fp.encode(7e4, "e5m2").kind == "inf"
    e = fp.encode(0.1, "fp16")
    assert e.stored == float(np.float16(0.1)) and e.error == pytest.approx(float(np.float16(0.1)) - 0.1, rel=1e-12)
    assert fp.encode(256 * 256, "fp16").kind == "inf"


def test_spacing_is_the_distance_to_the_next_value():
    for name, dtype in DTYPES.items():
        f = fp.FORMATS[name]
        x = np.geomspace(f.min_subnormal, f.max / 2, 500)
        stored = fp.round_to_format(x, name)
        above = np.nextafter(stored.astype(dtype), np.array(np.inf, dtype)).astype(np.float64) if name in (
            "fp32", "fp16") else np.array([fp.round_to_format(s + fp.spacing(s, name), name) for s in stored])
        np.testing.assert_array_equal(fp.spacing(x, name), above - stored)
    assert fp.spacing(2048, "fp16") == 2 and fp.spacing(1, "bf16") == 2.0 ** -7 and fp.spacing(0, "fp16") == 2.0 ** -24


@pytest.mark.parametrize("call, message", [
    (lambda: fp.encode(1, "fp64"), "no format named 'fp64'"), (lambda: fp.encode("x", "fp16"), "real number"),
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
    places = np.stack(np.meshgrid(np.arange(8), np.arange(4), indexing="ij"), -1).reshape(32, 1, 2)
    axes = fp.draw_fragments({"M": places}, lanes=[0, 1])
    assert len(axes[0].texts) == 32 and axes[0].texts[5].get_text() == "5:0"
    plt.close("all")
