"""Checks for module 6's precision exercises: messages that show the expected and the actual bits.

A precision bug is in the bits: a tie rounded up instead of to even, a NaN
turned into infinity, a product rounded to fp16 before the sum. So a failure
names the launch and the first wrong element, and shows both values field by
field (sign, exponent, mantissa)::

    out[3] should be 0 10010 0101100000 (37.5), got 0 10010 0101011111 (37.47)

Each check draws random, non-uniform inputs, poisons the outputs, and takes
``special=`` to add the awkward values of its exercise (``"ties"``,
``"denormals"``, ``"infinities"``, ``"nan"``, ``"overflow"``, ...). Results that
depend on the order of float sums are compared with a float64 reference within
a bound that fits the format; exact results bit for bit.
"""

from __future__ import annotations

import ast
import inspect
import math
import re
import textwrap
from contextlib import contextmanager
from typing import Callable, Iterable, Sequence

import numpy as np
from numba import cuda
from numba.core import types as numba_types

from ..kernels.precision import emulate_mma_m16n8k8, mma_error_bound, mma_m16n8k8, ulp
from ..run import ptx, simulated, trace
from . import core
from .core import CheckFailed, explain_failure, is_kernel, kernel_name, operations_listed, report
from .matmul import reads_per_thread

U16 = 2.0 ** -11  # unit roundoff of fp16
U32 = 2.0 ** -24  # ... and of fp32
_FIELDS = {np.dtype(np.float16): (5, 10, np.uint16), np.dtype(np.float32): (8, 23, np.uint32),
           np.dtype(np.uint16): (8, 7, np.uint16)}  # uint16: a bfloat16 bit pattern


def bit_fields(value, dtype) -> str:
    """``value`` of ``dtype`` as "sign exponent mantissa (value)"; a uint16 is read as a bfloat16 pattern."""
    dtype = np.dtype(dtype)
    exponent_bits, mantissa_bits, unsigned = _FIELDS[dtype]
    pattern = int(np.asarray(value, dtype).view(unsigned))
    width = 1 + exponent_bits + mantissa_bits
    text = format(pattern, f"0{width}b")
    shown = np.asarray(np.uint32(pattern << 16)).view(np.float32) if dtype == np.uint16 else np.asarray(value, dtype)
    return f"{text[0]} {text[1:1 + exponent_bits]} {text[1 + exponent_bits:]} ({float(shown):.6g})"


def _mismatch(name: str, described: str, label: str, index, expected, got, dtype, why: str = "") -> CheckFailed:
    where = "[" + ", ".join(str(int(i)) for i in np.atleast_1d(index)) + "]"
    poisoned = core.POISONED if _is_poison(got, dtype) else ""
    return CheckFailed(f"{name} gave a wrong result with {described}:\n"
                       f"  {label}{where} should be {bit_fields(expected, dtype)},\n"
                       f"  {' ' * len(label + where)}       got {bit_fields(got, dtype)}{poisoned}"
                       + (f"\n  {why}" if why else ""))


def _poisoned(values, dtype) -> np.ndarray:
    """Element by element: still the value `core.poison` filled the output with, bit for bit (a NaN the kernel
    computed, with another sign or payload, is not taken for it)."""
    dtype = np.dtype(dtype)
    bits = np.dtype(f"u{dtype.itemsize}")
    return np.asarray(values, dtype).view(bits) == core.poison((), dtype).view(bits)


def _is_poison(value, dtype) -> bool:
    return bool(_poisoned(value, dtype))


def _unwritten_region(got: np.ndarray, dtype, threads_xy: tuple[int, int] | None = None) -> str:
    """Where a 2-D output still holds the poison, when that is one rectangle (a store or a whole call left out):
    ", and so it is at rows 0 to 15, columns 8 to 15 (all of them, nothing else)"; else "". With ``threads_xy``,
    the launch's threads along x and along y for an output indexed [row, column] with x along the columns: when
    exactly out[:x, :y] was written (a row below the threads along x, a column below those along y), the kernel took
    its row from x and its column from y, and the message says so."""
    left = _poisoned(got, dtype)
    if got.ndim != 2 or not left.any():
        return ""
    if threads_xy is not None:
        rows, cols = got.shape
        written = (min(rows, threads_xy[0]), min(cols, threads_xy[1]))
        expected_left = np.ones(got.shape, bool)
        expected_left[:written[0], :written[1]] = False
        if written != (rows, cols) and np.array_equal(left, expected_left):
            return (f": only rows 0 to {written[0] - 1} and columns 0 to {written[1] - 1} were written, as if the row "
                    f"came from x ({threads_xy[0]} threads along x) and the column from y ({threads_xy[1]} along y). "
                    "cuda.grid(2) gives (x, y), and x counts along a row's columns: col, row = cuda.grid(2)")
    rows, cols = np.flatnonzero(left.any(axis=1)), np.flatnonzero(left.any(axis=0))
    if not left[rows[0]:rows[-1] + 1, cols[0]:cols[-1] + 1].all() or left.sum() == got.size:
        return ""
    return (f", and so it is at rows {rows[0]} to {rows[-1]}, columns {cols[0]} to {cols[-1]} (all of them, nothing "
            "else): is a store, or a whole call, left out?")


def _launch(kernel, name: str, described: str, grid, block, out_shape, dtype, arguments: list,
            out_name: str = "out") -> tuple:
    """``kernel[grid, block](out, *arguments)`` as every check launches (`core.launch_on_copies`: ``out``
    poisoned, a canary after it); returns ``out`` and the arguments as the kernel left them."""
    if not is_kernel(kernel):
        raise CheckFailed(f"{name} is not a kernel: write it as a function decorated with @cuda.jit "
                          f"(got {type(kernel).__name__}).")
    try:
        out, canary, after = core.launch_on_copies(kernel, grid, block, out_shape, dtype, arguments)
    except Exception as exc:
        raise CheckFailed(explain_failure(name, described, exc, out_name)) from None
    if not _poisoned(canary, dtype).all():
        raise CheckFailed(f"{name} wrote past the end of `{out_name}` with {described}: a thread past the end of "
                          "the array needs a guard.")
    return out, after


def _unchanged(name: str, described: str, labels: Sequence[str], before: Sequence, after: Sequence) -> None:
    for label, old, new in zip(labels, before, after):
        if isinstance(old, np.ndarray) and not np.array_equal(old.view(np.uint8), new.view(np.uint8)):
            raise CheckFailed(f"{name} changed its input `{label}` with {described}: it must only write its outputs.")


def _compare_exact(name, described, label, got, expected, dtype, mistakes: Sequence[tuple] = ()) -> None:
    """Bit for bit, except that any NaN matches any NaN of the same sign. ``mistakes``: (what a known mistake
    gives, its hint): the first whose values match ``got`` where it is wrong names the mistake."""
    same = got.view(np.uint8).reshape(got.shape + (-1,)) == expected.view(np.uint8).reshape(expected.shape + (-1,))
    same = same.all(axis=-1)
    if np.dtype(dtype).kind == "f":
        same |= np.isnan(got) & np.isnan(expected) & (np.signbit(got) == np.signbit(expected))
    bad = np.argwhere(~same)
    if len(bad):
        first, wrong = tuple(bad[0]), tuple(bad.T)
        hint = next((f": {hint}" for given, hint in mistakes
                     if np.array_equal(got[wrong], np.asarray(given, got.dtype)[wrong], equal_nan=True)), "")
        raise _mismatch(name, described, label, first, expected[first], got[first], dtype,
                        f"{len(bad)} of {got.size} elements differ{hint}")


