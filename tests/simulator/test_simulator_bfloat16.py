"""bfloat16 (numba.cuda.bf16, arrays of ml_dtypes.bfloat16) rounds as on the GPU: each operation rounds its
exact result once to the nearest bfloat16, ties to even (cuda_bf16.hpp: fma.rn.bf16, cvt.rn.bf16.f32,
__double2bfloat16, a correctly rounded __hdiv). The reference here is exact rational arithmetic."""

import math
from fractions import Fraction

import numpy as np
import pytest
from numba import cuda
from numba.cuda import float32, float64

from gpucourse import simulated

ml_dtypes = pytest.importorskip("ml_dtypes")
from numba.cuda.bf16 import (bfloat16, bfloat162ll_rz, bfloat162ull_rz, float32_to_bfloat16_rd,  # noqa: E402
                             float32_to_bfloat16_ru, float32_to_bfloat16_rz, hdiv, hfma, hmax, hsqrt)

BF16 = ml_dtypes.bfloat16
MAX = Fraction(2**8 - 1, 2**7) * 2**127  # the largest finite bfloat16
N = 200


@pytest.fixture(autouse=True)
def on_the_simulator():
    with simulated():
        yield


def nearest(q: Fraction, mode: str = "rn") -> float:
    """The bfloat16 nearest ``q`` (ties to even), or toward zero (rz), down (rd), up (ru)."""
    if q == 0:
        return 0.0
    sign, q = (-1, -q) if q < 0 else (1, q)
    exponent = max(math.floor(math.log2(q)), -126)
    while Fraction(2) ** exponent > q and exponent > -126:  # log2 of a Fraction may be off by one
        exponent -= 1
    while Fraction(2) ** (exponent + 1) <= q:
        exponent += 1
    ulp = Fraction(2) ** (exponent - 7)
    steps, rest = divmod(q, ulp)
    if mode == "rn":
        steps += rest > ulp / 2 or (rest == ulp / 2 and steps % 2 == 1)
    elif rest and mode == ("rd" if sign < 0 else "ru"):
        steps += 1
    value = steps * ulp
    if value > MAX and (mode == "rn" or mode == ("rd" if sign < 0 else "ru")):
        return sign * math.inf
    return sign * float(min(value, MAX))


def bfloat16_values(rng, n, low=-4.0, high=4.0):
    """Random bfloat16 values (as float32), spread over magnitudes, with zeros and some extremes."""
    values = rng.uniform(low, high, n) * 2.0 ** rng.integers(-20, 20, n)
    values[:6] = [0.0, -0.0, 1.0, 3.0e38, -1.2e-38, 2.0**-130]
    return values.astype(np.float32).astype(BF16).astype(np.float32)


@cuda.jit
def arithmetic(out, a, b):
    i = cuda.grid(1)
    if i < a.size:
        x, y = bfloat16(a[i]), bfloat16(b[i])
        out[i, 0] = float32(x + y)
        out[i, 1] = float32(x - y)
        out[i, 2] = float32(x * y)
        out[i, 3] = float32(hdiv(x, y))
        out[i, 4] = float32(hfma(x, y, x))
        out[i, 5] = float32(hmax(x, y))


