"""Checks for test cells: run a student's kernel, compare with a NumPy spec, explain failures.

A test cell reads like a sentence::

    check_kernel(zip_kernel, zip_spec, one_block([1, 7, 32], inputs=2))

Every case draws random, non-uniform inputs, fills the output with a poison
value (NaN, or the most negative integer) so that unwritten elements show,
launches the kernel as ``kernel[grid, block](out, *inputs)`` and compares
with ``spec(*inputs)`` within a tolerance that fits the dtype. The first
failure raises `CheckFailed` naming the launch, the first wrong index, the
expected and the actual value.
"""

from __future__ import annotations

import contextlib
import contextvars
import inspect
import itertools
import linecache
import os
import re
import sysconfig
import traceback
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np
from numba import cuda

from ..run import trace
from ..run.ptx import is_kernel
from ..simulator import BudgetExceeded, KernelFault, OutOfBounds, UnknownArray

Shape = tuple[int, ...]

# (relative, absolute) tolerance for values of magnitude about 1.
TOLERANCES = {
    np.dtype(np.float16): (1e-3, 1e-3),
    np.dtype(np.float32): (1e-5, 1e-6),
    np.dtype(np.float64): (1e-12, 1e-14),
}


class CheckFailed(AssertionError):
    """A kernel gave a wrong result, or could not run; the message says why."""


@dataclass(frozen=True)
class Case:
    """One launch of a kernel under test: launch configuration and input shapes."""

    grid: tuple[int, ...]
    block: tuple[int, ...]
    inputs: tuple[Shape, ...]
    out: Shape
    per_thread: int = 1  # elements of each input the plan gives a thread (a scan's `pairs_per_thread`: 2)

    def describe(self) -> str:
        shapes = ", ".join(str(s) for s in self.inputs)
        return f"grid={self.grid}, block={self.block}, inputs {shapes} -> out {self.out}"


def _tuple(x, what: str) -> tuple[int, ...]:
    """``x`` (one int or a sequence of them) as a tuple of ints; anything else fails, naming ``what`` it is."""
    values = tuple(x) if isinstance(x, Sequence) else (x,)
    if not all(isinstance(v, (int, np.integer)) for v in values):
        raise CheckFailed(f"case's {what} must be a whole number or a tuple of them, such as 32 or (8, 4), not {x!r}.")
    return tuple(int(v) for v in values)


def case(grid, block, inputs: Iterable, out=None) -> Case:
    """A `Case`; ``out`` defaults to the broadcast shape of the inputs."""
    shapes = tuple(_tuple(s, "input shape") for s in inputs)
    out_shape = _tuple(out, "out shape") if out is not None else tuple(np.broadcast_shapes(*shapes))
    return Case(_tuple(grid, "grid"), _tuple(block, "block"), shapes, out_shape)


