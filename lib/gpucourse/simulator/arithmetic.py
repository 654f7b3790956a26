"""Operators of a simulated kernel, computed in the types numba-cuda gives them.

NumPy and numba promote differently: ``float32 * 0.1`` is float32 in NumPy and
float64 in numba, ``int32 + int32`` stays int32 in NumPy and is int64 in numba,
``bool + bool`` is a logical or in NumPy and an int64 sum in numba. The
rewritten kernel (`transform`) sends every arithmetic, bitwise, comparison and
unary operator here. Each operand gets its numba type (a lane array or NumPy
scalar its dtype; a Python int, float or bool, as a literal or a scalar
argument, int64, float64 or boolean, as in numba), numba's own CUDA typing
context resolves the operator's signature for those types (cached per
operator and types), the operands are cast to the signature's argument types,
NumPy computes, and the result is cast to its return type. Integers wrap as on
the GPU. NVVM is not involved, so this typing holds with the PTX check off too.

Where numba merges two values into one variable (a branch, ``x if c else y``,
``and``/``or``) and in ``min``/``max``, `select` (and `strong`) let NumPy
promote the two with Python scalars taken as their numba types, which agrees
with numba's unification for the number types.
"""

from __future__ import annotations

import contextlib
import functools
import operator

import numpy as np
from numba.core import types
from numba.cuda.types import bfloat16 as numba_bfloat16
from numba.np.numpy_support import as_dtype as numba_as_dtype, from_dtype as numba_from_dtype

from . import bfloat16, fused
from .bfloat16 import BFLOAT16
from .conversions import saturated

_PYTHON_SCALARS = {bool: np.dtype(np.bool_), int: np.dtype(np.int64), float: np.dtype(np.float64)}
# numba negates an int16 in 16 bits and widens the result (``neg.s16``, ``cvt.s64.s16``): -(-32768) is -32768, as
# PTX defines it and as ptxas 13.3 and later compile it. ptxas 12.9 to 13.2 (CUDA 13.0's among them) negate the
# sign-extended value in 32 bits and drop the widening where the result stays an integer (sm_90 SASS: PRMT 0x9910,
# IMAD.MOV -R, SHF.R.S32.HI): 32768 there, while a conversion to a float still reads 16 bits (I2F.F64.S16):
# -32768. `int16_negation_unwrapped` computes those assemblers' integer result. ``abs`` of an int16 (typed int16:
# IABS of the sign-extended value) has the same two faces under them; the simulator wraps it.
_INT16 = np.dtype(np.int16)
_INT16_NEGATION_UNWRAPPED = False  # see `int16_negation_unwrapped`
_REMAINDER_SIGN_OF_DIVIDEND = False  # see `remainder_sign_of_dividend`
_SIGNED_OVERFLOWS = None  # see `signed_overflows`: while on, (its `Overflows`, a function giving the active lanes)
# numba marks them `nsw` where the result is signed; a power's too: its int_power multiplies (`_power`)
_NSW = {operator.add: "+", operator.sub: "-", operator.mul: "*", operator.pow: "**"}
_INT64_RANGE = 1 << 64
_UINT64_MAX = _INT64_RANGE - 1


def as_dtype(numba_type) -> np.dtype:
    """numba's ``as_dtype``, which does not know bfloat16 (``ml_dtypes.bfloat16`` in NumPy)."""
    if numba_type == numba_bfloat16 and BFLOAT16 is not None:
        return BFLOAT16
    return numba_as_dtype(numba_type)


def from_dtype(dtype: np.dtype):
    """numba's ``from_dtype`` (it knows bfloat16 only in numba-cuda's own version)."""
    return numba_bfloat16 if dtype is BFLOAT16 and dtype is not None else numba_from_dtype(dtype)


@functools.cache
def _typing_context():
    from numba.cuda.descriptor import cuda_target  # noqa: PLC0415 (slow import, needed at the first operator)

    context = cuda_target.typing_context
    context.refresh()
    return context