def _compare_within(name, described, label, got, exact, bound, dtype, hint: str = "",
                    threads_xy: tuple[int, int] | None = None, nan_for_inf_hint: str = "") -> None:
    """Within ``bound`` of the float64 ``exact``; where ``exact`` rounds to inf or NaN in ``dtype``, that exactly.
    ``threads_xy``: for a 2-D output with x along its columns, the launch's threads along x and y
    (`_unwritten_region`). ``nan_for_inf_hint``: the exercise's hint where a NaN was computed for an infinity."""
    with np.errstate(over="ignore", invalid="ignore"):
        stored = exact.astype(dtype)
        special = ~np.isfinite(stored)
        ok = np.where(special, (got == stored) | (np.isnan(got) & np.isnan(stored)),
                      np.abs(got.astype(np.float64) - exact) <= bound)
    bad = np.argwhere(~ok)
    if len(bad):
        first = tuple(bad[0])
        if _is_poison(got[first], dtype):  # a guard or an index, not the arithmetic: the exercise's hint misleads
            region = _unwritten_region(got, dtype, threads_xy)
            why = f"a thread past a guard or a wrong index leaves it unwritten{region}"
        elif special[first]:
            why = (f"the exact result is {exact[first]:.6g}, which is {float(stored[first])} in {np.dtype(dtype).name}: "
                   "the kernel must give that too (inf - inf and 0 * inf give NaN; clamping gives the largest finite "
                   "value)")
            if nan_for_inf_hint and np.isnan(got[first]) and np.isinf(stored[first]):
                why += f": {nan_for_inf_hint}"
        else:
            why = (f"the float64 result is {exact[first]:.9g}; rounding allows ±{float(np.asarray(bound)[first]):.3g} "
                   f"there{': ' + hint if hint else ''}")
        raise _mismatch(name, described, label, first, stored[first], got[first], dtype,
                        f"{len(bad)} of {got.size} elements are wrong. {why[0].upper()}{why[1:]}")


def _float_budget(kernel, name: str, arguments: list, widths: Sequence[int], why: str) -> None:
    """A budget on the kernel's PTX for these ``arguments``' types (a float64 compilation from another call, such as
    Exercise 6's host code passing a Python float, is that call's fault): no arithmetic or conversion on floats of
    ``widths`` bits (64, 32)."""
    argtypes = tuple(ptx.argument_type(a) for a in arguments)
    ptx.check_compiles(kernel, arguments, argtypes)  # the PTX of these argument types (already there after a launch)
    for width in widths:
        found = ptx.float_operations(kernel.py_func, width, argtypes)
        if found is None:
            raise CheckFailed(f"{name}: cannot check its float{width} budget, the kernel was not compiled to PTX "
                              "(NVVM missing, or GPUCOURSE_PTX_CHECK=off).")
        if found:
            raise CheckFailed(f"{name} computes in float{width} ({operations_listed(found)} in its PTX): {why}")


_NO_FLOAT64 = ("the exercise asks for float32 arithmetic: a Python float such as `0.0` or `2.0` is a float64 and makes "
               "what it touches float64 (slow on a GPU): write float32(0).")


def _sizes_described(**arrays) -> str:
    return ", ".join(f"{k} {v.shape}" for k, v in arrays.items())


def _special(rng, shape, dtype, kinds: Sequence[str], spot: float = 0.1) -> np.ndarray:
    """Random normal values with a share ``spot`` of them replaced by the awkward ``kinds``."""
    values = (rng.standard_normal(shape) * rng.uniform(0.5, 2)).astype(dtype)
    picks = {"denormals": lambda n: rng.uniform(-1, 1, n) * 2.0 ** -16,
             "infinities": lambda n: rng.choice([-np.inf, np.inf], n),
             "nan": lambda n: np.full(n, np.nan),
             "large": lambda n: rng.uniform(200, 400, n) * rng.choice([-1, 1], n)}
    for kind in kinds:
        chosen = rng.random(shape) < spot
        values[chosen] = picks[kind](int(chosen.sum())).astype(dtype)
    return values


# ---------------------------------------------------------------- exercise 1: a linear layer in fp16


def check_linear_fp16(kernel, shapes: Iterable[tuple[int, int, int]], *, block=(16, 16), special: Sequence[str] = (),
                      seed: int = 0, name: str | None = None, quiet: bool = False) -> None:
    """``kernel[grid, block](Y, X, W, bias)``: ``Y = X @ W.T + bias`` rounded once to fp16.

    Each shape is ``(M, K, N)``: ``X`` (M, K) and ``W`` (N, K) float16, ``bias`` (N,) float32, ``Y`` (M, N)
    float16; ``grid = (ceil(N / block[0]), ceil(M / block[1]))``. ``Y`` may differ from the float64 result by
    half an fp16 ulp plus the rounding of K float32 additions; where the result overflows fp16 it must be inf.
    ``special``: "denormals", "large" (fp16 overflows), "infinities", "nan" among the inputs.
    """
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    rng = np.random.default_rng(seed)
    count = 0
    for M, K, N in shapes:
        # infinities and NaN: about one in every second row of X, so that most results stay finite (a NaN the
        # kernel never wrote must not pass for a NaN it computed)
        X = _special(rng, (M, K), np.float16, special, spot=min(0.1, 0.5 / K))
        W = _special(rng, (N, K), np.float16, [k for k in special if k in ("denormals", "large")])
        bias = (rng.standard_normal(N) * 2).astype(np.float32)
        grid = (math.ceil(N / block[0]), math.ceil(M / block[1]))
        described = f"grid={grid}, block={tuple(block)}, {_sizes_described(X=X, W=W)}"
        Y, after = _launch(kernel, name, described, grid, block, (M, N), np.float16, [X, W, bias], "Y")
        _unchanged(name, described, ["X", "W", "bias"], [X, W, bias], after)
        X64, W64 = X.astype(np.float64), W.astype(np.float64)
        with np.errstate(invalid="ignore", over="ignore"):
            exact = X64 @ W64.T + bias
            scale = np.abs(X64) @ np.abs(W64).T + np.abs(bias)
        bound = 0.5 * ulp(np.where(np.isfinite(exact), exact, 0), "fp16") + (K + 2) * U32 * scale
        _compare_within(name, described, "Y", Y, exact, bound, np.float16,
                        _linear_hint(X64, W64, bias, Y, exact, bound), (grid[0] * block[0], grid[1] * block[1]))
        _float_budget(kernel, name, [Y, X, W, bias], [64],
                      "the exercise asks for a float32 accumulator; a literal such as `0.` is a float64 and makes "
                      "what it touches float64: write float32(0).")
        count += 1
    report(name, count, quiet)


def _linear_hint(X: np.ndarray, W: np.ndarray, bias: np.ndarray, Y: np.ndarray, exact: np.ndarray,
                 bound: np.ndarray) -> str:
    """The hint for the first finite element of ``Y`` out of ``bound``: the bias left out, or a loop that leaves out
    the first or the last product (a wrong bound); else the accumulator's."""
    got = Y.astype(np.float64)
    with np.errstate(invalid="ignore"):
        wrong = np.argwhere(np.isfinite(exact) & ~(np.abs(got - exact) <= bound))
    if len(wrong):
        r, c = map(int, wrong[0])
        K = X.shape[1]

        def near(value: float) -> bool:  # as near as the right sum would be, rounded at its own magnitude
            return abs(got[r, c] - value) <= bound[r, c] + 0.5 * float(ulp(np.float64(value), "fp16"))

        if near(exact[r, c] - float(bias[c])):
            return f"Y[{r}, {c}] is row {r} of X times row {c} of W without the bias: add bias[{c}] to the sum"
        for k, which in ((0, "the first product"), (K - 1, "the last product")):
            if near(exact[r, c] - X[r, k] * W[c, k]):
                return (f"the sum of Y[{r}, {c}] leaves out {which}, X[{r}, {k}] * W[{c}, {k}]: check the loop's "
                        f"bounds; k runs from 0 to K - 1 = {K - 1}, as range(X.shape[1]) gives")
    return ("is every step float32 (each fp16 value widened before its product, the sum, and the bias added to it) "
            "and rounded to fp16 once, at the end?")


