"""bfloat16 in a simulated kernel, rounded as the GPU rounds it.

numba-cuda keeps bfloat16 arrays as NumPy arrays of ``ml_dtypes.bfloat16`` and computes with the
functions of ``numba.cuda.bf16``, which call CUDA's ``cuda_bf16.hpp``. There every operation rounds
its exact result once to the nearest bfloat16, ties to even: ``fma.rn.bf16`` (``+``, ``-``, ``*``,
``hadd``, ``hfma``...), ``cvt.rn.bf16.f32``, ``__double2bfloat16`` (rounding to odd in float32 first,
so that float64 is rounded only once) and ``__hdiv`` (a float32 quotient close enough to round
correctly). The simulator computes the exact result in float64 (a product of two bfloat16 always
fits; a sum that does not fit is rounded to odd) and rounds it once the same way. ``ml_dtypes``'
own float64 conversion rounds twice, and its arithmetic computes in float32: neither is used.

The ``h*`` math functions (``hsqrt``, ``hexp``, ``hsin``...) use the GPU's approximate float32
instructions before rounding to bfloat16; the simulator rounds NumPy's float32 value instead, which
agrees except where the approximation lands on the other side of a rounding boundary.
"""

from __future__ import annotations

import math

import numpy as np

from .conversions import saturated
from .extrema import extremum

try:
    import ml_dtypes

    BFLOAT16: np.dtype | None = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # bfloat16 arrays need ml_dtypes, on a GPU too (numba-cuda imports it the same way)
    BFLOAT16 = None

MODULE = "numba.cuda._internal.cuda_bf16"  # where numba.cuda.bf16's functions come from

_SIGN = np.uint32(0x80000000)


def _lanes(value) -> tuple[np.ndarray, bool]:
    return np.asarray(value), isinstance(value, np.ndarray)


def _shaped(result: np.ndarray, lanes: bool):
    return result if lanes else result[()]


def _odd_float32(x: np.ndarray) -> np.ndarray:
    """float64 values rounded to float32 toward zero, the last bit set where that was inexact (round to odd):
    rounding this once more to bfloat16 rounds ``x`` once, whatever the mode."""
    f = x.astype(np.float32)
    back = f.astype(np.float64)
    inexact = (back != x) & np.isfinite(f) & ~np.isnan(x)
    bits = f.view(np.uint32).copy()
    bits[inexact & (np.abs(back) > np.abs(x))] -= np.uint32(1)
    bits[inexact] |= np.uint32(1)
    return bits.view(np.float32)


def _from_float32(f: np.ndarray, mode: str) -> np.ndarray:
    """float32 values rounded to bfloat16: ``rn`` to nearest even, ``rz`` toward zero, ``rd`` down, ``ru`` up."""
    if mode == "rn":
        return f.astype(BFLOAT16)
    bits = f.view(np.uint32)
    truncated = bits & np.uint32(0xFFFF0000)
    inexact = (truncated != bits) & ~np.isnan(f)
    negative = (bits & _SIGN) != 0
    away = inexact & (negative if mode == "rd" else ~negative) if mode != "rz" else np.zeros_like(inexact)
    rounded = np.where(np.isnan(f), bits, truncated + np.where(away, np.uint32(0x10000), np.uint32(0)))
    return (rounded >> np.uint32(16)).astype(np.uint16).view(BFLOAT16)


def round_to(value, mode: str = "rn"):
    """``value`` (lanes or a scalar, any real type) as bfloat16, rounded once."""
    if BFLOAT16 is None:
        raise TypeError("bfloat16 on the CPU needs the ml_dtypes package (pip install ml_dtypes)")
    x, lanes = _lanes(value)
    if x.dtype == BFLOAT16:
        return value
    f = x if x.dtype == np.float32 else _odd_float32(x.astype(np.float64))
    return _shaped(_from_float32(f, mode), lanes)


def exact_sum(a, b):
    """``a + b`` of float64 values, rounded to odd where float64 cannot hold it (then rounded once more, it is
    rounded once: `round_to`)."""
    s = a + b
    bb = s - a
    error = (a - (s - bb)) + (b - bb)  # Knuth's two-sum: a + b = s + error exactly
    inexact = (error != 0) & np.isfinite(s)
    if not np.any(inexact):
        return s
    s = np.array(s, np.float64)
    toward_zero = np.where(inexact & (np.sign(error) != np.sign(s)), np.nextafter(s, 0), s)
    bits = toward_zero.view(np.int64) | np.where(inexact, 1, 0)
    return np.where(inexact, bits.view(np.float64), s)


def _wide(*values) -> list[np.ndarray]:
    return [np.asarray(v).astype(np.float64) for v in values]


def _rounded(function):
    """A bfloat16 operation: ``function`` computes the exact (or rounded-to-odd) result from float64 values."""
    def apply(*values):
        lanes = any(isinstance(v, np.ndarray) for v in values)
        with np.errstate(all="ignore"):
            return _shaped(np.asarray(round_to(np.asarray(function(*_wide(*values))))), lanes)

    return apply


def _saturated(function):
    def apply(*values):
        result = np.asarray(function(*values)).astype(np.float64)
        return round_to(np.where(np.isnan(result), 0.0, np.clip(result, 0.0, 1.0)))

    return apply


def _relu(function):
    def apply(*values):
        result = np.asarray(function(*values)).astype(np.float64)
        return round_to(np.where(result < 0, 0.0, result))

    return apply


def _approximate(numpy_function):
    """An ``h*`` math function: float32 in, NumPy's float32 result, rounded to nearest bfloat16."""
    def apply(value):
        x, lanes = _lanes(value)
        with np.errstate(all="ignore"):
            return _shaped(np.asarray(round_to(numpy_function(x.astype(np.float32)).astype(np.float32))), lanes)

    return apply