def dtype_of(value) -> np.dtype | None:
    """The dtype numba gives ``value``, or None when it is not a number (a tuple, an array argument)."""
    if type(value) is np.ndarray or isinstance(value, np.generic):
        return value.dtype
    return _PYTHON_SCALARS.get(type(value))


@functools.cache
def _resolved(function, dtypes: tuple):
    """The signature numba's CUDA typing resolves for ``function`` on ``dtypes``, or None (it refuses them: the PTX
    check reports it)."""
    try:
        return _typing_context().resolve_function_type(function, tuple(map(from_dtype, dtypes)), {})
    except Exception:  # noqa: BLE001 (numba raises many kinds of typing errors)
        return None


@functools.cache
def _signature(function, dtypes: tuple) -> tuple | None:
    """(argument dtypes, result dtype) numba resolves for ``function`` on ``dtypes``; None if it has none."""
    signature = _resolved(function, dtypes)
    if signature is None or not isinstance(signature.return_type, (types.Number, types.Boolean)):
        return None
    try:
        arguments, result = tuple(map(as_dtype, signature.args)), as_dtype(signature.return_type)
    except Exception:  # noqa: BLE001 (a type NumPy has no dtype for)
        return None
    if len(set(arguments)) > 1 and all(d.kind in "iu" for d in (*arguments, result)) and function is not operator.pow:
        arguments = (result,) * len(arguments)  # int64 & uint64: NumPy has no such loop; same bits in int64
        # (not a power's exponent: `_power` reads a uint64 of 2**63 or more as the number it is)
    elif result.kind in "iu" and bool in arguments:
        arguments = tuple(result if d == bool else d for d in arguments)  # -True is -1: NumPy refuses -bool
    elif function is operator.neg and arguments == (_INT16,) and _INT16_NEGATION_UNWRAPPED:
        arguments = (result,)  # as ptxas 12.9 to 13.2 compile it where it stays an integer (_INT16)
    return arguments, result


@contextlib.contextmanager
def _switched(name: str, value):
    """Module switch ``name`` set to ``value`` within, the operators' cached plans cleared on the way in and out."""

    def switch(to) -> None:
        globals()[name] = to
        _signature.cache_clear()
        for plans in _PLANS:
            plans.clear()

    previous = globals()[name]
    switch(value)
    try:
        yield
    finally:
        switch(previous)


def int16_negation_unwrapped():
    """Within it, -x of an int16 is negated in 64 bits, -(-32768) = 32768: what a GPU computes where ptxas 12.9 to
    13.2 assembled the kernel and the result stays an integer (see ``_INT16``); for the fuzzing's check of such a
    GPU. Outside it, the simulator wraps, as PTX and numba define the negation."""
    return _switched("_INT16_NEGATION_UNWRAPPED", True)


def remainder_sign_of_dividend():
    """Within it, a float ``%`` and ``//`` move the remainder into the divisor's sign by the sign of the dividend,
    not of the remainder `_gpu_frem` computed: what NVVM compiles where it can prove the dividend's sign (an
    unsigned integer's conversion, say), since an exact remainder has the dividend's sign. The two differ only
    where ``|a / b|`` reaches 2**53 and the GPU's remainder is not exact. For the fuzzing's check."""
    return _switched("_REMAINDER_SIGN_OF_DIVIDEND", True)


