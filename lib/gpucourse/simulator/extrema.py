"""The minimum and maximum of two floats as a GPU computes them (PTX's ``min``/``max``, libdevice's
``fmin``/``fmax``, CUDA's ``__hmin``/``__hmax``): -0.0 < +0.0, and a NaN loses to a number unless asked to
win (``max.NaN``, ``__hmax_nan``). NumPy's ``maximum`` spreads NaNs and its ``fmax`` may return either zero."""

from __future__ import annotations

import numpy as np


def extremum(a, b, larger: bool, nan_wins: bool = False):
    """The larger (or smaller) of ``a`` and ``b`` lane by lane, in the type NumPy promotes them to."""
    if larger:
        result = (np.maximum if nan_wins else np.fmax)(a, b)
    else:
        result = (np.minimum if nan_wins else np.fmin)(a, b)
    zeros = (a == 0) & (b == 0)
    if np.any(zeros):
        result = np.where(zeros, np.where(np.signbit(a) != larger, a, b), result)
    return result
