"""In a notebook, the course's own errors show as their message, not as a traceback.

A failed check, a kernel the GPU compiler rejects, a fault the simulator
found (a race, an index out of bounds), a trace asked about an array the
kernel did not touch or an event timed before it was reached is the student's to fix: the
lines of `gpucourse` it passed through (and, under nbgrader, the hidden tests
next to the failing line) would only get in the way. The cell still fails, so
nbgrader still scores it zero.
"""

from __future__ import annotations

import textwrap

from ..run import EventNotReady, KernelCompileError
from ..simulator import BudgetExceeded, KernelFault, UnknownArray
from .core import CheckFailed

COURSE_ERRORS = (CheckFailed, BudgetExceeded, KernelCompileError, KernelFault, UnknownArray, EventNotReady)


# columns: a message's lines are wrapped between words to fit a notebook, nbgrader's Validate box, and `nbgrader
# validate` on the command line, which indents each line 4 columns and cuts it at 87 (its Validator.width, 90, less 3)
WIDTH = 83


def shown(etype, value) -> list[str]:
    """The error output's text: ``Name: message``, each line of it wrapped between words at `WIDTH` columns (under
    its own indentation, two more for the lines it continues on); the exception's message itself is unchanged."""
    lines = []
    for line in f"{etype.__name__}: {value}".splitlines() or [""]:
        indent = " " * (len(line) - len(line.lstrip(" ")))
        lines += textwrap.wrap(line, WIDTH, subsequent_indent=indent + "  ", break_long_words=False,
                               break_on_hyphens=False) if len(line) > WIDTH else [line]
    return ["\n".join(lines)]


def _message_only(shell, etype, value, tb, tb_offset=None):
    """IPython ignores a custom handler's return value: show the error here, as an error output."""
    message = shown(etype, value)
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
