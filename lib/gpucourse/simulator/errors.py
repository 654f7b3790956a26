"""The faults the course simulator stops a launch for, the budget a trace can find exceeded, and an array a trace
was asked about that the kernel did not touch."""

from __future__ import annotations


class KernelFault(Exception):
    """A kernel did something a GPU would not do reliably; the message says who, where and why."""


class OutOfBounds(KernelFault, IndexError):
    """An index outside an array, negative ones included."""


class DataRace(KernelFault):
    """Two threads touch one element, at least one writes, and nothing orders them."""


class DivergentBarrier(KernelFault):
    """A barrier that some live threads of the block (or warp) never reach."""


class UninitializedRead(KernelFault):
    """A read of shared or local memory, or of a fresh device allocation, that nothing has written."""


class WarpFault(KernelFault):
    """A warp primitive that reads from, or names, a lane that is not taking part."""


class UnsupportedInKernel(KernelFault):
    """Python the course simulator cannot run (the GPU compiler may reject it too)."""


class EndlessLoop(KernelFault):
    """A launch ran past its budget of loop iterations: it did not finish."""


class TooSlowToSimulate(KernelFault):
    """A launch ran past the simulator's time budget: a problem too big to simulate on a CPU."""


class BudgetExceeded(AssertionError):
    """A kernel is correct but touches memory more (or worse) than its budget allows."""


class UnknownArray(KeyError):
    """A trace asked about an array the kernel did not touch; shown as its message (a KeyError's is quoted)."""

    def __str__(self) -> str:
        return self.args[0]


def fault(kind: type, where: str, detail: str) -> KernelFault:
    """``kind`` with the standard two-part message: where (kernel, line) and what."""
    return kind(f"{where}\n  {detail}")