# ---------------------------------------------------------------- lecture 6's puzzle: dot products in fp32


def check_dot_rows(kernel, shapes: Iterable[tuple[int, int]] = ((1, 1), (33, 1000), (300, 17)), *,
                   threads: int = 64, seed: int = 0, name: str | None = None, quiet: bool = False) -> None:
    """``kernel[ceil(M / threads), threads](out, A, x)``: ``out[r] = sum_k A[r, k] * x[k]``, A (M, K) and x (K,)
    float16, out (M,) float32, accumulated in float32: within ``(K + 1) * 2**-24 * (|A| @ |x|)`` of the float64
    result, and no float64 in the PTX. Positive inputs: an fp16 accumulator, rounded at every step, fails.
    """
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    rng = np.random.default_rng(seed)
    count = 0
    for M, K in shapes:
        A, x = rng.uniform(0, 1, (M, K)).astype(np.float16), rng.uniform(0, 1, K).astype(np.float16)
        grid = math.ceil(M / threads)
        described = f"grid={grid}, block={threads}, {_sizes_described(A=A, x=x)}"
        out, after = _launch(kernel, name, described, grid, threads, (M,), np.float32, [A, x])
        _unchanged(name, described, ["A", "x"], [A, x], after)
        exact = A.astype(np.float64) @ x.astype(np.float64)
        bound = (K + 1) * U32 * exact
        _compare_within(name, described, "out", out, exact, bound, np.float32, _dot_rows_hint(A, x, out, exact, bound))
        _float_budget(kernel, name, [out, A, x], [64], "write float32(0), not 0., for the accumulator.")
        count += 1
    report(name, count, quiet)


def _dot_rows_hint(A: np.ndarray, x: np.ndarray, got: np.ndarray, exact: np.ndarray, bound: np.ndarray) -> str:
    """The hint for the first row out of ``bound``: a loop that does not run (0), or one that leaves out the first
    or the last product (a wrong bound); else the accumulator's."""
    got64 = got.astype(np.float64)
    wrong = np.flatnonzero(~(np.abs(got64 - exact) <= bound))
    if len(wrong):
        r, K = int(wrong[0]), A.shape[1]
        bounds = f"k runs from 0 to K - 1 = {K - 1}, as range(A.shape[1]) gives"
        if got[r] == 0 and exact[r] != 0:
            return f"got 0: does your loop over the row run? Check its bounds: {bounds}"
        for k, which in ((0, "element 0"), (K - 1, "the last element")):
            if abs(got64[r] - (exact[r] - float(A[r, k]) * float(x[k]))) <= bound[r]:
                return f"your sum leaves out {which}, A[{r}, {k}] * x[{k}]: check the loop's bounds; {bounds}"
    return "is the accumulator float32, and each fp16 value widened before the product?"


# ---------------------------------------------------------------- exercise 2: Kahan sums in fp16


