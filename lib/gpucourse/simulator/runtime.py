"""The runtime a rewritten kernel calls: lane masks, control flow and memory access.

One `Runtime` (``RUNTIME``) runs one launch at a time. Its ``mask`` says which
lanes (threads) execute the current statement; see `gpucourse.simulator.transform`
for the code that calls it.
"""

from __future__ import annotations

import ast
import linecache
import time

import numpy as np
from numpy._core.multiarray import count_nonzero as _count_nonzero  # np.count_nonzero less its Python wrapper

from . import arithmetic
from .arithmetic import SIGNATURES, Arithmetic, argument_kinds, cast, dtype_of, overflows_recorded, range_dtype, select
from .bfloat16 import BFLOAT16, round_to as round_to_bfloat16
from .errors import DataRace, EndlessLoop, OutOfBounds, TooSlowToSimulate, UninitializedRead, UnsupportedInKernel, fault
from .functions import Enumerated, Zipped
from .geometry import Geometry
from .memory import AccessRecord, LaneSlice, SimArray, SimView, extent_of as _extent
from .transform import SITES


class Undefined:
    """The value of a local variable before its first assignment."""

    def __repr__(self):
        return "<unassigned>"


UNDEFINED = Undefined()
_DONE = object()  # a uniform loop's range is exhausted
INT64 = np.dtype(np.int64)
NO_TYPES: dict = {}


_DIVISIONS = ("op_Div", "op_FloorDiv", "op_Mod")


class Frame:
    """One call of a kernel or device function."""

    __slots__ = ("entry", "returned", "result", "saved_removed", "live")


class Loop:
    __slots__ = ("broken", "last_mask")


