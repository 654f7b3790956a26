"""Checks for module 2's reductions: block sums, axis reductions and scans, with their budgets.

Each output is a sum (or max, ...) of many inputs, whose float rounding depends on the order
of the additions, so results are compared within ``REDUCTION_RTOL`` times the sum of the
absolute values of the terms::

    check_axis_reduce(mean_axis_kernel, mean_spec, [(4, 5, 6)], axes=[0, 1, 2])
    check_reduction(dot_kernel, dot_spec, one_block_reduce([7, 1000], threads=[32, 128], inputs=2),
                    budget=reads_each_element_once("a", "b"))

``budget`` (one callable or a list) is called with the launch's trace once the result is right;
those launches run on the course simulator, also on a GPU machine, so a data race is caught there too.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Callable, Iterable

import numpy as np

from ..simulator import BudgetExceeded
from .core import Case, blocks_needed, case, planned_per_thread
from .runner import Launch, check_launches, expected_of, random_values


# ---------------------------------------------------------------- launch plans


def one_block_reduce(sizes: Iterable[int], threads: Iterable[int], inputs: int = 1) -> list[Case]:
    """One block of each ``threads`` count over 1-D inputs of each size; ``out`` has one element."""
    return [case(1, t, [(n,)] * inputs, out=(1,)) for n in sizes for t in threads]


def block_per_row(shapes: Iterable[tuple[int, int]], threads: Iterable[int]) -> list[Case]:
    """One block of each ``threads`` count per row of a ``(rows, cols)`` input; ``out`` has one element per row."""
    return [case(rows, t, [(rows, cols)], out=(rows,)) for rows, cols in shapes for t in threads]


def pairs_per_thread(sizes: Iterable[int], threads: Iterable[int]) -> list[Case]:
    """One block of ``T`` threads over 1-D inputs of ``n <= 2 T`` elements (two per thread, which
    `reads_each_element_once` allows each thread whatever ``n``); ``out`` as ``a``."""
    cases = []
    for n in sizes:
        for t in threads:
            if n > 2 * t:
                raise ValueError(f"{n} elements need at least {blocks_needed(n, 2)} threads, not {t}")
            cases.append(replace(case(1, t, [(n,)], out=(n,)), per_thread=2))
    return cases


def block_sums(sizes: Iterable[int], threads: int) -> list[Case]:
    """Enough blocks of ``threads`` threads to cover 1-D inputs of each size; ``out`` has one element per block.

    Block ``b`` sums its chunk ``a[b T : (b + 1) T]`` into ``out[b]``, so the spec takes ``T`` too: a test
    checks one block size per call, ``check_reduction(kernel, lambda a: spec(a, T), block_sums(sizes, T))``.
    """
    return [case(blocks_needed(n, threads), threads, [(n,)], out=(blocks_needed(n, threads),)) for n in sizes]


def stencil_blocks(sizes: Iterable[int], threads: Iterable[int], radius: int) -> list[Case]:
    """Enough blocks of ``T`` threads to cover ``a`` of each size, and ``2 radius + 1`` weights ``w``; ``out`` as ``a``."""
    return [case(blocks_needed(n, t), t, [(n,), (2 * radius + 1,)], out=(n,)) for n in sizes for t in threads]


# ---------------------------------------------------------------- budgets


def _per_thread_share(t, name: str) -> int:
    lanes = t.geometry.lanes
    return max(1, -(-t.array(name).size // lanes))


def reads_each_element_once(*names: str, evenly: bool = True):
    """A budget: every element of each array read exactly once from global memory.

    With ``evenly`` (the default), also no thread reads more than its share,
    ``ceil(size / threads in the launch)`` elements (the work is spread over the block), or more than the plan
    gives it (`pairs_per_thread`: two, as a scan that loads ``a[2t]`` and ``a[2t + 1]`` does).
    """
    def budget(t):
        for name in names:
            try:
                t.assert_reads_per_element(name, exactly=1)
            except BudgetExceeded as exc:
                raise BudgetExceeded(f"{exc}{_read_again(t, name)}") from None
            if evenly:
                share, planned = _per_thread_share(t, name), planned_per_thread()
                given = f", up to {planned} each as the exercise gives them" if planned > share else ""
                try:
                    t.assert_reads_per_thread(name, at_most=max(share, planned))
                except BudgetExceeded as exc:
                    raise BudgetExceeded(
                        f"{exc}: spread the work so that every thread reads about as many elements of "
                        f"`{name}` as the others ({t.array(name).size} elements over {t.geometry.lanes} threads{given})"
                    ) from None

    return budget


def _read_again(t, name: str) -> str:
    """When every element of ``name`` was read, each by one thread only, and some more than once: which thread read
    the first of those again (the GPU's compiler may load a[i] once for two uses, but the budget counts each)."""
    array = t.array(name)
    lanes, elements = array.accesses("read")
    counts = array.per_element["read"][:array.size]
    if not len(lanes) or counts.min() < 1 or array.space != "global":
        return ""
    pairs = np.unique(lanes * array.size + elements)
    if np.bincount(pairs % array.size, minlength=array.size).max() > 1:  # an element read by two threads
        return ""
    element = int(np.argmax(counts != 1))
    lane = int(pairs[pairs % array.size == element][0] // array.size)
    index = [int(i) for i in np.unravel_index(element, array.shape)]
    times = "twice" if counts[element] == 2 else f"{counts[element]} times"
    return (f" ({t.geometry.thread_name(lane)} read `{name}{index}` {times}: read it once into a variable, "
            f"x = {name}[i], and use x {times})")


def halo_reads(name: str, radius: int):
    """A budget for a 1-D stencil of ``radius`` staged in shared memory: few global reads of ``name``.

    Each block reads its own elements and a halo of ``radius`` on each side, once: no element is read
    more than twice (by its block and, in a halo, by a neighbour; 1 + ceil(2 radius / T) for small
    blocks ``T``), and no thread more than 3 times (its element and one on each side). A kernel in which
    every thread reads its ``2 radius + 1`` neighbours from global memory reads each element that often.
    """

    def budget(t):
        threads = t.geometry.threads_per_block
        per_element = 1 + blocks_needed(2 * radius, threads)
        why = (f"copy the block's elements and a halo of {radius} on each side into shared memory once, "
               "and read the neighbours from there")
        try:
            t.assert_reads_per_element(name, at_most=per_element)
            t.assert_reads_per_thread(name, at_most=1 + 2 * blocks_needed(radius, threads))
        except BudgetExceeded as exc:
            raise BudgetExceeded(f"{exc}: {why}") from None

    return budget


def shared_arrays(t) -> list[str]:
    """The names of the shared arrays a launch touched."""
    return [name for name, array in t.arrays.items() if array.space == "shared"]


def tree_reads(per_level: int, elements_per_thread: int = 1):
    """A budget for a tree in shared memory: no thread reads shared memory more than ``per_level`` times per
    level of the tree, plus once per value it keeps.

    A block's ``m = elements_per_thread * T`` values take ``ceil(log2(m))`` levels, and at each level a
    thread reads about two values (three in a scan's down-sweep). One thread looping over the shared array
    gives the same numbers and reads it ``m`` times: for 32 values or more, over this budget.
    """

    def budget(t):
        shared = shared_arrays(t)
        if not shared:
            raise BudgetExceeded(f"{t.kernel}: uses no shared memory; combine the block's values in a shared array")
        values = elements_per_thread * t.geometry.threads_per_block
        levels = max(1, int(np.ceil(np.log2(values))))
        limit = per_level * levels + elements_per_thread
        reads = sum(t.reads_per_thread(name) for name in shared)
        worst = int(np.argmax(reads))
        if reads[worst] > limit:
            raise BudgetExceeded(
                f"{t.kernel}: {t.geometry.thread_name(worst)} read shared memory {int(reads[worst])} times, more than "
                f"{limit} ({per_level} per level of a tree over the block's {values} values, {levels} levels, and "
                f"{elements_per_thread} for its result): one thread looping over the shared array does the block's "
                "work alone; let the threads share each level of the tree, with a barrier between levels"
            )

    return budget


def no_atomics(*names: str):
    """A budget: no atomic updates (``cuda.atomic.*``) of ``names``, or of any array when none are named.

    For a puzzle that asks for a tree: every thread adding its value to the result with an atomic gives the
    right sum, but the additions on one address run one after another and the tree is never written.
    """

    def budget(t):
        for name, array in t.arrays.items():
            if names and name not in names:
                continue
            per_thread = array.per_thread["atomic"]
            if per_thread.any():
                raise BudgetExceeded(
                    f"{t.kernel}: {int(np.count_nonzero(per_thread))} threads made {int(per_thread.sum())} atomic "
                    f"updates of `{name}` (cuda.atomic): atomics on one address are served one after another. "
                    "This exercise asks for no atomics: combine the block's values with a tree in shared memory, a "
                    "barrier after each level, and let one thread write the result"
                )

    return budget


def shared_reads_per_element(at_most: float, elements_per_thread: int = 2):
    """A budget for a scan in one block: shared-memory reads per element of the block's shared array.

    The block scans ``elements_per_thread * T`` elements (``T`` threads, padded). A work-efficient
    (Blelloch) scan does about ``2 m`` additions on ``m`` elements, an up-sweep and a down-sweep: about
    6 shared reads per element with the copy out. The step-by-step scan that adds the element ``d``
    places before for ``d = 1, 2, 4, ...`` does ``m log2(m)`` additions: 2 reads per element per step.
    """

    def budget(t):
        shared = shared_arrays(t)
        if not shared:
            raise BudgetExceeded(f"{t.kernel}: uses no shared memory; scan in a shared array")
        reads = sum(int(t.reads_per_thread(name).sum()) for name in shared)
        elements = elements_per_thread * t.geometry.lanes
        if reads > at_most * elements:
            raise BudgetExceeded(
                f"{t.kernel}: read shared memory {reads} times for a scan of {elements} elements "
                f"({elements_per_thread} per thread), {reads / elements:.1f} per element, more than {at_most:g}: "
                "a work-efficient scan (an up-sweep that builds a tree of partial sums, then a down-sweep) does "
                f"about 2 additions per element; adding the element d places before for d = 1, 2, 4, ... does "
                f"log2({elements}) = {np.log2(elements):.0f} per element"
            )

    return budget


def writes_each_element_once(*names: str):
    """A budget: every element of each array written exactly once."""

    def budget(t):
        for name in names:
            t.assert_writes_per_element(name, exactly=1)

    return budget


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
                out_shape = shape[:axis] + shape[axis + 1:]
                expected = expected_of(spec, dtype, a, axis, shape=out_shape,
                                       expects=f"reducing {shape} along axis {axis} gives")
                scale = expected_of(spec, dtype, np.abs(a), axis) if np.dtype(dtype).kind == "f" else None
                rows, cols = out_shape
                for bx, by in blocks:
                    yield Launch((blocks_needed(cols, bx), blocks_needed(rows, by)), (bx, by),
                                  f"a of shape {shape}, axis={axis} -> out {out_shape}", [a, axis], expected, scale)

    check_launches(kernel, launches(), dtype=dtype, name=name, quiet=quiet, budget=budget)


def _padding_hint(launch, got, first) -> str:
    if got[first] == 0 and launch.expected[first] != 0:
        return (
            "\n  Every input value of this test is negative, so a 0 can only come from padding: threads (or "
            "shared memory slots) with no element must hold the identity of the operation, the value that "
            "changes nothing (for max: -inf, `float32(-math.inf)`), not 0."
        )
    if launch.expected[first] == -np.inf and np.isfinite(got[first]):
        return (
            f"\n  This row is all -inf (a fully masked row, as Module 5's softmax meets), so its max is -inf, not "
            f"{float(got[first])!r}: a start that is only very negative still wins against -inf. Start from the "
            "identity of max, the value that never wins: `float32(-math.inf)`."
        )
    return ""


def _scan_hint(launch, got, first) -> str:
    """A hint for an exclusive scan that came out as a known mistake: off by the total of ``a`` everywhere
    (Blelloch's down-sweep started from the total: the root was not cleared), inclusive, or with ``a``'s values
    left at every even index (a down-sweep without the swap: no element ``i - d`` is written). With one element
    all three give ``out[0] = a[0]``, and the hint names them all."""
    a = np.asarray(launch.arguments[0], np.float64) if launch.arguments else None
    if a is None or a.ndim != 1 or got.shape != a.shape or not a.size:
        return ""
    inclusive = np.cumsum(a)
    exclusive = inclusive - a
    close = np.cumsum(np.abs(a)) * 1e-4 + 1e-6  # float32 sums, far looser than a shift by one element
    if not np.all(np.abs(launch.expected - exclusive) <= close):
        return ""
    if a.size == 1:
        if abs(got[0] - a[0]) <= close[0]:
            return ("\n  With one element, out[0] = a[0] fits three mistakes: the down-sweep started from the total "
                    "(set the last element to 0 between the sweeps, step 2); the inclusive scan (out[i] includes a[i]: "
                    "shift by one); or a down-sweep without the swap (element i − d takes the value of element i, "
                    "step 3). With more elements, the first makes every out[i] too large by the total of a, the "
                    "second gives a[0] + ... + a[i], the third leaves out[i] = a[i] at every even i.")
        return ""
    if np.all(np.abs(got - (exclusive + inclusive[-1])) <= close + np.abs(a).sum() * 1e-4):
        return ("\n  Every out[i] is too large by the total of a: the down-sweep started from the total. Set the last "
                "element to 0 between the sweeps (step 2).")
    if np.all(np.abs(got - inclusive) <= close):
        return ("\n  This is the inclusive scan (out[i] includes a[i]); the exclusive scan starts with out[0] = 0 and "
                "leaves a[i] out of out[i]: shift by one.")
    if a.size >= 3 and np.all(np.abs(got[::2] - a[::2]) <= close[::2]):
        return ("\n  out[i] is still a[i] at every even i (out[0], out[2], ...): the down-sweep never wrote element "
                "i − d. Step 3 swaps: element i − d takes the value of element i, and element i adds the old value "
                "of i − d (keep it in a variable first).")
    return ""


def _reduction_hint(launch, got, first) -> str:
    return _padding_hint(launch, got, first) + _scan_hint(launch, got, first)


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
    hint=None,
) -> None:
    """Check a reduction or scan ``kernel[grid, block](out, *inputs)`` against ``spec(*inputs)``.

    Cases as in `check_kernel` (`one_block_reduce`, `block_per_row`, `gpucourse.grading.one_block`).
    Each output is a sum (or max, ...) of many inputs, so a float result may differ from the
    spec by rounding: up to ``REDUCTION_RTOL`` times ``spec`` of the absolute values (for a dot
    product, the sum of ``|a[i] * b[i]|``; for a scan, the running sum of ``|a[i]|``).
    ``values="negative"`` draws only negative inputs, so a padding of 0 shows in a max; ``"masked"`` makes rows
    of -inf too, so a start of -1e30 shows. ``hint(launch, got,
    first)``, given, says more about a wrong result than the reduction's own hints.
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    float_dtype = np.dtype(dtype).kind == "f"

    def launches():
        for kase in cases:
            inputs = [random_values(rng, shape, dtype, values) for shape in kase.inputs]
            expected = expected_of(spec, dtype, *inputs, shape=kase.out, expects="the case expects")
            # the rounding of sums of the finite inputs: a masked -inf would make every tolerance infinite
            scale = expected_of(spec, dtype, *[np.abs(np.where(np.isfinite(x), x, 0)) for x in inputs]) \
                if float_dtype else None
            yield Launch(kase.grid, kase.block, f"inputs {', '.join(map(str, kase.inputs))} -> out {kase.out}",
                          inputs, expected, scale, kase.per_thread)

    check_launches(kernel, launches(), dtype=dtype, name=name, quiet=quiet, budget=budget,
                    hint=hint or (_reduction_hint if values in ("negative", "masked") else _scan_hint))