def _plant_row_specials(rng, x: np.ndarray, special: Sequence[str]) -> None:
    """Rows of subnormals, rows that overflow, and rows with one infinity, both infinities or a NaN. No infinity in
    a row that overflows: its fp16 running sum is +inf before it meets a -inf (NaN), where the float64 sum is -inf."""
    rows, n = x.shape
    overflows = set(range(1, rows, 4)) if "overflow" in special else set()
    for kind in special:
        if kind == "denormals":
            x[::2] = (rng.uniform(-1, 1, x[::2].shape) * 2.0 ** -14).astype(np.float16)
        elif kind == "overflow":
            x[1::4] = rng.uniform(1000, 2000, x[1::4].shape).astype(np.float16)
        elif kind == "infinities":
            for r in sorted(set(range(0, rows, 3)) - overflows):
                x[r, rng.integers(n)] = rng.choice([-np.inf, np.inf])
            x[rows // 2, 0], x[rows // 2, -1] = np.inf, -np.inf  # both: NaN (also where the row overflows)
        elif kind == "nan":
            x[2::5, rng.integers(n)] = np.nan
        else:
            raise ValueError(f"unknown special value {kind!r}")


def check_kahan_rows(kernel, shapes: Iterable[tuple[int, int]], *, threads: int = 32, values: str = "mixed",
                     special: Sequence[str] = (), seed: int = 0, name: str | None = None, quiet: bool = False) -> None:
    """``kernel[ceil(rows / threads), threads](out, x)``: ``out[r]`` the fp16 sum of row ``r`` of fp16 ``x``.

    Within Kahan's bound, ``(2u + 2 n u**2)`` times the sum of ``|x|`` (u = 2**-11, n the row length), of the
    float64 sum; a sum that is inf or NaN in fp16 (an infinity in the row, a NaN, an overflow) must be that.
    ``values``: "mixed" (normal), "positive" (uniform in [0, 1)), "ones" (the running sum stalls at 2048).
    ``special``: "denormals", "infinities", "nan", and "overflow" (rows of large positive values).
    """
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    rng = np.random.default_rng(seed)
    count = 0
    for rows, n in shapes:
        if values == "ones":
            x = np.ones((rows, n), np.float16)
        elif values == "positive":
            x = rng.uniform(0, 1, (rows, n)).astype(np.float16)
        else:
            x = (rng.standard_normal((rows, n)) * rng.uniform(0.5, 2)).astype(np.float16)
        _plant_row_specials(rng, x, special)
        grid = math.ceil(rows / threads)
        described = f"grid={grid}, block={threads}, x {x.shape} ({values} values{', ' if special else ''}" \
                    f"{', '.join(special)})"
        out, after = _launch(kernel, name, described, grid, threads, (rows,), np.float16, [x])
        _unchanged(name, described, ["x"], [x], after)
        x64 = x.astype(np.float64)
        with np.errstate(invalid="ignore"):
            exact = x64.sum(axis=1)
        bound = (2 * U16 + 2 * n * U16 ** 2) * np.abs(x64).sum(axis=1)
        _compare_within(name, described, "out", out, exact, bound, np.float16,
                        "does the sum carry Kahan's compensation?",
                        nan_for_inf_hint="once t is inf, Kahan's c = (t - total) - y is inf - inf = NaN, and the "
                                         "next y = x - c spreads it: where t is not finite (t - t != float16(0)), "
                                         "set c = float16(0)")
        _float_budget(kernel, name, [out, x], [64, 32],
                      "the exercise asks for fp16 arithmetic only (total, c, y and t all float16): a wider "
                      "accumulator would pass the bound without Kahan's compensation. math.isinf, abs or "
                      "float32(...) of an fp16 value widens it too: test `t - t == float16(0)` for a finite t.")
        count += 1
    report(name, count, quiet)


# ---------------------------------------------------------------- exercise 3: float32 -> bfloat16 bits


def bfloat16_reference(bits32: np.ndarray) -> np.ndarray:
    """The bfloat16 patterns (uint16) nearest to float32 patterns (uint32), ties to even; a NaN stays a NaN
    (sign and top mantissa bits kept, quiet bit 0x0040 set)."""
    bits32 = np.asarray(bits32, np.uint32).astype(np.uint64)
    nan = (bits32 & 0x7FFFFFFF) > 0x7F800000
    rounded = (bits32 + 0x7FFF + ((bits32 >> 16) & 1)) >> 16
    return np.where(nan, (bits32 >> 16) | 0x0040, rounded).astype(np.uint16)


def bfloat16_inputs(rng, size: int, special: Sequence[str] = ()) -> np.ndarray:
    """float32 bit patterns (uint32): random magnitudes, and the ``special`` ones ("ties", "denormals",
    "infinities", "nan", "overflow")."""
    values = (rng.standard_normal(size) * np.exp2(rng.integers(-20, 20, size))).astype(np.float32).view(np.uint32)
    extra = []
    for kind in special:
        if kind == "ties":  # exactly half-way: the kept bits odd (round up) and even (round down)
            extra.append((rng.integers(0, 0x7F7F, 16).astype(np.uint32) << 16) | 0x8000)
            extra.append(np.array([0x3F808000, 0x3F818000, 0xBF808000, 0x00008000, 0x7F7F8000], np.uint32))
        elif kind == "denormals":
            signs = rng.integers(0, 2, 16).astype(np.uint32) << 31
            extra.append(rng.integers(1, 0x007FFFFF, 16).astype(np.uint32) | signs)
        elif kind == "infinities":
            extra.append(np.array([0x7F800000, 0xFF800000], np.uint32))
        elif kind == "nan":  # quiet, signalling, and payloads only in the low 16 bits (they must not become inf)
            extra.append(np.array([0x7FC00000, 0xFFC00000, 0x7F800001, 0xFF80FFFF, 0x7FBFFFFF, 0x7F808000,
                                   0x7F810000], np.uint32))  # the last: signalling, its payload in the kept bits
        elif kind == "overflow":
            extra.append(np.array([0x7F7FFFFF, 0xFF7FFFFF, 0x7F7F8000, 0x7F7F7FFF], np.uint32))
        else:
            raise ValueError(f"unknown special value {kind!r}")
    return np.concatenate([values] + extra)


def check_to_bfloat16(kernel, sizes: Iterable[int], *, threads: Iterable[int] = (128,), special: Sequence[str] = (),
                      seed: int = 0, name: str | None = None, quiet: bool = False) -> None:
    """``kernel[ceil(n / threads), threads](out, bits)``: ``out`` (uint16) the bfloat16 nearest to each float32
    pattern of ``bits`` (uint32), bit for bit as `bfloat16_reference`."""
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    rng = np.random.default_rng(seed)
    count = 0
    for size in sizes:
        bits32 = bfloat16_inputs(rng, size, special)
        for t in threads:
            grid = math.ceil(len(bits32) / t)
            described = f"grid={grid}, block={t}, {len(bits32)} values{' with ' if special else ''}{', '.join(special)}"
            out, after = _launch(kernel, name, described, grid, t, (len(bits32),), np.uint16, [bits32])
            _unchanged(name, described, ["bits"], [bits32], after)
            expected = bfloat16_reference(bits32)
            bad = np.flatnonzero(out != expected)
            if len(bad):
                i = int(bad[0])
                value = bits32[i:i + 1].view(np.float32)[0]
                given = bit_fields(value, np.float32)
                nan = (" It is a NaN. IEEE 754 lets a conversion return any NaN (some return one canonical 0x7FC0), "
                       "but this exercise asks for its sign and top bits kept: (u >> 16) | 0x0040."
                       if np.isnan(value) else
                       " It is an infinity (exponent all ones, mantissa 0), not a NaN, which has a mantissa other "
                       "than 0: test (u & 0x7FFFFFFF) > 0x7F800000 for a NaN, so that an infinity is rounded as the "
                       "other values (which keeps it inf)." if np.isinf(value) and (int(out[i]) & 0x7F) else
                       " Its 16 dropped bits are exactly 0x8000: a tie, which rounds to the even pattern (the one "
                       "whose last kept bit is 0), down as often as up." if int(bits32[i]) & 0xFFFF == 0x8000 else "")
                raise _mismatch(name, described, "out", i, expected[i], out[i], np.uint16,
                                f"the float32 input bits[{i}] is {given}; {len(bad)} of {len(out)} are wrong.{nan}")
            count += 1
    report(name, count, quiet)


# ---------------------------------------------------------------- lecture 6's puzzle: a scaled gradient in fp16

SCALED_GRADIENT_CASES = ((1000, 2.0 ** 16, 128), (33, 2.0 ** 12, 32), (1, 2.0 ** 4, 32))  # (n, scale, threads)


def _scaled_gradient_hint(got: np.ndarray, exact: np.ndarray, unscaled: np.ndarray, scale: float) -> str:
    """What the wrong fp16 gradients are instead: rounded before the scale, divided by it, not divided by n."""
    with np.errstate(over="ignore"):
        if np.allclose(got, (exact / scale ** 2).astype(np.float16), rtol=2 * U16, atol=2.0 ** -24):
            return "g is the gradient divided by the scale: loss scaling multiplies by it (and unscaling divides)."
        lost = (got == 0) & (exact != 0) & (np.abs(unscaled) <= 2.0 ** -25)
        if lost.any():
            i = int(np.argmax(lost))
            return (f"g[{i}] is 0: its unscaled value, {unscaled[i]:.3g}, is below half of fp16's smallest subnormal "
                    "(2^-25) and rounds to zero before the scale can lift it. Compute in float32 and round to fp16 "
                    "once, at the end: float32 difference, divided by n, times scale, then store.")
        if len(exact) > 1 and np.allclose(got, (exact * len(exact)).astype(np.float16), rtol=2 * U16, atol=2.0 ** -24):
            return f"g is n = {len(exact)} times too large: the loss is a mean, its gradient is divided by n."
        if np.isnan(got).any() or np.isinf(got).any():
            return (f"g holds inf or NaN: the scale, {scale:g}, is past fp16's largest value (65504) when it is an "
                    "fp16 itself; keep it and the arithmetic in float32, and round to fp16 once, at the end.")
    return "each g[i] is float16(scale * (out[i] - y[i]) / n), computed in float32 and rounded once."


def check_scaled_gradient(kernel, *, seed: int = 0, name: str | None = None, quiet: bool = False) -> None:
    """``kernel[ceil(n / threads), threads](g, out, y, scale)``: ``g`` (float16) is ``scale * (out - y) / n``, the
    scaled gradient of the loss ``sum((out - y)**2) / (2 n)``, with ``out`` and ``y`` float32 of ``n`` and
    ``scale`` a float32 power of two; computed in float32 and rounded to fp16 once (within half an fp16 step, and
    fp32's rounding), with no float64 in the PTX.

    The differences range from 1e-7 to 1, so that many unscaled gradients lie below fp16's range.
    """
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    rng = np.random.default_rng(seed)
    for n, scale, threads in SCALED_GRADIENT_CASES:
        out = rng.standard_normal(n).astype(np.float32)
        y = (out - rng.choice([-1, 1], n) * 10.0 ** rng.uniform(-7, 0, n)).astype(np.float32)
        scale32 = np.float32(scale)
        grid = math.ceil(n / threads)
        described = f"grid={grid}, block={threads}, n={n}, scale 2^{int(math.log2(scale))}"
        g, after = _launch(kernel, name, described, grid, threads, (n,), np.float16, [out, y, scale32], "g")
        _unchanged(name, described, ["out", "y"], [out, y], after[:2])
        unscaled = (out.astype(np.float64) - y) / n
        exact = unscaled * scale
        bound = np.maximum(U16 * np.abs(exact), 2.0 ** -25) * (1 + 2.0 ** -10)  # half a step, and fp32's rounding
        try:
            _compare_within(name, described, "g", g, exact, bound, np.float16)
        except CheckFailed as failed:
            raise CheckFailed(f"{failed}\n  {_scaled_gradient_hint(g, exact, unscaled, scale)}") from None
        _float_budget(kernel, name, [g, out, y, scale32], [64],
                      _NO_FLOAT64 + " So does a float32 divided by an int, such as n: divide by float32(n).")
    report(name, len(SCALED_GRADIENT_CASES), quiet)


# ---------------------------------------------------------------- exercise 4: dynamic loss scaling


def _unscale_cases(rng, size: int, scales: Sequence[float], special: Sequence[str]):
    """(scale, fp16 gradients, what was planted) of each launch: random gradients at each scale, with ``special``
    ones planted; then, for "infinities" and "nan", each value alone in the gradients (a flag that misses -inf
    must not pass because +inf came along)."""
    for scale in scales:
        plain = lambda: (rng.standard_normal(size) * scale * 1e-3).astype(np.float16)  # noqa: E731
        if not special:
            yield scale, plain(), ""
            continue
        yield scale, _special(rng, size, np.float16, special, spot=0.05), ", ".join(special)
        alone = [v for kind, values in (("infinities", (-np.inf, np.inf)), ("nan", (np.nan,))) if kind in special
                 for v in values]
        for value in alone:
            grads = plain()
            grads[rng.integers(size)] = value
            yield scale, grads, f"one {value:+} among them, the others finite".replace("+nan", "NaN")


def _flag_written_hint(message: str) -> str:
    """``message``, where it reports a race on ``found_inf[0]`` (a plain write beside another write or an update),
    with the exercise's fix in place of the simulator's general advice (barriers, which cannot order threads of
    different blocks, or one thread writing)."""
    race = re.search(r"(data race on `found_inf\[0\]`: .*?(?:wrote it|atomically it|write it in the same "
                     r"instruction))(?:, and |\. ).*$", message, re.MULTILINE)
    if race is None:
        return message
    fix = ("found_inf[0] is 0 before the launch (the host zeroes it once per step) and several threads may find an "
           "inf or a NaN: the kernel never writes it with `=`, to set it or to reset it; each such thread raises it "
           "with cuda.atomic.max(found_inf, 0, 1)")
    return message.replace(race.group(0), f"{race.group(1)}: {fix}")


def check_unscale(kernel, sizes: Iterable[int], *, threads: int = 128, scales: Sequence[float] = (1024.0,),
                  special: Sequence[str] = (), seed: int = 0, name: str | None = None, quiet: bool = False) -> None:
    """``kernel[ceil(n / threads), threads](out, found_inf, grads, inv_scale)``: ``out`` (float32) is
    ``grads`` (float16) times ``inv_scale`` (float32, a power of two: exact), and ``found_inf[0]`` (int32, 0
    before the launch) becomes 1 when any product is inf or NaN."""
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    rng = np.random.default_rng(seed)
    count = 0
    for size in sizes:
        for scale, grads, planted in _unscale_cases(rng, size, scales, special):
            inv_scale = np.float32(1 / scale)
            grid = math.ceil(size / threads)
            described = f"grid={grid}, block={threads}, {size} gradients, loss scale {scale:g}" + \
                        (f" ({planted})" if planted else "")
            try:
                out, (found, after, _) = _launch(kernel, name, described, grid, threads, (size,), np.float32,
                                                 [np.zeros(1, np.int32), grads, inv_scale])
            except CheckFailed as failed:
                raise CheckFailed(_flag_written_hint(str(failed))) from None
            _unchanged(name, described, ["grads"], [grads], [after])
            expected = grads.astype(np.float32) * inv_scale
            with np.errstate(over="ignore", under="ignore", invalid="ignore"):
                in_fp16 = grads * np.float16(inv_scale)
            _compare_exact(name, described, "out", out, expected, np.float32, [
                (in_fp16, "out holds the product computed in float16 (grads[i] * inv_scale on an fp16 value: the "
                          "small gradients underflow to 0 or lose their bits); widen first: float32(grads[i]) * "
                          "inv_scale")])
            should = int(not np.isfinite(expected).all())
            if int(found[0]) != should:
                raise CheckFailed(f"{name} with {described}: found_inf[0] should be {should}, got {int(found[0])}"
                                  + (" (the gradients hold an inf or a NaN)" if should else " (all are finite)")
                                  + (": it is a flag, not a count (cuda.atomic.max, not atomic.add)" if found[0] > 1
                                     else ""))
            _float_budget(kernel, name, [out, found, grads, inv_scale], [64], _NO_FLOAT64)
            count += 1
    report(name, count, quiet)


def _loss_scale_reference(scale: float, good_steps: int, found_inf: bool, interval: int) -> tuple:
    """``(scale, good_steps, skip)`` after a step: halved and skipped on an inf or NaN, doubled after ``interval``
    good steps in a row."""
    if found_inf:
        return scale / 2, 0, True
    return (scale * 2, 0, False) if good_steps + 1 == interval else (scale, good_steps + 1, False)


def check_loss_scale_update(function: Callable, runs: Iterable[tuple[float, Sequence[bool]]], *, interval: int,
                            name: str | None = None, quiet: bool = False,
                            interval_name: str = "GROWTH_INTERVAL") -> None:
    """``function(scale, good_steps, found_inf) -> (scale, good_steps, skip)`` along each run of steps.

    Each run is ``(initial scale, found_inf of each step)``, from 0 good steps: on an inf or NaN the step is
    skipped, the scale halved and the count reset; otherwise the count grows, and after ``interval`` good
    steps in a row the scale doubles and the count restarts. A ``function`` that reads a global ``interval_name``
    equal to ``interval`` also runs once with that global changed for a moment: its value written in place of the
    name fails.
    """
    __tracebackhide__ = True
    name = name or getattr(function, "__name__", "function")
    count = 0
    for initial, flags in runs:
        scale, good = initial, 0
        for step, found in enumerate(flags):
            expected = _loss_scale_reference(scale, good, found, interval)
            got = core.call_function(function, name, (scale, good, found))
            if isinstance(got, (list, np.ndarray)) and len(got) == 3 and tuple(got) == expected:
                raise CheckFailed(f"{name}({scale!r}, {good!r}, {found!r}) returned the right values as a "
                                  f"{type(got).__name__}: return a tuple, (scale, good_steps, skip)")
            if not isinstance(got, tuple) or len(got) != 3 or tuple(got) != expected:
                history = "".join("x" if f else "." for f in flags[:step + 1])
                raise CheckFailed(f"{name}({scale!r}, {good!r}, {found!r}) should return {expected!r}, got {got!r}\n"
                                  f"  at step {step} of a run from scale {initial:g} (steps so far, x = inf/NaN found: "
                                  f"{history})")
            scale, good = expected[0], expected[1]
            count += 1
    _interval_not_hard_coded(function, name, interval, interval_name)
    report(name, count, quiet, unit="step")


def _defaulting_to(function: Callable, constant: str) -> list[str]:
    """The parameters of ``function`` whose default is written as the name ``constant`` (they read it, once, when
    the function is defined), from its source; none where the source is not to be had."""
    try:
        tree = ast.parse(textwrap.dedent(inspect.getsource(function)))
    except (OSError, TypeError, SyntaxError):
        return []
    definition = next((n for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.Lambda))), None)
    if definition is None:
        return []
    arguments = definition.args
    positional = arguments.posonlyargs + arguments.args
    pairs = list(zip(positional[len(positional) - len(arguments.defaults):], arguments.defaults)) + [
        (a, d) for a, d in zip(arguments.kwonlyargs, arguments.kw_defaults) if d is not None]
    return [a.arg for a, d in pairs if isinstance(d, ast.Name) and d.id == constant]