class Runtime(Arithmetic):
    """Masks, control flow, memory access and (from `Arithmetic`) the operators of a running kernel."""

    def __init__(self):
        self.geometry: Geometry | None = None
        self.trace = None
        self.variable_types: dict = {}
        self.inline_types = None

    # -- launch --------------------------------------------------------------
    def begin(self, geometry: Geometry, kernel_name: str, shared_bytes: int, trace=None,
              variable_types: dict | None = None, debug: bool = False, step_budget: int | None = None,
              seconds: float | None = None, inline_types=None) -> None:
        """Start a launch; ``debug`` (``cuda.jit(debug=True)``) raises ZeroDivisionError on a division by zero,
        as numba's Python error model does; a launch that runs more than ``step_budget`` loop iterations
        (summed over its loops, every lane at once) stops with `EndlessLoop`, one whose loops still iterate
        after ``seconds`` with `TooSlowToSimulate`. ``inline_types(py_func, argtypes)``: the variable types of an
        ``inline="always"`` device function, which ``variable_types`` cannot hold (numba types it in its callers)."""
        self.geometry = g = geometry
        self.variable_types = variable_types or {}
        self.inline_types = inline_types
        self.kernel_name = kernel_name
        self.shared_bytes = shared_bytes
        self.trace = trace
        self.lane_ids = np.arange(g.lanes, dtype=np.int64)
        self.nobody = np.zeros(g.lanes, bool)
        self.everybody = np.ones(g.lanes, bool)
        self.block_phase = np.zeros(g.blocks, np.int64)
        self.warp_phase = np.zeros(g.warps, np.int64)
        self.awaited_at_syncwarp = self.nobody  # lanes others wait for at a cuda.syncwarp() (see `syncwarp`)
        self.syncwarp_site = None
        self.removed = self.nobody
        self.raised_by_kernel = None
        self.raising_lane = 0
        self.steps_left = (1 << 62) if step_budget is None else step_budget
        self.deadline = float("inf") if seconds is None else time.monotonic() + seconds
        for name in _DIVISIONS:
            if debug:
                setattr(self, name, self._checked_division(getattr(Arithmetic, name)))
            else:
                self.__dict__.pop(name, None)
        self.exits = 0
        self.return_site = None  # per lane, the site of the `return` its thread exited the kernel at (-1: none)
        self.frames: list[Frame] = []
        self.loops: list[Loop] = []
        self.shared: dict = {}
        self.site = None
        self.mask = self.everybody
        self.count = g.lanes
        self.any = True
        self.full = True
        self._lanes = None
        self._who_lanes = self._who_places = self._who = None
        self._resolved: dict = {}  # id(array) -> (array, mask, index, what `resolve` found)

    def end(self) -> None:
        self.geometry = None
        self.return_site = None
        self.variable_types = {}
        self.inline_types = None
        self.shared = {}
        self.trace = None
        self._resolved = {}

    @property
    def exited(self) -> np.ndarray:
        """Lanes whose thread has returned from the kernel."""
        returned = self.frames[0].returned if self.frames else None
        return self.nobody if returned is None else returned

    # -- masks ---------------------------------------------------------------
    def set_mask(self, mask: np.ndarray) -> None:
        self.mask = mask
        self.count = int(_count_nonzero(mask))
        self.any = self.count > 0
        self.full = self.count == self.frames[-1].live if self.frames else True
        self._lanes = None

    def lanes(self) -> np.ndarray | None:
        """Indices of the active lanes, or None when all lanes of the launch are active."""
        if self.count == self.geometry.lanes:
            return None
        if self._lanes is None:
            self._lanes = self.mask.nonzero()[0]
        return self._lanes

    def active_lanes(self) -> np.ndarray:
        lanes = self.lanes()
        return self.lane_ids if lanes is None else lanes

    def push(self):
        return self.mask, self.exits, self.count

    def pop(self, saved) -> None:
        mask, exits, count = saved
        if exits != self.exits:
            self.set_mask(mask & ~self.removed)
        elif mask is not self.mask:  # no lane left in between: the saved count holds (masks are never changed)
            self.mask, self.count, self.any, self._lanes = mask, count, count > 0, None
            self.full = count == self.frames[-1].live if self.frames else True

    def branch(self, condition):
        """The state `pop` restores after an ``if`` (`push`), then the mask narrowed to ``condition`` (`narrow`),
        in one call."""
        saved = self.mask, self.exits, self.count
        if isinstance(condition, np.ndarray):
            self.set_mask(self.mask & condition.astype(bool, copy=False))
        elif not condition:
            self.set_mask(self.nobody)
        return saved

    def narrow(self, condition) -> bool:
        if isinstance(condition, np.ndarray):
            self.set_mask(self.mask & condition.astype(bool, copy=False))
        elif not condition:
            self.set_mask(self.nobody)
        return self.any

    def narrow_not(self, condition) -> bool:
        if isinstance(condition, np.ndarray):
            self.set_mask(self.mask & ~condition.astype(bool, copy=False))
        elif condition:
            self.set_mask(self.nobody)
        return self.any

    def types_of(self, function, arguments: tuple = ()) -> dict:
        """{variable: dtype} numba gives the variables of ``function`` in this launch (empty if unknown): those of
        the signature its ``arguments`` match, where its signatures type them differently."""
        signatures = self.variable_types.get((function, SIGNATURES))
        if signatures is not None:
            found = signatures.get(argument_kinds(arguments))
            if found is not None:
                return found
        return self.variable_types.get(function, NO_TYPES)

    @staticmethod
    def assigned(types: dict, name: str, value, key: str | None = None):
        """``value`` converted to the type numba gives the variable ``name`` it is assigned to (or, where numba types
        the variable's versions differently, to this assignment's version's: its `assignment_key` ``key``)."""
        if not types:
            return value
        dtype = types.get(name)
        if dtype is None and key is not None:
            dtype = types.get(key)
        current = dtype_of(value)  # (not `in (dtype, None)`: NumPy takes None for float64, so a float64 stayed)
        if dtype is None or current is None or current == dtype:
            return value
        return cast(value, dtype)

    def merge_assigned(self, old, types: dict, name: str, value, key: str | None = None):
        """``merge(old, assigned(types, name, value, key))``: an assignment in a branch or loop. Where the lanes
        hold versions of different types (``v = 5`` in a branch, ``v`` a float32 before it), NumPy's promotion holds
        both, and each read takes the type of the version numba reads there (`transform.read_keys`)."""
        value = self.assigned(types, name, value, key)
        if old is UNDEFINED or self.full:
            return value
        return self.merge(old, value)

    def merge(self, old, new):
        """``new`` in the active lanes, ``old`` elsewhere."""
        if old is UNDEFINED or self.full:
            return new
        if type(old) is np.ndarray and type(new) is np.ndarray:
            return np.where(self.mask, new, old)  # (promoted where the two differ: versions of two types)
        if isinstance(old, tuple):
            return tuple(self.merge(o, n) for o, n in zip(old, new))
        return select(self.mask, new, old)

    # -- frames and exits ----------------------------------------------------
    def enter(self) -> Frame:
        frame = Frame()
        frame.entry = self.mask
        frame.returned = None
        frame.result = None
        frame.saved_removed = self.removed
        frame.live = self.count
        self.frames.append(frame)
        self.removed = self.nobody
        self.full = True
        return frame

    def leave(self, frame: Frame):
        self.frames.pop()
        self.removed = frame.saved_removed
        if self.frames:
            self.set_mask(frame.entry)
        return frame.result

    def _remove_active(self) -> None:
        self.removed = self.removed | self.mask
        self.exits += 1
        self.set_mask(self.nobody)

    def ret(self, value, site: int | None = None) -> None:
        """``return value`` at ``site``: the active lanes leave the call (in the kernel's frame, their threads exit:
        `return_site` keeps where)."""
        frame = self.frames[-1]
        if site is not None and len(self.frames) == 1 and self.any:
            if self.return_site is None:
                self.return_site = np.full(self.geometry.lanes, -1, np.int64)
            self.return_site[self.mask] = site
        if value is not None:
            frame.result = value if frame.result is None else self.merge_result(frame.result, value)
        frame.returned = self.mask if frame.returned is None else frame.returned | self.mask
        frame.live -= self.count
        self._remove_active()

    def merge_result(self, old, new):
        if isinstance(old, tuple):
            return tuple(self.merge_result(o, n) for o, n in zip(old, new))
        return select(self.mask, new, old)

    def raised(self, exception, lane: int | None = None) -> BaseException:
        """The exception a kernel's ``raise`` statement raises (in its first active lane, or ``lane``), kept so
        that the launch passes it on with numba's message."""
        self.raised_by_kernel = exception() if isinstance(exception, type) else exception
        self.raising_lane = int(self.active_lanes()[0]) if lane is None and self.any else (lane or 0)
        return self.raised_by_kernel

    def _checked_division(self, divide):
        """``divide`` raising ZeroDivisionError where an active lane divides by zero (debug=True)."""

        def checked(a, b):
            zero = b == 0
            if isinstance(zero, np.ndarray):
                if zero.shape == self.mask.shape:
                    zero = zero & self.mask
                if zero.any():
                    lanes = np.flatnonzero(zero)
                    raise self.raised(ZeroDivisionError("division by zero"), int(lanes[0]) if zero.ndim == 1 else None)
            elif zero and self.any:
                raise self.raised(ZeroDivisionError("division by zero"))
            return divide(a, b)

        return checked

    def brk(self) -> None:
        loop = self.loops[-1]
        loop.broken = self.mask if loop.broken is None else loop.broken | self.mask
        self._remove_active()

    def cont(self) -> None:
        self._remove_active()

    def brk_if(self, condition) -> None:
        """``if condition: break``: `branch`, `brk` and `pop` in one call."""
        leaving = self._where_true(condition)
        if leaving is not None:
            loop = self.loops[-1]
            loop.broken = leaving if loop.broken is None else loop.broken | leaving
            self._remove(leaving)

    def cont_if(self, condition) -> None:
        """``if condition: continue``: `branch`, `cont` and `pop` in one call."""
        leaving = self._where_true(condition)
        if leaving is not None:
            self._remove(leaving)

    def _where_true(self, condition):
        """The active lanes where ``condition`` holds, or None where it holds in none."""
        if isinstance(condition, np.ndarray):
            lanes = self.mask & condition.astype(bool, copy=False)
            return lanes if _any(lanes) else None
        return self.mask if condition and self.any else None

    def _remove(self, lanes) -> None:
        """Take ``lanes`` (active) out, as `_remove_active` in a branch of them and the `pop` after it do."""
        self.removed = self.removed | lanes
        self.exits += 1
        self.set_mask(self.mask & ~self.removed)

    # -- loops ---------------------------------------------------------------
    def _iteration_mask(self, entry, loop: Loop, frame: Frame) -> np.ndarray:
        """The lanes of the loop's entry that have not left it (kept while no lane breaks or returns)."""
        broken, returned, mask = loop.last_mask
        if broken is loop.broken and returned is frame.returned and mask is not None:
            return mask
        mask = entry
        if loop.broken is not None:
            mask = mask & ~loop.broken
        if frame.returned is not None:
            mask = mask & ~frame.returned
        loop.last_mask = (loop.broken, frame.returned, mask)
        return mask

    def _loop(self, condition):
        """Iterate while some lane is in; ``condition(k)`` narrows the mask of iteration ``k``."""
        entry, saved_removed, frame = self.mask, self.removed, self.frames[-1]
        loop = Loop()
        loop.broken = None
        loop.last_mask = (None, None, None)
        self.loops.append(loop)
        try:
            k = 0
            while self.any or k:  # after an iteration where every lane did `continue`, the next one has lanes
                if k and (self.mask is not entry or loop.broken is not None):
                    self.set_mask(self._iteration_mask(entry, loop, frame))
                    if not self.any:
                        return
                self.removed = self.nobody
                value = condition(k)
                if value is _DONE or not self.any:
                    return
                self.steps_left -= 1
                if self.steps_left < 0:
                    raise EndlessLoop()
                if time.monotonic() > self.deadline:
                    raise TooSlowToSimulate()
                yield value
                k += 1
        finally:
            self._end_loop(entry, saved_removed, frame)

    def _end_loop(self, entry, saved_removed, frame) -> None:
        self.loops.pop()
        if frame.returned is None:
            self.removed = saved_removed
            self.set_mask(entry)
        else:
            self.removed = saved_removed | frame.returned
            self.set_mask(entry & ~frame.returned)

    def loop_range(self, *arguments):
        """``for ... in range(...)``: numba-cuda converts the bounds to the type of the loop variable (int32, int64
        or uint64), a float as ``cvt.rzi`` does (toward zero: ``range(2.9)`` is ``range(2)``)."""
        dtype = INT64
        if any(type(a) is not int for a in arguments):
            dtype = range_dtype(tuple(INT64 if type(a) is int else dtype_of(a) for a in arguments))
            arguments = tuple(a if dtype_of(a) is None else cast(a, dtype) for a in arguments)
        start, stop, step = (0, arguments[0], 1) if len(arguments) == 1 else (tuple(arguments) + (1,))[:3]
        if any(isinstance(a, np.ndarray) for a in (start, stop, step)):
            return self._lane_range(start, stop, step, dtype)
        values = iter(range(start, stop, step))
        if dtype != INT64:
            values = (cast(v, dtype) for v in values)
        return self._loop(lambda k: next(values, _DONE))

    def loop_items(self, items, site: int):
        """``for x in items``: a tuple, the elements of an array (read by every lane), or ``enumerate``/``zip``."""
        length, element = self._sequence(items, site)
        return self._loop(lambda k: element(k) if k < length else _DONE)

    def _sequence(self, items, site: int):
        """(length, element(k)) of what a loop iterates."""
        if type(items) in (SimArray, SimView):
            return len(items), lambda k: self.load(items, k, site)
        if type(items) is Enumerated:
            length, element = self._sequence(items.items, site)
            return length, lambda k: (items.start + k, element(k))
        if type(items) is Zipped:
            parts = [self._sequence(part, site) for part in items.items]
            return min(length for length, _ in parts), lambda k: tuple(element(k) for _, element in parts)
        items = tuple(items)
        return len(items), items.__getitem__

    def _lane_range(self, start, stop, step, dtype):
        value = np.broadcast_to(np.asarray(start).astype(dtype), (self.geometry.lanes,)).copy()
        step = np.asarray(step).astype(dtype)
        state = {"value": value}
        upward = step > 0 if step.ndim else bool(step > 0)

        def condition(k):
            if k:
                state["value"] = state["value"] + step
            v = state["value"]
            running = np.where(upward, v < stop, v > stop) if step.ndim else (v < stop if upward else v > stop)
            self.set_mask(self.mask & running)
            return v

        return self._loop(condition)

    def loop_while(self):
        return self._loop(lambda k: None)

    def while_test(self, condition) -> bool:
        if isinstance(condition, np.ndarray):
            failing = self.mask & ~condition.astype(bool, copy=False)
            if _any(failing):
                loop = self.loops[-1]
                loop.broken = failing if loop.broken is None else loop.broken | failing
                self.exits += 1
                self.set_mask(self.mask & ~failing)
        elif not condition:
            self.brk()
        return self.any

    # -- expressions -----------------------------------------------------------
    def and_(self, first, *rest):
        return self._short_circuit(first, rest, conjunction=True)

    def or_(self, first, *rest):
        return self._short_circuit(first, rest, conjunction=False)

    def _short_circuit(self, first, rest, conjunction: bool):
        """``and``/``or``: each later operand runs only in the lanes that still need it.

        As in Python and numba the result is an operand: ``2 and 3`` is 3, ``0 or 5`` is 5.
        """
        value = first
        for later in rest:
            if not isinstance(value, np.ndarray):
                if bool(value) != conjunction:
                    return value
                value = later()
                continue
            saved = self.push()
            if self.narrow(value) if conjunction else self.narrow_not(value):
                value = select(self.mask, later(), value)
            self.pop(saved)
        return value

    def not_(self, value):
        if isinstance(value, np.ndarray):
            return ~value.astype(bool, copy=False)
        return not value

    def ifexp(self, condition, yes, no, pruned=False):
        """``yes() if condition else no()`` in the type numba gives it: both sides unified, unless ``pruned`` (a
        constant test: numba types the side taken alone)."""
        if pruned or not isinstance(condition, np.ndarray):
            condition = bool(np.any(condition & self.mask) if isinstance(condition, np.ndarray) else condition)
            taken, other = (yes, no) if condition else (no, yes)
            value = taken()
            beside = None if pruned else self._without_lanes(other)
            kind = None if beside is None else dtype_of(beside)
            if kind is None or kind == dtype_of(value):  # (not `in (None, ...)`: float64 == None in NumPy)
                return value
            unified = select(condition, *((value, beside) if condition else (beside, value)))
            return unified[()] if unified.ndim == 0 else unified
        saved = self.push()
        a = yes() if self.narrow(condition) else None
        self.pop(saved)
        b = no() if self.narrow_not(condition) else None
        self.pop(saved)
        if a is None or b is None:  # every lane took one side (or none did): the result has the type of both
            a = self._without_lanes(yes) if a is None else a
            b = self._without_lanes(no) if b is None else b
            if a is None or b is None:
                return b if a is None else a
        return select(condition, a, b)

    def _without_lanes(self, expression):
        """``expression()`` run by no lane, for the type of its value (None if it cannot run so)."""
        saved = self.push()
        self.set_mask(self.nobody)
        try:
            return expression()
        except Exception:  # noqa: BLE001 (only its type was wanted)
            return None
        finally:
            self.pop(saved)

    # -- memory ----------------------------------------------------------------
    def where(self, site: int) -> str:
        s = SITES[site]
        function = f"kernel `{self.kernel_name}`"
        if s.function != self.kernel_name:
            function += f", device function `{s.function}`"
        return f"{function}, line {s.line}: {s.source.strip()}"

    def resolve(self, array: SimArray, index, site: int, verb: str):
        """Active lanes, their index components (bounds-checked) and flat element numbers; kept for the next
        access to the same array with the same index values and mask (``a[i]`` read again: lane arrays and masks
        are never changed in place)."""
        last = self._resolved.get(id(array))
        if last is not None and last[0] is array and last[1] is self.mask and _same_index(last[2], index):
            return last[3]
        resolved = self._resolve(array, index, site, verb)
        if len(self._resolved) > 64:
            self._resolved.clear()
        self._resolved[id(array)] = (array, self.mask, index, resolved)
        return resolved

    def _resolve(self, array: SimArray, index, site: int, verb: str):
        index = index if isinstance(index, tuple) else (index,)
        if len(index) != array.ndim:
            raise fault(
                UnsupportedInKernel, self.where(site),
                f"`{SITES[site].expression}` gives {len(index)} index(es) to `{array.name}`, which has "
                f"{array.ndim} dimension(s) {array.shape}",
            )
        lanes = self.lanes()
        components = []
        element = 0
        for axis, (value, extent, stride) in enumerate(zip(index, array.shape, array.element_strides)):
            if isinstance(value, np.ndarray):
                if value.dtype.kind not in "iub":
                    raise fault(UnsupportedInKernel, self.where(site),
                                f"index {axis} of `{SITES[site].expression}` is {value.dtype}, not an integer")
                value = value if lanes is None else value[lanes]
                value = value.astype(np.int64, copy=False)  # unsigned and boolean indices count as int64 do
                outside = _max(value.view(np.uint64)) >= extent  # a negative index is a huge unsigned one
            else:
                value = int(value)
                outside = value < 0 or value >= extent
            if outside:
                self.out_of_bounds(array, index, axis, extent, site, verb)
            components.append(value)
            part = value if stride == 1 else value * stride
            element = part if axis == 0 else element + part
        if array.copies > 1:  # shared: one copy per block; local: one per lane
            owner = self.geometry.block_of if array.space == "shared" else self.lane_ids
            owner = owner if lanes is None else owner[lanes]
            element = element + owner * array.size
            components = [owner] + components
        if not isinstance(element, np.ndarray):
            element = _filled(self.count, element)
        return lanes, tuple(components), element

    def out_of_bounds(self, array, index, axis, extent, site, verb):
        lanes = self.active_lanes()
        values = [np.broadcast_to(v, (self.geometry.lanes,))[lanes] if isinstance(v, np.ndarray)
                  else np.full(len(lanes), int(v)) for v in index]
        bad = (values[axis] < 0) | (values[axis] >= extent)  # an extent per active lane on a `LaneAxis`
        first = int(np.flatnonzero(bad)[0])
        lane = int(lanes[first])
        extent = int(np.broadcast_to(extent, bad.shape)[first])
        shown = ", ".join(str(int(v[first])) for v in values)
        value = int(values[axis][first])
        why = (
            f"negative index {value} on axis {axis} (size {extent}): numba wraps it to the end of the axis, "
            "like Python, and a kernel almost never means that" if value < 0
            else f"index {value} is past the end of axis {axis} (size {extent})"
        )
        raise fault(
            OutOfBounds, self.where(site),
            f"{self.geometry.thread_name(lane)}: index {shown} is out of bounds for `{array.name}` of shape "
            f"{array.shape} when it {verb}s `{SITES[site].expression}`: {why}",
        ) from None

    def who(self, lanes: np.ndarray) -> tuple:
        """(lanes, their blocks, warps, block and warp barrier phases): kept while the lanes and the phases are
        those of the access before (barriers replace the phase arrays, never change them)."""
        if lanes is not self._who_lanes:
            g = self.geometry
            self._who_lanes, self._who_places, self._who = lanes, (g.block_of[lanes], g.warp_of[lanes]), None
        who = self._who
        if who is None or who[5] is not self.block_phase or who[6] is not self.warp_phase:
            block, warp = self._who_places
            who = self._who = (lanes, block, warp, self.block_phase[block], self.warp_phase[warp], self.block_phase,
                               self.warp_phase)
        return who[:5]

    def race(self, array, site, lanes, record: AccessRecord, elements, conflict, mine: str, theirs: str):
        g = self.geometry
        first = self._race_to_name(np.flatnonzero(conflict), lanes, record, elements)
        lane, element = int(lanes[first]), int(elements[first])
        other, other_block = int(record.lane[element]), int(record.block[element])
        them = "several threads" if other < 0 else g.thread_name(other)
        in_one_warp = g.warps_per_block > 1 and other >= 0 and g.warp_of[other] == g.warp_of[lane]
        barrier = ("cuda.syncwarp() (the two threads are in one warp, whose threads do not run in lockstep since "
                   "Volta; cuda.syncthreads() would do too where every thread of the block reaches it)"
                   if in_one_warp else "cuda.syncthreads()")
        if mine == "writes" and theirs == "wrote":  # two writers: most often an index computed twice
            order = ("if each thread should write its own element, two computed the same index: check it (the "
                     "start and the step of a loop, threadIdx against blockIdx); if they share one result, "
                     + ("threads of different blocks cannot wait for each other: use an atomic, or give each "
                        "block its own part of the output" if other_block != g.block_of[lane] else
                        "let one thread write it, or put cuda.syncthreads() between the two writes"))
        elif other_block != g.block_of[lane]:
            order = ("threads of different blocks cannot wait for each other: use an atomic, "
                     "or give each block its own part of the output")
        elif theirs == "wrote":
            order = f"no barrier orders them: put {barrier} after the write and before this read"
        elif theirs == "read" and _count_nonzero(elements == element) > 1 and _accumulates(SITES[site]):
            order = ("these threads all update this one element from its old value: their reads and writes "
                     "interleave and updates are lost, which no barrier fixes. Use an atomic (cuda.atomic.add for a "
                     "sum, cuda.atomic.max for a maximum), or combine within the block first (a reduction) and let "
                     "one thread write")
        elif theirs == "read":
            order = ("no barrier orders them: the readers may still need the old value, so put "
                     f"{barrier} after their last read and before this write")
        else:
            order = f"no barrier orders them: put {barrier} between the two"
        raise fault(
            DataRace, self.where(site),
            f"data race on `{array.name}{_element_name(array, element)}`: {g.thread_name(lane)} {mine} it, "
            f"{them} {theirs} it, and {order}",
        ) from None

    def _race_to_name(self, conflicting: np.ndarray, lanes, record: AccessRecord, elements) -> int:
        """The conflicting access to report: one with a thread of another warp of the block where there is one (only
        cuda.syncthreads() orders those, and it orders a warp's own threads too), else the first."""
        g = self.geometry
        if g.warps_per_block > 1:
            mine, others = lanes[conflicting], record.lane[elements[conflicting]]
            known = np.where(others >= 0, others, mine)  # "several threads": no warp to tell
            across = (others >= 0) & (g.block_of[known] == g.block_of[mine]) & (g.warp_of[known] != g.warp_of[mine])
            if across.any():
                return int(conflicting[np.argmax(across)])
        return int(conflicting[0])

    def check_uninitialised(self, array, lanes, elements, site):
        unwritten = ~array.written[elements]
        if _any(unwritten):
            first = int(np.flatnonzero(unwritten)[0])
            lane = int(self.active_lanes()[first])
            element = f"{array.name}{_element_name(array, int(elements[first]))}"
            hint = self.returned_before(lane, element) if array.space == "shared" else ""
            raise fault(
                UninitializedRead, self.where(site),
                f"{self.geometry.thread_name(lane)} reads `{element}`, "
                f"which nothing has written ({_UNWRITTEN[array.space]}){hint}",
            ) from None

    def returned_before(self, lane: int, element: str) -> str:
        """For a read of shared ``element`` nothing wrote: the threads of ``lane``'s block that had already returned
        from the kernel (which never write their share), and the first line they returned at; "" if none had."""
        g = self.geometry
        returned = np.flatnonzero(self.exited & (g.block_of == g.block_of[lane]))
        if not len(returned):
            return ""
        count = len(returned)
        threads = f"{count} threads of this block" if count > 1 else "1 thread of this block"
        at = ""
        if self.return_site is not None:
            sites = {int(s) for s in np.unique(self.return_site[returned]) if s >= 0}
            if sites:
                first = min(sites, key=lambda s: (SITES[s].line, s))
                lines = {SITES[s].line for s in sites}
                at = f", at line {SITES[first].line} (`{_with_its_guard(SITES[first])}`)"
                if len(lines) > 1:
                    others = len(lines) - 1
                    at += f" and at {others} other return{'s' if others > 1 else ''}"
        them = "one of them was" if count > 1 else "it was"
        return (f"; {threads} ({_threads_named(g, returned)}) had returned before this read{at}: if {them} to write "
                f"`{element}`, every thread must reach the copy and the barrier before returning (guard the work, "
                f"not the barrier)")

    def through_view(self, view: SimView, index, site: int, verb: str) -> tuple:
        """(base array, its index) of element ``view[index]``, the index checked against the view's own axes."""
        index = _as_tuple(index)
        if view.prefix is not None:
            return view.base, view.prefix + index
        if len(index) != view.ndim:
            raise fault(UnsupportedInKernel, self.where(site),
                        f"`{SITES[site].expression}` gives {len(index)} index(es) to a view of {view.ndim} dimension(s)")
        lanes = self.lanes()
        for position, axis in view.sliced_axes():
            value, extent = index[position], _extent(axis)
            value = value if lanes is None or not isinstance(value, np.ndarray) else value[lanes]
            extent = extent if lanes is None or not isinstance(extent, np.ndarray) else extent[lanes]
            outside = (np.asarray(value) < 0) | (np.asarray(value) >= extent)
            if outside.any():
                self.out_of_bounds(view, index, position, extent, site, verb)
        return view.base, view.base_index(index)

    def view(self, array, index, site: int):
        """``array[index]`` where the index has slices: a view (``a[1:3]``, ``a[i, :]``, ``a[::2]``)."""
        if type(array) is SimArray:
            array = SimView.whole(array)
        if type(array) is not SimView:
            return array[index]  # a.shape[1:]
        index = _as_tuple(index)
        if len(index) > array.ndim:
            raise fault(UnsupportedInKernel, self.where(site),
                        f"`{SITES[site].expression}` gives {len(index)} index(es) to `{array.name}`, which has "
                        f"{array.ndim} dimension(s) {array.shape}")
        return array.indexed(index)

    def slice_of(self, site: int, *bounds) -> slice | LaneSlice:
        """``start:stop:step`` of a subscript: a `slice`, or a `LaneSlice` where a bound differs from thread to
        thread (the step may not)."""
        start, stop, step = (self._uniform(bound) for bound in bounds)
        if isinstance(step, np.ndarray):
            raise fault(UnsupportedInKernel, self.where(site),
                        f"the step of the slice in `{SITES[site].expression}` differs from thread to thread, which "
                        "the course simulator does not support: give every thread the same step, or index elements")
        if isinstance(start, np.ndarray) or isinstance(stop, np.ndarray):
            return LaneSlice(start, stop, step)
        return slice(start, stop, step)

    def _uniform(self, bound):
        """A slice bound as one int where every active lane has the same, else the lanes' values."""
        if not isinstance(bound, np.ndarray):
            return bound
        lanes = self.lanes()
        values = bound if lanes is None or not bound.ndim else bound[lanes]
        if values.size and values.min() != values.max():
            return bound.astype(np.int64)
        return int(values.flat[0]) if values.size else 0

    def unpacked(self, value, count: int, site: int):
        """``value`` about to be unpacked into ``count`` names: a tuple as it is, or a 1-D array (or view) of
        exactly ``count`` elements in every active lane, as numba unpacks one (a length it checks at run time)."""
        if type(value) not in (SimArray, SimView):
            return value
        if value.ndim != 1:
            raise fault(UnsupportedInKernel, self.where(site),
                        f"`{SITES[site].expression}` unpacks `{value.name}`, which has {value.ndim} dimensions: "
                        "numba unpacks only a 1-D array")
        lanes = self.active_lanes()
        extents = np.broadcast_to(value.shape[0], (self.geometry.lanes,))[lanes]
        named = f"a view of `{value.base.name}`" if type(value) is SimView else f"`{value.name}`"
        wrong = np.flatnonzero(extents != count)
        if wrong.size:
            lane = int(lanes[wrong[0]])
            raise fault(OutOfBounds, self.where(site),
                        f"{self.geometry.thread_name(lane)}: `{SITES[site].expression}` unpacks "
                        f"{int(extents[wrong[0]])} elements of {named} into {count} names: numba checks the "
                        "length at run time and raises ValueError (on a GPU without debug=True, the thread just stops "
                        "there)")
        return value

    def item(self, value, k: int, site: int):
        """Item ``k`` of what `unpacked` returned: a tuple's, or an array's element (a load)."""
        return self.load(value, k, site) if type(value) in (SimArray, SimView) else value[k]

    def load(self, array, index, site: int):
        if not self.any:  # no lane reads (`_without_lanes`): a value of the element type only
            return np.zeros(self.geometry.lanes, array.dtype)
        if type(array) is SimView:
            if len(_as_tuple(index)) < array.ndim:
                return array.indexed(_as_tuple(index))
            array, index = self.through_view(array, index, site, "read")
        if type(array) is not SimArray:
            if isinstance(array, tuple) and (isinstance(index, np.ndarray) or not -len(array) <= index < len(array)):
                return self._tuple_item(array, index, site)  # a.shape[i % 2]: an element per lane; or out of range
            return array[index]
        if len(_as_tuple(index)) < array.ndim:
            return SimView(array, _as_tuple(index) + tuple(map(range, array.shape[len(_as_tuple(index)):])))
        lanes, components, elements = self.resolve(array, index, site, "read")
        if array.written is not None:
            self.check_uninitialised(array, lanes, elements, site)
        if array.tracked:
            active = self.active_lanes()
            who = self.who(active)
            for record, theirs in ((array.writes, "wrote"), (array.atomics, "updated atomically")):
                if record is not None and record.used and not record.settled():
                    conflict = record.conflicts(elements, who)
                    if conflict is not None:
                        self.race(array, site, active, record, elements, conflict, "reads", theirs)
            array.reads.note(elements, who)
        if self.trace is not None:
            self.trace.record(self, array, "read", self.active_lanes(), elements, components, site)
        if (overflows := overflows_recorded()) is not None:
            overflows.loaded(array.name, self.active_lanes(), elements)
        values = array.fetch(elements, components)
        if lanes is not None:
            values, active = np.zeros(self.geometry.lanes, array.dtype), values
            values[lanes] = active
        return values.view(np.recarray) if array.dtype.names else values  # r[i].x reads a field

    def _tuple_item(self, items: tuple, index, site: int) -> np.ndarray:
        """``items[index]`` in each active lane: Python's negative indices, as numba's run-time tuple index (-n to
        -1 are the last n items); out of range: `OutOfBounds`, where numba raises IndexError (a GPU without
        debug=True ends the thread there)."""
        lanes, n = self.active_lanes(), len(items)
        wanted = np.broadcast_to(index, (self.geometry.lanes,))[lanes].astype(np.int64)
        bad = (wanted < -n) | (wanted >= n)
        if bad.any():
            first = int(np.flatnonzero(bad)[0])
            subscript = ast.parse(SITES[site].expression, mode="eval").body
            named, value = ast.unparse(subscript.slice), int(wanted[first])
            raise fault(OutOfBounds, self.where(site),
                        f"{self.geometry.thread_name(int(lanes[first]))}: `{SITES[site].expression}`"
                        + ("" if named == str(value) else f" with {named} = {value}")
                        + f": the tuple has {n} element{'s' * (n != 1)} ({_tuple_indices(n)}); numba raises "
                        "IndexError for an index out of range (on a GPU without debug=True, the thread just stops "
                        "there)")
        per_lane = np.stack([np.broadcast_to(np.asarray(item), (self.geometry.lanes,)) for item in items])
        values = np.zeros(self.geometry.lanes, per_lane.dtype)
        values[lanes] = per_lane[wanted, lanes]  # each lane its own item (items may differ per lane)
        return values

    def store(self, array, index, value, site: int, field: str | None = None):
        """``array[index] = value``, or ``array[index].field = value`` for a record array."""
        if type(array) is SimView:
            array, index = self.through_view(array, index, site, "write")
        if type(array) is not SimArray:
            return self.store_in_record(array, index, value, site)
        if array.readonly:
            raise fault(UnsupportedInKernel, self.where(site),
                        f"`{array.name}` is in constant memory, which kernels can only read")
        lanes, components, elements = self.resolve(array, index, site, "write")
        if array.tracked:
            active = self.active_lanes()
            who = self.who(active)
            for record, theirs in ((array.writes, "wrote"), (array.reads, "read"), (array.atomics, "updated atomically")):
                if record is not None and record.used and not record.settled():
                    conflict = record.conflicts(elements, who)
                    if conflict is not None:
                        self.race(array, site, active, record, elements, conflict, "writes", theirs)
            self.check_duplicate_writes(array, active, elements, site)
            array.writes.put(elements, who)
            array.reads.clear(elements)
            if array.atomics is not None:
                array.atomics.clear(elements)
        if array.written is not None:
            array.written[elements] = True
        if self.trace is not None:
            self.trace.record(self, array, "write", self.active_lanes(), elements, components, site)
        if (overflows := overflows_recorded()) is not None:
            overflows.stored(array.name, array.data.size, self.active_lanes(), elements)
        if isinstance(value, np.ndarray) and value.ndim:
            value = value if lanes is None else value[lanes]
        if array.dtype is BFLOAT16:
            value = round_to_bfloat16(value)  # NumPy's conversion from float64 rounds twice
        elif array.dtype.kind in "iu" and (type(value) is int or getattr(dtype_of(value), "kind", "") == "f"):
            value = cast(value, array.dtype)  # as cvt.rzi: NaN to 0, out of range clamped (NumPy: the lowest int);
            # a literal out of the type's range (-1 into a uint8) wraps, where NumPy refuses it
        array.assign(elements, components, value, field)

    def store_in_record(self, record, index, value, site: int) -> None:
        """``r.x = v``, ``r['x'] = v`` or ``r.h[k] = v`` on a record argument: memory every thread shares."""
        if not isinstance(record, (np.void, np.ndarray)):
            raise fault(UnsupportedInKernel, self.where(site), f"cannot assign into {type(record).__name__}")
        lanes = self.active_lanes()
        if len(lanes) > 1:
            first, second = (self.geometry.thread_name(int(lane)) for lane in lanes[:2])
            raise fault(DataRace, self.where(site),
                        f"data race on `{SITES[site].expression}`: {first} and {second} write it in the same "
                        "instruction; let one thread write")
        if not len(lanes):
            return
        if type(value) is SimArray:
            value = value.data
        elif isinstance(value, np.ndarray) and value.shape == (self.geometry.lanes,) + np.shape(record[index]):
            value = value[lanes[0]]  # the writing thread's value
        record[index] = value

    def check_duplicate_writes(self, array, lanes, elements, site):
        if len(elements) < 2 or _all(elements[1:] > elements[:-1]):  # increasing: no element twice
            return
        order = np.argsort(elements, kind="stable")
        ordered = elements[order]
        same = np.flatnonzero(ordered[1:] == ordered[:-1])
        if len(same):
            a, b = int(lanes[order[same[0]]]), int(lanes[order[same[0] + 1]])
            g = self.geometry
            raise fault(
                DataRace, self.where(site),
                f"data race on `{array.name}{_element_name(array, int(ordered[same[0]]))}`: {g.thread_name(a)} and "
                f"{g.thread_name(b)} write it in the same instruction. If each thread should write its own "
                "element, they computed the same index: check it (threadIdx against blockIdx, the blockIdx.x * "
                "blockDim.x offset); if they share one result, "
                + ("threads of different blocks cannot wait for each other: use an atomic, or give each block "
                   "its own part of the output" if g.block_of[a] != g.block_of[b]
                   else "let one thread write it (say lane 0, when every lane holds the same value), or use an "
                        "atomic when each thread adds its own part"),
            )

    def atomic(self, operation, array, index, value, site: int, compare=None):
        """``operation(old, value)`` applied element by element in lane order; returns the old values."""
        if type(array) is SimView:
            array, index = self.through_view(array, index, site, "update")
        if type(array) is not SimArray:
            raise fault(UnsupportedInKernel, self.where(site), "atomics need an array argument")
        if array.dtype.itemsize == 2 and (array.dtype.kind == "f" or array.dtype is BFLOAT16):
            raise fault(UnsupportedInKernel, self.where(site),
                        f"cuda.atomic on a {array.dtype} array does not compile for a GPU (numba-cuda has no 16-bit "
                        "float atomics): accumulate in a float32 array, or add up within the block first")
        lanes, components, elements = self.resolve(array, index, site, "update")
        if array.written is not None:
            self.check_uninitialised(array, lanes, elements, site)
            array.written[elements] = True
        active = self.active_lanes()
        if array.tracked:
            who = self.who(active)
            for record, theirs in ((array.writes, "wrote"), (array.reads, "read")):
                if record.used and not record.settled():
                    conflict = record.conflicts(elements, who)
                    if conflict is not None:
                        self.race(array, site, active, record, elements, conflict, "updates atomically", theirs)
            array.atomic_record().note(elements, who)
        if self.trace is not None:
            self.trace.record(self, array, "atomic", active, elements, components, site)
        if (overflows := overflows_recorded()) is not None:
            overflows.loaded(array.name, active, elements)  # the old value it returns
            overflows.stored(array.name, array.data.size, active, elements, atomically=True)
        values = _per_lane(value, lanes, len(elements), array.dtype)
        compares = None if compare is None else _per_lane(compare, lanes, len(elements), array.dtype)
        data = array.flat
        old = np.empty(len(elements), array.dtype)
        if data is None:  # z.real: the updates of each element, in lane order, a round at a time
            _atomic_rounds(array, operation, elements, components, values, compares, old)
        elif len(np.unique(elements)) == len(elements):
            old[:] = data[elements]
            data[elements] = operation(old, values) if compares is None else operation(old, compares, values)
        elif (operation is atomic_add or operation is atomic_sub) and array.dtype.kind in "iu":
            _atomic_integer_sums(data, elements, values if operation is atomic_add else -values, old)
        else:
            _atomic_in_lane_order(data, operation, elements, values, compares, old)
        if lanes is None:
            return old
        out = np.zeros(self.geometry.lanes, array.dtype)
        out[lanes] = old
        return out