def blocks_needed(size: int, threads_per_block: int) -> int:
    """Blocks of ``threads_per_block`` threads that cover ``size`` elements (integer ceiling)."""
    return -(-size // threads_per_block)


# ---------------------------------------------------------------- launch plans


def counts(values, what: str, least: int = 1) -> list[int]:
    """``values`` (one int or several) as a list of ints from ``least`` up; anything else fails, saying what
    ``what`` takes."""
    values = [values] if isinstance(values, (int, np.integer)) else values
    try:
        found = list(values)
    except TypeError:
        found = None
    if not found or not all(isinstance(v, (int, np.integer)) and v >= least for v in found):
        raise CheckFailed(f"{what} must be whole numbers from {least} up, such as [{least}, 7, 32] (or one number, "
                          f"32), not {values!r}.")
    return [int(v) for v in found]


def pairs(values, what: str) -> list[tuple[int, int]]:
    """``values`` (one pair of ints or several) as a list of pairs of ints from 1 up; anything else fails, saying
    what ``what`` takes."""
    one = isinstance(values, tuple) and len(values) == 2 and all(isinstance(v, (int, np.integer)) for v in values)
    try:
        found = [tuple(p) for p in ([values] if one else values)]
    except TypeError:
        found = None
    if not found or not all(len(p) == 2 and all(isinstance(v, (int, np.integer)) and v >= 1 for v in p)
                            for p in found):
        raise CheckFailed(f"{what} must be pairs of whole numbers from 1 up, such as [(2, 9), (5, 7)] (or one pair, "
                          f"(5, 7)), not {values!r}.")
    return [(int(a), int(b)) for a, b in found]


def one_block(sizes: Iterable[int], inputs: int = 1, extra_threads: int = 0) -> list[Case]:
    """One block per launch, ``size + extra_threads`` threads over 1-D arrays of ``size``."""
    return [case(1, n + extra_threads, [(n,)] * inputs) for n in counts(sizes, "one_block's sizes", 0)]


def blocks_1d(sizes: Iterable[int], threads: Iterable[int], inputs: int = 1, per_thread: int = 1) -> list[Case]:
    """Enough blocks of each ``threads`` count to cover 1-D arrays of each size, ``per_thread`` elements a thread."""
    return [
        case(blocks_needed(n, t * per_thread), t, [(n,)] * inputs)
        for n in counts(sizes, "blocks_1d's sizes", 0) for t in counts(threads, "blocks_1d's threads")
    ]


def one_block_2d(shapes: Iterable[Shape], inputs: int = 1, extra=(0, 0)) -> list[Case]:
    """One 2-D block of ``(cols + extra[0], rows + extra[1])`` threads over each ``(rows, cols)`` array.

    ``threadIdx.x`` runs along columns (the contiguous axis), ``threadIdx.y`` along rows.
    """
    cases = []
    for rows, cols in pairs(shapes, "one_block_2d's shapes"):
        block = (cols + extra[0], rows + extra[1])
        cases.append(case((1, 1), block, [(rows, cols)] * inputs))
    return cases


def blocks_2d(shapes: Iterable[Shape], blocks: Iterable[tuple[int, int]], inputs: int = 1) -> list[Case]:
    """A 2-D grid of ``(bx, by)`` blocks covering each ``(rows, cols)`` array; x runs along columns."""
    cases = []
    for rows, cols in pairs(shapes, "blocks_2d's shapes"):
        for bx, by in pairs(blocks, "blocks_2d's blocks"):
            grid = (blocks_needed(cols, bx), blocks_needed(rows, by))
            cases.append(case(grid, (bx, by), [(rows, cols)] * inputs))
    return cases


def outer(shapes: Iterable[Shape], block: tuple[int, int], extra=(0, 0)) -> list[Case]:
    """Broadcast a column ``(rows, 1)`` against a row ``(1, cols)`` in one block (or a grid when smaller); ``block``
    may be several, each a case."""
    cases = []
    for (rows, cols), (bx, by) in itertools.product(pairs(shapes, "outer's shapes"), pairs(block, "outer's block")):
        grid = (blocks_needed(cols + extra[0], bx), blocks_needed(rows + extra[1], by))
        cases.append(case(grid, (bx, by), [(rows, 1), (1, cols)]))
    return cases


# ---------------------------------------------------------------- the check


def random_array(rng: np.random.Generator, shape: Shape, dtype) -> np.ndarray:
    """Distinct-looking values in every cell: a wrong index cannot pass by luck."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(-10, 10, size=shape).astype(dtype)
    if dtype.kind in "iu":
        low = 0 if dtype.kind == "u" else -1000
        return rng.integers(low, 1000, size=shape).astype(dtype)
    raise CheckFailed(f"the checks draw random floats or integers, not {dtype}: give dtype=np.float32 (or another "
                      "float or integer type).")


def _poison_value(dtype: np.dtype):
    """NaN; the lowest signed integer; the highest unsigned one (0, the lowest, is what most outputs hold)."""
    if dtype.kind == "f":
        return np.nan
    return np.iinfo(dtype).max if dtype.kind == "u" else np.iinfo(dtype).min


def poison(shape: Shape, dtype) -> np.ndarray:
    """An output full of a value no correct kernel writes (`_poison_value`)."""
    dtype = np.dtype(dtype)
    return np.full(shape, _poison_value(dtype), dtype=dtype)


POISONED = " (never written, or only added to: it still holds the poison value)"  # an atomic add to NaN stays NaN


def _is_poison(value) -> bool:
    if isinstance(value, (float, np.floating)):
        return bool(np.isnan(value))
    return bool(value == _poison_value(np.asarray(value).dtype))


def _mismatches(got: np.ndarray, expected: np.ndarray) -> np.ndarray:
    if got.dtype.kind == "f":
        rtol, atol = TOLERANCES.get(got.dtype, (1e-5, 1e-6))
        scale = max(1.0, float(np.max(np.abs(expected), initial=0.0)))
        ok = np.isclose(got, expected, rtol=rtol, atol=atol * scale)
    else:
        ok = got == expected
    return np.argwhere(~ok)


def _index(ix) -> str:
    return "[" + ", ".join(str(int(i)) for i in ix) + "]"


# Poisoned elements after the end of ``out``: on a GPU an unguarded write past the end
# does not fault, it lands here and shows.
CANARY = 64


def plural(count: int, word: str) -> str:
    """"1 shape", "3 shapes", "2 launches": a count for a message."""
    return f"{count} {word}" + ("" if count == 1 else "es" if word.endswith("h") else "s")


def operations_listed(found: dict) -> str:
    """"2 add.f64, 1 mul.f64": PTX operations and their counts (`run.ptx.float_operations`) for a message."""
    return ", ".join(f"{n} {op}" for op, n in sorted(found.items()))


def kernel_name(kernel) -> str:
    return getattr(getattr(kernel, "py_func", kernel), "__name__", "kernel")


def parameter_names(kernel) -> list[str]:
    try:
        return list(inspect.signature(getattr(kernel, "py_func", kernel)).parameters)
    except (TypeError, ValueError):
        return []


def _takes(kernel, count: int) -> bool:
    """Whether ``kernel`` can be called with ``count`` arguments (defaults and ``*args`` counted; True where its
    signature cannot be read)."""
    try:
        inspect.signature(getattr(kernel, "py_func", kernel)).bind(*range(count))
    except TypeError:
        return False
    except ValueError:
        return True
    return True


def budget_list(budget) -> list[Callable]:
    """``budget=`` as a list: None, one budget, or several; a maker of budgets not called (``budget=float32_only``)
    or something not callable fails, since it would check nothing."""
    if budget is None:
        return []
    budgets = list(budget) if isinstance(budget, (list, tuple)) else [budget]
    for given in budgets:
        if not callable(given):
            raise CheckFailed(f"budget={given!r} is not a budget: give one made by the course, such as "
                              "reads_each_element_once(\"a\"), or a function of the trace.")
        if (getattr(given, "__module__", None) or "").startswith(__package__) and \
                "<locals>" not in getattr(given, "__qualname__", "<locals>"):
            raise CheckFailed(f"budget={given.__name__} makes a budget but is not one: call it, "
                              f"{given.__name__}(...), with the arrays it checks, as the exercise's test cell does.")
    return budgets


def launch_on_copies(kernel, grid, block, out_shape, dtype, arguments) -> tuple[np.ndarray, np.ndarray, list]:
    """``kernel[grid, block](out, *arguments)`` on device copies; ``out`` poisoned, with a canary after it.

    Returns out, the canary and the arguments as the kernel left them (non-array arguments as given).
    """
    size = int(np.prod(out_shape, dtype=np.int64))
    d_buffer = cuda.to_device(poison((size + CANARY,), dtype))
    d_out = d_buffer[:size].reshape(out_shape)
    d_arguments = [cuda.to_device(np.ascontiguousarray(a)) if isinstance(a, np.ndarray) else a for a in arguments]
    kernel[grid, block](d_out, *d_arguments)
    cuda.synchronize()
    buffer = d_buffer.copy_to_host()
    after = [d.copy_to_host() if isinstance(a, np.ndarray) else a for a, d in zip(arguments, d_arguments)]
    return buffer[:size].reshape(out_shape), buffer[size:], after


RETURNED = "had returned before this read"  # the simulator's words where threads of the block had returned
GUARD_HINT = "Either this thread has no element"  # how `explain_failure`'s advice on a read out of bounds starts
WRITE_GUARD_HINT = "A thread past the end of"  # and its advice on a write past the output


# Where the course and the Python it runs on keep their files: a frame outside them is the student's code
_LIBRARIES = tuple({os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                    *(sysconfig.get_paths()[key] for key in ("stdlib", "purelib", "platlib"))})


def _stub(exc: NotImplementedError) -> str:
    """The kernel, device function or function whose ``raise NotImplementedError()`` ``exc`` comes from: the one
    the simulator names (``In function 'f'``), else the innermost frame of the traceback outside the course's and
    Python's files; "" if none."""
    named = re.match(r"In function '(\w+)'", str(exc))
    if named:
        return named.group(1)
    frames = [frame for frame, _ in traceback.walk_tb(exc.__traceback__)
              if not os.path.abspath(frame.f_code.co_filename).startswith(_LIBRARIES)]
    return frames[-1].f_code.co_name if frames else ""


def explain_failure(name: str, described: str, exc: BaseException, out_name: str = "out") -> str:
    """Why a launch did not finish: not written yet (``name``, or the stub it calls), a fault the simulator found,
    or an error."""
    if isinstance(exc, NotImplementedError):
        stub = _stub(exc)
        if stub and stub != name:
            return (f"{stub} is not written yet ({name} calls it): replace its `raise NotImplementedError()` with "
                    "your code and run its cell.")
        return (
            f"{name} is not written yet: it (or a device function it calls) raised NotImplementedError. "
            "Replace `raise NotImplementedError()` with your code."
        )
    detail = str(exc).strip() or type(exc).__name__
    detail = detail.replace("\n", "\n  ") if isinstance(exc, KernelFault) else f"{type(exc).__name__}: {detail}"
    hint = ""
    if isinstance(exc, OutOfBounds):
        found = re.search(r"out of bounds for `([^`]+)`", detail)
        array = found.group(1) if found else out_name
        if array == out_name:
            hint = f"{WRITE_GUARD_HINT} `{out_name}` needs a guard."
        else:
            hint = (f"{GUARD_HINT} of `{out_name}` and needs a guard, or the index it "
                    f"computed into `{array}` is wrong: check it against the shape and strides.")
    return f"{name} failed with {described}:\n  {detail}" + (f"\n  {hint}" if hint else "")


def in_place_of_guard_hint(message: str, hint: str) -> str:
    """``message`` of a launch that read or wrote out of bounds (`explain_failure`) with its general advice, a guard
    or a wrong index, replaced by ``hint``: a check that knows what the fault means in its exercise says that
    instead."""
    advice = (f"  {GUARD_HINT}", f"  {WRITE_GUARD_HINT}")
    return "\n".join(line for line in message.splitlines() if not line.startswith(advice)) + hint


def run_checked(kernel, name: str, described: str, grid, block, out_shape, dtype, arguments, labels, budgets):
    """Launch (traced when there are budgets); fail on a fault, a write past ``out`` or a changed argument.

    ``labels`` names the arguments in messages. Returns ``out`` and the trace (None without budgets).
    """
    if not is_kernel(kernel):
        raise CheckFailed(f"{name} is not a kernel: write it as a function decorated with @cuda.jit "
                          f"(got {type(kernel).__name__}).")
    parameters = parameter_names(kernel)
    if not _takes(kernel, 1 + len(arguments)):
        given = ", ".join(["the output"] + [f"an array of shape {a.shape}" if isinstance(a, np.ndarray) else repr(a)
                                            for a in arguments])
        raise CheckFailed(f"{name} takes {plural(len(parameters), 'parameter')} ({', '.join(parameters)}), but the "
                          f"check launches it with {1 + len(arguments)}: {given}. Keep the parameters the exercise "
                          "gives.")
    try:
        with trace() if budgets else contextlib.nullcontext() as recorded:
            got, canary, after = launch_on_copies(kernel, grid, block, out_shape, dtype, arguments)
    except Exception as exc:
        raise CheckFailed(explain_failure(name, described, exc, labels[0] if labels else "out")) from None
    output = f"`{labels[0] if labels else 'out'}`"  # the output by its parameter name
    if not np.array_equal(canary, poison(canary.shape, dtype), equal_nan=canary.dtype.kind == "f"):
        raise CheckFailed(
            f"{name} wrote past the end of {output} with {described}: a thread past the end of the array needs a guard."
        )
    for position, (before, now) in enumerate(zip(arguments, after), start=1):
        if isinstance(before, np.ndarray) and not np.array_equal(before, now, equal_nan=before.dtype.kind == "f"):
            label = labels[position] if position < len(labels) else f"argument {position + 1}"
            raise CheckFailed(f"{name} changed its input {label} with {described}: a kernel must only write to its "
                              f"output, {output}.")
    return got, recorded


_PER_THREAD = contextvars.ContextVar("per_thread", default=1)


def planned_per_thread() -> int:
    """Inside a budget: the elements of each input that the launch's plan gives a thread (`Case.per_thread`)."""
    return _PER_THREAD.get()


def check_budgets(name: str, described: str, budgets, recorded, parameters: list[str], per_thread: int = 1) -> None:
    """Run each budget on the launch's trace (``per_thread``: its plan's `Case.per_thread`); say which one a correct
    kernel is over, and why."""
    if budgets and not len(recorded):
        raise CheckFailed(f"{name} ran, but the course simulator kept no trace of it, so its budget cannot be "
                          "checked: a kernel without source code (built by exec from a string) runs on numba's "
                          "simulator. Define it in a notebook cell or a .py file.")
    planned = _PER_THREAD.set(per_thread)
    try:
        for budget in budgets:
            budget(recorded.last)
    except BudgetExceeded as exc:  # the rule it breaks first (without the kernel's name again), then the launch
        reason = str(exc).removeprefix(f"{recorded.last.kernel}: ")
        raise CheckFailed(f"{name} is correct but over its budget: {reason}\n  (with {described})") from None
    except UnknownArray as exc:  # the budget names an array the kernel does not have
        raise CheckFailed(
            f"{name}: {exc.args[0]}. Keep the parameter names the exercise gives "
            f"({', '.join(parameters)}): the budget refers to them."
        ) from None
    finally:
        _PER_THREAD.reset(planned)


def report(name: str, count: int, quiet: bool, unit: str = "launch", budgeted: bool = False) -> None:
    """The success line: ``✓ name: correct on 3 launches``, and ``, within its budget`` when one was checked; a
    check of none fails (it passed nothing)."""
    if not count:
        raise CheckFailed(f"{name} was checked on {plural(0, unit)}, which shows nothing: give the check at least "
                          f"one {unit}.")
    if not quiet:
        print(f"✓ {name}: correct on {plural(count, unit)}{', within its budget' if budgeted else ''}")


def explain_mismatch(name, kase, got, expected, bad, out_name: str = "out") -> str:
    """The first wrong element of ``out_name`` (the kernel's own name for its output), expected against got."""
    first = tuple(bad[0])
    value = got[first]
    lines = [
        f"{name} gave a wrong result with {kase.describe()}:",
        f"  {out_name}{_index(first)} should be {expected[first].item()!r}, got {value.item()!r}"
        + (POISONED if _is_poison(value) else ""),
        f"  {len(bad)} of {got.size} elements are wrong; the first: "
        + ", ".join(_index(ix) for ix in bad[:5]),
    ]
    return "\n".join(lines)


def _swapped_axes_hint(kase: Case, got: np.ndarray, bad: np.ndarray) -> str:
    """For a 2-D ``out`` right where written, and written exactly where the row is below the launch's threads along x
    and the column below those along y (where the two extents differ, and no guard against the wrong shape gives the
    same): the kernel took its row from x and its column from y."""
    if got.ndim != 2 or len(kase.block) < 2:
        return ""
    rows, cols = got.shape
    x, y = (kase.grid + (1,))[0] * kase.block[0], (kase.grid + (1,))[1] * kase.block[1]
    written = (min(rows, x), min(cols, y))
    if written in ((rows, cols), (rows, min(cols, rows)), (min(rows, cols), cols)):
        return ""
    rest = np.ones(got.shape, bool)
    rest[:written[0], :written[1]] = False
    unwritten = np.isnan(got) if got.dtype.kind == "f" else got == _poison_value(got.dtype)
    if len(bad) != rest.sum() or not (rest & unwritten)[tuple(bad.T)].all():  # wrong: the rest, unwritten, only
        return ""
    return (f"\n  Only out[0:{written[0]}, 0:{written[1]}] was written, as if the row came from x ({x} threads along "
            f"x) and the column from y ({y} along y). cuda.grid(2) gives (x, y): x counts along a row's columns (the "
            "fastest-varying index), y along the rows: c, r = cuda.grid(2), or in one block c = cuda.threadIdx.x, "
            "r = cuda.threadIdx.y.")


def spec_output(spec, arguments, shape=None, expects: str = "") -> np.ndarray:
    """``spec(*arguments)`` as an array; a spec that returns None, or not an array of ``shape`` (when given, as
    ``expects`` says), fails naming it."""
    result = spec(*arguments)
    if result is None:
        raise CheckFailed(f"{kernel_name(spec)} returned None: a spec returns the output it computes (is a `return` "
                          "missing?).")
    result = np.asarray(result)
    if shape is not None and result.shape != tuple(shape):
        raise CheckFailed(f"{kernel_name(spec)} returned an array of shape {result.shape}, but {expects} "
                          f"{tuple(shape)}: a spec returns the whole output, as the kernel must write it.")
    return result


def check_kernel(
    kernel,
    spec: Callable[..., np.ndarray],
    cases: Iterable[Case],
    *,
    dtype=np.float32,
    seed: int = 0,
    name: str | None = None,
    quiet: bool = False,
    budget: Callable | Sequence[Callable] | None = None,
) -> None:
    """Run ``kernel[grid, block](out, *inputs)`` for every case; compare with ``spec(*inputs)``.

    ``budget``, if given, is called with the launch's trace (`gpucourse.trace`) once the
    result is right, e.g. ``budget=lambda t: t.assert_reads_per_element("a", exactly=1)`` (or a list of
    such budgets); the
    launches then run on the course simulator, also on a GPU machine.
    """
    __tracebackhide__ = True
    name = name or kernel_name(kernel)
    budgets, parameters = budget_list(budget), parameter_names(kernel)
    rng = np.random.default_rng(seed)
    cases = list(cases)
    for kase in cases:
        inputs = [random_array(rng, shape, dtype) for shape in kase.inputs]
        expected = spec_output(spec, inputs, kase.out, "the case expects").astype(dtype)
        described = kase.describe()
        labels = ["out"] + [f"number {k}" for k in range(1, len(inputs) + 1)]
        got, recorded = run_checked(kernel, name, described, kase.grid, kase.block, kase.out, dtype, inputs,
                                    labels, budgets)
        bad = _mismatches(got, expected)
        if len(bad):
            raise CheckFailed(explain_mismatch(name, kase, got, expected, bad, parameters[0] if parameters else "out")
                              + _swapped_axes_hint(kase, got, bad))
        check_budgets(name, described, budgets, recorded, parameters)
    report(name, len(cases), quiet, budgeted=bool(budgets))


def call_function(function: Callable, name: str, args: tuple, at: str = ""):
    """``function(*args)``; what it raises becomes a `CheckFailed` (not written yet, or the call and the error;
    ``at`` describes the call where its arguments' reprs would not)."""
    __tracebackhide__ = True
    try:
        return function(*args)
    except NotImplementedError as exc:
        callee = _unwritten_callee(function, exc)
        if callee:
            raise CheckFailed(f"{callee}, which {name} calls, is not written yet: write it and run its cell, then "
                              "this one.") from None
        raise CheckFailed(f"{name} is not written yet: replace `raise NotImplementedError()` with your code.") from None
    except CheckFailed:
        raise  # a check the function calls (a stand-in the checker passes it) said what is wrong
    except Exception as exc:
        call = f"{name} raised {type(exc).__name__} at {at}" if at else \
            f"{name}({', '.join(_argument(a) for a in args)}) raised {type(exc).__name__}"
        raise CheckFailed(f"{call}: {exc}") from None


def _argument(value) -> str:
    """``value`` as a call's message shows it: an array of more than a few elements by its shape and dtype (its
    repr ran to 200 lines for lecture 1's 1000 floats), anything else by its repr."""
    if hasattr(value, "shape") and hasattr(value, "dtype") and getattr(value, "size", 0) > 8:
        return f"<{value.dtype} array of shape {tuple(value.shape)}>"
    return repr(value)


def _unwritten_callee(function: Callable, exc: BaseException) -> str:
    """The function or kernel that ``function`` called when ``exc`` (a stub's NotImplementedError) came out of it,
    read from the line of ``function`` it passed through; "" when ``function`` raised it itself."""
    code, tb, line = getattr(function, "__code__", None), exc.__traceback__, None
    while tb is not None:
        if tb.tb_frame.f_code is code:
            line = (tb.tb_next is not None, linecache.getline(code.co_filename, tb.tb_lineno))
        tb = tb.tb_next
    if not line or not line[0]:
        return ""
    statement = re.sub(r"^\s*(return\s+|[\w\s,.\[\]]+?=(?!=))", "", line[1])  # what is called, not assigned
    called = re.match(r"\s*(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*)\s*[\[(]", statement)
    return called.group(1) if called else ""


def _equal(got, expected) -> bool:
    """``got == expected`` as one bool; False where it is not one (an array of several elements against a number)."""
    try:
        return bool(got == expected)
    except (TypeError, ValueError):
        return False


def wrong_answer(name: str, args: tuple, expected, got) -> str:
    """What is wrong with ``got`` as the answer of ``name(*args)``; empty if nothing."""
    call = f"{name}({', '.join(repr(a) for a in args)})"
    if not _equal(got, expected):
        return f"{call} should be {expected!r}, got {got!r}"
    if type(expected) is int and isinstance(got, np.integer):
        return (f"{call} should return int {expected!r}, got {got!r}: a NumPy integer, which a GPU refuses as a "
                "launch's size (numba-cuda takes Python ints only); return int(...)")
    if type(got) is not type(expected):
        return f"{call} should return {type(expected).__name__} {expected!r}, got {type(got).__name__} {got!r}"
    return ""


def check_function(
    function: Callable,
    calls: Iterable[tuple[tuple, object]],
    *,
    hint: str = "",
    name: str | None = None,
    quiet: bool = False,
) -> None:
    """Check a plain (host) Python function: ``function(*args)`` must return ``expected``, of its type.

    ``calls`` holds ``(args, expected)`` pairs. The first wrong answer raises `CheckFailed`
    naming the call, the expected and the returned value, and ``hint``.
    """
    __tracebackhide__ = True
    if not callable(function):
        raise CheckFailed(f"{name or 'the function'} is {function!r}, not a function: write it with def.")
    name = name or function.__name__
    calls = list(calls)
    for call in calls:
        if not (isinstance(call, tuple) and len(call) == 2 and isinstance(call[0], (tuple, list))):
            raise CheckFailed(f"check_function takes (arguments, answer) pairs, the arguments in a tuple, such as "
                              f"[((10, 4), 3)] for {name}(10, 4) == 3; got {call!r}.")
        args, expected = call
        got = call_function(function, name, args)
        problem = wrong_answer(name, args, expected, got)
        if problem:  # the hint is about the value: not for the right value of another type
            raise CheckFailed(problem + (f"\n  Hint: {hint}" if hint and not _equal(got, expected) else ""))
    report(name, len(calls), quiet, unit="call")