def _interval_not_hard_coded(function: Callable, name: str, interval: int, interval_name: str) -> None:
    """When ``function`` reads the notebook's ``interval_name`` (a global equal to ``interval``), run it again with
    that global set to another value for a moment: a function that still doubles after ``interval`` good steps wrote
    the number where the exercise names the constant."""
    names = getattr(function, "__globals__", None)
    if not isinstance(names, dict) or names.get(interval_name) != interval:
        return
    other = interval + 3
    given = {name: other for name in _defaulting_to(function, interval_name)}  # ``interval=GROWTH_INTERVAL``
    scale, good = 1024.0, 0
    names[interval_name] = other
    try:
        for _ in range(other + 1):
            expected = _loss_scale_reference(scale, good, False, other)
            got = core.call_function(lambda *args: function(*args, **given), name, (scale, good, False))
            if not isinstance(got, tuple) or len(got) != 3 or tuple(got) != expected:
                raise CheckFailed(f"{name} is right with {interval_name} = {interval}, but with {interval_name} = "
                                  f"{other} it returned {got!r} for ({scale!r}, {good!r}, False), not {expected!r}: "
                                  f"read {interval_name} in the function rather than writing its value {interval}")
            scale, good = expected[0], expected[1]
    finally:
        names[interval_name] = interval


