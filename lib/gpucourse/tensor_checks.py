"""Checks for module 2's kernels: strided tensors, axis reductions, block reductions and scans.

`gpucourse.checks.check_kernel` launches ``kernel(out, *inputs)`` on plain arrays.
The kernels of module 2 take more: a tensor's storage with its shape and
strides, an axis, and results that are sums of many elements, whose float32
rounding depends on the order of the additions. The checks here cover them and
still read like a sentence in a test cell::

    check_strided_map(contiguous_kernel, contiguous_spec, [tensor(4, 6).T, tensor(2, 3, 5).narrow(2, 1, 3)])
    check_broadcast_zip(sub_kernel, sub_spec, [(tensor(4, 6), tensor(6, 4).T), (tensor(3, 1), tensor(5))])
    check_axis_reduce(mean_axis_kernel, mean_spec, [(4, 5, 6)], axes=[0, 1, 2])
    check_reduction(dot_kernel, dot_spec, one_block_reduce([7, 1000], threads=[32, 128], inputs=2),
                    budget=reads_each_element_once("a", "b"))

``tensor(4, 6).T`` describes a layout: a check fills the storage behind it with
random values of its dtype. Like `check_kernel`, every check draws random,
non-uniform values, fills ``out`` with a poison value (with a canary after its
end that an unguarded write would change), launches, makes sure the inputs are
unchanged and compares with the NumPy spec, computed in float64 for float
dtypes. The first failure raises `CheckFailed` naming the launch and the
layouts, the first wrong index, the expected and the actual value.

``budget`` (one callable or a list) is called with the launch's trace once the
result is right, as in `check_kernel`; those launches run on the course
simulator, also on a GPU machine, so that a data race is caught there too.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from .checks import (TOLERANCES, Case, CheckFailed, _explain_mismatch, blocks_needed, budget_list, case,
                     check_budgets, kernel_name, parameter_names, random_array, report, run_checked)
from .simulator import BudgetExceeded
from .tensors import Tensor, broadcast_shape

# Relative tolerance of a sum of many terms, times the sum of their absolute values:
# float32 sums taken in another order (a tree, a scan) round differently, by about
# log2(n) * 6e-8 of that size; 1e-5 leaves room for sequential loops of a few thousand terms.
REDUCTION_RTOL = {np.dtype(np.float16): 1e-2, np.dtype(np.float32): 1e-5, np.dtype(np.float64): 1e-13}

VALUES = ("mixed", "negative")


# ---------------------------------------------------------------- layouts and values


def tensor(*shape: int) -> Tensor:
    """A contiguous tensor of ``shape``, as a template: a check fills its storage with random values.

    Views of it (``.T``, ``.permute(...)``, ``.narrow(...)``, ``.broadcast_to(...)``) describe the
    layouts a check tests, e.g. ``tensor(4, 6).T`` or ``tensor(3, 1).broadcast_to((2, 3, 5))``.
    """
    return Tensor.from_numpy(np.zeros(tuple(int(s) for s in shape), np.float32))


def random_values(rng: np.random.Generator, shape, dtype, values: str = "mixed") -> np.ndarray:
    """Random, distinct-looking values: ``mixed`` signs (as `check_kernel`) or all ``negative``."""
    if values not in VALUES:
        raise ValueError(f"values must be one of {VALUES}, not {values!r}")
    if values == "mixed":
        return random_array(rng, tuple(shape), dtype)
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(-10, -0.5, size=shape).astype(dtype)
    if dtype.kind == "i":
        return rng.integers(-1000, 0, size=shape).astype(dtype)
    raise TypeError(f"random_values: no negative values of dtype {dtype}")


def _filled(view: Tensor, rng, dtype, values: str) -> Tensor:
    """``view``'s layout over new storage of random values."""
    storage = random_values(rng, (view.storage.size,), dtype, values)
    return Tensor(storage, tuple(view.shape), tuple(view.strides), view.offset)


def _layout(name: str, t: Tensor) -> str:
    offset = f", offset {t.offset}" if t.offset else ""
    return f"{name} of shape {t.shape} with strides {t.strides}{offset}"


