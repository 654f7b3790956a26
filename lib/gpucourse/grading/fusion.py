"""Checks for module 5's fused kernels: GEMM epilogues, row kernels (softmax, LayerNorm, cross-entropy), attention.

A test cell reads::

    check_row_kernel(softmax_warp_kernel, softmax_spec, warp_rows([(7, 100)], warps=[4]),
                     budget=[reads_per_element("x", exactly=1), no_shared_memory()])

The inputs are random and non-uniform; a row kernel's logits include rows that
a softmax must survive: a fully masked row (every value ``-inf``), a partly
masked one and one of large values (about ``3e4``: ``exp`` overflows float32
past 89 unless the row's max is subtracted). ``out`` is poisoned; the result is
compared with the float64 spec within the rounding float32 allows there (it
grows with the size of the row's values). A failure names the **row** (and
what is special about it), the first wrong column, expected vs got, and the
other wrong rows; for attention it also says which **block of keys** the
output looks like it left out or did not rescale.

Budgets (callables on a launch's trace, as in `check_kernel`): `global_traffic`,
`reads_per_element`, `kv_reads_per_query_block` (flash attention reads K and V
once per block of queries, and not the tiles the causal mask hides), and
`memory_independent_of_n` (no shared or local buffer that grows with N).
`check_bias_relu` and `check_row_group_max` check lecture 5's puzzles (the second prints, never raises). `make_flash_exercise` builds
assignment 5's flash attention around the student's online-softmax update; `check_registers_only`
fails on local memory in a kernel's compiled code.
`global_bytes(trace)` adds up the global bytes of every launch of a trace.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass, field, replace
from typing import Callable, Iterable, Sequence

import numpy as np
from numba import cuda, float32

from ..kernels.fusion import LOG2E, attention_reference, make_micro_tile, reciprocal
from ..run import compile_for_gpu
from ..run import ptx
from ..run.ptx import toolchain_problem
from ..simulator import BudgetExceeded
from .core import (RETURNED, CheckFailed, blocks_needed, budget_list, check_budgets, in_place_of_guard_hint,
                   kernel_name, parameter_names, report, run_checked)
from .matmul import float32_only, no_shared_memory, reads_per_thread
from .runner import wrong_indices

WARP = 32
F32_EPS = float(np.finfo(np.float32).eps)


@dataclass
class RowLaunch:
    """One launch: configuration, arguments after ``out``, the float64 answer and the tolerance per element."""

    grid: tuple
    block: tuple
    what: str
    arguments: list
    expected: np.ndarray
    tolerance: np.ndarray
    rows: dict = field(default_factory=dict)  # row -> what is special about it
    diagnose: Callable | None = None  # (row, got row) -> a hint, or ""

    def describe(self) -> str:
        return f"grid={self.grid}, block={self.block}, {self.what}"


def global_bytes(recorded) -> int:
    """Bytes read and written in global memory by every launch of a trace (``with gpucourse.trace() as t``), or one.

    Every thread's access counts: a value that each thread of a block reads counts once per thread (on a GPU a
    warp's broadcast is one transaction, and caches absorb repeats).
    """
    launches = getattr(recorded, "launches", [recorded])
    total = 0
    for launch in launches:
        for array in launch.arrays.values():
            if array.space == "global":
                total += sum(int(array.per_thread[kind].sum()) for kind in ("read", "write")) * array.itemsize
    return total


# ---------------------------------------------------------------- inputs


def logits(rng: np.random.Generator, rows: int, cols: int, special: bool = True) -> tuple[np.ndarray, dict]:
    """Random rows of scale 1 to 8; with ``special``, row 0 all -inf, row 1 half -inf, row 2 large (about 3e4)."""
    x = rng.standard_normal((rows, cols)) * rng.uniform(1, 8, size=(rows, 1))
    notes = {}
    if special and rows >= 3:
        x[0] = -np.inf
        x[1, rng.random(cols) < 0.5] = -np.inf
        x[2] = x[2] * 100 + 3e4
        masked = int(np.isneginf(x[1]).sum())  # a short row may get none, or all
        notes = {0: "a fully masked row: every value is -inf",
                 2: "a row of large values, about 3e4: exp overflows unless the max is subtracted first"}
        if masked:
            notes[1] = ("a fully masked row: every value is -inf" if masked == cols
                        else "a partly masked row: some values are -inf")
    return x.astype(np.float32), notes


def row_scale(x: np.ndarray) -> np.ndarray:
    """The largest finite |value| of each row (0 for a fully masked row)."""
    finite = np.where(np.isfinite(x), np.abs(x.astype(np.float64)), 0.0)
    return finite.max(axis=-1, initial=0.0)


# ---------------------------------------------------------------- launch plans


@dataclass(frozen=True)
class RowPlan:
    """Rows and columns of ``x`` and the launch that covers them."""

    shape: tuple[int, int]
    grid: tuple
    block: tuple


def warp_rows(shapes: Iterable[tuple[int, int]], warps: Iterable[int] = (4,)) -> list[RowPlan]:
    """One warp per row: blocks of ``(32, w)`` threads, warp ``threadIdx.y`` of block ``blockIdx.x`` owns row
    ``blockIdx.x * w + threadIdx.y``; ``grid = ceil(rows / w)``."""
    warps = list(warps)
    return [RowPlan((rows, cols), (blocks_needed(rows, w),), (WARP, w)) for rows, cols in shapes for w in warps]


def thread_rows(shapes: Iterable[tuple[int, int]], threads: Iterable[int] = (32,)) -> list[RowPlan]:
    """One thread per row: thread ``cuda.grid(1)`` owns that row; ``grid = ceil(rows / threads)``."""
    threads = list(threads)
    return [RowPlan((rows, cols), (blocks_needed(rows, t),), (t,)) for rows, cols in shapes for t in threads]


def block_rows(shapes: Iterable[tuple[int, int]], threads: Iterable[int] = (128,)) -> list[RowPlan]:
    """One block of ``threads`` threads per row: ``grid = rows``."""
    threads = list(threads)
    return [RowPlan((rows, cols), (rows,), (t,)) for rows, cols in shapes for t in threads]


# ---------------------------------------------------------------- the check


def _rows_text(rows: Sequence[int], limit: int = 8) -> str:
    shown = ", ".join(str(int(r)) for r in rows[:limit])
    return shown + (f" and {len(rows) - limit} more" if len(rows) > limit else "")


def explain_rows(name: str, launch: RowLaunch, got: np.ndarray, bad: np.ndarray, out_name: str) -> str:
    """Which row is wrong first, what is special about it, expected vs got, and the other wrong rows.

    An ordinary row is named before a special one (masked, large values): when both are wrong, the bug is
    not in how the special case is handled, and the special row's note would only mislead.
    """
    ordinary = [i for i in range(len(bad)) if int(bad[i][0]) not in launch.rows]
    first = tuple(int(i) for i in bad[ordinary[0] if ordinary else 0])
    row = first[0]
    value, wanted = got[first], launch.expected[first]
    index = ", ".join(map(str, first))
    never = (" (NaN: the poison of an element never written, or a NaN computed, such as exp(-inf - -inf) or 0 / 0)"
             if np.isnan(value) and not np.isnan(wanted) else "")
    special = f" ({launch.rows[row]})" if row in launch.rows else ""
    wrong_rows = np.unique(bad[:, 0])
    lines = [f"{name} gave a wrong result with {launch.describe()}:",
             f"  row {row}{special} is wrong: {out_name}[{index}] should be {float(wanted)!r}, got {float(value)!r}{never}",
             f"  {len(wrong_rows)} of {got.shape[0]} rows are wrong: {_rows_text(wrong_rows)}"]
    if launch.diagnose is not None:
        hint = launch.diagnose(row, got[row] if got.ndim > 1 else got[row:row + 1])
        if hint:
            lines.append(f"  {hint}")
    return "\n".join(lines)


def check_launches(kernel, launches: Iterable[RowLaunch], *, name=None, quiet=False, budget=None) -> None:
    """Run each launch on copies, compare within its tolerance, explain by row, then apply the budgets."""
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    parameters = parameter_names(kernel)
    out_name = parameters[0] if parameters else "out"
    labels = [out_name] + [f"`{p}`" for p in parameters[1:]]
    budgets = budget_list(budget)
    launches = list(launches)
    right = []  # the launches that gave the right result
    for number, launch in enumerate(launches):
        got, recorded = _launched(kernel, name, launch, labels, budgets)
        bad = _wrong(got, launch)
        if len(bad):
            hint = _block_hint(kernel, name, launch, right, launches[number + 1:], labels)
            raise CheckFailed(explain_rows(name, launch, got, bad, out_name) + hint)
        check_budgets(name, launch.describe(), budgets, recorded, parameters)
        right.append(launch)
    report(name, len(launches), quiet, budgeted=bool(budgets))


def _launched(kernel, name: str, launch: RowLaunch, labels: list, budgets: list):
    """(the output, the trace) of ``launch`` on copies; a fault's message with the exercise's hint."""
    __tracebackhide__ = True
    try:
        return run_checked(kernel, name, launch.describe(), launch.grid, launch.block, launch.expected.shape,
                           np.float32, launch.arguments, labels, budgets)
    except CheckFailed as failed:
        message = str(failed)
        if "reads `p_tile[" in message and "which nothing has written" in message:  # the flash exercise
            # the read is in the course's tile product, whose line the student never wrote: named by what it does
            message = re.sub(r"(kernel `\w+`), device function `\w+`, line \d+: .*",
                             r"\1, where the course's code multiplies p_tile by V:", message)
            message = message.replace(" (shared memory starts with leftovers; write it, then syncthreads, before "
                                      "reading it)", "")
            message += ("\n  online_softmax_tile stores every p it computes, 0 for a masked key, in "
                        "p_tile[row + ROW_STEP * i, col + LANES * j] for every i < ROWS and j < KEYS: the "
                        "kernel multiplies the whole tile by V.")
        elif "which nothing has written (shared memory" in message and RETURNED not in message:
            message += ("\n  If threads without a row or query (past the end) return before the barrier, their "
                        "share of the shared array is never written: every thread of the block copies its "
                        "elements and meets every barrier; guard only the final store.")
        raise CheckFailed(message) from None


def _wrong(got: np.ndarray, launch: RowLaunch) -> np.ndarray:
    """The indices where ``got`` is outside the launch's tolerance (an infinite answer matched exactly)."""
    return wrong_indices(got, launch.expected, launch.tolerance)