# ---------------------------------------------------------------- exercise 5: fp32 master weights


def check_master_sgd(kernel, sizes: Iterable[int], *, threads: int = 128, lr: float = 1e-3,
                     special: Sequence[str] = (), grads_dtype=np.float16, seed: int = 0, name: str | None = None,
                     quiet: bool = False) -> None:
    """``kernel[ceil(n / threads), threads](weights, master, grads, lr)``: ``master`` (float32, updated in place)
    becomes ``master - lr * grads`` (within one float32 rounding: a GPU may fuse the multiply-add) and
    ``weights`` (float16) the fp16 rounding of the new master. ``grads`` are float16, or float32 (``grads_dtype``:
    the unscaled gradients of a loss-scaled step, which fp16 would round).

    ``special``: "small updates" (below half an fp16 ulp of the weight: only the master sees them),
    "denormals" (gradients), "large" (masters near fp16's largest value: some weights overflow to inf).
    """
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    rng = np.random.default_rng(seed)
    count = 0
    for size in sizes:
        master = (rng.standard_normal(size) * rng.uniform(0.5, 4)).astype(np.float32)
        grads = rng.standard_normal(size).astype(grads_dtype)
        if "small updates" in special:
            master = (np.abs(master) + 16).astype(np.float32)  # fp16 ulp 2**-6 there; lr * |g| far smaller
        if "denormals" in special:
            grads[::3] = (rng.uniform(-1, 1, len(grads[::3])) * 2.0 ** -16).astype(grads_dtype)
        if "large" in special:
            master[::4] = rng.uniform(65400, 65600, len(master[::4])).astype(np.float32)
        lr32 = np.float32(lr)
        grid = math.ceil(size / threads)
        described = f"grid={grid}, block={threads}, {size} weights, {np.dtype(grads_dtype).name} gradients, lr {lr:g}" + \
                    (f" ({', '.join(special)})" if special else "")
        weights, (new_master, after, _) = _launch(kernel, name, described, grid, threads, (size,), np.float16,
                                                  [master, grads, lr32], "weights")
        _unchanged(name, described, ["grads"], [grads], [after])
        exact = master.astype(np.float64) - float(lr32) * grads.astype(np.float64)
        step = np.abs(float(lr32) * grads.astype(np.float64))
        bound = (np.abs(exact) + step) * U32 * 1.001  # two roundings at most: the product and the difference
        if np.isnan(new_master).any() and not np.isnan(exact).any():
            raise CheckFailed(f"{name} gave a wrong result with {described}: master holds NaN where the update has "
                              "none. `weights` is an output only: the check fills it with NaN before the launch, so "
                              "read the master, update it, then store its fp16 rounding in weights.")
        _compare_within(name, described, "master", new_master, exact, bound, np.float32,
                        "is the update computed in float32 on the float32 master, from the gradient as it is "
                        "(float32(grads[i]), never rounded to fp16)?")
        with np.errstate(over="ignore"):
            rounded, rounded_before = new_master.astype(np.float16), master.astype(np.float16)
        if np.isnan(weights).any() and not np.isnan(rounded).any():
            raise CheckFailed(f"{name} gave a wrong result with {described}: master is right, but weights holds NaN "
                              "where its fp16 rounding has none. `weights` is an output only (the check fills it "
                              "with NaN before the launch): store float16(master[i]) in it, reading nothing from it.")
        _compare_exact(name, described, "weights", weights, rounded, np.float16, [
            (rounded_before, "weights holds the fp16 rounding of the master before the update: store float16 of "
                             "the updated master")])
        _float_budget(kernel, name, [weights, new_master, grads, lr32], [64], _NO_FLOAT64)
        count += 1
    report(name, count, quiet)


# ---------------------------------------------------------------- exercise 6: one mixed-precision training step


FLAG_BYTES = 4  # found_inf: one int32, the only copy a training step makes each way


def _step_gradients(rng, size: int, scale: float, overflow: bool) -> np.ndarray:
    """fp16 gradients of a loss scaled by ``scale``: unscaled values of order 1 down to 2**-20 (tiny ones only
    float32 keeps), and on an ``overflow`` step a few infinities and a NaN."""
    unscaled = rng.standard_normal(size) * np.exp2(rng.integers(-20, 1, size))
    grads = np.clip(unscaled * scale, -65504, 65504).astype(np.float16)
    if overflow:
        spots = rng.choice(size, min(size, 3), replace=False)
        grads[spots] = np.array([np.inf, -np.inf, np.nan][:len(spots)], np.float16)
    return grads


def _step_return_hint(got, expected: tuple, found: bool) -> str:
    """Why a training step returned ``got`` instead of ``expected`` (this step's gradients overflowed: ``found``)."""
    if got is None:
        return "return what loss_scale_update returns"
    if isinstance(got, (list, np.ndarray)) and len(got) == 3 and tuple(got) == expected:
        return "the right values, but return a tuple, as loss_scale_update does"
    if isinstance(got, tuple) and len(got) == 3 and got[2] and not found:
        return ("skipped, though every gradient is finite: the flag must be 0 at the start of every step (a new one), "
                "and loss_scale_update needs its value, bool(found.copy_to_host()[0]), not the device array, which "
                "is always true")
    if isinstance(got, tuple) and len(got) == 3 and not got[2] and found:
        return "not skipped, though a gradient is inf or NaN: read the flag after unscale_kernel's launch"
    return "loss_scale_update(scale, good_steps, found_inf) decides: its arguments in that order, its result returned"


