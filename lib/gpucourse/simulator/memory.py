"""Arrays as a simulated kernel sees them, and the shadow memory that checks them.

A `SimArray` is one array of one memory space (global, shared, local or
constant). Shared arrays hold one copy per block and local arrays one copy per
thread, so an index gets the block or the lane put in front of it.

`AccessRecord` is the shadow that finds data races. For every element it
keeps who last wrote it, who read it and who updated it atomically since, as
(lane, block, warp, block barrier phase, warp barrier phase); ``-2`` stands for
"several". Two accesses are ordered when they come from the same thread, or
from the same block with a ``syncthreads`` between them, or from the same warp
with a ``syncwarp`` between them. A write unordered with any other access is a
race; so is a read unordered with a write, and an atomic unordered with a
plain access.
"""

from __future__ import annotations

import numpy as np

NOBODY = -1
SEVERAL = -2


class AccessRecord:
    """Who touched each element, for one kind of access (write, read or atomic)."""

    FIELDS = ("lane", "block", "warp", "block_phase", "warp_phase")

    def __init__(self, size: int):
        self.lane = np.full(size, NOBODY, np.int64)
        self.block = np.full(size, NOBODY, np.int64)
        self.warp = np.full(size, NOBODY, np.int64)
        self.block_phase = np.zeros(size, np.int64)
        self.warp_phase = np.zeros(size, np.int64)
        self.used = False

    def at(self, elements: np.ndarray) -> tuple[np.ndarray, ...]:
        return tuple(getattr(self, f)[elements] for f in self.FIELDS)

    def put(self, elements: np.ndarray, values: tuple) -> None:
        for f, v in zip(self.FIELDS, values):
            getattr(self, f)[elements] = v
        self.used = True

    def clear(self, elements: np.ndarray) -> None:
        if self.used:
            self.lane[elements] = NOBODY
            self.block[elements] = NOBODY
            self.warp[elements] = NOBODY


def unordered(record: tuple, who: tuple) -> np.ndarray:
    """Lanes whose access is not ordered after the recorded one (vectorised)."""
    lane, block, warp, block_phase, warp_phase = record
    me, my_block, my_warp, my_block_phase, my_warp_phase = who
    ordered = (lane == NOBODY) | (lane == me)
    ordered |= (block == my_block) & (block_phase < my_block_phase)
    ordered |= (warp == my_warp) & (warp_phase < my_warp_phase)
    return ~ordered


def group_by_element(elements: np.ndarray, who: tuple) -> tuple[np.ndarray, tuple]:
    """One summary record per distinct element of an instruction: several lanes become SEVERAL."""
    order = np.argsort(elements, kind="stable")
    sorted_elements = elements[order]
    n = len(sorted_elements)
    starts = np.flatnonzero(np.r_[True, sorted_elements[1:] != sorted_elements[:-1]])
    if len(starts) == n:
        return elements, who
    lane, block, warp, block_phase, warp_phase = (np.asarray(v)[order] for v in who)
    counts = np.diff(np.r_[starts, n])

    def same_or_several(values):
        low, high = np.minimum.reduceat(values, starts), np.maximum.reduceat(values, starts)
        return np.where(low == high, low, SEVERAL)

    summary = (
        np.where(counts == 1, lane[starts], SEVERAL),
        same_or_several(block),
        same_or_several(warp),
        np.maximum.reduceat(block_phase, starts),
        np.maximum.reduceat(warp_phase, starts),
    )
    return sorted_elements[starts], summary


def merge_records(old: tuple, new: tuple) -> tuple:
    """Several readers (or atomics) of one element: keep what a later write must be ordered after."""
    o_lane, o_block, o_warp, o_bphase, o_wphase = old
    n_lane, n_block, n_warp, n_bphase, n_wphase = new
    superseded = (o_lane == NOBODY) | ((o_lane == n_lane) & (n_lane >= 0))
    superseded |= (o_block == n_block) & (n_block >= 0) & (o_bphase < n_bphase)
    superseded |= (o_warp == n_warp) & (n_warp >= 0) & (o_wphase < n_wphase)
    keep = ~superseded
    return (
        np.where(keep & (o_lane != n_lane), SEVERAL, n_lane),
        np.where(keep & (o_block != n_block), SEVERAL, n_block),
        np.where(keep & (o_warp != n_warp), SEVERAL, n_warp),
        np.where(keep, np.maximum(o_bphase, n_bphase), n_bphase),
        np.where(keep, np.maximum(o_wphase, n_wphase), n_wphase),
    )


class SimArray:
    """An array in one memory space of a simulated launch."""

    def __init__(self, data: np.ndarray, name: str, space: str, shape: tuple, *, readonly: bool = False,
                 initialised: bool = True, written=None):
        self.data = data
        self.name = name
        self.space = space  # "global", "shared", "local" or "const"
        self.shape = tuple(int(s) for s in shape)
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.dtype = data.dtype
        self.readonly = readonly
        self.flat = data.reshape(-1) if data.flags.c_contiguous else None
        self.element_strides = tuple(int(np.prod(self.shape[k + 1:], dtype=np.int64)) for k in range(self.ndim))
        self.byte_strides = data.strides[-self.ndim:] if self.ndim else ()
        self.byte_offset = _offset_in_allocation(data) if space == "global" else 0
        self.tracked = space in ("global", "shared")
        copies = data.size // max(self.size, 1)
        # Elements written so far, by flat element number (None: all are, or need not be, checked).
        self.written = written if initialised else np.zeros(max(data.size, 1), bool)
        total = self.size * copies
        self.writes = AccessRecord(total) if self.tracked else None
        self.reads = AccessRecord(total) if self.tracked else None
        self.atomics: AccessRecord | None = None
        self.copies = copies

    def __len__(self) -> int:
        return self.shape[0]

    def __repr__(self) -> str:
        return f"<{self.space} array {self.name} {self.shape} {self.dtype}>"

    def atomic_record(self) -> AccessRecord:
        if self.atomics is None:
            self.atomics = AccessRecord(self.size * self.copies)
        return self.atomics

    def fetch(self, elements, components) -> np.ndarray:
        if self.flat is not None:
            return self.flat[elements]
        return self.data[components]

    def assign(self, elements, components, values, field: str | None = None) -> None:
        """Write ``values`` to the elements (or one field of the records) there."""
        if self.flat is not None:
            (self.flat if field is None else self.flat[field])[elements] = values
        else:
            (self.data if field is None else self.data[field])[components] = values


class SimView:
    """``a[i]`` of an array with more dimensions: the rest of ``a``, with ``i`` (per lane) fixed in front."""

    def __init__(self, base: SimArray, prefix: tuple):
        self.base = base
        self.prefix = prefix
        self.shape = base.shape[len(prefix):]
        self.ndim = len(self.shape)
        self.size = int(np.prod(self.shape, dtype=np.int64))
        self.dtype = base.dtype
        self.name = base.name

    def __len__(self) -> int:
        return self.shape[0]


def _offset_in_allocation(array: np.ndarray) -> int:
    """Byte offset of a view's first element in the allocation it belongs to (GPU allocations are 256-byte aligned)."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    return int(array.__array_interface__["data"][0] - root.__array_interface__["data"][0])