def _block_hint(kernel, name: str, wrong: RowLaunch, right: list, later: list, labels: list) -> str:
    """For a launch that gave a wrong result: where the same inputs give the right result with another block shape
    (that of a launch of the same shapes, checked before or among the ``later`` ones, with its grid), a hint that
    the kernel assumes its block's shape; else "". The same inputs: other data can hide a bug that has nothing to do
    with the block (a row that happens to be all masked), and the hint would send the student after the wrong one."""
    configurations = dict.fromkeys((launch.grid, launch.block) for launch in [*right, *later]
                                   if launch.what == wrong.what and launch.block != wrong.block)
    for grid, block in configurations:
        again = replace(wrong, grid=grid, block=block)
        try:
            got, _ = _launched(kernel, name, again, labels, [])
        except CheckFailed:
            continue
        if not len(_wrong(got, again)):
            return (f"\n  With block={block} the result is right, with block={wrong.block} it is not: does the kernel "
                    "assume its block's shape (a number of warps or threads written in)? Read it from "
                    "cuda.blockDim.x and cuda.blockDim.y: the launch chooses it.")
    return ""


def first_hint(*diagnoses: Callable) -> Callable:
    """A diagnosis that gives the first hint of ``diagnoses`` (each ``(row, got row) -> a hint, or ""``)."""
    return lambda row, got: next((hint for diagnose in diagnoses if (hint := diagnose(row, got))), "")


def proportional_diagnosis(expected: np.ndarray) -> Callable:
    """A hint for a softmax row that is the right one times a constant: the exponentials are right, the sum is not."""

    def diagnose(row: int, got: np.ndarray) -> str:
        wanted = expected[row]
        shown = wanted > 1e-6
        if shown.any() and not np.any(got):  # 0 where the softmax is not: l was 0, NaN or infinite
            return ("the whole row is 0: the sum l it is divided by was 0, NaN or infinite. Rescale it by "
                    "exp(m_old - m_new), at most 1, and skip the rescale when the new max is -inf: merging two "
                    "empty states (-inf, 0) gives exp(-inf - -inf) = NaN")
        if shown.sum() < 2 or not np.all(np.isfinite(got[shown])):
            return ""
        ratio = got[shown].astype(np.float64) / wanted[shown]
        factor = float(np.median(ratio))
        if factor > 1e-6 and abs(factor - 1) > 1e-3 and np.allclose(ratio, factor, rtol=1e-3):  # 0: a row lost
            return (f"the row is the right softmax times {factor:.4g}: each exp(x - m) is right, the sum l it is "
                    "divided by is not. When a value raises the max, rescale the sum so far by exp(m_old - m_new); "
                    "when two lanes' states merge, rescale both sums to the larger max")
        return ""

    return diagnose


def lane_factor_diagnosis(expected: np.ndarray) -> Callable:
    """A hint for a row (one warp per row) whose columns of each lane (c % 32) are the right softmax times a factor
    of that lane's own: the lanes did not share one max and one sum (shfl_down_sync leaves them in lane 0 alone)."""

    def diagnose(row: int, got: np.ndarray) -> str:
        wanted = expected[row]
        lanes = np.arange(len(wanted)) % 32
        factors = []
        for lane in range(32):
            shown = (lanes == lane) & (wanted > 1e-6)
            if shown.sum() >= 2:
                ratio = got[shown].astype(np.float64) / wanted[shown]
                if not (np.all(np.isfinite(ratio)) and np.allclose(ratio, ratio[0], rtol=1e-3)):
                    return ""
                factors.append(ratio[0])
        if len(factors) < 2 or np.allclose(factors, factors[0], rtol=1e-3):
            return ""  # too few columns to tell, or one factor for the row (`proportional_diagnosis`)
        return ("the columns of each lane (c % 32) are the right softmax times a factor of that lane's own: the "
                "lanes did not all get the warp's max and sum. After shfl_down_sync only lane 0 holds them; "
                "shfl_xor_sync (offsets 16, 8, 4, 2, 1) gives them to every lane")

    return diagnose