def test_arithmetic_rounds_the_exact_result_once():
    rng = np.random.default_rng(10)
    a, b = bfloat16_values(rng, N), bfloat16_values(rng, N)[::-1].copy()
    b[b == 0] = 1.5
    out = np.full((N, 6), np.nan, np.float32)
    arithmetic[(N + 63) // 64, 64](out, a, b)
    for i, (x, y) in enumerate(zip(map(Fraction, a.tolist()), map(Fraction, b.tolist()))):
        expected = [nearest(x + y), nearest(x - y), nearest(x * y), nearest(x / y), nearest(x * y + x),
                    float(max(x, y))]
        assert out[i].tolist() == pytest.approx(expected, rel=0, abs=0), (a[i], b[i])


def test_a_product_on_a_tie_plus_a_tiny_term_rounds_up_as_one_fma_does():
    """5/4 * 77/64 = 1.5 + 2**-8 lies halfway between two bfloat16; adding 2**-60 must round it up, which a
    float64 sum rounded twice (to the tie, then to even) would not."""
    tiny = np.float32(2.0**-60)

    @cuda.jit
    def fma_with(out, a, b, c):
        out[0] = float32(hfma(bfloat16(a[0]), bfloat16(b[0]), bfloat16(c[0])))

    result = np.zeros(1, np.float32)
    fma_with[1, 1](result, np.array([1.25], np.float32), np.array([77 / 64], np.float32), np.array([tiny]))
    assert result[0] == 1.5 + 2.0**-7


@cuda.jit
def from_float64(out, d):
    i = cuda.grid(1)
    if i < d.size:
        out[i] = d[i]  # float64 stored in a bfloat16 array: __double2bfloat16


def test_float64_is_rounded_once_not_through_float32():
    d = np.array([1 + 2.0**-8 + 2.0**-30, 1 + 2.0**-8, -(1 + 2.0**-8 + 2.0**-40), 3.3961e38, 3.3963e38, 1e-45])
    out = np.zeros(d.size, BF16)
    from_float64[1, 32](out, d)
    assert out.astype(np.float64).tolist() == [nearest(Fraction(v)) for v in d.tolist()]
    assert out[0] != d[:1].astype(np.float32).astype(BF16)[0]  # through float32: rounded twice, to 1.0


@cuda.jit
def directed(out, a):
    i = cuda.grid(1)
    if i < a.size:
        out[i, 0] = float32(float32_to_bfloat16_rz(a[i]))
        out[i, 1] = float32(float32_to_bfloat16_rd(a[i]))
        out[i, 2] = float32(float32_to_bfloat16_ru(a[i]))


def test_directed_conversions_from_float32():
    a = np.random.default_rng(11).normal(0, 100, N).astype(np.float32)
    out = np.zeros((N, 3), np.float32)
    directed[(N + 63) // 64, 64](out, a)
    for value, row in zip(a.tolist(), out.tolist()):
        assert row == [nearest(Fraction(value), mode) for mode in ("rz", "rd", "ru")]


@cuda.jit
def bfloat16_arrays(out, a, b):
    i = cuda.grid(1)
    if i < a.size:
        x = a[i] * b[i] + a[i]
        out[i] = math.sqrt(x * x)  # math.sqrt of a bfloat16 is hsqrt, a bfloat16


def test_bfloat16_arrays_and_math_on_their_elements():
    rng = np.random.default_rng(12)
    a, b = rng.uniform(-2, 2, 150).astype(BF16), rng.uniform(-2, 2, 150).astype(BF16)
    out = np.zeros(150, BF16)
    bfloat16_arrays[3, 64](out, a, b)
    x, y = a.astype(np.float64).tolist(), b.astype(np.float64).tolist()
    sums = [nearest(Fraction(nearest(Fraction(p) * Fraction(q))) + Fraction(p)) for p, q in zip(x, y)]
    squares = np.array([nearest(Fraction(v) ** 2) for v in sums], np.float32)
    np.testing.assert_array_equal(out.astype(np.float32), np.sqrt(squares).astype(BF16).astype(np.float32))


@cuda.jit
def math_on_bfloat16(out, a):
    i = cuda.grid(1)
    if i < a.size:
        out[i] = float64(hsqrt(bfloat16(a[i])))


def test_bfloat16_math_is_float32_math_rounded():
    a = np.random.default_rng(13).uniform(0, 50, 64).astype(np.float32)
    out = np.zeros(64)
    math_on_bfloat16[1, 64](out, a)
    np.testing.assert_array_equal(out, np.sqrt(a.astype(BF16).astype(np.float32)).astype(BF16).astype(np.float64))


@cuda.jit
def constructed_through_cuda(out, d):
    i = cuda.grid(1)
    if i < d.size:
        out[i] = cuda.float32(cuda.bfloat16(d[i]))


def test_cuda_bfloat16_of_a_float64_rounds_once():
    d = np.random.default_rng(15).normal(0, 1e3, N) * (1 + 2.0**-30)
    d[0] = 1 + 2.0**-8 + 2.0**-30
    out = np.zeros(N, np.float32)
    constructed_through_cuda[(N + 63) // 64, 64](out, d)
    assert out.tolist() == [nearest(Fraction(v)) for v in d.tolist()]


@cuda.jit
def to_wide_integers(signed, unsigned, a):
    i = cuda.grid(1)
    if i < a.size:
        x = bfloat16(a[i])
        signed[i] = bfloat162ll_rz(x)
        unsigned[i] = bfloat162ull_rz(x)


def test_conversions_to_64_bit_integers_clamp_at_the_types_range():
    """cvt.rzi.s64.bf16 and .u64: NaN to 0, beyond the range the nearest end (2**63 - 1 as a float is 2**63, so
    clamping in floats and then casting gave the lowest int64)."""
    a = np.array([1e19, -1e19, 3e38, -3e38, np.nan, 2.5, -2.5], np.float32)
    signed, unsigned = np.zeros(a.size, np.int64), np.zeros(a.size, np.uint64)
    to_wide_integers[1, 32](signed, unsigned, a)
    top, bottom = 2**63 - 1, -2**63
    assert signed.tolist() == [top, bottom, top, bottom, 0, 2, -2]
    assert unsigned.tolist()[1:] == [0, 2**64 - 1, 0, 0, 2, 0]
    assert unsigned[0] == int(float(BF16(1e19)))  # below 2**64: converted, not clamped
