"""Functions a kernel calls on numbers (builtins, ``math``, ``cmath``), on lane arrays.

Each maps a scalar function to one that takes a value per lane (or a scalar)
and gives the dtype numba would; ``enumerate`` and ``zip`` give what a ``for``
loop over arrays iterates (`Enumerated`, `Zipped`).
"""

from __future__ import annotations

import builtins
import cmath
import functools
import math
import operator

import numpy as np

from .arithmetic import Arithmetic, argument_dtypes, cast, complex_quotient, dtype_of, strong, typed
from .conversions import saturated
from .extrema import extremum


_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@functools.cache
def _unified(dtypes: tuple) -> np.dtype:
    return functools.reduce(np.promote_types, dtypes)


def _min_max(name: str):
    """numba-cuda's ``min`` or ``max``. Of two float32 or float64 values it calls libdevice's ``fmin``/``fmax``,
    PTX's ``min``/``max``: a NaN loses to a number, and -0.0 < +0.0. Of anything else (integers, float16, a
    mix of an integer and a float, three values, a tuple) it runs Python's order (numba's ``do_minmax``): the
    first of equal values stays, and so does a NaN in first place only; in the type numba unifies them to."""
    beats = operator.lt if name == "min" else operator.gt
    builtin = getattr(builtins, name)

    def min_max(*args):
        tupled = len(args) == 1
        if tupled:  # min(a_tuple)
            args = tuple(args[0])
        if all(type(a) is int for a in args):
            return builtin(*args)
        values = [strong(a) for a in args]
        ptx = not tupled and len(values) == 2 and all(dtype_of(v) in _FLOATS for v in values)
        if not any(type(v) is np.ndarray for v in values):  # one value for all lanes: no arrays to build
            if ptx and (values[0] != values[0] or values[1] != values[1] or values[0] == values[1] == 0):
                best = extremum(*values, larger=name == "max")[()]
            else:
                best = builtin(*values)
            return _unified(tuple(v.dtype for v in values)).type(best)
        if ptx:
            result = extremum(*values, larger=name == "max")
        else:
            result = values[0]
            for value in values[1:]:
                result = np.where(beats(value, result), value, result)
        return result[()] if isinstance(result, np.ndarray) and result.ndim == 0 else result

    return min_max


def cast_to(dtype):
    """A kernel's ``int32(x)``, ``float32(x)``...: `arithmetic.cast` (integers wrap, floats convert as ``cvt.rzi``)."""
    return lambda value: cast(value, dtype)


def _elementwise(math_function, arity: int = 1):
    """A math function without a NumPy twin, lane by lane (in float64: `_numba_typed` gives the result type)."""
    vectorised = np.frompyfunc(math_function, arity, 1)
    return lambda *values: np.asarray(vectorised(*values), np.float64)


def _c_gamma(x: float) -> float:
    """``tgamma`` as C and the GPU give it: inf at 0 (signed) and on overflow, nan at a negative integer."""
    try:
        return math.gamma(x)
    except OverflowError:
        return math.inf
    except ValueError:
        return math.copysign(math.inf, x) if x == 0 else math.nan


def _c_lgamma(x: float) -> float:
    """``lgamma`` as C and the GPU give it: inf at 0, at a negative integer and on overflow."""
    try:
        return math.lgamma(x)
    except (ValueError, OverflowError):
        return math.inf


def _c_remainder(x: float, y: float) -> float:
    """``remainder`` as C and the GPU give it: nan where Python raises (``y`` 0, ``x`` infinite)."""
    try:
        return math.remainder(x, y)
    except ValueError:
        return math.nan


def _numba_typed(function, implementation):
    """``implementation`` in the types numba-cuda gives ``function``: ``math.floor`` of a float32 is a float32,
    ``math.pow(float32, 2)`` float64, ``float(a float32)`` float32, ``math.exp`` of a uint8 float64."""
    return lambda *values: typed(function, *values, implementation=implementation)


def _converted(builtin, numeric):
    """``builtin(value)`` (``int``, ``float``, ``bool``) in the type numba-cuda gives it (``float`` of a float32 is
    float32), computed by ``numeric`` on the value in the signature's type; a Python number as Python converts it."""
    def convert(value):
        if type(value) in _PYTHON_NUMBERS or dtype_of(value) is None:
            return builtin(value)
        return typed(builtin, value, implementation=numeric)

    return convert


_PYTHON_NUMBERS = (bool, int, float)


def _round(value, ndigits=None):
    if ndigits is None:
        if type(value) in _PYTHON_NUMBERS:
            return builtins.round(value)
        return typed(builtins.round, value, implementation=np.rint)
    return typed(builtins.round, value, ndigits, implementation=_round_to_digits)


def _nearest_int64(y):
    """``round(y)`` of a float64 on the GPU (``__nv_llrint``): to the nearest integer, ties to even, saturated."""
    return saturated(np.rint(y), np.dtype(np.int64)).astype(np.float64)