def check_row_kernel(kernel, spec: Callable, plans: Iterable[RowPlan], *, seed: int = 0, special: bool = True,
                     name=None, quiet=False, budget=None) -> None:
    """``kernel[grid, block](y, x)``: each row of ``y`` is ``spec`` of that row of ``x`` (softmax-like, values <= 1).

    The tolerance is float32 rounding of the row's exponentials: ``1e-5 * |expected| + 1e-6``.
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)

    def launches():
        for plan in plans:
            x, notes = logits(rng, *plan.shape, special=special)
            expected = np.asarray(spec(x.astype(np.float64)), np.float64)
            tolerance = 1e-5 * np.abs(expected) + 1e-6
            yield RowLaunch(plan.grid, plan.block, f"x of shape {plan.shape}", [x], expected, tolerance, notes,
                            first_hint(proportional_diagnosis(expected), lane_factor_diagnosis(expected)))

    check_launches(kernel, launches(), name=name, quiet=quiet, budget=budget)


def empty_state_diagnosis(cols: int, threads: int) -> Callable:
    """A hint for NaN in a row shorter than the block: threads without a column merge empty Welford states."""

    def diagnose(row: int, got: np.ndarray) -> str:
        if not np.isnan(got).any():
            return ""
        hint = "a NaN is most often a 0 / 0"
        if cols < threads:
            hint += (f": a row of {cols} column{'s' if cols > 1 else ''} leaves some of the {threads} threads without "
                     "a column, their state is the empty (0, 0, 0), and merging two empty states divides by n = 0 "
                     "(when n is 0, return the other state unchanged)")
        return hint + "; the variance is M2 / n (LayerNorm's is biased), not M2 / (n - 1)"

    return diagnose


def check_layernorm(kernel, spec: Callable, plans: Iterable[RowPlan], *, seed: int = 0, name=None, quiet=False,
                    budget=None) -> None:
    """``kernel[grid, block](y, x, gamma, beta)``: LayerNorm of each row of ``x`` (``gamma``, ``beta`` per column).

    Some rows have a large mean (up to 1e3) next to a small spread: a one-pass ``E[x^2] - E[x]^2`` loses the
    variance there, Welford's update (or sums of ``x - shift``) does not.
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)

    def launches():
        for plan in plans:
            rows, cols = plan.shape
            x = rng.standard_normal((rows, cols)) * rng.uniform(0.5, 3, size=(rows, 1))
            shifted = rng.random(rows) < 0.3
            quiet = rows - 1 if rows > 1 and cols > 1 else None  # a spread of 2e-3: a variance below LayerNorm's eps
            if quiet is not None:
                shifted[quiet] = False
                x[quiet] = 0.5 + rng.standard_normal(cols) * 2e-3
            x[shifted] += rng.uniform(-1e3, 1e3, size=(int(shifted.sum()), 1))
            x = x.astype(np.float32)
            gamma = rng.uniform(0.5, 2, cols).astype(np.float32)
            beta = rng.uniform(-1, 1, cols).astype(np.float32)
            expected = np.asarray(spec(x.astype(np.float64), gamma.astype(np.float64), beta.astype(np.float64)))
            mean = x.astype(np.float64).mean(axis=1, keepdims=True)
            spread = np.maximum(x.astype(np.float64).std(axis=1, keepdims=True), 1e-3)
            rounding = 16 * F32_EPS * np.abs(mean) / spread  # a float32 mean of values near 1e3 is off by about 1e3 * eps
            tolerance = 1e-5 * np.abs(expected) + np.abs(gamma) * (rounding + 1e-5) + 1e-6
            notes = {int(r): "a row with a large mean next to a small spread" for r in np.flatnonzero(shifted)}
            if quiet is not None:
                notes[quiet] = ("a row of spread 2e-3, whose variance is below EPS: EPS belongs inside the square "
                                "root, 1 / sqrt(var + EPS), and the variance is M2 / n")
            yield RowLaunch(plan.grid, plan.block, f"x of shape {plan.shape}", [x, gamma, beta], expected,
                            tolerance, notes, empty_state_diagnosis(cols, int(np.prod(plan.block))))

    check_launches(kernel, launches(), name=name, quiet=quiet, budget=budget)


def check_cross_entropy(kernel, spec: Callable, plans: Iterable[RowPlan], *, ignore_index: int = -100, seed: int = 0,
                        name=None, quiet=False, budget=None) -> None:
    """``kernel[grid, block](loss, logits, labels)``: one loss per row; ``labels`` int32, ``ignore_index`` -> 0.

    Rows: large logits, logits of -inf (a vocabulary mask) and labels equal to ``ignore_index`` (a padding
    token). The tolerance grows with the row's largest finite |logit| (float32 keeps 7 digits of it).
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)

    def launches():
        for plan in plans:
            rows, classes = plan.shape
            x, _ = logits(rng, rows, classes, special=False)
            notes = {}
            if rows >= 2:
                x[1] = x[1] * 100 + 3e4
                notes[1] = "a row of large logits, about 3e4: exp overflows unless the max is subtracted first"
            labels = rng.integers(0, classes, rows).astype(np.int32)
            if rows >= 3:
                labels[0] = ignore_index
                notes[0] = f"its label is {ignore_index}, the padding that is ignored: its loss is 0"
            if rows >= 4 and classes >= 2:  # a vocabulary mask: whole lanes may hold only -inf
                masked = rng.random(classes) < 0.7
                masked[labels[2]] = False
                x[2, masked] = -np.inf
                notes[2] = ("a masked vocabulary: some logits are -inf (the label's is not), so a lane may hold "
                            "only -inf, the empty state")
            expected = np.asarray(spec(x.astype(np.float64), labels), np.float64)
            tolerance = 1e-5 * (np.abs(expected) + row_scale(x)) + 1e-5
            yield RowLaunch(plan.grid, plan.block, f"logits of shape {plan.shape}", [x, labels], expected,
                            tolerance, notes, picked_diagnosis(x, labels, expected, tolerance, ignore_index))

    check_launches(kernel, launches(), name=name, quiet=quiet, budget=budget)


def picked_diagnosis(x: np.ndarray, labels: np.ndarray, expected: np.ndarray, tolerance: np.ndarray,
                     ignore_index: int) -> Callable:
    """A hint for a wrong loss: it is logsumexp minus the logit of another column (or minus nothing)."""

    def diagnose(row: int, got: np.ndarray) -> str:
        label = int(labels[row])
        if label == ignore_index:
            return ""
        gap = float(x[row].astype(np.float64).max() - x[row, label])
        if np.isposinf(got).all() and gap > 87:  # exp(-gap) is 0 in float32: log(0) = -inf
            return (f"the label's logit is {gap:.0f} below the row's max, so its probability exp(picked - m) / l is 0 "
                    "in float32 and its log -inf: compute the loss as (m - picked) + log(l), never as the log of a "
                    "softmax")
        if not np.isfinite(got).all():
            return ""
        logsumexp = expected[row] + float(x[row, label])
        value = float(got[0])
        if abs(logsumexp - value) <= tolerance[row]:
            return (f"the loss is logsumexp alone: the logit of the label (column {label}) was not subtracted. "
                    f"The lane that reads column {label} keeps it; cuda.shfl_sync(FULL_MASK, picked, {label} % 32) "
                    "hands it to the other lanes")
        close = np.flatnonzero(np.abs(logsumexp - x[row].astype(np.float64) - value) <= tolerance[row])
        if len(close):
            return (f"the loss subtracts the logit of column {int(close[0])}, not of the label, column {label}: "
                    f"fetch it from the lane that read column {label}, lane {label} % 32 = {label % 32}")
        return ""

    return diagnose


def check_gemm_epilogue(kernel, spec: Callable, shapes: Iterable[tuple[int, int, int]], *, tile: int = 16,
                        seed: int = 0, name=None, quiet=False, budget=None) -> None:
    """``kernel[grid, (tile, tile)](C, A, B, bias)``, ``C = spec(A, B, bias)`` of shape (M, N), x along C's columns.

    Each shape is ``(M, K, N)``; the tolerance is float32 rounding of the sum: ``1e-5 * (|A| @ |B| + |bias|)``.
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)

    def launches():
        for M, K, N in shapes:
            A = rng.uniform(-2, 2, (M, K)).astype(np.float32)
            B = (rng.uniform(-2, 2, (K, N)) / np.sqrt(K)).astype(np.float32)
            bias = rng.uniform(-1, 1, N).astype(np.float32)
            A64, B64, bias64 = A.astype(np.float64), B.astype(np.float64), bias.astype(np.float64)
            expected = np.asarray(spec(A64, B64, bias64))
            tolerance = 2e-5 * (np.abs(A64) @ np.abs(B64) + np.abs(bias64)) + 1e-6
            grid = (blocks_needed(N, tile), blocks_needed(M, tile))
            yield RowLaunch(grid, (tile, tile), f"A {(M, K)}, B {(K, N)}, bias {(N,)} -> C {(M, N)}",
                            [A, B, bias], expected, tolerance,
                            diagnose=first_hint(gelu_diagnosis(A64 @ B64 + bias64, expected, tolerance),
                                                short_k_diagnosis(spec, A64, B64, bias64, tile, tolerance)))

    check_launches(kernel, launches(), name=name, quiet=quiet, budget=budget)


