"""Checks of module 1 (threads, blocks and grids) beyond `check_kernel`: `check_copies`, a host function that
launches kernels, judged on its result and on the copies it makes between host and device."""

from __future__ import annotations

from typing import Callable, Iterable

import numpy as np

from ..run import BACKEND
from .core import CheckFailed, _index, _mismatches, call_function, plural, random_array, report


def _copies_problem(name: str, copies, to_device: int, to_host: int) -> str:
    """What is wrong with the copies counted, or ''."""
    if (copies.to_device, copies.to_host) == (to_device, to_host):
        return ""
    return "\n".join([
        f"{name} gives the right result, but copies {copies.to_device} arrays to the device and {copies.to_host} back",
        f"  (should be {to_device} and {to_host}). Every NumPy array passed to a launch is copied in before it "
        "and back",
        "  after it: copy each input in once (cuda.to_device), allocate the others on the device",
        "  (cuda.device_array_like), launch on device arrays, and copy the result back once (.copy_to_host()).",
    ])


def _launches_problem(name: str, launched: int, launches: int | None) -> str:
    """What is wrong with the number of kernels a call launched, or ''."""
    if launches is None or launched == launches:
        return ""
    done = f"launches {plural(launched, 'kernel')}" if launched else \
        "launches no kernel: it computes on the host, with NumPy"
    return (f"{name} gives the right result, but {done}; the exercise launches {launches}, each step on the device "
            "(on device arrays), and copies only the input in and the result back")


def check_copies(function: Callable, spec: Callable, sizes: Iterable[int] = (1, 1000, 4099), *,
                 to_device: int = 1, to_host: int = 1, launches: int | None = None, quiet: bool = False) -> None:
    """``function(x)`` (a host function that launches kernels) must return ``spec(x)`` as a host array, for a random
    float32 ``x`` of each size, with exactly ``to_device`` copies to the device and ``to_host`` back, and (given)
    ``launches`` kernel launches, so that no step is done in NumPy instead.

    The copies and launches are counted on the CPU simulator (`gpucourse.run.counting_copies`, `trace`); on a GPU
    only the result is checked, and the success line says so.
    """
    __tracebackhide__ = True
    name = getattr(function, "__name__", "function")
    rng = np.random.default_rng(len(name))
    sizes = list(sizes)
    for size in sizes:
        x = random_array(rng, (size,), np.float32)
        expected = spec(x.copy())
        if BACKEND.on_gpu:
            got, copies = call_function(function, name, (x,)), None
        else:
            from ..run import counting_copies, trace  # noqa: PLC0415

            with counting_copies() as copies, trace() as traced:
                got = call_function(function, name, (x,))
        if not isinstance(got, np.ndarray):
            if hasattr(got, "copy_to_host"):
                raise CheckFailed(f"{name} returns a device array: return the host array that .copy_to_host() "
                                  "gives, as the caller expects NumPy")
            raise CheckFailed(f"{name}(x) should return a NumPy array like x, got {type(got).__name__} {got!r:.60}")
        if got.shape != expected.shape or got.dtype != expected.dtype:
            raise CheckFailed(f"{name}(x) for x of {size} float32 should return {expected.shape} {expected.dtype}, "
                              f"got {got.shape} {got.dtype}")
        bad = _mismatches(got, expected)
        if len(bad):
            first = tuple(bad[0])
            raise CheckFailed(f"{name}(x) for x of {size} float32: element {_index(first)} should be "
                              f"{expected[first].item()!r}, got {got[first].item()!r} ({len(bad)} of {size} wrong)")
        problem = "" if copies is None else (_launches_problem(name, len(traced.launches), launches)
                                             or _copies_problem(name, copies, to_device, to_host))
        if problem:
            raise CheckFailed(problem)
    report(name, len(sizes), quiet, unit="call")
    if BACKEND.on_gpu and not quiet:
        print("  (on a GPU only the result is checked: the copies are counted on the CPU simulator)")