def _round_to_digits(x, ndigits):
    """``round(x, ndigits)`` of floats as numba-cuda computes it, not as Python does: CPython's old fallback
    (``x * 10**ndigits`` in float64, rounded to an integer, scaled back), which differs from Python's correctly
    rounded result for many values near a tie (2.675 to 2 digits: numba 2.68, Python 2.67)."""
    x, ndigits = np.asarray(x), np.asarray(ndigits)
    if ndigits.ndim:  # a different ndigits per thread: each value of it in turn
        result = np.empty(np.broadcast_shapes(x.shape, ndigits.shape), x.dtype)
        for n in np.unique(ndigits):
            lanes = np.broadcast_to(ndigits == n, result.shape)
            result[lanes] = _round_to_digits(np.broadcast_to(x, result.shape)[lanes], n)
        return result
    n, wide = int(ndigits), x.astype(np.float64)
    with np.errstate(all="ignore"):
        if n >= 0:
            scale, more = (10.0 ** (n - 22), 1e22) if n > 22 else (10.0 ** n, 1.0)
            y = (wide * scale) * more
        else:
            scale = 10.0 ** -n
            y = wide / scale
        z = _nearest_int64(y)
        z = np.where(np.abs(y - z) == 0.5, 2.0 * _nearest_int64(y / 2.0), z)
        z = (z / more) / scale if n >= 0 else z * scale
        unchanged = ~np.isfinite(wide) | (np.isinf(y) if n >= 0 else False)  # numba returns x itself there
    result = np.where(unchanged, wide, z).astype(x.dtype)
    return result if result.ndim else result[()]


def _divmod(a, b):
    """``divmod(a, b)`` as numba computes it: both operands converted to the one type numba's ``divmod`` takes
    (int64 or uint64, numba's machine integers; float64 for a signed and a 64-bit unsigned integer, where ``//``
    would take int64), then ``(a // b, a % b)`` with their guards (0 for a zero divisor and for ``MIN // -1``)."""
    dtypes = tuple(map(dtype_of, (a, b)))
    if None not in dtypes and not all(type(v) in (int, float) for v in (a, b)):
        common = argument_dtypes(builtins.divmod, dtypes)
        if common is not None:
            a, b = cast(a, common[0]), cast(b, common[1])
    return Arithmetic.op_FloorDiv(a, b), Arithmetic.op_Mod(a, b)


def _polar(z):
    return np.abs(z), np.angle(z)


def _log(z, base=None):
    """``cmath.log(z)``, and ``cmath.log(z, base)`` as numba computes it: ``log(z) / log(base)``."""
    if base is None:
        return np.log(z)
    return typed(cmath.log, z, base, implementation=lambda z, base: complex_quotient(np.log(z), np.log(base)))


def _complex_of(real, imag):
    result = np.empty(np.shape(real) or np.shape(imag), np.result_type(real, imag, np.complex64))
    result.real, result.imag = real, imag  # not real + 1j * imag: inf * 1j is nan + inf j
    return result if result.ndim else result[()]


def _complex(real=0.0, imag=0.0):
    """``complex(real, imag)`` in the type numba gives it, with infinite parts kept."""
    if not any(isinstance(v, np.ndarray) for v in (real, imag)):
        return builtins.complex(real, imag)
    return typed(builtins.complex, real, imag, implementation=_complex_of)


def _quiet(cmath_function):
    """``cmath_function`` giving nan where Python raises (numba computes on)."""
    def apply(*values):
        try:
            return cmath_function(*values)
        except (ValueError, OverflowError):
            return complex(math.nan, math.nan)

    return apply


def _special_values_as_cmath(numpy_function, cmath_function):
    """``numpy_function``, except in lanes with an infinite or nan input: there Python's ``cmath`` gives the
    C99 values numba-cuda gives."""
    python = np.frompyfunc(_quiet(cmath_function), 1, 1)

    def apply(z):
        result = numpy_function(z)
        special = ~np.isfinite(z)
        if not np.any(special):
            return result
        exact = np.asarray(python(z), np.result_type(result))
        return np.where(special, exact, result) if isinstance(result, np.ndarray) else exact[()]

    return apply


def _rect(r, phi):
    """``cmath.rect`` lane by lane by Python (NumPy's ``r * cos + 1j * r * sin`` loses signed zeros and infinities)."""
    return typed(cmath.rect, r, phi, implementation=lambda *v: np.asarray(_RECT(*v), np.complex128))


_RECT = np.frompyfunc(_quiet(cmath.rect), 2, 1)


def _scaled_by(constant: float):
    """``x * constant`` with the constant rounded once to ``x``'s type, as numba-cuda lowers ``math.degrees`` and
    ``math.radians``; NumPy's float32 ``degrees`` rounds 180 / pi from a float32 pi, 1 ulp apart for most x."""
    def scale(x):
        x = np.asarray(x)
        result = x * x.dtype.type(constant)
        return result if result.ndim else result[()]

    return scale