GELU_TANH = "gelu(z) = 0.5 z (1 + tanh(sqrt(2 / pi) (z + 0.044715 z^3)))"


def gelu_diagnosis(z: np.ndarray, expected: np.ndarray, tolerance: np.ndarray) -> Callable:
    """A hint for a wrong row of an epilogue whose spec is GELU's tanh form of ``z``: it is GELU's exact erf form."""
    tanh_form = 0.5 * z * (1 + np.tanh(math.sqrt(2 / math.pi) * (z + 0.044715 * z ** 3)))
    erf_form = 0.5 * z * (1 + np.vectorize(math.erf)(z / math.sqrt(2)))
    asked = np.allclose(expected, tanh_form, rtol=1e-9, atol=0)

    def diagnose(row: int, got: np.ndarray) -> str:
        if asked and np.all(np.abs(got - erf_form[row]) <= tolerance[row]):
            return (f"its output is GELU's exact form, 0.5 z (1 + erf(z / sqrt(2))), but the exercise asks for its "
                    f"tanh form, {GELU_TANH} (use SQRT_2_OVER_PI, GELU_CUBIC and math.tanh); the two differ by up "
                    "to 5e-4")
        return ""

    return diagnose


def short_k_diagnosis(spec: Callable, A: np.ndarray, B: np.ndarray, bias: np.ndarray, tile: int,
                      tolerance: np.ndarray) -> Callable:
    """A hint for a wrong row of a tiled GEMM's output that is the product over whole tiles of K only: the loop over
    tiles stops at K // tile and leaves the last, partial tile out."""
    K = A.shape[1]
    whole = K // tile * tile
    short = np.asarray(spec(A[:, :whole], B[:whole], bias)) if whole < K else None

    def diagnose(row: int, got: np.ndarray) -> str:
        if short is not None and np.all(np.abs(got - short[row]) <= tolerance[row]):
            return (f"its output is the product over the first {whole} of the K = {K} columns of A only: the loop over "
                    f"tiles stops at K // {tile} and leaves out the last, partial tile; run it ceil(K / {tile}) times "
                    "and load 0 past the end of A and B")
        return ""

    return diagnose