def _compare(numpy_function, unordered: bool = False):
    def apply(a, b):
        a, b = _wide(a, b)
        result = numpy_function(a, b)
        return result | np.isnan(a) | np.isnan(b) if unordered else result

    return apply


def _to_integer(dtype, rounding):
    """bfloat16 to an integer type as ``cvt.*i``: rounded, nan to 0, saturated at the type's range."""

    def apply(value):
        x, lanes = _lanes(value)
        return _shaped(saturated(rounding(x.astype(np.float64)), dtype), lanes)

    return apply


def _from_integer(mode):
    return lambda value: round_to(np.asarray(value).astype(np.float64), mode)


def _reinterpret(dtype):
    def apply(value):
        x, lanes = _lanes(value)
        return _shaped(x.view(dtype).copy(), lanes)

    return apply


def _is_infinite(value):
    x = np.asarray(value).astype(np.float64)
    return np.where(np.isinf(x), np.sign(x), 0).astype(np.int32)


_ROUNDINGS = {"rn": np.rint, "rz": np.trunc, "rd": np.floor, "ru": np.ceil}
_INTEGERS = {"char": np.int8, "uchar": np.uint8, "short": np.int16, "ushort": np.uint16, "int": np.int32,
             "uint": np.uint32, "ll": np.int64, "ull": np.uint64}


def _operations() -> dict:
    """numba.cuda.bf16's functions by their CUDA names (``__hadd``, ``hsqrt``, ``__float2bfloat16_rz``)."""
    add, multiply = _rounded(exact_sum), _rounded(np.multiply)
    subtract = _rounded(lambda a, b: exact_sum(a, -b))
    fma = _rounded(lambda a, b, c: exact_sum(a * b, c))
    table = {
        "hadd": add, "hadd_rn": add, "hsub": subtract, "hsub_rn": subtract, "hmul": multiply,
        "hmul_rn": multiply, "hdiv": _rounded(np.divide), "hfma": fma, "hneg": _rounded(np.negative),
        "habs": _rounded(np.abs), "hadd_sat": _saturated(add), "hsub_sat": _saturated(subtract),
        "hmul_sat": _saturated(multiply), "hfma_sat": _saturated(fma), "hfma_relu": _relu(fma),
        "heq": _compare(np.equal), "hne": _compare(np.not_equal), "hge": _compare(np.greater_equal),
        "hgt": _compare(np.greater), "hle": _compare(np.less_equal), "hlt": _compare(np.less),
        "hequ": _compare(np.equal, True), "hneu": _compare(np.not_equal, True),
        "hgeu": _compare(np.greater_equal, True), "hgtu": _compare(np.greater, True),
        "hleu": _compare(np.less_equal, True), "hltu": _compare(np.less, True),
        "hmax": _rounded(lambda a, b: extremum(a, b, True)), "hmin": _rounded(lambda a, b: extremum(a, b, False)),
        "hmax_nan": _rounded(lambda a, b: extremum(a, b, True, nan_wins=True)),
        "hmin_nan": _rounded(lambda a, b: extremum(a, b, False, nan_wins=True)),
        "hisnan": lambda v: np.isnan(np.asarray(v).astype(np.float32)),
        "hisinf": _is_infinite,
        "bfloat162float": lambda v: np.asarray(v).astype(np.float32) if isinstance(v, np.ndarray)
        else np.float32(v),
        "float2bfloat16": round_to, "double2bfloat16": round_to,
        "htrunc": _rounded(np.trunc), "hceil": _rounded(np.ceil), "hfloor": _rounded(np.floor),
        "hrint": _rounded(np.rint), "hsqrt": _approximate(np.sqrt), "hrsqrt": _approximate(lambda x: 1 / np.sqrt(x)),
        "hrcp": _approximate(lambda x: 1 / x), "hlog": _approximate(np.log), "hlog2": _approximate(np.log2),
        "hlog10": _approximate(np.log10), "hcos": _approximate(np.cos), "hsin": _approximate(np.sin),
        "hexp": _approximate(np.exp), "hexp2": _approximate(np.exp2),
        "hexp10": _approximate(lambda x: np.power(np.float32(10), x)), "htanh": _approximate(np.tanh),
        "htanh_approx": _approximate(np.tanh),
        "bfloat16_as_short": _reinterpret(np.int16), "bfloat16_as_ushort": _reinterpret(np.uint16),
        "short_as_bfloat16": _reinterpret(BFLOAT16), "ushort_as_bfloat16": _reinterpret(BFLOAT16),
    }
    for mode, rounding in _ROUNDINGS.items():
        table[f"float2bfloat16_{mode}"] = lambda v, mode=mode: round_to(v, mode)
        for name, dtype in _INTEGERS.items():
            table[f"bfloat162{name}_{mode}"] = _to_integer(dtype, rounding)
            table[f"{name}2bfloat16_{mode}"] = _from_integer(mode)
    return table


OPERATIONS = _operations() if BFLOAT16 is not None else {}

# math functions numba-cuda sends to an ``h*`` function for a bfloat16 argument
MATH = {getattr(math, name): OPERATIONS.get(f"h{name}") for name in
        ("trunc", "ceil", "floor", "sqrt", "log", "log10", "cos", "sin", "tanh", "exp", "exp2")}


def operation(function):
    """The simulator's version of a ``numba.cuda.bf16`` function, or None when it has none."""
    return OPERATIONS.get(getattr(function, "__name__", "").lstrip("_"))


__all__ = ["BFLOAT16", "MATH", "MODULE", "exact_sum", "operation", "round_to"]