def check_training_step(function: Callable, sizes: Iterable[int], *, interval: int, overflows: str = "..x.....x..",
                        scale: float = 2.0 ** 10, lr: float = 0.05, seed: int = 0, name: str | None = None,
                        quiet: bool = False) -> None:
    """``function(weights, master, scaled_grads, lr, scale, good_steps) -> (scale, good_steps, skipped)``, one
    step of mixed-precision SGD on device arrays, along a run of steps (``overflows``: x where the gradients
    hold an inf or a NaN).

    Each step must return what the loss-scale update says (``interval`` good steps double the scale), leave
    ``master`` (float32) and ``weights`` (float16) untouched when it skips, and else update the master by
    ``lr`` times the unscaled gradients (within the roundings of the product and the difference) and set the
    weights to its fp16 rounding. On the CPU simulator the step's copies are counted too: the flag back to the
    host, nothing else.
    """
    __tracebackhide__ = True
    from ..run import BACKEND  # noqa: PLC0415

    name = name or getattr(function, "__name__", "function")
    rng = np.random.default_rng(seed)
    lr32, count = np.float32(lr), 0
    for size in sizes:
        master = rng.standard_normal(size) * 4
        master[::5] *= 2.0 ** -12  # small weights, where the tiny gradients that fp16 would lose still count
        master = master.astype(np.float32)
        weights = master.astype(np.float16)
        d_master, d_weights = cuda.to_device(master), cuda.to_device(weights)
        current, good = scale, 0
        for step, mark in enumerate(overflows):
            found = mark == "x"
            grads = _step_gradients(rng, size, current, found)
            d_grads = cuda.to_device(grads)
            described = (f"step {step} of a run of {len(overflows)} ({overflows}: x = the gradients hold an inf or a "
                         f"NaN), {size} weights, loss scale {current:g}, {good} good steps before it")
            args = (d_weights, d_master, d_grads, lr32, current, good)
            launches = []  # on the CPU simulator: what the step launched, each with its argument types
            if BACKEND.on_gpu:
                got = core.call_function(function, name, args, described)
            else:
                from ..run import counting_copies, recording_launches  # noqa: PLC0415

                with counting_copies() as copies, recording_launches() as launches:
                    got = core.call_function(function, name, args, described)
                if copies.bytes_to_device > FLAG_BYTES or copies.bytes_to_host > FLAG_BYTES:
                    raise CheckFailed(
                        f"{name} copied {copies.bytes_to_device} bytes to the device and {copies.bytes_to_host} to "
                        f"the host at {described}; a step copies one thing: the flag ({FLAG_BYTES} bytes), in at 0 "
                        "(cuda.to_device(np.zeros(1, np.int32))) and back, once. A new array for the unscaled "
                        "gradients is cuda.device_array(n, np.float32), which copies nothing; the other arrays are "
                        "device arrays already: launch on them (a NumPy array passed to a launch is copied in and "
                        "back), and decide on the host from the flag alone, not from the gradients.")
            expected = _loss_scale_reference(current, good, found, interval)
            if not isinstance(got, tuple) or len(got) != 3 or tuple(got) != expected:
                raise CheckFailed(f"{name} should return {expected!r} (scale, good_steps, skipped) at {described}, "
                                  f"got {got!r}: {_step_return_hint(got, expected, found)}")
            new_master, new_weights = d_master.copy_to_host(), d_weights.copy_to_host()
            if found:
                for label, old, new in (("master", master, new_master), ("weights", weights, new_weights)):
                    if not np.array_equal(old.view(np.uint8), new.view(np.uint8)):
                        raise CheckFailed(f"{name} changed `{label}` at {described}: a skipped step updates "
                                          "nothing (the gradients hold an inf or a NaN, which would spread into "
                                          "every weight it touches)")
            else:
                unscaled = grads.astype(np.float64) / current  # exact: a power of two
                exact = master.astype(np.float64) - float(lr32) * unscaled
                bound = (np.abs(exact) + np.abs(float(lr32) * unscaled)) * U32 * 1.001
                _compare_within(name, described, "master", new_master, exact, bound, np.float32,
                                "is the master updated by lr times the gradients divided by the scale, kept in "
                                "float32 (not rounded to fp16 on the way)? If Exercise 4 or 5 fails its own "
                                "check, fix that first: this step runs them")
                _compare_exact(name, described, "weights", new_weights, new_master.astype(np.float16), np.float16)
            _launched_in_float32(name, launches, described)
            master, weights = new_master, new_weights
            current, good = expected[0], expected[1]
            count += 1
    report(name, count, quiet, unit="step")
    if BACKEND.on_gpu and not quiet:
        print("  (on a GPU the copies are not counted: the CPU simulator counts them)")


def _launched_in_float32(name: str, launches: list, described: str) -> None:
    """A host function's launches (`run.recording_launches`) compiled without float64 arithmetic: a Python float
    passed for a float32 parameter (``1 / scale``) makes the kernel compute in float64 for that launch."""
    for py_func, argtypes in launches:
        found = ptx.float_operations(py_func, 64, argtypes)
        if not found:
            continue
        parameters = list(inspect.signature(py_func).parameters)
        doubles = [f"`{parameter}`" for parameter, kind in zip(parameters, argtypes) if kind == numba_types.float64]
        listed = operations_listed(found)
        why = (f"it passes {' and '.join(doubles)} a Python float, which is a float64, so the kernel computes in "
               f"float64 for that launch ({listed} in its PTX; slow on a GPU): pass a float32 there, "
               "np.float32(1 / scale) for a scale's inverse"
               if doubles else f"that launch computes in float64 ({listed} in its PTX): {_NO_FLOAT64}")
        raise CheckFailed(f"{name} is correct but over its budget: it launches `{py_func.__name__}` with float64 "
                          f"arithmetic: {why}\n  (at {described})")


# ---------------------------------------------------------------- exercise 8: softmax of fp16 rows, in fp32


def check_softmax_fp16(kernel, shapes: Iterable[tuple[int, int]], *, special: Sequence[str] = (), seed: int = 0,
                       name: str | None = None, quiet: bool = False) -> None:
    """``kernel[rows, 32](out, x)``: ``out[r] = softmax(x[r])``, ``x`` and ``out`` (rows, n) float16, one warp per row.

    Within half an fp16 ulp plus ``(n + 16) * 2**-23`` of each float64 value (fp32 exponentials and an fp32 sum of
    ``n`` terms; an fp16 sum is far outside); no float64 in the PTX. ``special``: "large" (rows whose values reach
    tens of thousands: ``exp`` overflows fp32 unless the row's maximum is subtracted first), "masked" (entries of
    -inf, which contribute 0).
    """
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    rng = np.random.default_rng(seed)
    count = 0
    for rows, n in shapes:
        x = rng.standard_normal((rows, n)) * rng.uniform(1, 4)
        if "large" in special:
            x[::2] = x[::2] * 100 + rng.uniform(-50000, 50000, (x[::2].shape[0], 1))
        x = x.astype(np.float16)
        if "masked" in special:
            x[rng.random((rows, n)) < 0.3] = -np.inf
            x[:, rng.integers(n)] = rng.standard_normal(rows)  # every row keeps a finite entry
        described = f"grid={rows}, block=32, x {x.shape} ({', '.join(special) or 'normal values'})"
        out, after = _launch(kernel, name, described, rows, 32, (rows, n), np.float16, [x])
        _unchanged(name, described, ["x"], [x], after)
        x64 = x.astype(np.float64)
        e = np.exp(x64 - x64.max(axis=1, keepdims=True))
        exact = e / e.sum(axis=1, keepdims=True)
        bound = 0.5 * ulp(exact, "fp16") + (n + 16) * 2.0 ** -23 * exact
        _compare_within(name, described, "out", out, exact, bound, np.float16,
                        "is the row's maximum subtracted first, are the exponentials and their sum float32, and "
                        "does every lane get the row's maximum and sum (shfl_xor_sync; shfl_down_sync leaves them in "
                        "lane 0 only)?")
        _float_budget(kernel, name, [out, x], [64], "write float32(0) and float32(-inf) (math.inf is a float64).")
        _lanes_share_the_row(kernel, name, described, x)
        count += 1
    report(name, count, quiet)