class Overflows:
    """What `signed_overflows` found: one line per overflowing operation (``"int64 +: 9223372036854775807 and
    1"``, its first lane's operands); the threads an overflow reached (a mask of lanes, None before the first):
    those where one happened, then those that read what such a thread stored, shuffled or voted (a thread is taken
    to carry its overflow into everything it computes after); and by array name, the elements such threads
    stored last or updated atomically (`reached`)."""

    def __init__(self):
        self.found: list[str] = []
        self.lanes: np.ndarray | None = None
        self._elements: dict[str, np.ndarray] = {}

    def overflowed(self, over: np.ndarray) -> None:
        self.lanes = over.copy() if self.lanes is None else self.lanes | over

    def stored(self, name: str, size: int, lanes: np.ndarray, elements, atomically: bool = False) -> None:
        """Threads ``lanes`` stored elements ``elements`` (one each) of array ``name`` of ``size`` elements."""
        if self.lanes is None and name not in self._elements:
            return
        marks = self._elements.setdefault(name, np.zeros(size, bool))
        reached = np.zeros(len(lanes), bool) if self.lanes is None else self.lanes[lanes]
        elements = np.broadcast_to(elements, reached.shape)
        if atomically:
            marks[elements[reached]] = True
        else:
            marks[elements] = reached

    def loaded(self, name: str, lanes: np.ndarray, elements) -> None:
        marks = self._elements.get(name)
        if marks is not None:
            self.lanes[lanes[np.broadcast_to(marks[elements], lanes.shape)]] = True

    def exchanged(self, lanes: np.ndarray, sources: np.ndarray) -> None:
        """Threads ``lanes`` read the values of threads ``sources`` (a shuffle)."""
        if self.lanes is not None:
            self.lanes[lanes] |= self.lanes[sources]

    def voted(self, lanes: np.ndarray, warp_of: np.ndarray) -> None:
        """Threads ``lanes`` took a vote of their warps (``warp_of``: each lane's warp)."""
        if self.lanes is not None:
            warps = np.unique(warp_of[lanes[self.lanes[lanes]]])
            self.lanes[lanes[np.isin(warp_of[lanes], warps)]] = True

    def reached(self, name: str) -> np.ndarray | None:
        """The elements of array ``name`` an overflow reached (a mask), or None where none did."""
        return self._elements.get(name)


def overflows_recorded() -> Overflows | None:
    """The `Overflows` `signed_overflows` is recording, or None."""
    return None if _SIGNED_OVERFLOWS is None else _SIGNED_OVERFLOWS[0]


@contextlib.contextmanager
def signed_overflows(active_lanes):
    """Within it, a signed integer ``+``, ``-`` or ``*`` whose exact result leaves its type in a lane of
    ``active_lanes()`` (a mask) is recorded in the `Overflows` it yields: numba marks them `nsw`, so LLVM and NVVM
    compile as if it never happens (``x + y < y`` becomes ``x < 0``), and a GPU's result is undefined where the
    simulator wraps. For the fuzzing's check."""
    overflows = Overflows()
    with _switched("_SIGNED_OVERFLOWS", (overflows, active_lanes)):
        yield overflows


def _checking_overflow(function, arguments: tuple, result: np.dtype):
    """``function`` in ``result``'s type, its operands cast to ``arguments``, the lanes that overflow recorded (a
    power's where its exponent is one `_power` multiplies out: from 0 to `_POWER_CUTOFF`)."""
    overflows, active_lanes = _SIGNED_OVERFLOWS
    power = function is operator.pow

    def compute(a, b):
        a, b = (_int_constant(v, d) if type(v) is int else cast(v, d) for v, d in zip((a, b), arguments))
        with np.errstate(all="ignore"):
            value = cast(_power(a, b) if power else function(a, b), result)
        operands, computed = [np.asarray(v).astype(object) for v in (a, b)], np.asarray(value).astype(object)
        if power:
            base, exponent = np.broadcast_arrays(*operands)
            multiplied = (exponent >= 0) & (exponent <= _POWER_CUTOFF)
            exact = np.where(multiplied, base ** np.where(multiplied, exponent, 0), computed)
        else:
            exact = function(*operands)
        over = np.logical_and(np.asarray(exact != computed, dtype=bool), active_lanes())
        if over.any():
            lane = np.unravel_index(np.argmax(over), over.shape)
            first = [np.broadcast_to(v, over.shape)[lane] for v in (a, b)]
            overflows.found.append(f"{result} {_NSW[function]}: {first[0]} and {first[1]}")
            overflows.overflowed(over)
        return value

    return compute


