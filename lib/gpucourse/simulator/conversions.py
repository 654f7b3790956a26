"""Floats to integers as PTX's ``cvt`` converts them: NaN to 0 and values beyond the type's range clamped to
its ends (NumPy's cast gives x86's lowest integer for all of those)."""

from __future__ import annotations

import numpy as np


def saturated(x: np.ndarray, dtype: np.dtype) -> np.ndarray:
    """``x`` (floats already rounded as the conversion rounds, or to be truncated toward zero) as ``dtype``,
    clamped by comparison: 2**63 - 1 as a float is 2**63, which ``np.clip`` would turn into the lowest int64."""
    info = np.iinfo(dtype)
    with np.errstate(invalid="ignore"):  # the values out of range are replaced below
        result = x.astype(dtype)
        high, low, nan = x >= info.max, x <= info.min, np.isnan(x)
    if high.any() or low.any() or nan.any():
        result = np.where(nan, 0, np.where(high, info.max, np.where(low, info.min, result))).astype(dtype)
    return result
