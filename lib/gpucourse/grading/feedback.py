"""In a notebook, the course's own errors show as their message, not as a traceback.

A failed check, a kernel the GPU compiler rejects, a fault the simulator
found (a race, an index out of bounds), a trace asked about an array the
kernel did not touch or an event timed before it was reached is the student's to fix: the
lines of `gpucourse` it passed through (and, under nbgrader, the hidden tests
next to the failing line) would only get in the way. The cell still fails, so
nbgrader still scores it zero.
"""

from __future__ import annotations

from ..run import EventNotReady, KernelCompileError
from ..simulator import BudgetExceeded, KernelFault, UnknownArray
from .core import CheckFailed

COURSE_ERRORS = (CheckFailed, BudgetExceeded, KernelCompileError, KernelFault, UnknownArray, EventNotReady)


def _message_only(shell, etype, value, tb, tb_offset=None):
    """IPython ignores a custom handler's return value: show the error here, as an error output."""
    message = [f"{etype.__name__}: {value}"]
    shell._showtraceback(etype, value, message)
    return message


def install() -> bool:
    """Register the handler with the running IPython shell; False outside IPython."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    shell = get_ipython()
    if shell is None:
        return False
    shell.set_custom_exc(COURSE_ERRORS, _message_only)
    return True
