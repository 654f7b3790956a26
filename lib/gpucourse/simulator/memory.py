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

import functools
import math
import operator

import numpy as np

NOBODY = -1
SEVERAL = -2


class AccessRecord:
    """Who touched each element, for one kind of access (write, read or atomic).

    One (5, size) table, a row per field, allocated at the first access. Writes (`put`) and reads (`note`) wait
    in a list and go into the table, in order, only when something looks at it: an output written once, or an
    input nothing writes in the launch, never gets a table. In shared memory, where only the threads of one
    block meet, an access of threads whose block has passed a barrier since is ordered before every later
    access, and so is what it would replace or merge with: it is dropped."""

    FIELDS = ("lane", "block", "warp", "block_phase", "warp_phase")
    PENDING = 1 << 18  # waiting accesses (summed over lanes) at most: bounds their memory

    def __init__(self, size: int, block_phases=None):
        self.size = size
        self.block_phases = block_phases  # shared memory: a function giving each block's barrier phase now
        self._table = None
        self._rows: tuple = ()  # the table's rows, as views
        self.pending: list = []  # (elements, who, whether merged as several readers' `note` or set as a `put`)
        self.pending_count = 0
        self.used = False
        self.version = 0  # changes with the table
        self._settled = (None, None, False)  # (version, block phases, whether `settled`) of the last answer
        self._last_put = None  # the record the last change of the table put (None: a `clear` came after)

    @property
    def table(self) -> np.ndarray:
        if self._table is None:
            self._table = np.empty((5, self.size), np.int64)
            self._table[:3] = NOBODY
            self._table[3:] = 0
            self._rows = tuple(self._table)
        if self.pending:
            self._apply_pending()
        return self._table

    lane = property(lambda self: self.table[0])
    block = property(lambda self: self.table[1])

    def _at(self, elements: np.ndarray) -> tuple[np.ndarray, ...]:
        """The record of ``elements``, a field at a time (faster than the table's 2-D indexing)."""
        lane, block, warp, block_phase, warp_phase = self._rows
        return lane[elements], block[elements], warp[elements], block_phase[elements], warp_phase[elements]

    def conflicts(self, elements: np.ndarray, who: tuple) -> np.ndarray | None:
        """Which accesses ``who`` of ``elements`` are not ordered after the recorded ones (`unordered`); None if
        none is. Elements nobody else touched are told by their lanes alone."""
        self.table  # noqa: B018
        lane = self._rows[0][elements]
        if np.logical_and.reduce((lane == NOBODY) | (lane == who[0])):
            return None
        conflict = unordered(self._at(elements), who)
        return conflict if np.logical_or.reduce(conflict) else None

    def put(self, elements: np.ndarray, values: tuple) -> None:
        """``values`` become the record of ``elements`` (one instruction's writes)."""
        self._wait(elements, values, False)

    def _put(self, elements: np.ndarray, values: tuple) -> None:
        for row, value in zip(self._rows, values):
            row[elements] = value
        self.version += 1
        self._last_put = values

    def clear(self, elements: np.ndarray) -> None:
        if self.used:
            self.table[:3, elements] = NOBODY
            self.version += 1
            self._last_put = None

    def settled(self) -> bool:
        """Shared memory: whether every recorded access came from threads whose block has passed a barrier
        since, so that every access now is ordered after it (no element needs checking)."""
        if self.block_phases is None:
            return False
        table, phases = self.table, self.block_phases()
        version, seen_phases, settled = self._settled
        if version != self.version or seen_phases is not phases:
            last = self._last_put
            if last is not None and np.logical_or.reduce(last[3] >= phases[last[1]]):
                settled = False  # the last entries put are of this barrier phase: still in the table
            else:
                lane, block, block_phase = table[0], table[1], table[3]
                settled = bool(np.logical_and.reduce((lane == NOBODY) | ((block >= 0)
                                                                        & (block_phase < phases[block]))))
            self._settled = (self.version, phases, settled)
        return settled

    def note(self, elements: np.ndarray, who: tuple) -> None:
        """Several accesses of one instruction (reads or atomics), merged later as `merge_records` merges them."""
        self._wait(elements, who, True)

    def _wait(self, elements: np.ndarray, who: tuple, merged: bool) -> None:
        self.pending.append((elements, who, merged))
        self.pending_count += len(elements)
        self.used = True
        if self.pending_count > self.PENDING:
            self.table  # noqa: B018

    def _apply_pending(self) -> None:
        pending, self.pending, self.pending_count = self.pending, [], 0
        phases = None if self.block_phases is None else self.block_phases()
        for elements, who, merged in pending:
            if phases is not None and np.logical_and.reduce(phases[who[1]] > who[3]):
                continue  # shared memory its block has passed a barrier since: ordered before any later access
            if merged:
                elements, summary = group_by_element(elements, who)
                who = merge_records(self._at(elements), summary)
            self._put(elements, who)


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
    n = len(elements)
    if n < 2:
        return elements, who
    steps = elements[1:] - elements[:-1]
    smallest_step = steps.min()
    if smallest_step > 0:  # increasing (coalesced): every element once
        return elements, who
    if smallest_step == 0:  # already in order, with repeats
        order, sorted_elements, first_of_rest = None, elements, steps != 0
    else:
        order = elements.argsort(kind="stable")
        sorted_elements = elements[order]
        first_of_rest = sorted_elements[1:] != sorted_elements[:-1]
    starts = first_of_rest.nonzero()[0]
    if len(starts) == n - 1:
        return elements, who
    starts += 1
    starts = np.concatenate((_ZERO, starts))
    counts = np.empty(len(starts), np.int64)
    counts[:-1] = starts[1:] - starts[:-1]
    counts[-1] = n - starts[-1]
    lane, block, warp, block_phase, warp_phase = (np.asarray(v) if order is None else np.asarray(v)[order]
                                                  for v in who)

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