_UNWRITTEN = {
    "shared": "shared memory starts with leftovers; write it, then syncthreads, before reading it",
    "local": "local memory starts undefined; write it before reading it",
    "global": "memory from cuda.device_array starts with leftovers; copy data in (copy_to_device) or write it "
              "in an earlier kernel before reading it",
}


# ndarray.any, .all and .max less their Python wrappers
_any, _all, _max = np.logical_or.reduce, np.logical_and.reduce, np.maximum.reduce


def _same_index(a, b) -> bool:
    """Whether two indices are the same objects (a tuple: item by item)."""
    if a is b:
        return True
    if type(a) is not tuple or type(b) is not tuple or len(a) != len(b):
        return False
    for x, y in zip(a, b):
        if x is not y:
            return False
    return True


def _filled(n: int, value: int) -> np.ndarray:
    """``np.full(n, value, np.int64)`` without its Python-level overhead (one per uniform index)."""
    out = np.empty(n, np.int64)
    out.fill(value)
    return out


def _as_tuple(index) -> tuple:
    return index if isinstance(index, tuple) else (index,)


def atomic_add(old, value):
    return old + value


def atomic_sub(old, value):
    return old - value


def _atomic_integer_sums(data, elements, deltas, old) -> None:
    """Integer atomic adds of a contiguous array where lanes share elements, at once: in lane order, each lane's
    old value is the element's plus the deltas of the lanes before it (integers wrap alike in any grouping)."""
    order = np.argsort(elements, kind="stable")
    ordered, ordered_deltas = elements[order], deltas[order]
    first = np.empty(len(ordered), bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = first.nonzero()[0]
    running = np.cumsum(ordered_deltas, dtype=data.dtype)  # inclusive, over all elements
    before = running - ordered_deltas  # exclusive
    since_start = before - before[starts][np.cumsum(first) - 1]  # exclusive, within each element's lanes
    old[order] = data[ordered] + since_start
    last = np.append(starts[1:] - 1, len(ordered) - 1)
    data[ordered[starts]] += running[last] - before[starts]


def _atomic_rounds(array, operation, elements, components, values, compares, old) -> None:
    """Atomic updates of an array that is not one contiguous block: each round updates the first remaining
    lane of each element, so that every element sees its updates in lane order."""
    remaining = np.arange(len(elements))
    while remaining.size:
        _, first = np.unique(elements[remaining], return_index=True)
        batch = remaining[np.sort(first)]
        where = tuple(c[batch] if np.ndim(c) else c for c in components)
        old[batch] = current = array.fetch(elements[batch], where)
        new = operation(current, values[batch]) if compares is None else operation(current, compares[batch],
                                                                                    values[batch])
        array.assign(elements[batch], where, new)
        remaining = np.delete(remaining, np.sort(first))


def _atomic_in_lane_order(data, operation, elements, values, compares, old) -> None:
    """Atomic updates of a contiguous array where lanes share elements, each element's in lane order: round r
    applies the r-th update of every element at once; lane by lane in Python where one element takes most."""
    order = np.argsort(elements, kind="stable")
    ordered = elements[order]
    first = np.empty(len(ordered), bool)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.diff(starts, append=len(ordered))
    rounds = int(counts.max())
    if rounds * 4 > len(elements):
        for k, e in enumerate(elements.tolist()):
            old[k] = data[e]
            data[e] = operation(old[k], values[k]) if compares is None else operation(old[k], compares[k], values[k])
        return
    rank = np.arange(len(ordered)) - np.repeat(starts, counts)  # of each update among its element's
    by_round = order[np.argsort(rank, kind="stable")]
    edges = np.cumsum(np.bincount(rank, minlength=rounds))
    begin = 0
    for end in edges.tolist():
        batch = by_round[begin:end]
        where = elements[batch]
        old[batch] = current = data[where]
        data[where] = (operation(current, values[batch]) if compares is None
                       else operation(current, compares[batch], values[batch]))
        begin = end


def _per_lane(value, lanes, n, dtype) -> np.ndarray:
    if isinstance(value, np.ndarray) and value.ndim:
        value = value if lanes is None else value[lanes]
    return np.broadcast_to(cast(np.asarray(value), dtype), (n,))


def _tuple_indices(n: int) -> str:
    """The indices a tuple of ``n`` elements has, as numba takes them at run time."""
    if n < 2:
        return "index 0, or -1" if n else "no index"
    return f"indices 0 to {n - 1}, or -{n} to -1 from the end"


def _accumulates(site) -> bool:
    """Whether the statement at ``site`` updates the element it writes from its old value: ``x[0] += v`` or
    ``x[0] = x[0] + v``."""
    try:
        statement = ast.parse(site.source.strip()).body[0]
    except (SyntaxError, IndexError):
        return False
    if isinstance(statement, ast.AugAssign):
        return True
    if not (isinstance(statement, ast.Assign) and len(statement.targets) == 1):
        return False
    target = ast.unparse(statement.targets[0])
    return any(ast.unparse(node) == target for node in ast.walk(statement.value))


def _with_its_guard(site) -> str:
    """A ``return`` site's line, with the ``if`` header above it where the return stands alone on its line."""
    shown = site.source.strip()
    above = linecache.getline(site.filename, site.line - 1).strip()
    if shown == "return" and above.startswith(("if ", "elif ")) and above.endswith(":"):
        return f"{above} return"
    return shown


def _runs(values) -> str:
    """Sorted distinct integers as ranges: ``3 to 31``, ``5``, ``0 to 2 and 9 to 31`` (the first three, then "...")."""
    values = np.unique(values)
    breaks = np.flatnonzero(np.diff(values) != 1) + 1
    runs = [(int(run[0]), int(run[-1])) for run in np.split(values, breaks)]
    named = [f"{a}" if a == b else f"{a} to {b}" for a, b in runs[:3]]
    if len(runs) > 3:
        return ", ".join(named) + ", ..."
    return named[0] if len(named) == 1 else ", ".join(named[:-1]) + " and " + named[-1]


def _threads_named(g: Geometry, lanes: np.ndarray) -> str:
    """The threads of one block in ``lanes``: ``threadIdx.x 3 to 31``; in a 2-D or 3-D block, ranges along each
    axis if they form a box (``threadIdx.x 0 to 15, threadIdx.y 12 to 15``), else the first and the last
    (``among them threadIdx=(12, 0, 0) and threadIdx=(15, 15, 0)``)."""
    t = g.threadIdx
    axes = [(name, values[lanes]) for name, values, size in zip("xyz", (t.x, t.y, t.z), g.block) if size > 1]
    if not axes:
        return "threadIdx.x 0"
    if len(axes) == 1:
        return f"threadIdx.{axes[0][0]} {_runs(axes[0][1])}"
    box = 1
    for _, values in axes:
        box *= int(values.max() - values.min() + 1)
    if box == len(lanes):
        return ", ".join(f"threadIdx.{name} {_runs(values)}" for name, values in axes)
    first, last = int(lanes[0]), int(lanes[-1])
    return f"among them {g.thread_coordinates(first)} and {g.thread_coordinates(last)}"


def _element_name(array: SimArray, element: int) -> str:
    """``[i, j]`` of a flat element number (the copy of a shared or local array left out)."""
    position = np.unravel_index(element % max(array.size, 1), array.shape) if array.shape else ()
    return "[" + ", ".join(str(int(p)) for p in position) + "]"


RUNTIME = Runtime()


def signed_overflows():
    """`arithmetic.signed_overflows` in the lanes that run each operation (lane k: thread k of the launch)."""
    return arithmetic.signed_overflows(lambda: RUNTIME.mask)
