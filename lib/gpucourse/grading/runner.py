"""The runner behind module 2's and 3's checks: launches with their expected output, and float tolerances.

A check builds `Launch`es (configuration, arguments, the float64 reference, and for a sum the
scale of its terms) and hands them to `check_launches`, which runs each on copies, compares
within the dtype's rounding, reports the first wrong index and applies the budgets.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

import numpy as np

from ..kernels import Tensor
from .core import (TOLERANCES, CheckFailed, budget_list, check_budgets, explain_mismatch, kernel_name,
                   parameter_names, random_array, report, run_checked, spec_output)

# Relative tolerance of a sum of many terms, times the sum of their absolute values:
# float32 sums taken in another order (a tree, a scan) round differently, by about
# log2(n) * 6e-8 of that size; 1e-5 leaves room for sequential loops of a few thousand terms.
REDUCTION_RTOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-13}

VALUES = ("mixed", "negative", "masked")


def random_values(rng: np.random.Generator, shape, dtype, values: str = "mixed") -> np.ndarray:
    """Random, distinct-looking values: ``mixed`` signs (as `check_kernel`), all ``negative``, or ``masked``:
    negative, with the first row of a matrix (and its last, from 3 rows) all -inf, as a fully masked row of
    attention scores (floats only)."""
    if values not in VALUES:
        raise ValueError(f"values must be one of {VALUES}, not {values!r}")
    if values == "mixed":
        return random_array(rng, tuple(shape), dtype)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        drawn = rng.uniform(-10, -0.5, size=shape).astype(dtype)
        if values == "masked" and drawn.ndim == 2:
            drawn[[0, -1] if len(drawn) >= 3 else [0]] = -np.inf
        return drawn
    if values == "masked":
        raise TypeError(f"random_values: masked rows hold -inf, which {dtype} has not")
    if dtype.kind == "i":
        return rng.integers(-1000, 0, size=shape).astype(dtype)
    raise TypeError(f"random_values: no negative values of dtype {dtype}")


def filled(view: Tensor, rng, dtype, values: str) -> Tensor:
    """``view``'s layout over new storage of random values."""
    storage = random_values(rng, (view.storage.size,), dtype, values)
    return Tensor(storage, tuple(view.shape), tuple(view.strides), view.offset)


def layout(name: str, t: Tensor) -> str:
    offset = f", offset {t.offset}" if t.offset else ""
    return f"{name} of shape {t.shape} with strides {t.strides}{offset}"


@dataclass
class Launch:
    """One launch of a check: configuration, arguments after ``out``, and what ``out`` should hold."""

    grid: tuple[int, ...]
    block: tuple[int, ...]
    what: str  # the arguments in words
    arguments: list  # host arrays and scalars, in the kernel's order after `out`
    expected: np.ndarray
    scale: np.ndarray | None = None  # per element: the size of a sum's terms (reductions), else None
    per_thread: int = 1  # `Case.per_thread` of the plan behind it

    def describe(self) -> str:
        return f"grid={self.grid}, block={self.block}, {self.what}"


def expected_of(spec, dtype, *arguments, shape=None, expects: str = "") -> np.ndarray:
    """``spec`` computed in float64 for float dtypes (a reference without rounding of its own); of ``shape`` when
    given (`spec_output`)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        arguments = [a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in arguments]
    return spec_output(spec, arguments, shape, expects)


def tolerance_of(launch: Launch, dtype) -> np.ndarray | None:
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        return None
    if launch.scale is None:
        rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-6))
        finite = launch.expected[np.isfinite(launch.expected)]  # an inf or NaN would make every tolerance infinite
        scale = max(1.0, float(np.max(np.abs(finite), initial=0.0)))
        return atol * scale + rtol * np.abs(launch.expected)
    rtol = REDUCTION_RTOL.get(dtype, 1e-5)
    return rtol * np.abs(launch.scale) + TOLERANCES.get(dtype, (1e-5, 1e-6))[1]


def wrong_indices(got: np.ndarray, expected: np.ndarray, tolerance) -> np.ndarray:
    if tolerance is None:
        return np.argwhere(got != expected)
    with np.errstate(invalid="ignore"):  # an infinite answer is matched exactly (no tolerance reaches it); a NaN
        # answer never matches: NaN is the poison of an element never written (as in `check_kernel`)
        ok = (got == expected) | (np.isfinite(expected) & (np.abs(got.astype(np.float64) - expected) <= tolerance))
    return np.argwhere(~ok)


def check_launches(kernel, launches: Iterable[Launch], *, dtype, name, quiet, budget, hint=None) -> None:
    """Run each launch; the first wrong one fails, with ``hint(launch, got, first)`` added (``first``: the first
    wrong index) when given."""
    __tracebackhide__ = True
    dtype = np.dtype(dtype)
    name = name or kernel_name(kernel)
    parameters = parameter_names(kernel)
    labels = [parameters[0] if parameters else "out"] + [f"`{p}`" for p in parameters[1:]]
    budgets = budget_list(budget)
    count = 0
    for launch in launches:
        expected = launch.expected.astype(dtype)
        got, recorded = run_checked(kernel, name, launch.describe(), launch.grid, launch.block, expected.shape,
                                    dtype, launch.arguments, labels, budgets)
        tolerance = tolerance_of(launch, dtype)
        bad = wrong_indices(got, launch.expected if dtype.kind == "f" else expected, tolerance)
        if len(bad):
            message = explain_mismatch(name, launch, got, expected, bad, labels[0])
            first = tuple(bad[0])
            if launch.scale is not None and tolerance is not None and np.isfinite(launch.expected[first]):
                allowed = float(np.asarray(tolerance)[first])
                if abs(float(got[first]) - float(launch.expected[first])) <= 100 * allowed:  # a near miss
                    message += f"\n  (that is more than the rounding of {dtype} sums allows there: ±{allowed:.2g})"
            if hint:
                message += hint(launch, got, first)
            raise CheckFailed(message)
        check_budgets(name, launch.describe(), budgets, recorded, parameters, launch.per_thread)
        count += 1
    report(name, count, quiet, budgeted=bool(budgets))

