"""The bit intrinsics ``cuda.popc``, ``cuda.clz``, ``cuda.ffs`` and ``cuda.brev`` on lane arrays.

Each works on the unsigned bit pattern of its argument's width, in the types
numba-cuda's typing gives the call (``ffs`` returns uint32, ``brev`` takes
uint32 or uint64, the others keep their argument's type).
"""

from __future__ import annotations

import numpy as np
from numba.cuda import stubs

from .arithmetic import typed

_BYTE_REVERSED = np.array([int(f"{b:08b}"[::-1], 2) for b in range(256)], np.uint8)


def _unsigned(value) -> np.ndarray:
    value = np.asarray(value)
    return value.astype(np.dtype(f"u{value.dtype.itemsize}"), copy=False)


def _count(bits: np.ndarray) -> np.ndarray:
    return np.bitwise_count(bits).astype(np.int64)


def _popc(value):
    return _count(_unsigned(value))


def _clz(value):
    bits = _unsigned(value).copy()
    shift = 1
    while shift < bits.dtype.itemsize * 8:  # smear the highest set bit into every lower one
        bits |= bits >> bits.dtype.type(shift)
        shift *= 2
    return bits.dtype.itemsize * 8 - _count(bits)


def _ffs(value):
    bits = _unsigned(value)
    lowest = bits & (~bits + bits.dtype.type(1))
    return np.where(bits == 0, 0, _count(lowest - bits.dtype.type(1)) + 1)


def _brev(value):
    bits = _unsigned(value)
    lanes = np.atleast_1d(bits)
    reversed_bytes = _BYTE_REVERSED[lanes.view(np.uint8).reshape(len(lanes), -1)][:, ::-1]
    result = np.ascontiguousarray(reversed_bytes).view(bits.dtype).reshape(lanes.shape)
    return result if bits.ndim else result[0]


def _intrinsic(stub, implementation):
    def apply(value):
        return typed(stub, value, implementation=implementation)

    return staticmethod(apply)


class BitIntrinsics:
    """Mixed into the simulated ``cuda`` namespace."""

    popc = _intrinsic(stubs.popc, _popc)
    clz = _intrinsic(stubs.clz, _clz)
    ffs = _intrinsic(stubs.ffs, _ffs)
    brev = _intrinsic(stubs.brev, _brev)