_ZERO = np.zeros(1, np.int64)


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


REINTERPRETED = ("an array's bytes read as another type (`.view(dtype)`) are not simulated (each element is checked "
                 "in its own type): reinterpret on the host, `x.view(np.int32)`, and launch with that array")


class SimArray:
    """An array in one memory space of a simulated launch."""

    def __init__(self, data: np.ndarray, name: str, space: str, shape: tuple, *, readonly: bool = False,
                 initialised: bool = True, written=None, block_phases=None):
        self.data = data
        self.name = name
        self.space = space  # "global", "shared", "local" or "const"
        self.shape = tuple(int(s) for s in shape)
        self.ndim = len(self.shape)
        self.size = math.prod(self.shape)
        self.dtype = data.dtype
        self.readonly = readonly
        self.flat = data.reshape(-1) if data.flags.c_contiguous else None
        self.element_strides = tuple(math.prod(self.shape[k + 1:]) for k in range(self.ndim))
        self.byte_strides = data.strides[-self.ndim:] if self.ndim else ()
        self.tracked = space in ("global", "shared")
        copies = data.size // max(self.size, 1)
        # Elements written so far, by flat element number (None: all are, or need not be, checked).
        self.written = written if initialised else np.zeros(max(data.size, 1), bool)
        total = self.size * copies
        self.block_phases = block_phases  # shared memory: see `AccessRecord`
        self.writes = AccessRecord(total, block_phases) if self.tracked else None
        self.reads = AccessRecord(total, block_phases) if self.tracked else None
        self.atomics: AccessRecord | None = None
        self.copies = copies

    @functools.cached_property
    def byte_offset(self) -> int:
        """Byte offset of the first element in its allocation (global memory; asked for by vector loads and
        traces only)."""
        return _offset_in_allocation(self.data) if self.space == "global" else 0

    def __len__(self) -> int:
        return self.shape[0]

    @property
    def strides(self) -> tuple:
        """``a.strides`` in a kernel: the bytes from one element to the next along each dimension."""
        return tuple(int(s) for s in self.byte_strides)

    @property
    def itemsize(self) -> int:
        return self.dtype.itemsize

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    def __repr__(self) -> str:
        return f"<{self.space} array {self.name} {self.shape} {self.dtype}>"

    def atomic_record(self) -> AccessRecord:
        if self.atomics is None:
            self.atomics = AccessRecord(self.size * self.copies, self.block_phases)
        return self.atomics

    def view(self, dtype=None):
        """``a.view(dtype)`` in a kernel: refused, with why (`REINTERPRETED`)."""
        raise ValueError(REINTERPRETED)

    def reshape(self, *shape) -> "SimArray":
        """``a.reshape(shape)`` of a contiguous array: its elements, and what was recorded of them, in a new shape."""
        shape = shape[0] if len(shape) == 1 and isinstance(shape[0], tuple) else shape
        values = [np.asarray(extent) for extent in shape]
        if any(v.ndim and v.size and v.min() != v.max() for v in values):
            raise ValueError(f"the shape given to {self.name}.reshape differs from thread to thread")
        if self.flat is None or self.copies > 1:
            raise ValueError(f"{self.name} is not one contiguous array, and numba reshapes only those")
        data = self.data.reshape(tuple(int(v.flat[0]) if v.size else 0 for v in values))
        array = SimArray(data, self.name, self.space, data.shape, readonly=self.readonly, written=self.written)
        array.writes, array.reads = self.writes, self.reads
        array.atomics = self.atomic_record() if self.tracked else None
        return array

    @property
    def real(self) -> "SimArray":
        return self._part("real")

    @property
    def imag(self) -> "SimArray":
        return self._part("imag")

    def _part(self, name: str) -> "SimArray":
        """``z.real`` or ``z.imag`` of a complex array: a view of its parts. Of a real array, as in numba:
        ``real`` is the array, ``imag`` a new array of zeros."""
        if self.dtype.kind != "c":
            return self if name == "real" else SimArray(np.zeros_like(self.data), f"{self.name}.imag", "local",
                                                        self.shape)
        return SimArray(getattr(self.data, name), f"{self.name}.{name}", self.space, self.shape,
                        readonly=self.readonly, written=self.written, block_phases=self.block_phases)

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


