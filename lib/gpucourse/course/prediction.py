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
from collections.abc import Mapping, Set

import numpy as np


def _words(text: str) -> str:
    return " ".join(text.replace("%", " ").lower().split())


def _is_bool(value) -> bool:
    return isinstance(value, (bool, np.bool_))


def _same(guess, actual, tolerance: float) -> bool:
    """Equal, numbers within the relative ``tolerance``; sequences element by element; True or False only by a
    bool (not 0, 1 or "False")."""
    if _is_bool(actual):
        return _is_bool(guess) and bool(guess) == bool(actual)
    if isinstance(actual, numbers.Real) and not isinstance(actual, bool):  # NumPy's numbers too
        try:
            return math.isclose(float(guess), float(actual), rel_tol=tolerance, abs_tol=0)
        except (TypeError, ValueError):
            return False
    if isinstance(actual, str) and isinstance(guess, str):  # words: their case, spaces and % signs aside
        return _words(guess) == _words(actual)
    if isinstance(actual, str) or isinstance(guess, str):
        return False
    if isinstance(actual, (Mapping, Set)) or isinstance(guess, (Mapping, Set)):  # no order: keys, values, members
        if isinstance(actual, Mapping) and isinstance(guess, Mapping):
            return guess.keys() == actual.keys() and all(_same(guess[k], actual[k], tolerance) for k in actual)
        return isinstance(actual, Set) and isinstance(guess, Set) and guess == actual
    try:
        guessed, actual = list(guess), list(actual)
    except TypeError:  # not both sequences: one number against several is wrong
        return np.ndim(guess) == np.ndim(actual) and guess == actual
    return len(guessed) == len(actual) and all(_same(g, a, tolerance) for g, a in zip(guessed, actual))


ELEMENTS_FOR_BYTES = ("elements where the question counts bytes, or the other way round? A float32 is 4 bytes, a "
                      "float16 2, a float64 8.")


def _unit_slip(guess, actual, tolerance: float, unit: str | None = None) -> str:
    """A note when a wrong ``guess`` (of the right kind: `_wrong_kind` answers the others) is a number off by a
    unit: a percent for a fraction (25 for 0.25), ``actual`` times a power of 1000 (µs for ms, bytes for KB), or,
    where the ``unit`` is bytes or elements, a whole count times 2, 4 or 8 (elements for bytes; for several counts,
    each the same times off). A count of blocks, sectors or copies off by 2 is no unit slip: there the note would
    send the student after bytes the question never asked about."""
    if _is_bool(actual) or isinstance(actual, str):
        return ""
    if not isinstance(actual, numbers.Real):
        several = hasattr(actual, "__len__") and len(actual) > 1 and hasattr(guess, "__len__")
        if several and unit in ("bytes", "elements"):  # strides in bytes (NumPy's) where they count elements
            return _elements_for_bytes(guess, actual)
        return ""
    try:
        guessed = float(guess)
    except (TypeError, ValueError):
        return ""
    ratio = guessed / float(actual) if actual else 0.0
    if abs(float(actual)) <= 1 and math.isclose(ratio, 100, rel_tol=max(tolerance, 0.05)):
        return (f" (Your number is 100 times too large: a percent where the question asks for a fraction? "
                f"{guessed:g}% is {guessed / 100:g}.)")
    if off := (_off_by(ratio, (2**10, 2**20, 2**30), min(tolerance, 0.01))  # KiB, MiB, GiB: exactly so many
               or _off_by(ratio, (1e3, 1e6, 1e9), max(tolerance, 0.05))):
        return f" (Your number is {off}: check the unit the question asks for.)"
    if unit in ("bytes", "elements") and guessed.is_integer() and float(actual).is_integer() and (
            off := _off_by(ratio, (2, 4, 8), 0.0)):
        return f" (Your number is {off}: {ELEMENTS_FOR_BYTES})"
    return ""


def _elements_for_bytes(guess, actual) -> str:
    """The elements-for-bytes note for a sequence of whole counts, each guessed the same 2, 4 or 8 times off."""
    try:
        pairs = [(float(g), float(a)) for g, a in zip(guess, actual, strict=True)]
    except (TypeError, ValueError):
        return ""
    if not all(g.is_integer() and a.is_integer() for g, a in pairs) or not any(a for _, a in pairs):
        return ""
    ratios = {g / a if a else (1.0 if g == 0 else math.nan) for g, a in pairs if a or g}
    off = _off_by(ratios.pop(), (2, 4, 8), 0.0) if len(ratios) == 1 else ""
    return f" (Your numbers are each {off}: {ELEMENTS_FOR_BYTES})" if off else ""