# ---------------------------------------------------------------- launch plans


def one_block_reduce(sizes: Iterable[int], threads: Iterable[int], inputs: int = 1) -> list[Case]:
    """One block of each ``threads`` count over 1-D inputs of each size; ``out`` has one element."""
    return [case(1, t, [(n,)] * inputs, out=(1,)) for n in sizes for t in threads]


def block_per_row(shapes: Iterable[tuple[int, int]], threads: Iterable[int]) -> list[Case]:
    """One block of each ``threads`` count per row of a ``(rows, cols)`` input; ``out`` has one element per row."""
    return [case(rows, t, [(rows, cols)], out=(rows,)) for rows, cols in shapes for t in threads]


# ---------------------------------------------------------------- budgets


def _per_thread_share(t, name: str) -> int:
    lanes = t.geometry.lanes
    return max(1, -(-t.array(name).size // lanes))


def reads_each_element_once(*names: str, evenly: bool = True):
    """A budget: every element of each array read exactly once from global memory.

    With ``evenly`` (the default), also no thread reads more than its share,
    ``ceil(size / threads in the launch)`` elements: the work is spread over the block.
    """
    def budget(t):
        for name in names:
            t.assert_reads_per_element(name, exactly=1)
            if evenly:
                share = _per_thread_share(t, name)
                try:
                    t.assert_reads_per_thread(name, at_most=share)
                except BudgetExceeded as exc:
                    raise BudgetExceeded(
                        f"{exc}: spread the work so that every thread reads about as many elements of "
                        f"`{name}` as the others ({t.array(name).size} elements over {t.geometry.lanes} threads)"
                    ) from None

    return budget


def writes_each_element_once(*names: str):
    """A budget: every element of each array written exactly once."""

    def budget(t):
        for name in names:
            t.assert_writes_per_element(name, exactly=1)

    return budget


# ---------------------------------------------------------------- the common runner


@dataclass
class _Launch:
    """One launch of a check: configuration, arguments after ``out``, and what ``out`` should hold."""

    grid: tuple[int, ...]
    block: tuple[int, ...]
    what: str  # the arguments in words
    arguments: list  # host arrays and scalars, in the kernel's order after `out`
    expected: np.ndarray
    scale: np.ndarray | None = None  # per element: the size of a sum's terms (reductions), else None

    def describe(self) -> str:
        return f"grid={self.grid}, block={self.block}, {self.what}"


def _expected(spec, dtype, *arguments) -> np.ndarray:
    """``spec`` computed in float64 for float dtypes (a reference without rounding of its own)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        arguments = [a.astype(np.float64) if isinstance(a, np.ndarray) else a for a in arguments]
    return np.asarray(spec(*arguments))


def _tolerance(launch: _Launch, dtype) -> np.ndarray | None:
    dtype = np.dtype(dtype)
    if dtype.kind != "f":
        return None
    if launch.scale is None:
        rtol, atol = TOLERANCES.get(dtype, (1e-5, 1e-6))
        scale = max(1.0, float(np.max(np.abs(launch.expected), initial=0.0)))
        return atol * scale + rtol * np.abs(launch.expected)
    rtol = REDUCTION_RTOL.get(dtype, 1e-5)
    return rtol * np.abs(launch.scale) + TOLERANCES.get(dtype, (1e-5, 1e-6))[1]


def _wrong(got: np.ndarray, expected: np.ndarray, tolerance) -> np.ndarray:
    if tolerance is None:
        return np.argwhere(got != expected)
    with np.errstate(invalid="ignore"):
        ok = (got == expected) | (np.abs(got.astype(np.float64) - expected) <= tolerance)
    return np.argwhere(~ok)


def _check_launches(kernel, launches: Iterable[_Launch], *, dtype, name, quiet, budget, hint=None) -> None:
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
        tolerance = _tolerance(launch, dtype)
        bad = _wrong(got, launch.expected if dtype.kind == "f" else expected, tolerance)
        if len(bad):
            message = _explain_mismatch(name, launch, got, expected, bad)
            first = tuple(bad[0])
            if launch.scale is not None and tolerance is not None:
                allowed = float(np.asarray(tolerance)[first])
                if abs(float(got[first]) - float(launch.expected[first])) <= 100 * allowed:  # a near miss
                    message += f"\n  (that is more than the rounding of {dtype} sums allows there: ±{allowed:.2g})"
            if hint:
                message += hint(got[first], expected[first])
            raise CheckFailed(message)
        check_budgets(name, launch.describe(), budgets, recorded, parameters)
        count += 1
    report(name, count, quiet)


# ---------------------------------------------------------------- the checks


def check_strided_map(
    kernel,
    spec: Callable[[np.ndarray], np.ndarray],
    views: Sequence[Tensor],
    *,
    threads: Iterable[int] = (32,),
    dtype=np.float32,
    seed: int = 0,
    name: str | None = None,
    quiet: bool = False,
    budget=None,
) -> None:
    """Check ``kernel[blocks, t](out, a, a_shape, a_strides)`` on strided views, for every view and ``t``.

    ``a`` is the view's storage from its first element, ``a_shape`` and ``a_strides`` tuples of
    ints (strides in elements), as `Tensor.kernel_arguments` gives them. ``out`` is a
    contiguous 1-D array with one element per element of the view, in row-major order:
    ``out == spec(view).reshape(-1)``, where ``spec`` gets the view as a NumPy array. One
    thread per element: ``blocks = ceil(size / t)``.
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    threads = list(threads)

    def launches():
        for view in views:
            a = _filled(view, rng, dtype, "mixed")
            expected = _expected(spec, dtype, a.numpy()).reshape(-1)
            storage, shape, strides = a.kernel_arguments()
            for t in threads:
                yield _Launch((blocks_needed(a.size, t),), (t,),
                              f"{_layout('a', a)} -> out ({expected.size},)",
                              [storage, shape, strides], expected)

    _check_launches(kernel, launches(), dtype=dtype, name=name, quiet=quiet, budget=budget)


def check_broadcast_zip(
    kernel,
    spec: Callable[[np.ndarray, np.ndarray], np.ndarray],
    pairs: Sequence[tuple[Tensor, Tensor]],
    *,
    threads: Iterable[int] = (32,),
    dtype=np.float32,
    seed: int = 0,
    name: str | None = None,
    quiet: bool = False,
    budget=None,
) -> None:
    """Check ``kernel[blocks, t](out, out_shape, a, a_shape, a_strides, b, b_shape, b_strides)``.

    For every pair of views ``(a, b)``: each is passed with its *own* shape and strides (not
    broadcast by the host), and the kernel broadcasts them with NumPy's rule. ``out`` is a
    contiguous 1-D array of the broadcast shape's size, in row-major order, with that shape as a
    tuple in ``out_shape``: ``out == spec(a, b).reshape(-1)``. One thread per element of ``out``.
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    threads = list(threads)

    def launches():
        for a_view, b_view in pairs:
            a, b = _filled(a_view, rng, dtype, "mixed"), _filled(b_view, rng, dtype, "mixed")
            out_shape = broadcast_shape(a.shape, b.shape)
            expected = _expected(spec, dtype, a.numpy(), b.numpy())
            if expected.shape != out_shape:
                raise ValueError(f"spec returned shape {expected.shape}, broadcasting gives {out_shape}")
            a_storage, a_shape, a_strides = a.kernel_arguments()
            b_storage, b_shape, b_strides = b.kernel_arguments()
            size = int(np.prod(out_shape, dtype=np.int64))
            for t in threads:
                yield _Launch((blocks_needed(size, t),), (t,),
                              f"{_layout('a', a)}, {_layout('b', b)} -> out of shape {out_shape}",
                              [tuple(out_shape), a_storage, a_shape, a_strides, b_storage, b_shape, b_strides],
                              expected.reshape(-1))

    _check_launches(kernel, launches(), dtype=dtype, name=name, quiet=quiet, budget=budget)


def check_axis_reduce(
    kernel,
    spec: Callable[[np.ndarray, int], np.ndarray],
    shapes: Iterable[tuple[int, int, int]],
    axes: Iterable[int] = (0, 1, 2),
    *,
    blocks: Iterable[tuple[int, int]] = ((8, 8),),
    dtype=np.float32,
    seed: int = 0,
    name: str | None = None,
    quiet: bool = False,
    budget=None,
) -> None:
    """Check ``kernel[grid, (bx, by)](out, a, axis)`` reducing a 3-D array along ``axis``.

    ``out`` is 2-D: ``a``'s shape without ``axis``, and ``out == spec(a, axis)``. One thread per
    element of ``out`` on a 2-D grid of 2-D blocks, x along ``out``'s columns, y along its rows.
    Float results may differ from the spec by the rounding of a sum (``spec`` of ``|a|`` sets the scale).
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    axes, blocks = list(axes), list(blocks)

    def launches():
        for shape in shapes:
            shape = tuple(int(s) for s in shape)
            if len(shape) != 3:
                raise ValueError(f"check_axis_reduce takes 3-D shapes, not {shape}")
            a = random_values(rng, shape, dtype)
            for axis in axes:
                expected = _expected(spec, dtype, a, axis)
                out_shape = shape[:axis] + shape[axis + 1:]
                if expected.shape != out_shape:
                    raise ValueError(f"spec returned shape {expected.shape}, reducing {shape} along "
                                     f"axis {axis} gives {out_shape}")
                scale = _expected(spec, dtype, np.abs(a), axis) if np.dtype(dtype).kind == "f" else None
                rows, cols = out_shape
                for bx, by in blocks:
                    yield _Launch((blocks_needed(cols, bx), blocks_needed(rows, by)), (bx, by),
                                  f"a of shape {shape}, axis={axis} -> out {out_shape}", [a, axis], expected, scale)

    _check_launches(kernel, launches(), dtype=dtype, name=name, quiet=quiet, budget=budget)


def _padding_hint(got, expected) -> str:
    if got == 0 and expected != 0:
        return (
            "\n  Every input value of this test is negative, so a 0 can only come from padding: threads (or "
            "shared memory slots) with no element must hold the identity of the operation, the value that "
            "changes nothing (for max: -inf, `float32(-math.inf)`), not 0."
        )
    return ""


def check_reduction(
    kernel,
    spec: Callable[..., np.ndarray],
    cases: Iterable[Case],
    *,
    values: str = "mixed",
    dtype=np.float32,
    seed: int = 0,
    name: str | None = None,
    quiet: bool = False,
    budget=None,
) -> None:
    """Check a reduction or scan ``kernel[grid, block](out, *inputs)`` against ``spec(*inputs)``.

    Cases as in `check_kernel` (`one_block_reduce`, `block_per_row`, `gpucourse.checks.one_block`).
    Each output is a sum (or max, ...) of many inputs, so a float result may differ from the
    spec by rounding: up to ``REDUCTION_RTOL`` times ``spec`` of the absolute values (for a dot
    product, the sum of ``|a[i] * b[i]|``; for a scan, the running sum of ``|a[i]|``).
    ``values="negative"`` draws only negative inputs, so a padding of 0 shows in a max.
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    float_dtype = np.dtype(dtype).kind == "f"

    def launches():
        for kase in cases:
            inputs = [random_values(rng, shape, dtype, values) for shape in kase.inputs]
            expected = _expected(spec, dtype, *inputs)
            if expected.shape != kase.out:
                raise ValueError(f"spec returned shape {expected.shape}, the case expects {kase.out}")
            scale = _expected(spec, dtype, *[np.abs(x) for x in inputs]) if float_dtype else None
            yield _Launch(kase.grid, kase.block, f"inputs {', '.join(map(str, kase.inputs))} -> out {kase.out}",
                          inputs, expected, scale)

    _check_launches(kernel, launches(), dtype=dtype, name=name, quiet=quiet, budget=budget,
                    hint=_padding_hint if values == "negative" else None)