def argument_dtypes(function, dtypes: tuple) -> tuple | None:
    """The dtypes numba converts arguments of ``dtypes`` to for ``function``, whatever its result (``divmod``'s is a
    tuple); None if it has no signature for them."""
    signature = _resolved(function, dtypes)
    return None if signature is None else tuple(map(as_dtype, signature.args))


@functools.cache
def range_dtype(dtypes: tuple) -> np.dtype:
    """The type numba-cuda's typing gives the variable of a loop over ``range`` of values of ``dtypes``, and converts
    every bound to: int32 (signed int32 and narrower; floats and booleans alone), uint64 (unsigned) or int64."""
    try:
        return as_dtype(_typing_context().resolve_function_type(range, tuple(map(from_dtype, dtypes)), {})
                        .return_type.dtype)
    except Exception:  # not numbers (complex ones included): numba refuses them, and the PTX check says so
        return np.dtype(np.int64)


def cast(value, dtype: np.dtype):
    """``value`` (lane array or scalar) as ``dtype``; a Python int too wide for an integer dtype wraps, as in numba;
    a float to an integer as the GPU converts it (`float_to_integer`); to bfloat16, rounded once
    (`bfloat16.round_to`)."""
    if dtype is BFLOAT16:
        return bfloat16.round_to(value)
    if type(value) is np.ndarray:
        if value.dtype.kind == "f" and dtype.kind in "iu":
            return float_to_integer(value, dtype)
        return value.astype(dtype, copy=False)
    if isinstance(value, np.generic) and value.dtype == dtype:
        return value
    if type(value) is int and dtype.kind in "iu":
        return _int_as(value, dtype)
    if dtype.kind in "iu" and (type(value) is float or (isinstance(value, np.generic) and value.dtype.kind == "f")):
        return float_to_integer(np.asarray(value, np.float64 if type(value) is float else value.dtype), dtype)[()]
    return dtype.type(value)