class LaneSlice:
    """``start:stop:step`` of a subscript whose start or stop differs from thread to thread (``a[i:]``)."""

    def __init__(self, start, stop, step):
        self.start, self.stop, self.step = start, stop, step


class LaneAxis:
    """A view axis that starts at a different base index in each thread: ``start`` and ``length`` per lane."""

    def __init__(self, start: np.ndarray, step: int, length: np.ndarray):
        self.start, self.step, self.length = start, step, length

    @classmethod
    def of(cls, axis: range, part: LaneSlice) -> "LaneAxis":
        """The axis ``axis[part]`` (Python's slice rules, lane by lane; a positive step the same in every lane)."""
        n = len(axis)
        step = 1 if part.step is None else part.step
        if step <= 0:
            raise ValueError("a slice whose bounds differ from thread to thread needs a positive step")
        start = np.asarray(0 if part.start is None else part.start, np.int64)
        stop = np.asarray(n if part.stop is None else part.stop, np.int64)
        start = np.clip(np.where(start < 0, start + n, start), 0, n)
        stop = np.clip(np.where(stop < 0, stop + n, stop), 0, n)
        length = np.maximum(0, (stop - start + step - 1) // step)
        return cls(axis.start + axis.step * start, axis.step * step, length)


def _is_axis(axis) -> bool:
    return type(axis) is range or type(axis) is LaneAxis


def extent_of(axis):
    return axis.length if type(axis) is LaneAxis else len(axis)


class SimView:
    """A view of an array, as ``a[i]`` of a 2-D array or ``a[1:3]``, ``a[i, :]``, ``a[::2]`` give it.

    ``axes`` has one entry per axis of the base array: a fixed index (a number, or one per lane), or the
    `range` of base indices a view axis runs over (slices compose as ranges do: ``range(8)[1::2][:2]``).
    ``prefix`` is the fixed indices when they all come first and every other axis is whole (``a[i]``),
    the case a view's index only extends; else None.
    """

    def __init__(self, base: SimArray, axes: tuple):
        self.base = base
        self.axes = axes
        self.shape = tuple(extent_of(axis) for axis in axes if _is_axis(axis))  # an extent per lane on a LaneAxis
        self.ndim = len(self.shape)
        size = functools.reduce(operator.mul, self.shape, 1)
        self.size = int(size) if np.ndim(size) == 0 else size
        self.dtype = base.dtype
        lead = next((k for k, axis in enumerate(axes) if _is_axis(axis)), len(axes))
        whole = all(type(axis) is range and axis == range(extent) for axis, extent in zip(axes[lead:], base.shape[lead:]))
        self.prefix = axes[:lead] if whole else None
        self.name = base.name if self.prefix is not None else f"{base.name}[{', '.join(map(_shown, axes))}]"

    def __len__(self) -> int:
        return self.shape[0]

    def sliced_axes(self):
        """(position in the view's index, range) of each view axis that is not a whole base axis."""
        position = 0
        for axis, extent in zip(self.axes, self.base.shape):
            if _is_axis(axis):
                if axis != range(extent):
                    yield position, axis
                position += 1

    def base_index(self, index: tuple) -> tuple:
        """The base array's index of the view's (complete, bounds-checked) ``index``."""
        components = iter(index)
        return tuple(_through(axis, next(components)) if _is_axis(axis) else axis for axis in self.axes)

    def view(self, dtype=None):
        """``a[i:j].view(dtype)`` in a kernel: refused, with why (`REINTERPRETED`)."""
        raise ValueError(REINTERPRETED)

    @classmethod
    def whole(cls, base: SimArray) -> "SimView":
        return cls(base, tuple(range(extent) for extent in base.shape))

    def indexed(self, index: tuple) -> "SimView":
        """The view of this view that ``index`` (integers per lane and `slice`s of numbers) gives."""
        components = iter(index)
        axes = []
        for axis in self.axes:
            if _is_axis(axis):
                component = next(components, slice(None))
                if type(component) is LaneSlice and type(axis) is range:
                    axis = LaneAxis.of(axis, component)
                elif type(component) is slice or type(component) is LaneSlice:
                    if type(axis) is LaneAxis and component != slice(None):
                        raise ValueError("slicing again a view whose start differs from thread to thread")
                    axis = axis if type(axis) is LaneAxis else axis[component]
                else:
                    axis = _through(axis, component)
            axes.append(axis)
        return SimView(self.base, tuple(axes))


def _through(axis: range, position):
    """The base index at ``position`` (a number or one per lane) of a view axis."""
    if type(axis) is range and axis.start == 0 and axis.step == 1:
        return position
    return axis.start + axis.step * position


def _shown(axis) -> str:
    if type(axis) is LaneAxis:
        return "i:" if axis.step == 1 else f"i::{axis.step}"
    if type(axis) is not range:
        return str(int(axis)) if np.ndim(axis) == 0 else "i"
    stop = axis.start + axis.step * len(axis)
    return f"{axis.start}:{stop if stop >= 0 else ''}" + (f":{axis.step}" if axis.step != 1 else "")


def _offset_in_allocation(array: np.ndarray) -> int:
    """Byte offset of a view's first element in the allocation it belongs to (GPU allocations are 256-byte aligned)."""
    root = array
    while isinstance(root.base, np.ndarray):
        root = root.base
    return int(array.__array_interface__["data"][0] - root.__array_interface__["data"][0])
