"""Warp-wide functions that a library defines outside the simulator (the course's tensor-core ``mma``).

A function called in a kernel that carries an ``__warp_emulation__`` attribute (a
``numba.core.extending.intrinsic`` emitting inline PTX, say) runs here: every
lane of each warp that calls it must take part, as ``mma.sync.aligned``
requires. The emulation gets, per argument, an array ``(warps, 32, n)`` of the
lanes' values (a tuple argument gives ``n`` values, a number one) and returns
an array ``(warps, 32, m)``; each lane gets back the tuple of its ``m`` values.
The emulation is a model of the instruction, not the hardware: where the hardware
rounds otherwise (a tensor core's aligned, truncated sums), results agree within
the library's stated bound, and bit for bit only with the model.
"""

from __future__ import annotations

import numpy as np

from .errors import WarpFault, fault
from .geometry import WARP_SIZE

ATTRIBUTE = "__warp_emulation__"


def emulation(function):
    """The warp-wide emulation ``function`` carries, or None."""
    try:
        return getattr(function, ATTRIBUTE, None)
    except Exception:  # an object whose attribute lookup fails is no warp-wide function
        return None


def _per_lane(runtime, value, lanes: np.ndarray) -> np.ndarray:
    """``value`` (a number, a lane array, or a tuple of them) as an array (len(lanes), n)."""
    parts = value if isinstance(value, tuple) else (value,)
    columns = []
    for part in parts:
        part = np.asarray(part)
        columns.append(part[lanes] if part.ndim else np.broadcast_to(part, lanes.shape))
    return np.stack(columns, axis=-1)


def run_warp_wide(runtime, function, emulate, args):
    """``function(*args)`` for the active lanes, computed warp by warp by ``emulate``."""
    g = runtime.geometry
    name = getattr(function, "__name__", None) or getattr(function, "_name", "a warp-wide function")
    active = runtime.active_lanes()
    warps = np.unique(g.warp_of[active])
    first = g.warp_first_lane[active][np.searchsorted(g.warp_of[active], warps)]
    lanes = first[:, None] + np.arange(WARP_SIZE)[None, :]  # (warps, 32)
    short = g.warp_size_of[first] < WARP_SIZE
    if short.any():
        lane = int(first[np.flatnonzero(short)[0]])
        raise fault(WarpFault, runtime.where(runtime.site),
                    f"`{name}` is a warp-wide instruction, but the warp of {g.thread_name(lane)} has only "
                    f"{g.warp_size_of[lane]} threads: use blocks whose size is a multiple of 32")
    absent = ~runtime.mask[lanes]
    if absent.any():
        w, k = map(int, np.argwhere(absent)[0])
        lane = int(lanes[w, k])
        state = "has returned" if runtime.exited[lane] else "is not executing this call (it took another branch)"
        raise fault(WarpFault, runtime.where(runtime.site),
                    f"`{name}` needs all 32 lanes of a warp, but {g.thread_name(lane)} {state}; "
                    "call it where every lane of the warp does")
    flat = lanes.reshape(-1)
    inputs = [_per_lane(runtime, a, flat).reshape(lanes.shape + (-1,)) for a in args]
    result = np.asarray(emulate(*inputs))
    outputs = []
    for j in range(result.shape[-1]):
        values = np.zeros(g.lanes, result.dtype)
        values[flat] = result[..., j].reshape(-1)
        outputs.append(values)
    return tuple(outputs)


__all__ = ["ATTRIBUTE", "emulation", "run_warp_wide"]