def float_to_integer(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """Floats as integers of ``dtype`` as PTX's ``cvt.rzi`` converts them (numba-cuda's conversions): toward
    zero, NaN to 0, clamped to the range of the type, or of 16 bits for an 8-bit type (numba-cuda converts to
    int8 with ``cvt.rzi.s16``, then keeps the low byte). NumPy's cast gives the lowest integer (x86's) instead."""
    wide = dtype if dtype.itemsize > 1 else np.dtype(np.int16 if dtype.kind == "i" else np.uint16)
    return saturated(x, wide).astype(dtype, copy=False)


@functools.lru_cache(maxsize=4096)
def _int_as(value: int, dtype: np.dtype):
    """A Python int as an integer dtype, wrapped (a kernel's constants come again and again: cached)."""
    return np.uint64(value & _UINT64_MAX).astype(dtype)


_INT_CONSTANTS: dict = {}  # (Python int, dtype) -> `cast` of it: a kernel's constants come again and again


def _int_constant(value: int, dtype: np.dtype):
    """``cast(value, dtype)`` of a Python int, looked up."""
    try:
        return _INT_CONSTANTS[value, dtype]
    except KeyError:
        if len(_INT_CONSTANTS) > 4096:
            _INT_CONSTANTS.clear()
        converted = _INT_CONSTANTS[value, dtype] = cast(value, dtype)
        return converted


def _wrapped(value):
    """A Python int outside int64 wraps around, as int64 arithmetic on the GPU does."""
    if type(value) is int and not -(1 << 63) <= value < (1 << 63):
        return (value + (1 << 63)) % _INT64_RANGE - (1 << 63)
    return value


def _plan(function, operands) -> tuple | None:
    """What `typed` does for operands of these types: (argument dtypes, result dtype, an operation that computes
    it on its own or None), or None where it computes ``implementation(*operands)`` as they are. Its own: bfloat16's
    (rounded once, as on the GPU), or one checking signed overflow (`signed_overflows`)."""
    dtypes = tuple(map(dtype_of, operands))
    signature = None if any(d is None for d in dtypes) else _signature(function, dtypes)  # dtype(None) is float64
    if signature is None:
        return None
    arguments, result = signature
    if _SIGNED_OVERFLOWS is not None and function in _NSW and result.kind == "i":
        return arguments, result, _checking_overflow(function, arguments, result)
    return arguments, result, _BFLOAT16_OPERATORS.get(function) if result is BFLOAT16 else None


def typed(function, *operands, implementation=None):
    """``function(*operands)`` in the types numba gives it, computed by ``implementation`` (default ``function``)
    on the operands cast to the signature's argument types."""
    implementation = implementation or function
    plan = _plan(function, operands)
    if plan is None:
        return implementation(*operands)
    arguments, result, own = plan
    if own is not None:
        return own(*operands)
    return cast(implementation(*[cast(v, d) for v, d in zip(operands, arguments)]), result)


def _on_python_scalars(function, operands):
    """Python computes operators on Python numbers as numba does, except overflow and division by zero."""
    try:
        return _wrapped(function(*operands))
    except ZeroDivisionError:
        return typed(function, *operands)


def complex_quotient(a, b):
    """``a / b`` of complex numbers by numba's algorithm (CPython's older ``_Py_c_quot``), which NumPy's
    division does not follow for infinities and nans. Where ``b`` is 0 numba raises ZeroDivisionError, which
    a GPU does not report (the thread's result is left unset): nan there."""
    a, b = np.asarray(a), np.asarray(b)
    ar, ai, br, bi = a.real, a.imag, b.real, b.imag
    by_real = np.abs(br) >= np.abs(bi)
    divisor, other = np.where(by_real, br, bi), np.where(by_real, bi, br)
    ratio = other / divisor
    denominator = divisor + other * ratio
    real = np.where(by_real, ar + ai * ratio, ar * ratio + ai) / denominator
    imag = np.where(by_real, ai - ar * ratio, ai * ratio - ar) / denominator
    result = np.empty(real.shape, np.result_type(a, b))
    result.real, result.imag = np.where(divisor == 0, np.nan, real), np.where(divisor == 0, np.nan, imag)
    return result if result.ndim else result[()]


def _true_divide(a, b):
    if np.result_type(a, b).kind == "c":
        return complex_quotient(a, b)
    return operator.truediv(a, b)


def _floor_divide(a, b):
    """``a // b`` as numba computes it: Python's floor, 0 for a zero divisor (NumPy's too), and 0 for the one
    signed quotient that overflows, ``MIN // -1`` (numba guards it: "We return 0, 0 instead"; NumPy wraps);
    floats from the GPU's remainder (`_float_floor_divide`)."""
    if _floats(a, b):
        return _on_floats(_float_floor_divide, a, b)
    quotient = np.floor_divide(a, b)
    if quotient.dtype.kind == "i":
        overflow = (a == np.iinfo(quotient.dtype).min) & (b == -1)
        if np.any(overflow):
            quotient = np.where(overflow, 0, quotient).astype(quotient.dtype)
            return quotient if quotient.ndim else quotient[()]
    return quotient


def _remainder(a, b):
    """``a % b`` as numba computes it: Python's sign rule; integers as NumPy's (0 for a zero divisor), floats
    from the GPU's remainder (`_float_remainder`)."""
    if _floats(a, b):
        return _on_floats(_float_remainder, a, b)
    return operator.mod(a, b)


def _floats(a, b) -> bool:
    """Whether ``a op b`` is a float operation (cheap for the typed operands, which have a dtype: every integer
    ``%`` and ``//`` of a kernel asks)."""
    try:
        return a.dtype.kind == "f" or b.dtype.kind == "f"
    except AttributeError:
        return np.result_type(a, b).kind == "f"


def _on_floats(operation, a, b):
    """``operation`` on two floats of one type; float16 in float32, rounded once at the end (numba-cuda's
    float16 ``%`` and ``//`` convert to float32 and back)."""
    a, b = np.asarray(a), np.asarray(b)
    dtype, shape = np.result_type(a, b), np.broadcast_shapes(a.shape, b.shape)
    wide = np.float32 if dtype.itemsize < 4 else dtype
    a, b = (np.atleast_1d(v).astype(wide, copy=False) for v in (a, b))  # fused.fma works on lanes
    with np.errstate(all="ignore"):
        result = operation(a, b).astype(dtype, copy=False).reshape(shape)
    return result if result.ndim else result[()]


def _gpu_frem(a, b):
    """LLVM's ``frem`` as NVVM emits it and ptxas fuses it: ``|a| - floor(|a| / |b|) * |b|`` in one rounding (a
    fused multiply-add), with the sign of ``a`` (``+0`` for ``-0``). Not C's exact ``fmod``: where ``|a| / |b|``
    rounds, the quotient is off and so is the remainder (``2.0**64 % 7.0`` is 1024.0 on a GPU, 2.0 in Python);
    an infinite ``b`` gives NaN, not ``a``."""
    magnitude, divisor = np.abs(a), np.abs(b)
    r = fused.fma(-np.floor(magnitude / divisor), divisor, magnitude)
    return np.where(a < 0, -r, r)


def _moved(a, b, r):
    """Where numba moves the remainder ``r`` of ``a / b`` into the divisor's sign: where their signs differ (or
    the dividend's and the divisor's, `remainder_sign_of_dividend`)."""
    return (b < 0) != ((a if _REMAINDER_SIGN_OF_DIVIDEND else r) < 0)


def _float_remainder(a, b):
    """numba's float ``a % b`` on `_gpu_frem`: moved into the divisor's sign, a zero with the divisor's sign; a
    zero divisor gives the remainder as it is (NaN)."""
    r = _gpu_frem(a, b)
    signed = np.where(r != 0, np.where(_moved(a, b, r), r + b, r), np.copysign(r.dtype.type(0), b))
    return np.where(b == 0, r, signed)


def _float_floor_divide(a, b):
    """numba's float ``a // b`` (CPython's ``float_divmod``) on `_gpu_frem`: ``(a - r) / b``, one less where the
    remainder's sign is moved, then the nearest integer below; a zero or NaN quotient as numba's ``div * div * a
    / b`` (a zero of the quotient's sign); ``a / b`` for a zero divisor."""
    r = _gpu_frem(a, b)
    quotient = (a - r) / b
    quotient = np.where((r != 0) & _moved(a, b, r), quotient - 1, quotient)
    below = np.floor(quotient)
    nearest = np.where(quotient - below > 0.5, below + 1, below)
    result = np.where(quotient != 0, nearest, quotient * quotient * a / b)
    return np.where(b == 0, a / b, result)


_POWER_CUTOFF = 0x10000  # numba's int_power: past it, math.pow


def _power(a, b):
    """``a ** b`` as numba-cuda computes it (its ``int_power``): an integer exponent by squaring and multiplying in
    the base's type, so ``x ** 3`` is ``x * (x * x)``, rounded twice where NumPy's ``pow`` rounds once; a negative
    one inverts (``1.0 / r``), and an integer base then gives 0, or itself for 1 and -1, or the lowest integer
    for 0 (numba's error model on a GPU); past ``_POWER_CUTOFF`` (a uint64 of 2**63 or more among them), ``pow``
    of the two as floats. A float exponent or a complex base: ``pow``."""
    a, b = np.asarray(a), np.asarray(b)
    if b.dtype.kind not in "iu" or a.dtype.kind not in "iuf":
        return np.power(a, b)
    shape = np.broadcast_shapes(a.shape, b.shape)
    magnitude = (b if b.dtype.kind == "u" else np.abs(b.astype(np.int64))).astype(np.uint64)  # |-2**63| too
    far = magnitude > _POWER_CUTOFF
    remaining = np.broadcast_to(np.where(far, 0, magnitude).astype(np.int64), shape)
    result, value = np.ones(shape, a.dtype), np.broadcast_to(a, shape)
    with np.errstate(all="ignore"):
        while remaining.any():
            result = np.where(remaining & 1, result * value, result)
            remaining, value = remaining >> 1, value * value
        negative = b < 0
        if a.dtype.kind == "f":
            result = np.where(negative, 1 / result, result)
            if far.any():
                result = np.where(far, np.power(a, b.astype(a.dtype)), result)
        else:
            if negative.any():
                inverted = np.where(a == 0, np.iinfo(a.dtype).min, np.where((a == 1) | (a == -1), result, 0))
                result = np.where(negative, inverted, result)
            if far.any():
                result = np.where(far, float_to_integer(np.power(a.astype(np.float64), b.astype(np.float64)),
                                                        a.dtype), result)
    result = result.astype(a.dtype, copy=False)
    return result if result.ndim else result[()]


_UNPLANNED = object()
_PLANS: list[dict] = []  # each operator's plans by operand types (`_operator`)


def _operator(function, implementation=None, arity: int = 2):
    """The operator as `typed` computes it, its plan looked up once per operand types (the per-operator cost
    of every statement of a simulated kernel)."""
    compute = implementation or function
    plans: dict = {}
    _PLANS.append(plans)
    python_computes = function is not operator.pow  # Python's ``**`` rounds once, as pow does

    def plan_of(operands, key):
        try:
            return plans[key]
        except KeyError:
            plan = plans[key] = _plan(function, operands)
            return plan

    def apply2(a, b):
        ta, tb = type(a), type(b)
        if (ta is int or ta is float) and (tb is int or tb is float) and python_computes:  # bool: ~True is False
            return _on_python_scalars(function, (a, b))
        key = (a.dtype if ta is np.ndarray or (ta not in _PYTHON_SCALARS and isinstance(a, np.generic)) else ta,
               b.dtype if tb is np.ndarray or (tb not in _PYTHON_SCALARS and isinstance(b, np.generic)) else tb)
        plan = plans.get(key, _UNPLANNED)
        if plan is _UNPLANNED:
            plan = plan_of((a, b), key)
        if plan is None:
            return compute(a, b)
        (da, db), result, own = plan
        if own is not None:
            return own(a, b)
        a = a if ta is np.ndarray and a.dtype is da else _int_constant(a, da) if ta is int else cast(a, da)
        b = b if tb is np.ndarray and b.dtype is db else _int_constant(b, db) if tb is int else cast(b, db)
        value = compute(a, b)
        return value if type(value) is np.ndarray and value.dtype is result else cast(value, result)

    def apply1(a):
        ta = type(a)
        if ta is int or ta is float:
            return _on_python_scalars(function, (a,))
        plan = plan_of((a,), (a.dtype if ta is np.ndarray or isinstance(a, np.generic) else ta,))
        if plan is None:
            return compute(a)
        (da,), result, own = plan
        if own is not None:
            return own(a)
        value = compute(a if ta is np.ndarray and a.dtype is da else cast(a, da))
        return value if type(value) is np.ndarray and value.dtype is result else cast(value, result)

    apply = apply2 if arity == 2 else apply1
    apply.__name__ = function.__name__
    return staticmethod(apply)


def strong(value):
    """A Python number as the NumPy scalar of its numba type, so that NumPy promotes it as numba unifies."""
    dtype = _PYTHON_SCALARS.get(type(value))
    return value if dtype is None else dtype.type(value)


def select(condition, yes, no):
    """``yes`` where ``condition``, else ``no``, in the type numba unifies them to."""
    return np.where(condition, strong(yes), strong(no))


# bfloat16 operators call CUDA's (``operator+`` is ``__hadd``...): one rounding of the exact result
_BFLOAT16_OPERATORS = {function: bfloat16.OPERATIONS[name] for function, name in (
    (operator.add, "hadd"), (operator.sub, "hsub"), (operator.mul, "hmul"), (operator.truediv, "hdiv"),
    (operator.neg, "hneg")) if name in bfloat16.OPERATIONS}
BINARY = {
    "Add": operator.add, "Sub": operator.sub, "Mult": operator.mul, "Div": operator.truediv,
    "FloorDiv": operator.floordiv, "Mod": operator.mod, "Pow": operator.pow, "LShift": operator.lshift,
    "RShift": operator.rshift, "BitOr": operator.or_, "BitXor": operator.xor, "BitAnd": operator.and_,
    "Eq": operator.eq, "NotEq": operator.ne, "Lt": operator.lt, "LtE": operator.le, "Gt": operator.gt,
    "GtE": operator.ge,
}
UNARY = {"USub": operator.neg, "UAdd": operator.pos, "Invert": operator.invert}


def operation_key(kind: str, line: int, ordinal: int, count: int) -> str:
    """How a kernel's variable types name the result of an operation: the ``ordinal``-th of the ``count``
    operations of ``kind`` (an ``ast`` operator's name, or ``Call``) on source ``line``, in the order they are
    evaluated (``"$Add:27:0/1"``; no variable's name starts with ``$``)."""
    return f"${kind}:{line}:{ordinal}/{count}"


def assignment_key(variable: str, line: int, ordinal: int, count: int) -> str:
    """How a kernel's variable types name the type of one assignment to ``variable``, whose versions numba types
    differently: the ``ordinal``-th of the ``count`` assignments to it on source ``line`` (``"$=v:27:0/1"``)."""
    return f"$={variable}:{line}:{ordinal}/{count}"


def read_key(variable: str, line: int, ordinal: int | None = None, count: int | None = None) -> str:
    """How a kernel's variable types name the type of the version one read of ``variable`` reads, where the versions
    its reads see have different types: the ``ordinal``-th of the ``count`` reads of it on source ``line``
    (``"$<v:27:0/1"``); without an ordinal, every read of it on that line, where all read versions of one type
    (``"$<v:27"``: numba may count them differently, a ``while`` test CPython evaluates in two places, the middle of a
    chained comparison it reads twice)."""
    return f"$<{variable}:{line}" if ordinal is None else f"$<{variable}:{line}:{ordinal}/{count}"


RETURNED = "$return"  # how a function's variable types name its return type (numba's, unified over its returns)
READS = "$reads"  # present (as bool) in a function's variable types where some of its reads are keyed (`read_key`)
SIGNATURES = "$signatures"  # (function, SIGNATURES): {`argument_kinds`: its variable types} where signatures differ


def argument_kinds(values) -> tuple:
    """What names a device function's signature by its arguments' values (as `run.ptx` names it by their numba
    types): each argument's dtype, ``"float32[2]"`` for a 2-D array of float32, ``"(float32, int64)"`` for a
    tuple, ``"None"`` for anything else."""
    return tuple(map(_kind, values))


def _kind(value) -> str:
    if type(value) is tuple:
        return f"({', '.join(map(_kind, value))})"
    dtype = dtype_of(value)
    if dtype is None and hasattr(value, "ndim") and hasattr(value, "dtype"):  # an array argument
        return f"{value.dtype}[{value.ndim}]"
    return str(dtype)


def method_name(ast_operator_name: str) -> str:
    """The `Arithmetic` method a rewritten kernel calls for an ``ast`` operator (``Add`` -> ``op_Add``)."""
    return f"op_{ast_operator_name}"


class Arithmetic:
    """The operators as methods of the runtime: ``_g_rt.op_Add(a, b)``."""


_IMPLEMENTATIONS = {"Div": _true_divide, "FloorDiv": _floor_divide, "Mod": _remainder, "Pow": _power}  # where NumPy's differs from numba's

for _name, _function in {**BINARY, **UNARY}.items():
    setattr(Arithmetic, method_name(_name),
            _operator(_function, _IMPLEMENTATIONS.get(_name), 1 if _name in UNARY else 2))

__all__ = ["Arithmetic", "BINARY", "UNARY", "as_dtype", "cast", "complex_quotient", "dtype_of", "from_dtype",
           "argument_kinds", "assignment_key", "method_name", "operation_key", "read_key", "READS", "RETURNED",
           "SIGNATURES", "select", "strong", "typed"]