def shuffled_max_attention(Q, K, V, row: int, offsets: Sequence[int]) -> np.ndarray:
    """Query ``row``'s output from assignment 5's flash kernel (`make_flash_exercise`, causal) when the update
    shuffles each row's tile max with ``offsets`` (not 2 and 1): each lane subtracts the max of the lanes its xor
    shuffles reach, which may be part of its row group only, or lanes of other row groups holding other queries
    (their scores: the kernel's zero query past N), while the kernel adds up the p, l and output of the group's 4
    lanes as if they shared one max."""
    N, d = Q.shape
    lanes, step, rows_per_warp = EXERCISE_LANES, EXERCISE_ROW_STEP, 32 // EXERCISE_LANES * EXERCISE_ROWS
    first = row - row % EXERCISE_QUERIES
    warp_first = row - (row - first) % rows_per_warp
    group, i = (row - warp_first) % step, (row - warp_first) // step
    reached = []  # for each lane of the row's group (its col): the (query, col) of every lane its shuffles reach
    for col in range(lanes):
        found = {group * lanes + col}
        for offset in offsets:
            found |= {lane ^ offset for lane in found}
        reached.append([(warp_first + lane // lanes + i * step, lane % lanes) for lane in sorted(found)])
    queries = np.zeros((max(N, first + EXERCISE_QUERIES), d))
    queries[:N] = Q
    scores = queries @ K.astype(np.float64).T / math.sqrt(d)
    m, acc, l = np.full(lanes, -np.inf), np.zeros((lanes, d)), np.zeros(lanes)
    for start in range(0, min(N, first + EXERCISE_QUERIES), EXERCISE_KEYS):  # the block's tiles
        tile = np.arange(start, min(N, start + EXERCISE_KEYS))
        tops = [max(scores[query, tile[(tile % lanes == col) & (tile <= query)]].max(initial=-np.inf)
                    for query, col in members) for members in reached]
        m_new = np.maximum(m, tops)
        base = np.where(np.isneginf(m_new), 0.0, m_new)
        rescale, m = np.exp(m - base), m_new
        keys = tile[tile <= row]
        p = np.exp(scores[row, keys] - base[keys % lanes])
        acc = acc * rescale[:, None] + p @ V[keys].astype(np.float64)
        l = l * rescale + np.bincount(keys % lanes, p, minlength=lanes)
    return acc[np.arange(d) % lanes, np.arange(d)] / l.sum()


def _attention_over(Q, K, V, row: int, keys, zeros: int = 0) -> np.ndarray:
    """Query ``row``'s attention over ``keys`` and ``zeros`` more keys of score 0 and value 0 (a tile's padding
    past N taken for keys)."""
    scores = K[keys].astype(np.float64) @ Q[row].astype(np.float64) / math.sqrt(Q.shape[1])
    top = max(scores.max(initial=-np.inf), 0.0 if zeros else -np.inf)
    weights = np.exp(scores - top)
    return weights @ V[keys].astype(np.float64) / (weights.sum() + zeros * math.exp(-top))


# a row's max over part of its group in the flash exercise: the offsets shuffled with, what lanes share a max
PART_GROUP_MAXES = [
    ((1,), "2 of its 4 lanes (shuffle offset 1 alone: lanes 4g and 4g + 1 share one max, 4g + 2 and 4g + 3 another)"),
    ((2,), "2 of its 4 lanes (shuffle offset 2 alone: lanes 4g and 4g + 2 share one max, 4g + 1 and 4g + 3 another)"),
    ((), "1 of its 4 lanes (no shuffle: each lane keeps its own max)"),
]
# offsets that reach other row groups: lecture 5's 16, 8 and 4 (its groups are lane % 4), part of them, a whole
# warp's reduction (lecture 2), and those with 2 and 1 as well
OTHER_ROWS_OFFSETS = [(16, 8, 4), (16, 8), (8, 4), (16, 8, 4, 2, 1), (8, 4, 2, 1), (4, 2, 1)]


def _flash_index_hint(Q, K, V, row: int, close: Callable) -> str:
    """Whether query ``row``'s wrong output from the exercise's kernel (`make_flash_exercise`) is ``close`` to what
    a mask gives that leaves ``first`` out of the query's index or ``start`` out of the key's: what it says."""
    N, tile = K.shape[0], EXERCISE_KEYS
    local = row % EXERCISE_QUERIES
    if row != local and close(_attention_over(Q, K, V, row, np.arange(local + 1))):
        return (f"its output is attention over keys 0 to {local}, as query {local} sees them: the mask compares "
                f"the key with the thread's row in its block, row + ROW_STEP * i ({local}); the query is "
                f"first + row + ROW_STEP * i ({row})")
    tiles = range(0, min(N, row - local + EXERCISE_QUERIES), tile)
    places = [(start, k) for start in tiles for k in range(min(tile, N, row + 1))]
    seen = [start + k for start, k in places if start + k < N]
    if seen != list(range(row + 1)) and close(_attention_over(Q, K, V, row, seen, len(places) - len(seen))):
        return (f"its output is attention over every key whose place in its tile of {tile} is at most {row} (keys "
                f"{', '.join(map(str, seen[:6]))}{' ...' if len(seen) > 6 else ''}): the mask compares the query "
                "with col + LANES * j, the key's place in its tile; the key is start + col + LANES * j")
    return ""


def _in_words(numbers: Sequence[int]) -> str:
    """"16, 8 and 4"."""
    head, last = ", ".join(map(str, numbers[:-1])), str(numbers[-1])
    return f"{head} and {last}" if head else last


def _flash_shuffle_hint(Q, K, V, row: int, close: Callable) -> str:
    """Whether query ``row``'s wrong output from the exercise's kernel is ``close`` to what a tile max shuffled over
    the wrong lanes gives (`shuffled_max_attention`): what it says, naming the offsets where one set alone fits."""
    fits = [(offsets, which) for offsets, which in [*PART_GROUP_MAXES, *((o, None) for o in OTHER_ROWS_OFFSETS)]
            if close(shuffled_max_attention(Q, K, V, row, offsets))]
    fix = ("A row group is 4 consecutive lanes (the same lane // 4), which differ in their 2 lowest bits: shuffle with "
           "offsets 2 and 1, so that every lane of the group gets the max of all 4")
    if len(fits) > 1:  # a row with few keys: several wrong shuffles give it
        named = "; ".join(", ".join(map(str, offsets)) or "none" for offsets, _ in fits)
        return (f"its output is what query {row} gets when the tile's max is shuffled over the wrong lanes (offsets "
                f"{named} all give it): the lanes of its row group then subtract different maxes, but their p and l "
                f"are added up as if they shared one. {fix}")
    for offsets, which in fits:
        if which is not None:
            return (f"its output is what query {row} gets when its max is taken over {which}: the lanes of its "
                    f"row group then subtract different maxes, but their p and l are added up as if they shared "
                    f"one. {fix}")
        far = [o for o in offsets if o >= EXERCISE_LANES]
        reach = "they reach" if len(far) == len(offsets) else f"{_in_words(far)} reach{'es' if len(far) == 1 else ''}"
        return (f"its output is what query {row} gets when the tile's max is shuffled with offsets "
                f"{_in_words(offsets)}: {reach} lanes of other row groups, which hold other queries, so "
                "each lane subtracts a max of other rows' scores, one its group's 4 lanes do not share. "
                f"{fix}, not lecture 5's 16, 8 and 4 (its groups are lane % 4)")
    return ""


def attention_diagnosis(Q, K, V, causal: bool, key_block: int, exercise: bool = False) -> Callable:
    """A hint for a wrong query row: the output it matches when some blocks of keys are left out or not rescaled;
    with ``exercise`` (assignment 5's flash kernel), also when the mask's indices leave out ``first`` or ``start``
    or a row's max is shuffled over the wrong lanes."""

    def diagnose(row: int, got: np.ndarray) -> str:
        N = K.shape[0]
        last = row + 1 if causal else N
        if not np.all(np.isfinite(got)):
            return ("its output is NaN or infinite: a rescale exp2(m_old - m_new) overflowed, or became "
                    "exp2(-inf - -inf). The running max never falls, m_new = max(m_old, the tile's max), so the "
                    "rescale is at most 1; and while every key so far is masked (m_new = -inf), skip it")
        blocks = blocks_needed(last, key_block)
        scale = max(1e-6, float(np.abs(V).max()))

        def close(output: np.ndarray) -> bool:
            return np.allclose(got, output, atol=1e-4 * scale)

        hint = exercise and causal and _flash_index_hint(Q, K, V, row, close)
        if hint:
            return hint
        for b in range(blocks - 1):  # only the first b + 1 blocks of keys (all visible to this query)
            stop = (b + 1) * key_block
            partial = attention_reference(Q[row:row + 1], K[:stop], V[:stop])[0]
            if close(partial):
                return (f"its output is attention over keys 0 to {stop - 1} only: the block of keys {stop} to "
                        f"{min(last, stop + key_block) - 1} (block {b + 1}) and the ones after it are missing")
        if causal:  # keys after the query were not masked: attention over keys 0 to some stop > row + 1
            ends = sorted({min(N, stop) for stop in range(key_block, N + key_block, key_block) if stop > last} | {N})
            for stop in ends:
                unmasked = attention_reference(Q[row:row + 1], K[:stop], V[:stop])[0]
                if close(unmasked):
                    return (f"its output is attention over keys 0 to {stop - 1}, but query {row} sees only keys "
                            f"0 to {row}: the causal mask is missing; give a key j > {row} the score -inf")
        if causal and row == 0 and not np.any(got):  # a zero row: no key counted, for one of several reasons
            return ("its output is 0, but query 0 sees key 0: its sum l stayed 0. Either the mask hides key 0 (mask "
                    "a key after the query, key > query, not key >= query), or p is never added to l, or the "
                    "running max m is never updated (then exp2(m - m_new) = 0 wipes l and the output at every tile)")
        if not np.any(got):  # a row that sees keys came out 0: every p underflowed, or none reached l
            return (f"its output is all 0, though query {row} sees keys 0 to {last - 1}: every p = exp2(s - m) of it "
                    "was 0, or never added to l. A max m far above all of this row's scores does it: take the max "
                    "over the lanes that hold this row only (shuffle offsets that stay within its row group; one "
                    "that reaches further brings in other rows' scores)")
        if causal and row:  # the diagonal masked too: query `row` sees keys 0 to row - 1
            strict = attention_reference(Q[row:row + 1], K[:row], V[:row])[0]
            if close(strict):
                return (f"its output is attention over keys 0 to {row - 1}: query {row} sees key {row} too; mask a "
                        "key after the query (key > query), not key >= query")
        for b in range(1, blocks):  # a block of keys alone
            keys = slice(b * key_block, min(last, (b + 1) * key_block))
            alone = attention_reference(Q[row:row + 1], K[keys], V[keys])[0]
            if close(alone):
                return (f"its output is attention over the block of keys {keys.start} to {keys.stop - 1} alone: the "
                        "blocks before it were lost (rescale the running sum and output by exp(m_old - m_new), "
                        "do not reset them)")
        hint = exercise and causal and _flash_shuffle_hint(Q, K, V, row, close)
        if hint:
            return hint
        tempered = attention_reference(Q[row:row + 1] * LOG2E, K[:last], V[:last])[0]
        if close(tempered):  # exp of scores scaled for exp2: each weighs e^(1.44 s)
            return ("its output is attention with every score multiplied by log2(e) = 1.44: the scores carry the "
                    "scale log2(e) / sqrt(d) for exp2, and exp of them weighs each key too sharply; use math.exp2")
        return (f"the keys of query row {row} are 0 to {last - 1}, in {blocks} block{'s' if blocks > 1 else ''} of "
                f"{key_block}: check the "
                "running max, the rescale exp(m_old - m_new) of l and of the output, and the final division by l")

    return diagnose


SPIKE = 100.0  # how far key 0's score on the large row stands above the others': past float32's exp (88.7)


def _spike(Q: np.ndarray, K: np.ndarray, row: int, key: int, kept: list[int]) -> None:
    """Turn ``K[key]`` so that query ``row`` scores it `SPIKE` above the keys it sees, and the queries of ``kept``
    score it 0 (their own spikes stay theirs): ``Q[row]`` less its part along those queries, scaled."""
    d = Q.shape[1]
    q = Q[row].astype(np.float64)
    if kept:
        basis = Q[kept].astype(np.float64).T
        q = q - basis @ np.linalg.lstsq(basis, q, rcond=None)[0]
    seen = [k for k in range(row + 1) if k != key]
    visible = (K[seen].astype(np.float64) @ Q[row].astype(np.float64)).max(initial=0.0) / math.sqrt(d)
    K[key] = (q * ((max(visible, 0.0) + SPIKE) * math.sqrt(d) / float(Q[row].astype(np.float64) @ q))).astype(K.dtype)


def _spikes(Q: np.ndarray, K: np.ndarray, causal: bool, block_rows: int, key_block: int) -> dict[int, str]:
    """Two more large scores, where a tile's max is easy to get wrong: a future key (masked) of the same tile scoring
    `SPIKE` above all a query sees (a max taken before the mask makes every visible weight 0), and for another query
    the last key of its first tile (a max over part of the tile overflows). Notes for their rows."""
    N, notes, kept = Q.shape[0], {}, [Q.shape[0] - 1]
    masked = [r for r in range(N - 2, 0, -1) if r // block_rows == (r + 1) // block_rows] if causal else []
    if masked:
        r = masked[0]
        _spike(Q, K, r, r + 1, kept)  # scored as if visible, then masked: r + 1 > r
        notes[r] = (f"key {r + 1}, in this query's future (masked), scores {SPIKE:.0f} above every key it sees: a "
                    "tile's max taken before the mask would use it")
        kept.append(r)
    last_of_tile = key_block - 1
    rows = [r for r in range(N - 2, last_of_tile, -1) if r not in kept and r != last_of_tile + 1]
    if rows:
        _spike(Q, K, rows[0], last_of_tile, kept)
        notes[rows[0]] = (f"key {last_of_tile}, the last of its tile, scores {SPIKE:.0f} above its other keys: a max "
                          "over part of the tile, or one that forgets earlier tiles, would miss it")
    return notes


def check_attention(kernel, shapes: Iterable[tuple[int, int]], *, block_rows: int, key_block: int,
                    causal: bool = True, large: bool = True, seed: int = 0, name=None, quiet=False,
                    budget=None, threads: int | None = None) -> None:
    """``kernel[ceil(N / block_rows), threads](O, Q, K, V)``: one head of (causal) attention, shapes ``(N, d)``.

    ``threads`` defaults to ``block_rows`` (one thread per query).

    With ``large``, the last query row is scaled by 60 (scores in the hundreds) and key 0 turned along it, `SPIKE`
    above its other keys, so that a running max that forgets earlier tiles overflows ``exp(m_old - m_new)``; and
    `_spikes` plants two more (a masked future key, the last key of a tile). A failure names the query row and the
    block of ``key_block`` keys its output seems to miss.
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    exercise = any(built is kernel for _, built in _flash_exercises.values())

    def launches():
        for N, d in shapes:
            Q, K, V = (rng.standard_normal((N, d)).astype(np.float32) * rng.uniform(0.5, 2) for _ in range(3))
            notes = {}
            if large:  # and key 0 along that query, scoring SPIKE above its other keys: exp(SPIKE) overflows float32
                Q[-1] *= 60
                q = Q[-1].astype(np.float64)
                others = (K[1:].astype(np.float64) @ q).max(initial=0.0) / math.sqrt(d)
                K[0] = q * ((max(others, 0.0) + SPIKE) * math.sqrt(d) / float(q @ q))
                notes[N - 1] = (f"large scores: its query row is 60 times larger, and key 0 lies along it, scoring "
                                f"{SPIKE:.0f} above its other keys")
                notes.update(_spikes(Q, K, causal, block_rows, key_block))
            expected = attention_reference(Q, K, V, causal)
            scores = np.abs(Q.astype(np.float64)) @ np.abs(K.astype(np.float64)).T / math.sqrt(d)
            tolerance = 1e-5 * float(np.abs(V).max()) * (1 + scores.max(axis=1, keepdims=True)) + 1e-6
            yield RowLaunch((blocks_needed(N, block_rows),), (threads or block_rows,), f"Q, K, V of shape {(N, d)}",
                            [Q, K, V], expected, np.broadcast_to(tolerance, expected.shape), notes,
                            attention_diagnosis(Q, K, V, causal, key_block, exercise))

    check_launches(kernel, launches(), name=name, quiet=quiet, budget=budget)


# ---------------------------------------------------------------- budgets


def reads_per_element(name: str, *, exactly: int | None = None, at_most: int | None = None, why: str = ""):
    """A budget: every element of ``name`` is read from global memory ``exactly`` (or ``at_most``) times."""

    def budget(t):
        try:
            t.assert_reads_per_element(name, exactly=exactly, at_most=at_most)
        except BudgetExceeded as exc:
            raise BudgetExceeded(f"{exc}{': ' + why if why else ''}") from None

    return budget


def global_traffic(name: str, *, reads: int, writes: int, why: str = ""):
    """A budget: ``name`` is read at most ``reads`` and written at most ``writes`` times per element, in total."""

    def budget(t):
        array = t.array(name)
        got = {kind: int(array.per_thread[kind].sum()) for kind in ("read", "write")}
        allowed = {"read": reads * array.size, "write": writes * array.size}
        for kind in ("read", "write"):
            if got[kind] > allowed[kind]:
                raise BudgetExceeded(
                    f"`{name}` ({array.size} elements) was {kind}{'ten' if kind == 'write' else ''} {got[kind]} times "
                    f"in global memory, more than {allowed[kind]} ({reads if kind == 'read' else writes} per element)"
                    f"{': ' + why if why else ''}")

    return budget


def kv_reads_per_query_block(block_rows: int, key_block: int, causal: bool = True, names=("K", "V")):
    """A budget: each row of K and V is read from global memory once per block of ``block_rows`` queries that
    needs it (all of them; with ``causal``, those whose last query comes at or after the row's tile of keys),
    one element per read: tiles through shared memory, not one read per query."""

    def budget(t):
        for name in names:
            N = t.array(name).shape[0]
            blocks = blocks_needed(N, block_rows)
            if causal:
                tile_start = np.arange(N) // key_block * key_block
                last_query = np.minimum(N, (np.arange(blocks) + 1) * block_rows)
                allowed = (last_query[None, :] > tile_start[:, None]).sum(axis=1)
            else:
                allowed = np.full(N, blocks)
            reads = t.reads_per_element(name)
            over = np.flatnonzero((reads > allowed[:, None]).any(axis=1))
            if len(over):
                row = int(over[0])
                raise BudgetExceeded(
                    f"row {row} of `{name}` was read up to {int(reads[row].max())} times per element, more than "
                    f"{int(allowed[row])}: one read per block of {block_rows} queries that needs its tile of "
                    f"{key_block} keys" + (" (the causal mask hides it from the blocks before it: skip those tiles)"
                                           if causal else "") + "; copy the tile into shared memory once per block")

    return budget


def memory_independent_of_n(limit_bytes: int = 48 * 1024):
    """A budget: the kernel's shared memory fits ``limit_bytes`` and no shared or local array has N x N elements.

    Flash attention keeps tiles of K and V and one row of accumulators per query: its memory does not grow with N.
    Use it with N large enough that N x N exceeds the kernel's tiles (a 16 x 64 tile: N >= 33).
    """

    def budget(t):
        N = t.array("Q").shape[0]
        shared = {name: a for name, a in t.arrays.items() if a.space == "shared"}
        total = sum(a.size * a.itemsize for a in shared.values())
        if total > limit_bytes:
            raise BudgetExceeded(f"{t.kernel}: {total} bytes of shared memory per block, more than {limit_bytes}: "
                                 "keep tiles of K and V, not whole rows of scores")
        for name, a in t.arrays.items():
            if a.space in ("shared", "local") and a.size >= N * N:
                raise BudgetExceeded(f"{t.kernel}: `{name}` has {a.size} elements, as many as the N x N = {N * N} "
                                     "scores: flash attention never holds them; use an online softmax over tiles")

    return budget


# ---------------------------------------------------------------- lecture 5's puzzles

BIAS_RELU_SHAPES = ((33, 70), (70, 33), (1, 1), (64, 48))  # (M, N): the first has fewer rows than columns
BIAS_RELU_BLOCKS = ((16, 16), (32, 8))


def bias_relu_diagnosis(C: np.ndarray, bias: np.ndarray, tolerance: np.ndarray) -> Callable:
    """A hint for a wrong row of ``relu(C + bias)``: the ReLU before the bias, the bias by row, no ReLU."""

    def diagnose(row: int, got: np.ndarray) -> str:
        if np.isnan(got).all():
            return "no element of this row was written (not written yet?)"
        c = C[row].astype(np.float64)
        candidates = [(np.maximum(c, 0) + bias, "the row is relu(C) + bias: the ReLU comes after the bias, "
                                                "max(C[row, col] + bias[col], 0)"),
                      (c + bias, "the row is C + bias: the ReLU is missing")]
        if row < len(bias):
            candidates.append((np.maximum(c + bias[row], 0), f"the row is relu(C + bias[{row}]): the bias is "
                               "indexed by the row; it has one value per column of C, bias[col]"))
        for candidate, hint in candidates:
            if np.all(np.abs(got - candidate) <= tolerance[row]):
                return hint
        return ""

    return diagnose


def check_bias_relu(kernel) -> None:
    """``kernel[(ceil(N / bx), ceil(M / by)), (bx, by)](Y, C, bias)``: ``Y = relu(C + bias)`` (``C`` M x N, ``bias`` of
    N) in one pass: each element of ``C`` read once, of ``Y`` written once and never read back, one value of the
    bias per thread, in float32 arithmetic only. That is 8 bytes per element plus the bias, where ``add_bias`` then
    ``relu`` move 16."""
    __tracebackhide__ = True
    rng = np.random.default_rng(5)

    def launches():
        for M, N in BIAS_RELU_SHAPES:
            C = (rng.standard_normal((M, N)) * rng.uniform(0.5, 4, size=(M, 1))).astype(np.float32)
            bias = rng.uniform(-2, 2, N).astype(np.float32)
            C64, bias64 = C.astype(np.float64), bias.astype(np.float64)
            expected = np.maximum(C64 + bias64, 0)
            tolerance = np.broadcast_to(F32_EPS * (np.abs(C64) + np.abs(bias64)), (M, N))  # one float32 rounding
            for bx, by in BIAS_RELU_BLOCKS:
                yield RowLaunch((blocks_needed(N, bx), blocks_needed(M, by)), (bx, by),
                                f"C of shape {(M, N)}, bias of {N}", [C, bias], expected, tolerance,
                                diagnose=bias_relu_diagnosis(C, bias64, tolerance))

    one_pass = [global_traffic("C", reads=1, writes=0, why="read each element once, into a register"),
                global_traffic("Y", reads=0, writes=1, why="apply the bias and the ReLU in a register and store "
                                                           "once: a second pass over Y moves it twice more"),
                reads_per_thread("bias", 1, why="one element of Y per thread, one value of the bias"),
                float32_only()]
    try:
        check_launches(kernel, launches(), quiet=True, budget=one_pass)
    except CheckFailed as failed:
        message = str(failed)
        if "out of bounds for `bias`" in message:
            message = in_place_of_guard_hint(
                message, "\n  bias has one value per column of C (N values): index it by the column, bias[col].")
        raise CheckFailed(message) from None
    print(f"✓ {kernel_name(kernel)}: Y = relu(C + bias) on {len(BIAS_RELU_SHAPES) * len(BIAS_RELU_BLOCKS)} launches, "
          "in one pass: C read once, Y written once, 8 bytes per element plus the bias (add_bias and relu: 16)")


GROUP_LAUNCHES = ((1, 32), (3, 64), (2, 128))  # (blocks, threads): every thread has a value


def _group_hint(got, group: np.ndarray, warp: np.ndarray, groups: int, down: bool) -> str:
    """Why a lane's result is not its row group's max: it added, it missed lanes of its group (``down``: with
    shfl_down, which never brings the last lanes the others' values), or it took another group's value."""
    if np.isclose(got, group.sum(dtype=np.float64), rtol=1e-5):
        return "That is the group's sum: combine the values with max, not +."
    if got in group:
        lanes = len(group)
        return (f"That is the max of some lanes of the group only: together the offsets must reach all {lanes}.\n"
                f"Offsets that keep lane % {groups} are multiples of {groups}; how many xor steps reach all {lanes} "
                "lanes of the group?" + ("\n(shfl_down leaves the last lanes without the others' values: use "
                                        "shfl_xor_sync.)" if down else ""))
    if got in warp:
        return f"That value belongs to another group: an xor offset that changes lane % {groups} mixes groups."
    return f"That is none of the warp's values: combine them with max, by xor offsets that keep lane % {groups}."


def check_row_group_max(kernel, groups: int = 4) -> bool | None:
    """Lecture 5's puzzle: ``kernel[blocks, threads](out, values)`` writes into ``out[i]`` the max of ``values``
    over ``i``'s row group, the lanes of its warp that share ``lane % groups``, with warp shuffles and no shared
    memory.

    Prints ✓, ✗ with the first wrong thread, or "not written yet" (``out`` equal to ``values``); returns True,
    False or None. It never raises: a lecture cell runs on with a wrong answer.
    """
    rng = np.random.default_rng(7)
    for blocks, threads in GROUP_LAUNCHES:
        values = rng.standard_normal(blocks * threads).astype(np.float32)
        warps = values.reshape(-1, 32 // groups, groups)  # [warp, lane // groups, lane % groups]
        expected = np.broadcast_to(warps.max(axis=1, keepdims=True), warps.shape).ravel()
        described = f"{blocks} block{'s' if blocks > 1 else ''} of {threads} threads"
        budgets = [no_shared_memory()]
        try:
            got, traced = run_checked(kernel, kernel_name(kernel), described, (blocks,), (threads,), values.shape,
                                      np.float32, [values], ["out", "`values`"], budgets)
            check_budgets(kernel_name(kernel), described, budgets, traced, ["out", "values"])
            recorded = None
        except CheckFailed as failed:
            recorded = str(failed)
        if recorded is None and np.array_equal(got, values):
            print("Not written yet: combine each lane's value with the other lanes of its group,\n"
                  "then run the cell again.")
            return None
        if recorded is None and not np.array_equal(got, expected):
            i = int(np.flatnonzero(got != expected)[0])
            first, warp_end = i - i % 32 + i % groups, i - i % 32 + 32
            down = "down" in (ptx.shuffles(kernel.py_func) or ())
            recorded = (f"with {described}, out[{i}] is {got[i]:.6g}, expected {expected[i]:.6g}: the max of "
                        f"values[{first}:{warp_end}:{groups}].\n"
                        + _group_hint(got[i], values[first:warp_end:groups], values[i - i % 32:warp_end], groups,
                                      down))
        if recorded is None:
            continue
        print(f"✗ Not yet: {recorded}")
        return False
    print(f"✓ Right: every thread has its group's max ({len(GROUP_LAUNCHES)} launches), with shuffles alone. "
          "attention_flash2 does this for each of its rows: `row_group_max`.")
    return True


# ---------------------------------------------------------------- assignment 5's flash attention frame

EXERCISE_QUERIES, EXERCISE_KEYS, EXERCISE_THREADS, EXERCISE_MAX_D = 32, 16, 64, 64  # 2 warps, 16 rows each
EXERCISE_ROWS, EXERCISE_ROW_STEP, EXERCISE_LANES = 2, 8, 4  # rows warp*16 + lane//4 + 8i; columns lane%4 + 4j


_flash_exercises: dict[int, tuple] = {}  # id of an update -> (the update, its kernel): built once per update


def make_flash_exercise(update):
    """Assignment 5's causal flash attention around the student's ``update`` (a device function), built once per
    ``update`` (a test cell that builds it again with the same update gets the same kernel, compiled once).

    ``kernel[ceil(N / 32), 64](O, Q, K, V)``, ``d <= 64``: 2 warps per 32 queries, tiles of 16 keys, Q scaled
    by ``log2(e) / sqrt(d)``; S and O += P V are register micro-tiles (`make_micro_tile`) of 2 rows per
    thread, 4 lanes per row group. ``update(s, m, l, acc, p_tile, row, col, start, first, N)`` is the online
    softmax of one tile: mask ``s``, take each row's max over its group, rescale ``l`` and ``acc``, write
    ``exp2(s - base)`` into ``p_tile`` and add it to ``l``.
    """
    built = _flash_exercises.get(id(update))
    if built is not None and built[0] is update:
        return built[1]
    BQ, BK, THREADS, D = EXERCISE_QUERIES, EXERCISE_KEYS, EXERCISE_THREADS, EXERCISE_MAX_D
    TM, STEP, LANES = EXERCISE_ROWS, EXERCISE_ROW_STEP, EXERCISE_LANES
    KEYS, COLS = BK // LANES, D // LANES
    Q_STRIDE, P_STRIDE = D + 1, BK + 1
    scores_product, output_product = make_micro_tile(TM, KEYS), make_micro_tile(TM, COLS)

    @cuda.jit
    def flash_attention_kernel(O, Q, K, V):
        q_tile = cuda.shared.array((BQ, Q_STRIDE), float32)
        k_tile = cuda.shared.array((D, P_STRIDE), float32)
        v_tile = cuda.shared.array((BK, D), float32)
        p_tile = cuda.shared.array((BQ, P_STRIDE), float32)
        s = cuda.local.array((TM, KEYS), float32)
        acc = cuda.local.array((TM, COLS), float32)
        m = cuda.local.array(TM, float32)
        l = cuda.local.array(TM, float32)
        t = cuda.threadIdx.x
        lane = t % 32
        row, col = (t // 32) * 16 + lane // LANES, lane % LANES
        first = cuda.blockIdx.x * BQ
        N, d = Q.shape
        scale = float32(LOG2E) / math.sqrt(float32(d))
        for e in range(t, BQ * D, THREADS):
            r, c = e // D, e % D
            q_tile[r, c] = Q[first + r, c] * scale if first + r < N and c < d else float32(0)
        for i in range(TM):
            m[i], l[i] = float32(-math.inf), float32(0)
            for j in range(COLS):
                acc[i, j] = float32(0)
        for start in range(0, min(N, first + BQ), BK):
            cuda.syncthreads()
            for e in range(t, BK * D, THREADS):
                j, c = e // D, e % D
                inside = start + j < N and c < d
                k_tile[c, j] = K[start + j, c] if inside else float32(0)
                v_tile[j, c] = V[start + j, c] if inside else float32(0)
            cuda.syncthreads()
            for i in range(TM):
                for j in range(KEYS):
                    s[i, j] = float32(0)
            scores_product(s, q_tile, row, STEP, k_tile, col, LANES, D)
            update(s, m, l, acc, p_tile, row, col, start, first, N)
            cuda.syncwarp()
            output_product(acc, p_tile, row, STEP, v_tile, col, LANES, BK)
        for i in range(TM):
            total = l[i]
            for offset in (2, 1):
                total += cuda.shfl_xor_sync(0xFFFFFFFF, total, offset)
            inverse = reciprocal(total)
            for j in range(COLS):
                query, c = first + row + i * STEP, col + j * LANES
                if query < N and c < d:
                    O[query, c] = acc[i, j] * inverse

    _flash_exercises[id(update)] = (update, flash_attention_kernel)
    return flash_attention_kernel


def check_registers_only(kernel, argtypes, name=None) -> None:
    """Fail unless ``kernel`` compiles for ``argtypes`` with no local memory (no ``ld.local``/``st.local`` in its
    PTX): every per-thread array indexed only by constants once the loops with constant bounds are unrolled."""
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    problem = toolchain_problem()
    if problem:
        raise CheckFailed(f"{name}: checking the compiled code needs NVVM (the course's cu12 or cu13 extra): {problem}")
    ptx = compile_for_gpu(kernel, argtypes)
    loads, stores = ptx.count("ld.local"), ptx.count("st.local")
    if loads or stores:
        raise CheckFailed(f"{name} compiles to {loads} loads and {stores} stores of local memory (ld.local, st.local): "
                          "a per-thread array stays in registers only when every index is a constant after the "
                          "compiler unrolls the loops; loop over the constants (range(ROWS), range(KEYS), "
                          "range(COLS)), not over a bound known only at run time, and mask with -inf instead")
    print(f"✓ {name}: no local memory in its compiled code (registers only)")