def _lanes_share_the_row(kernel, name: str, described: str, x: np.ndarray) -> None:
    """One warp per row, its lanes sharing the columns: each thread reads ``x`` at most 3 times per 32 columns
    (the max, the sum and the write pass), in a traced launch; a warp whose lane 0 does the row alone is over."""
    budget = reads_per_thread("x", 3 * math.ceil(x.shape[1] / 32),
                              why="one warp per row, lane t reading the columns t, t + 32, ... in each of the three "
                                  "passes (max, sum, write), the warp combining them with shfl_xor_sync")
    _, recorded = core.run_checked(kernel, name, described, x.shape[0], 32, x.shape, np.float16, [x], ["out", "x"],
                                   [budget])
    core.check_budgets(name, described, [budget], recorded, ["out", "x"])


# ---------------------------------------------------------------- tensor cores: lecture 6's puzzle, exercise 7


@contextmanager
def _counting_mma(calls: list):
    """Launches on the course simulator, traced (the trace is yielded), each call of `mma_m16n8k8` appending the
    number of warps it serves to ``calls``."""

    def counting(a, b, c):
        calls.append(a.shape[0])
        return emulate_mma_m16n8k8(a, b, c)

    mma_m16n8k8.__warp_emulation__ = counting
    try:
        with simulated(), trace() as recorded:
            yield recorded
    finally:
        mma_m16n8k8.__warp_emulation__ = emulate_mma_m16n8k8


def check_mma_nt(kernel, trials: int = 3, *, seed: int = 0, name: str | None = None, quiet: bool = False) -> None:
    """``kernel[1, 32](D, A, Bt)``: one warp computes ``D = A @ Bt.T``, A (16, 8) and Bt (16, 8) float16 (B stored
    N x K, as attention's K in ``Q @ K.T``), D (16, 16) float32, with two `mma_m16n8k8` (D's columns 0-7, then
    8-15, each from ``C = 0``): within `mma_error_bound` of the float64 product, two calls on the course simulator.
    """
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    rng = np.random.default_rng(seed)
    for trial in range(trials):
        A, Bt = _special(rng, (16, 8), np.float16, ()), _special(rng, (16, 8), np.float16, ())
        described = f"grid=1, block=32, A (16, 8), Bt (16, 8), random draw {trial + 1} of {trials}"
        calls = []
        with _counting_mma(calls):
            D, after = _launch(kernel, name, described, 1, 32, (16, 16), np.float32, [A, Bt], "D")
        _unchanged(name, described, ["A", "Bt"], [A, Bt], after)
        A64, B64 = A.astype(np.float64), Bt.astype(np.float64).T
        _compare_within(name, described, "D", D, A64 @ B64, mma_error_bound(8, np.abs(A64) @ np.abs(B64)),
                        np.float32, "B[k, n] is Bt[n, k]; in the right half n = 8 + group")
        if len(calls) != 2:
            raise CheckFailed(f"{name} is correct with {described}, but it calls mma_m16n8k8 {len(calls)} times, "
                              "not 2: one per 16 x 8 half of D, on the tensor cores")
    report(name, trials, quiet)


# ---------------------------------------------------------------- exercise 7: a tensor-core tile GEMM


def check_mma_gemm(kernel, shapes: Iterable[tuple[int, int, int]], *, warps: int = 4, special: Sequence[str] = (),
                   shared_a: bool = False, seed: int = 0, name: str | None = None, quiet: bool = False) -> None:
    """``kernel[grid, (32, warps)](C, A, B)``: ``C = A @ B`` (A, B float16, C float32), each warp one 16 x 8
    tile of C with `mma_m16n8k8`: ``grid = (ceil(N / (8 * warps)), ceil(M / 16))``.

    Within `mma_error_bound` of the float64 product (a tensor core's truncated fp32 sums, or the model's),
    and, run on the course simulator, with ``ceil(K / 8)`` calls of `mma_m16n8k8` per warp (a warp whose tile lies
    wholly past N may make none).
    ``special``: "denormals" (products far below fp16's range), "large" (products above it).
    ``shared_a``: a budget, each element of A read from global memory once per block that needs it (the block's
    warps share its 16 rows of A through shared memory), ``grid[0]`` times in all, and each thread reading its share
    of each step's 128 (``ceil(128 / (32 warps))``).
    """
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    rng = np.random.default_rng(seed)
    count = 0
    for M, K, N in shapes:
        A, B = _special(rng, (M, K), np.float16, special), _special(rng, (K, N), np.float16, special)
        grid = (math.ceil(N / (8 * warps)), math.ceil(M / 16))
        described = f"grid={grid}, block=(32, {warps}), {_sizes_described(A=A, B=B)}"
        calls = []
        with _counting_mma(calls) as recorded:
            C, after = _launch(kernel, name, described, grid, (32, warps), (M, N), np.float32, [A, B], "C")
        _unchanged(name, described, ["A", "B"], [A, B], after)
        A64, B64 = A.astype(np.float64), B.astype(np.float64)
        _compare_within(name, described, "C", C, A64 @ B64, mma_error_bound(K, np.abs(A64) @ np.abs(B64)), np.float32,
                        "check the fragments' layout (a B fragment is (B[p, g], B[p + 1, g])), that the loop over K "
                        "covers its last partial step, and that products and sums are fp32 (the tensor cores' fp16 x "
                        "fp16 + fp32)")
        steps, launched = math.ceil(K / 8), grid[0] * grid[1] * warps
        needed = grid[1] * math.ceil(N / 8)  # warps with a tile that overlaps C; the others may return at once
        if sum(calls) % steps or not needed * steps <= sum(calls) <= launched * steps:
            raise CheckFailed(f"{name} is correct with {described}, but its warps call mma_m16n8k8 {sum(calls)} "
                              f"times in all, not {needed * steps}: once per step of 8 along K ({steps}) in every "
                              f"warp whose 16 x 8 tile overlaps C ({needed} of the {launched} warps; a warp whose "
                              "tile lies wholly past N may skip them all)")
        reads = recorded.last.reads_per_element("A").max()
        if shared_a and reads > grid[0]:
            raise CheckFailed(f"{name} is correct but over its budget with {described}: an element of A is read "
                              f"{reads} times from global memory, not at most {grid[0]} (once per block of the "
                              f"{grid[0]} along N): the block's {warps} warps must share its A tile through shared "
                              "memory, copied once per step")
        share = steps * math.ceil(16 * 8 / (32 * warps))  # each thread's share of the copies of the A slice
        most = int(recorded.last.reads_per_thread("A").max()) if shared_a else 0
        if most > share:
            raise CheckFailed(f"{name} is correct but over its budget with {described}: one thread reads {most} "
                              f"elements of A, not at most {share} ({math.ceil(128 / (32 * warps))} per step of 8 "
                              f"along K): the block's {32 * warps} threads share the copy of the 16 x 8 slice, thread "
                              "e = threadIdx.y * 32 + threadIdx.x copying the elements e, e + 32 * WARPS, ... of "
                              "its 128 (a few threads copying it alone make the others wait at the barrier)")
        count += 1
    report(name, count, quiet)


__all__ = ["bit_fields", "bfloat16_reference", "bfloat16_inputs", "check_dot_rows", "check_linear_fp16",
           "check_kahan_rows", "check_to_bfloat16", "check_unscale", "check_loss_scale_update", "check_master_sgd",
           "check_mma_gemm", "check_mma_nt", "check_softmax_fp16"]
