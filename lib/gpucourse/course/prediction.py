"""'Your turn' cells: the student predicts a number or a pattern, then a check says right or wrong, and why;
or writes a small kernel (a puzzle), and a library check runs it at once.

The notebook computes ``actual`` by running something (a trace count, a compiled kernel's
registers), never by typing it in; ``guess`` is what the student wrote. ``None`` means not
answered yet: the check says so and shows nothing of the answer, so a notebook run top to
bottom with the guesses left empty passes.
"""

from __future__ import annotations

import math
import numbers


def _words(text: str) -> str:
    return " ".join(text.replace("%", " ").lower().split())


def _same(guess, actual, tolerance: float) -> bool:
    """Equal, numbers within the relative ``tolerance``; sequences element by element."""
    if isinstance(actual, numbers.Real) and not isinstance(actual, bool):  # NumPy's numbers too
        try:
            return math.isclose(float(guess), float(actual), rel_tol=tolerance, abs_tol=0)
        except (TypeError, ValueError):
            return False
    if isinstance(actual, str) and isinstance(guess, str):  # words: their case, spaces and % signs aside
        return _words(guess) == _words(actual)
    if isinstance(actual, str) or isinstance(guess, str):
        return False
    try:
        guessed, actual = list(guess), list(actual)
    except TypeError:
        return guess == actual
    return len(guessed) == len(actual) and all(_same(g, a, tolerance) for g, a in zip(guessed, actual))


def _unit_slip(guess, actual, tolerance: float) -> str:
    """A note when a wrong numeric ``guess`` is ``actual`` times a power of 1000 (µs for ms, bytes for KB), or is
    no number where the answer is one (``"twelve"``, ``[12]``)."""
    if not isinstance(actual, numbers.Real) or isinstance(actual, bool):
        return ""
    try:
        guessed = float(guess)
    except (TypeError, ValueError):
        return " (The answer is a number: write it as one, such as 12 or 0.5.)"
    ratio = guessed / float(actual) if actual else 0.0
    for factor in (1e3, 1e6, 1e9):
        for times, words in ((factor, "too large"), (1 / factor, "too small")):
            if math.isclose(ratio, times, rel_tol=max(tolerance, 0.05)):
                return f" (Your number is {factor:,.0f} times {words}: check the unit the question asks for.)"
    return ""


def check_prediction(guess, actual, why: str, tolerance: float = 0.0) -> None:
    """Print whether ``guess`` equals ``actual`` (within a relative ``tolerance`` for numbers), with ``why``, or
    that it is not answered yet (``guess`` None). Returns nothing, so that a cell that ends with it shows only
    the verdict. Sequences compare element by element, so a guessed list matches a NumPy array.
    """
    if guess is None:
        print("Not answered yet: write your prediction in place of None, then run this cell again.")
        return
    shown = actual.tolist() if hasattr(actual, "tolist") else actual  # NumPy values print as plain Python
    if isinstance(shown, float) and shown.is_integer():
        shown = int(shown)  # a count computed as a float reads as one: 4, not 4.0
    if _same(guess, actual, tolerance):
        print(f"✓ Right: {shown}. {why}")
    else:
        print(f"✗ Not quite: you said {guess}, the run says {shown}.{_unit_slip(guess, actual, tolerance)} {why}")


def try_puzzle(check, kernel, *args, **kwargs) -> bool:
    """Run the library ``check(kernel, *args, **kwargs)`` on a puzzle's kernel; print ✓ or what is wrong.

    A check raises an AssertionError (the course's `CheckFailed`) with its message: printed, not raised, so
    that a notebook run top to bottom with the puzzle not yet solved passes. Returns whether it passed.
    """
    try:
        check(kernel, *args, **kwargs)
    except AssertionError as exc:
        print(f"✗ Not yet: {exc}")
        return False
    return True