class Enumerated:
    """``enumerate(items, start)`` as a loop iterates it."""

    def __init__(self, items, start=0):
        self.items, self.start = items, start


class Zipped:
    """``zip(*items)`` as a loop iterates it."""

    def __init__(self, *items):
        self.items = items


def _math_pow(x, y):
    """``math.pow`` as numba-cuda computes it: libdevice's ``pow``, or for an int32 exponent ``__nv_powi``/``powif``:
    square and multiply, each product rounded in ``x``'s type, and ``1 / r`` for a negative exponent (a few ulps from
    the correctly rounded power; ``pow(nan, 0)`` is 1)."""
    y = np.asarray(y)
    if y.dtype != np.int32:
        return np.power(x, y)
    base = np.array(np.broadcast_to(x, np.broadcast_shapes(np.shape(x), y.shape)))
    exponent = np.abs(np.broadcast_to(y, base.shape).astype(np.int64))  # -2**31 stays 2**31, as the GPU's bits
    result = np.ones_like(base)
    with np.errstate(over="ignore", under="ignore", invalid="ignore", divide="ignore"):
        while True:
            result = np.where(exponent & 1, result * base, result)
            exponent >>= 1
            if not exponent.any():
                break
            base = base * base
        result = np.where(y < 0, base.dtype.type(1) / result, result)
    return result if result.ndim else result[()]


MATH = {function: _numba_typed(function, implementation) for function, implementation in {
    math.sqrt: np.sqrt, math.exp: np.exp, math.expm1: np.expm1, math.log: np.log, math.log2: np.log2,
    math.log10: np.log10, math.log1p: np.log1p, math.sin: np.sin, math.cos: np.cos, math.tan: np.tan,
    math.asin: np.arcsin, math.acos: np.arccos, math.atan: np.arctan, math.atan2: np.arctan2,
    math.sinh: np.sinh, math.cosh: np.cosh, math.tanh: np.tanh, math.asinh: np.arcsinh,
    math.acosh: np.arccosh, math.atanh: np.arctanh, math.fabs: np.abs, math.pow: _math_pow,
    math.hypot: np.hypot, math.fmod: np.fmod, math.copysign: np.copysign, math.isnan: np.isnan,
    math.isinf: np.isinf, math.isfinite: np.isfinite, math.floor: np.floor, math.ceil: np.ceil,
    math.trunc: np.trunc, math.erf: _elementwise(math.erf), math.erfc: _elementwise(math.erfc),
    math.gamma: _elementwise(_c_gamma), math.lgamma: _elementwise(_c_lgamma),
    math.degrees: _scaled_by(180.0 / math.pi), math.radians: _scaled_by(math.pi / 180.0), math.exp2: np.exp2, math.ldexp: np.ldexp, math.frexp: np.frexp, math.modf: np.modf,
    math.nextafter: np.nextafter, math.remainder: _elementwise(_c_remainder, 2),
}.items()}

BUILTINS = {
    builtins.min: _min_max("min"),
    builtins.max: _min_max("max"),
    builtins.abs: lambda x: np.abs(x) if isinstance(x, np.ndarray) else abs(x),
    builtins.int: _converted(builtins.int, lambda v: np.trunc(v) if np.result_type(v).kind == "f" else v),
    builtins.float: _converted(builtins.float, lambda v: v),
    builtins.bool: _converted(builtins.bool, lambda v: v),
    builtins.round: _round,
    builtins.complex: _complex,
    builtins.divmod: _divmod,
    builtins.pow: Arithmetic.op_Pow,  # numba lowers pow(a, b) as a ** b: square and multiply for an int exponent
}

CMATH = {
    cmath.sqrt: np.sqrt, cmath.exp: _special_values_as_cmath(np.exp, cmath.exp), cmath.log: _log,
    cmath.log10: np.log10, cmath.sin: np.sin,
    cmath.cos: np.cos, cmath.tan: np.tan, cmath.asin: np.arcsin, cmath.acos: np.arccos, cmath.atan: np.arctan,
    cmath.sinh: np.sinh, cmath.cosh: np.cosh, cmath.tanh: np.tanh, cmath.asinh: np.arcsinh,
    cmath.acosh: np.arccosh, cmath.atanh: np.arctanh, cmath.isnan: np.isnan, cmath.isinf: np.isinf,
    cmath.isfinite: np.isfinite, cmath.phase: np.angle, cmath.polar: _polar, cmath.rect: _rect,
}

FUNCTIONS = {**MATH, **CMATH, **BUILTINS, builtins.enumerate: Enumerated, builtins.zip: Zipped}

__all__ = ["FUNCTIONS", "Enumerated", "Zipped", "cast_to"]