def _wrong_kind(guess, actual) -> str:
    """What to write instead, where ``guess`` is not of the answer's kind: text that is no plain number, a list or a
    bool where the answer is one number; not a bool where it is True or False; not a list where it is several
    numbers. "" where the guess is of the right kind (right or wrong)."""
    if _is_bool(actual):
        return "" if _is_bool(guess) else "the answer is True or False: write one of them, without quotes"
    if isinstance(actual, numbers.Real):
        if _is_bool(guess) or not isinstance(guess, (numbers.Real, str)):
            return "the answer is one number: write it as one, such as 12 or 0.5"
        try:
            float(guess)
        except (TypeError, ValueError):
            return "the answer is a number: write it alone, such as 12 or 0.5, without quotes or a unit"
        return ""
    several = not isinstance(actual, (str, Mapping, Set)) and hasattr(actual, "__len__") and len(actual) > 1
    if several and (isinstance(guess, (numbers.Real, str)) or not hasattr(guess, "__len__")):
        return f"the answer is {len(actual)} numbers: write them as a list, such as [1.5, 2]"
    return ""


def _off_by(ratio: float, factors, tolerance: float) -> str:
    """"4 times too small" where ``ratio`` (guess over answer) is one of ``factors`` or its inverse, within the
    relative ``tolerance``; else ""."""
    for factor in factors:
        for times, words in ((factor, "too large"), (1 / factor, "too small")):
            if math.isclose(ratio, times, rel_tol=tolerance):
                return f"{factor:,.0f} times {words}"
    return ""


def check_prediction(guess, actual, why: str, tolerance: float = 0.0, unit: str | None = None,
                     choices=None) -> None:
    """Print whether ``guess`` equals ``actual`` (within a relative ``tolerance`` for numbers), with ``why``, or
    that it is not answered yet (``guess`` None). Returns nothing, so that a cell that ends with it shows only
    the verdict. Sequences compare element by element, so a guessed list matches a NumPy array.

    ``unit``: what a numeric answer counts, where a slip of the unit is likely: "bytes" (or "elements") adds, to a
    whole guess off by 2, 4 or 8, the question whether it counted elements. ``choices``: the words the question
    offers (``actual`` is one of them); a guess that is none of them (case, spaces and % signs aside) is asked to
    pick one, and nothing of the answer is shown, as for None. So is a guess of the wrong kind, a slip of form
    rather than a prediction: text that is no plain number ("4 sectors", "25%") or a list where the answer is a
    number, anything but True or False where it is a bool, one number where it is several.
    """
    if guess is None:
        print("Not answered yet: write your prediction in place of None, then run this cell again.")
        return
    if choices is not None:
        choices = [str(c) for c in choices]
        if str(actual) not in choices:
            raise ValueError(f"the answer {actual!r} is not one of the choices {choices}")
        if not any(isinstance(guess, str) and _words(guess) == _words(c) for c in choices):
            offered = " or ".join(filter(None, [", ".join(f'"{c}"' for c in choices[:-1]), f'"{choices[-1]}"']))
            print(f"Not answered yet: you wrote {guess!r}; write {offered} in place of it, then run this cell again.")
            return
    elif kind := _wrong_kind(guess, actual):  # a slip of form, not a prediction: no answer shown
        print(f"Not answered yet: you wrote {guess!r}; {kind}, then run this cell again.")
        return
    shown = actual.tolist() if hasattr(actual, "tolist") else actual  # NumPy values print as plain Python
    if isinstance(shown, float) and shown.is_integer():
        shown = int(shown)  # a count computed as a float reads as one: 4, not 4.0
    if _same(guess, actual, tolerance):
        print(f"✓ Right: {shown}. {why}")
    else:
        said = repr(guess) if isinstance(guess, str) and not isinstance(actual, str) else guess  # "False", quoted
        print(f"✗ Not quite: you said {said}, the run says {shown}.{_unit_slip(guess, actual, tolerance, unit)} {why}")


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
