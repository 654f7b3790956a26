"""``a * b + c`` rounded once, as PTX's ``fma.rn`` (``cuda.fma``, ``cuda.fp16.hfma``): NumPy has no fused
multiply-add, and ``a * b + c`` rounds twice (``fma(1 + 2**-52, 1 - 2**-52, -1)`` is ``-2**-104``, not 0).

float16 and float32: the product is exact in float64, the sum rounded to odd there (`bfloat16.exact_sum`),
then rounded once to the type. float64: Boldo and Melquiond's emulation (IEEE Trans. Computers 57(4),
2008): Dekker's exact product, Knuth's exact sum, one addition rounded to odd; lanes outside its range (huge
or tiny products, infinities, NaN) are computed exactly with fractions.
"""

from __future__ import annotations

import math
from fractions import Fraction

import numpy as np

from .bfloat16 import exact_sum

_SPLIT = 2.0**27 + 1  # Veltkamp's splitter: a float64 as two halves of 26 bits
_SAFE = (2.0**-960, 2.0**995)  # where the splitting and the product's error stay normal float64 numbers


def fma(a, b, c):
    """``a * b + c`` with one rounding, lane by lane, in the type NumPy promotes the three to."""
    a, b, c = np.broadcast_arrays(np.asarray(a), np.asarray(b), np.asarray(c))
    dtype = np.result_type(a, b, c)
    wide = [np.atleast_1d(v.astype(np.float64)) for v in (a, b, c)]  # a uniform value is 0-d: one lane
    with np.errstate(all="ignore"):
        if dtype.itemsize < 8:
            result = exact_sum(wide[0] * wide[1], wide[2]).astype(dtype)
        else:
            result = _fma64(*wide)
    result = result.reshape(a.shape)
    return result if result.ndim else result[()]


def _fma64(a, b, c):
    product = a * b
    hi_a, hi_b = _high_half(a), _high_half(b)
    lo_a, lo_b = a - hi_a, b - hi_b
    error = ((hi_a * hi_b - product) + hi_a * lo_b + lo_a * hi_b) + lo_a * lo_b  # a * b = product + error
    total = c + product
    virtual = total - c
    rest = (c - (total - virtual)) + (product - virtual)  # c + product = total + rest
    result = np.asarray(total + exact_sum(rest, error), np.float64)
    size = np.abs(product)
    outside = ~(np.isfinite(a) & np.isfinite(b) & np.isfinite(c)) | (size == 0) | (size < _SAFE[0]) | \
        (np.abs(a) > _SAFE[1]) | (np.abs(b) > _SAFE[1]) | (size > _SAFE[1]) | (np.abs(c) > _SAFE[1])
    for k in zip(*np.nonzero(outside)):
        result[k] = _fma_exact(float(a[k]), float(b[k]), float(c[k]))
    return result


def _high_half(x):
    scaled = x * _SPLIT
    return scaled - (scaled - x)


def _fma_exact(a: float, b: float, c: float) -> float:
    if not (math.isfinite(a) and math.isfinite(b)):
        return a * b + c  # an infinite or NaN product: IEEE's rules, one rounding or none
    if not math.isfinite(c):
        return c
    if a == 0 or b == 0:
        return a * b + c  # an exact zero product: the signs of zeros as IEEE adds them
    exact = Fraction(a) * Fraction(b) + Fraction(c)
    try:
        return float(exact)  # correctly rounded (0 for an exact zero: +0.0, as IEEE's sum of opposites)
    except OverflowError:
        return math.copysign(math.inf, exact)
