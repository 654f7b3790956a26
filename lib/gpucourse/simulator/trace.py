"""What a launch did with memory, counted, and budgets a test can assert in one line.

    with gpucourse.trace() as t:    # gpucourse.run.trace: records on this simulator
        kernel[grid, block](out, a)
    t.assert_reads_per_element("a", exactly=1)    # every element read from global memory once
    t.assert_reads_per_thread("A", at_most=K // T)
    t.assert_no_bank_conflicts("tile")
    print(t.summary())    # per array
    print(t.by_line())    # per source line: warp instructions, sectors per request, bank conflicts

Counted per array and per thread: reads, writes and atomic updates. Per warp
memory instruction: global memory sectors (32 bytes) touched, which says how
well the access coalesces, and the shared memory bank-conflict degree (32
banks of 4 bytes; 1 means no conflict). A vector access (`kernels.vector`'s 16-byte
loads and stores, whose stand-ins read element by element) counts as the one warp
instruction the GPU issues: its sectors once, its shared-memory banks per phase of
8 lanes (128 bytes), as the hardware serves them (`vector_access`).
"""

from __future__ import annotations

import contextlib
import dis
from dataclasses import dataclass

import numpy as np

from .errors import BudgetExceeded, UnknownArray
from .memory import SimArray
from .transform import SITES, STRETCHES

KINDS = ("read", "write", "atomic")
SECTOR_BYTES = 32
BANKS = 32
BANK_BYTES = 4


def _times(count) -> str:
    """``1 time``, ``2 times``."""
    return f"{count} time" if count == 1 else f"{count} times"


def _starts(values: np.ndarray) -> np.ndarray:
    """True where a value differs from the one before it (and at the first)."""
    starts = np.empty(len(values), bool)
    starts[:1] = True
    np.not_equal(values[1:], values[:-1], out=starts[1:])
    return starts


def _sorted_distinct(values: np.ndarray) -> np.ndarray:
    """``np.unique(values)`` for int64s, without its hashing: a warp's addresses mostly come in order already."""
    if len(values) > 1 and (values[1:] < values[:-1]).any():
        values = np.sort(values)
    return values[_starts(values)]


@dataclass
class Instructions:
    """Warp memory instructions of one kind on one array."""

    requests: int = 0  # warp instructions
    lanes: int = 0  # threads taking part, summed over those instructions (32 per request without divergence)
    sectors: int = 0  # global: 32-byte sectors; shared: wavefronts (1 per request without conflicts)
    worst: int = 0  # shared: the largest bank-conflict degree seen


class ArrayTrace:
    """Everything one launch did to one array."""

    def __init__(self, array, lanes: int):
        self.name = array.name
        self.space = array.space
        self.shape = array.shape
        self.itemsize = array.dtype.itemsize
        self._per_thread = {k: np.zeros(lanes, np.int64) for k in KINDS}
        self._per_element = {k: np.zeros(array.size * array.copies, np.int64) for k in KINDS}
        # accesses made since the counts above were last brought up to date: (lanes, or None for every lane,
        # elements), counted all at once when a count is asked for (`per_thread`, `per_element`)
        self._uncounted: dict[str, list] = {k: [] for k in KINDS}
        self.instructions = {k: Instructions() for k in KINDS}
        # (kind, lanes, elements, block, phase of each lane, site); None once only the counts are kept
        self.events: list[tuple] | None = []
        self.size = array.size

    def note(self, kind: str, lanes, elements) -> None:
        """One access of ``kind`` by ``lanes`` (None: every lane) to ``elements`` (one per lane, or one for all)."""
        self._uncounted[kind].append((lanes, elements))

    @property
    def per_thread(self) -> dict[str, np.ndarray]:
        """{kind: how many times each thread made such an access (in lane order)}."""
        self._count_accesses()
        return self._per_thread

    @property
    def per_element(self) -> dict[str, np.ndarray]:
        """{kind: how many times each element (of each copy: shared memory one per block) was accessed so}."""
        self._count_accesses()
        return self._per_element

    def _count_accesses(self) -> None:
        for kind, uncounted in self._uncounted.items():
            if not uncounted:
                continue
            threads, elements = self._per_thread[kind], self._per_element[kind]
            some = [lanes for lanes, _ in uncounted if lanes is not None]
            threads += len(uncounted) - len(some)  # the accesses of every lane
            if some:
                threads += np.bincount(np.concatenate(some), minlength=len(threads))
            elements += np.bincount(np.concatenate([np.ravel(e) for _, e in uncounted]), minlength=len(elements))
            uncounted.clear()

    def accesses(self, kind: str) -> tuple[np.ndarray, np.ndarray]:
        """(lane, element) of every access of ``kind``, in the order made (an element the same in all the lanes of
        an instruction is repeated for each)."""
        made = [(lanes, np.broadcast_to(elements, np.shape(lanes))) for k, lanes, elements, *_ in self.events
                if k == kind]
        if not made:
            return np.zeros(0, np.int64), np.zeros(0, np.int64)
        lanes, elements = (np.concatenate(part).astype(np.int64) for part in zip(*made))
        return lanes, elements

    def element_counts(self, kind: str) -> np.ndarray:
        counts = self.per_element[kind]
        if self.space == "shared":
            return counts.reshape((-1,) + self.shape)
        if self.space == "local":
            return counts.reshape((-1,) + self.shape).sum(axis=0)
        return counts.reshape(self.shape)


def _places(array, elements, components, lanes) -> np.ndarray:
    """The 32-byte sector (global memory) or 4-byte bank word (shared and local) of each lane's access."""
    if array.space != "global":
        return (elements % array.size) * array.dtype.itemsize // BANK_BYTES
    if array.flat is not None:  # C-contiguous: elements are in address order
        address = array.byte_offset + np.asarray(elements, np.int64) * array.dtype.itemsize
    else:
        address = array.byte_offset + sum(np.asarray(c, np.int64) * s for c, s in zip(components, array.byte_strides))
    return np.broadcast_to(address, lanes.shape) // SECTOR_BYTES


class LaunchTrace:
    """The trace of one launch."""

    def __init__(self, kernel: str, geometry, arrays, function=None):
        self.kernel = kernel
        self.function = function  # the kernel's Python function, for its PTX
        self.geometry = geometry
        self.arrays: dict[str, ArrayTrace] = {}
        self._by_id: dict[int, ArrayTrace] = {}
        self._alive: list = []  # every array registered, so that no id in _by_id is reused
        self.lines: dict[tuple, Instructions] = {}  # (function, line, array, kind) -> its warp instructions
        # (file, line, space, kind) -> warp instructions, at the line the compiled code's line table gives them
        # (`run.issue`, `run.assembler.lined_ptx`; `calls._run_device_function` says which): a device function's of
        # the kernel's file at its own lines, another file's at the line that calls it (NVVM inlines the call,
        # compiled apart without lines), one numba inlines (``inline="always"``) at its own lines inside code
        # compiled with lines, else at that code's call; all under the kernel's file name, as the line table has them
        self.kernel_lines: dict[tuple, int] = {}
        self.kernel_file = function.__code__.co_filename if function is not None else None
        self.call_site: int | None = None  # inside a device function: the call of it that the line table shows
        # the Python functions of the device functions whose accesses count at their own lines: those the line
        # table's compilation gives lines (`calls.own_line_functions`; set by the launch)
        self.own_line_functions: frozenset = frozenset()
        # the lines of the kernel's code (and of the device functions whose lines it keeps) as the line table has
        # them, those that ran, and those that did not (a branch no thread took), where `lines_run` could watch
        self.lines_known: set = set()
        self.lines_ran: set = set()
        self.watches_lines = False  # whether `lines_run` watched them (``trace(lines=True)``)
        self.block_barriers = np.zeros(geometry.blocks, np.int64)  # set when the launch ends
        self.source: dict[tuple, str] = {}
        self._vector: dict | None = None  # inside `vector_access`: (array name, kind) -> its element accesses
        for array in arrays:
            self._register(array)

    def _register(self, array) -> ArrayTrace:
        entry = self._by_id.get(id(array))
        if entry is None:
            entry = ArrayTrace(array, self.geometry.lanes)
            name, k = array.name, 2
            while name in self.arrays:
                name, k = f"{array.name}#{k}", k + 1
            entry.name = name
            self.arrays[name] = entry
            self._by_id[id(array)] = entry
            self._alive.append(array)  # an array dropped during the launch would free its id for another
        return entry

    # -- recording (called by the runtime) ----------------------------------------------------------
    def record(self, runtime, array, kind: str, lanes, elements, components, site: int) -> None:
        entry = self._register(array)
        entry.note(kind, None if len(lanes) == self.geometry.lanes else lanes, elements)
        _, block, warps, phase, _ = runtime.who(lanes)  # kept from the access before while the lanes are the same
        if self._vector is not None:  # part of one vector access: counted when it ends
            places = _places(array, elements, components, lanes)
            self._vector.setdefault((entry.name, kind), []).append((array, lanes, places))
        else:  # `_count` reads the places of global and shared memory only (local memory has none to count)
            places = _places(array, elements, components, lanes) if array.space in ("global", "shared") else None
            self._count(entry, array, kind, lanes, places, site, 1, len(lanes), warps)
        entry.events.append((kind, lanes, elements if array.copies == 1 else elements % array.size, block, phase, site))

    @contextlib.contextmanager
    def vector_access(self, site: int):
        """The element accesses inside are one warp instruction per array and kind, made at ``site``: a vector
        load or store's stand-in (`kernels.vector`) reads its 4 floats one by one, the GPU in one 16-byte
        access. Its sectors are the union of theirs; in shared memory a warp's access of ``b`` bytes per lane
        is served 128 bytes at a time (8 lanes at a time for 16 bytes), each phase's bank conflicts its own."""
        if self._vector is not None:  # already inside one
            yield
            return
        self._vector = {}
        try:
            yield
        finally:
            parts, self._vector = self._vector, None
            for (name, kind), pieces in parts.items():
                array = pieces[0][0]
                lanes = np.concatenate([lanes for _, lanes, _ in pieces])
                places = np.concatenate([places for _, _, places in pieces])
                self._count(self.arrays[name], array, kind, lanes, places, site,
                            len(pieces) * array.dtype.itemsize // BANK_BYTES or 1, len(pieces[0][1]))

    def _count(self, entry, array, kind: str, lanes, places, site: int, words_per_lane: int, threads: int,
               warps=None) -> None:
        """One warp instruction per warp among ``lanes`` (``threads`` of them taking part): global ``places`` are
        sectors, shared ones words."""
        g = self.geometry
        warps = g.warp_of[lanes] if warps is None else warps
        stats = entry.instructions[kind]
        requests, sectors, worst = stats.requests, stats.sectors, 0
        stats.lanes += threads
        if array.space == "global":
            stats.requests += len(_sorted_distinct(warps))
            stats.sectors += len(_sorted_distinct(warps * (1 << 40) + places))
        elif array.space == "shared":
            phases = warps * BANKS  # lanes served together: 128 bytes (all 32 for 4 bytes each, 8 for 16 bytes)
            if words_per_lane > 1:
                phases = phases + g.laneid[lanes] // max(1, BANKS // words_per_lane)
            words = _sorted_distinct(phases * (1 << 40) + places)  # each word a phase touches, once
            phase, word = words >> 40, words & ((1 << 40) - 1)
            new_phase = _starts(phase)
            row = np.cumsum(new_phase) - 1  # the phase's number among those here
            degree = np.bincount(row * BANKS + word % BANKS, minlength=(row[-1] + 1) * BANKS)
            degree = degree.reshape(-1, BANKS).max(axis=1)  # per phase: the most words wanted from one bank
            stats.requests += len(degree) if words_per_lane == 1 else len(_sorted_distinct(phase[new_phase] // BANKS))
            stats.sectors += int(degree.sum())
            worst = int(degree.max())
            stats.worst = max(stats.worst, worst)
        where = SITES[site]
        self.source.setdefault((where.function, where.line), where.source.strip())
        line = self.lines.setdefault((where.function, where.line, entry.name, kind), Instructions())
        added = stats.requests - requests
        line.requests += added
        line.lanes += threads
        line.sectors += stats.sectors - sectors
        line.worst = max(line.worst, worst)
        if self.call_site is not None:
            where = SITES[self.call_site]
        key = (self.kernel_file or where.filename, where.line, array.space, kind)
        self.kernel_lines[key] = self.kernel_lines.get(key, 0) + added

    @property
    def lines_not_run(self) -> set:
        """(file, line) of the kernel's code that no thread ran (`run.issue` counts none of its instructions); only
        a launch traced with ``trace(lines=True)`` knows them."""
        if not self.watches_lines:
            raise ValueError(f"the trace of `{self.kernel}` did not watch which lines ran: record it inside "
                             "`with trace(lines=True):`")
        return self.lines_known - self.lines_ran

    def keep_counts_only(self) -> None:
        """Drop the record of each access (what `touched`, `accesses` and the viewer read; they then raise), keeping
        every count: what the cost model keeps of a launch (`run.tuning`), kilobytes where the records held an index
        per thread per access (8 SGEMM candidates traced at 128 x 128 x 64: 590 MB)."""
        for entry in self.arrays.values():
            entry._count_accesses()
            entry.events = None

    def finish(self, runtime) -> None:
        """Called when the launch ends: keep what only the runtime knows."""
        self.block_barriers = runtime.block_phase.copy()

    # -- questions ------------------------------------------------------------------------------------
    def barriers(self, block=0) -> int:
        """How many ``syncthreads`` block ``block`` (a number or blockIdx tuple) went through."""
        return int(self.block_barriers[self.geometry.block_number(block)])

    def touched(self, name: str, block=0, phase: int = 0, kind: str = "read", thread=None) -> np.ndarray:
        """Which elements of ``name`` block ``block`` touched (``kind``) in barrier phase ``phase``.

        A boolean array of the array's shape (one block's copy for shared memory). ``block``: a
        number or blockIdx tuple; ``thread``: only this thread of the block (a number, or a
        threadIdx tuple). Phase ``p`` is the stretch after the block's ``p``-th ``syncthreads``.
        """
        g = self.geometry
        block = g.block_number(block)
        lane = None if thread is None else block * g.threads_per_block + g.thread_number(thread)
        array = self.array(name)
        mask = np.zeros(array.size, bool)
        for event_kind, lanes, elements, blocks, phases, _site in array.events:
            if event_kind == kind:
                keep = (blocks == block) & (phases == phase)
                if lane is not None:
                    keep &= lanes == lane
                mask[elements[keep]] = True
        return mask.reshape(array.shape)

    def array(self, name: str) -> ArrayTrace:
        try:
            return self.arrays[name]
        except KeyError:
            known = ", ".join(f"`{n}`" for n in self.arrays) or "none"
            raise UnknownArray(f"`{self.kernel}` touched no array called `{name}` (it touched {known})") from None

    def reads_per_thread(self, name: str) -> np.ndarray:
        """How many times each thread read ``name`` (one count per thread, in lane order)."""
        return self.array(name).per_thread["read"]

    def writes_per_thread(self, name: str) -> np.ndarray:
        return self.array(name).per_thread["write"]

    def reads_per_element(self, name: str) -> np.ndarray:
        """How many times each element of ``name`` was read (shared arrays: one copy per block)."""
        return self.array(name).element_counts("read")

    def writes_per_element(self, name: str) -> np.ndarray:
        return self.array(name).element_counts("write")

    def sectors_per_request(self, name: str, kind: str = "read") -> float:
        """Average 32-byte sectors per warp instruction on a global array (4 for coalesced float32)."""
        stats = self.array(name).instructions[kind]
        return stats.sectors / stats.requests if stats.requests else 0.0

    def threads_per_request(self, name: str, kind: str = "read") -> float:
        """Average threads taking part in a warp instruction on ``name`` (32 when no lane is idle)."""
        stats = self.array(name).instructions[kind]
        return stats.lanes / stats.requests if stats.requests else 0.0

    def bank_conflicts(self, name: str, kind: str = "read") -> int:
        """The worst bank-conflict degree of a warp instruction on a shared array (1: none)."""
        return self.array(name).instructions[kind].worst

    # -- budgets --------------------------------------------------------------------------------------
    def _fail(self, message: str):
        raise BudgetExceeded(f"{self.kernel}: {message}")

    def _worst_thread(self, counts: np.ndarray) -> str:
        return self.geometry.thread_name(int(np.argmax(counts)))

    def assert_reads_per_thread(self, name: str, at_most: int) -> None:
        counts = self.reads_per_thread(name)
        if counts.max(initial=0) > at_most:
            self._fail(
                f"each thread may read `{name}` at most {at_most} times, but "
                f"{self._worst_thread(counts)} read it {counts.max()} times"
            )

    def _assert_per_element(self, name: str, kind: str, exactly, at_most) -> None:
        for bound, value in (("exactly", exactly), ("at_most", at_most)):
            if value is not None and not isinstance(value, (int, np.integer)):
                raise TypeError(f"{bound} is a count, a whole number such as 1 (without quotes), not {value!r}")
        counts = self.array(name).element_counts(kind)
        verb = {"read": "read", "write": "written"}[kind]
        if exactly is not None:
            bad = np.argwhere(counts != exactly)
            if len(bad):
                where = tuple(int(i) for i in bad[0])
                self._fail(
                    f"every element of `{name}` should be {verb} exactly {_times(exactly)}, "
                    f"but `{name}{list(where)}` was {verb} {_times(counts[where])} "
                    f"({len(bad)} of {counts.size} elements are off)"
                )
        if at_most is not None and counts.max(initial=0) > at_most:
            where = tuple(int(i) for i in np.unravel_index(np.argmax(counts), counts.shape))
            self._fail(
                f"each element of `{name}` may be {verb} at most {_times(at_most)}, "
                f"but `{name}{list(where)}` was {verb} {_times(counts[where])}"
            )

    def assert_reads_per_element(self, name: str, *, exactly: int | None = None, at_most: int | None = None) -> None:
        self._assert_per_element(name, "read", exactly, at_most)

    def assert_writes_per_element(self, name: str, *, exactly: int | None = None, at_most: int | None = None) -> None:
        self._assert_per_element(name, "write", exactly, at_most)

    def assert_sectors_per_request(self, name: str, at_most: float, kind: str = "read") -> None:
        value = self.sectors_per_request(name, kind)
        if value > at_most:
            self._fail(
                f"warp {kind}s of `{name}` touch {value:.1f} sectors of 32 bytes each on average, more than "
                f"{at_most}: neighbouring threads should access neighbouring elements (coalescing)"
            )

    def assert_no_bank_conflicts(self, name: str | None = None) -> None:
        names = [name] if name else [n for n, a in self.arrays.items() if a.space == "shared"]
        for n in names:
            for kind in KINDS:
                worst = self.array(n).instructions[kind].worst
                if worst > 1:
                    self._fail(
                        f"{kind}s of shared array `{n}` have {worst}-way bank conflicts: {worst} threads of a "
                        "warp hit different words in the same bank (pad the array, or change the index order)"
                    )

    # -- report ---------------------------------------------------------------------------------------
    def summary(self) -> str:
        g = self.geometry
        width = max([len(n) for n in self.arrays] + [5]) + 2
        lines = [
            f"{self.kernel}[{g.grid}, {g.block}]: {g.lanes} threads",
            f"{'array':<{width}}{'space':<8}{'reads':>8}{'writes':>8}{'atomics':>8}{'max/thread':>11}"
            f"{'sectors/req (r/w)':>19}{'conflicts':>10}",
        ]
        for name, a in self.arrays.items():
            total = {k: int(a.per_thread[k].sum()) for k in KINDS}
            most = int(max(a.per_thread[k].max(initial=0) for k in ("read", "write")))
            sectors = "/".join(
                f"{self.sectors_per_request(name, k):.1f}" if a.instructions[k].requests else "-" for k in ("read", "write")
            ) if a.space == "global" else "-"
            worst = max(a.instructions[k].worst for k in KINDS)
            conflicts = ("none" if worst == 1 else f"{worst}-way") if a.space == "shared" and worst else "-"
            lines.append(
                f"{name:<{width}}{a.space:<8}{total['read']:>8}{total['write']:>8}{total['atomic']:>8}{most:>11}"
                f"{sectors:>19}{conflicts:>10}"
            )
        return "\n".join(lines)

    def by_line(self) -> str:
        """Warp memory instructions per source line and array: sectors per request, bank conflicts."""
        width = max([len(name) for _, _, name, _ in self.lines] + [5]) + 2
        rows = [f"{'line':>5}  {'array':<{width}}{'kind':<7}{'requests':>9}{'threads/req':>12}{'sectors/req':>12}"
                f"{'conflicts':>10}  source"]
        for (function, line, name, kind), stats in sorted(self.lines.items(), key=lambda item: item[0][1:]):
            space = self.arrays[name].space
            per_request = f"{stats.sectors / stats.requests:.1f}" if space == "global" and stats.requests else "-"
            conflicts = ("none" if stats.worst == 1 else f"{stats.worst}-way") if space == "shared" else "-"
            threads = f"{stats.lanes / stats.requests:.1f}" if stats.requests else "-"
            rows.append(f"{line:>5}  {name:<{width}}{kind:<7}{stats.requests:>9}{threads:>12}{per_request:>12}"
                        f"{conflicts:>10}  {self.source[function, line]}")
        return "\n".join(rows)


class Trace:
    """The launches run inside one ``with trace():`` block; questions go to the last one. ``lines``: each launch
    watches which lines of the kernel run (`LaunchTrace.lines_not_run`)."""

    def __init__(self, lines: bool = False):
        self.launches: list[LaunchTrace] = []
        self.lines = lines

    def __len__(self) -> int:
        return len(self.launches)

    def __getitem__(self, k: int) -> LaunchTrace:
        return self.launches[k]

    @property
    def last(self) -> LaunchTrace:
        if not self.launches:
            raise RuntimeError("no kernel was launched inside `with trace():`, so there is nothing to ask")
        return self.launches[-1]

    def __getattr__(self, name):
        if name.startswith("_"):
            raise AttributeError(name)
        return getattr(self.last, name)


_active: list[Trace] = []


@contextlib.contextmanager
def recording(lines: bool = False):
    """Record every launch this simulator runs inside the block, in the `Trace` it yields; ``lines``: which lines
    of its kernel each launch ran too (`lines_run`)."""
    recorded = Trace(lines)
    _active.append(recorded)
    try:
        yield recorded
    finally:
        _active.remove(recorded)


_watching: list[tuple] = []  # (launch trace, stretches that ran) of the launch whose lines `lines_run` watches


def mark(stretch: int) -> None:
    """A rewritten function's marker (`transform.MARK`): ``stretch`` ran, where `lines_run` watches, outside a device
    function's call (whose lines are the call's)."""
    if _watching:
        recorder, ran = _watching[-1]
        if recorder.call_site is None:
            ran.add(stretch)


def marked(stretch: int, value):
    """A lambda's marker (`transform.MARKED`): ``stretch`` ran; its value."""
    mark(stretch)
    return value


@contextlib.contextmanager
def lines_run(recorder: LaunchTrace | None, own_lines=()):
    """While a traced launch runs: which lines of the kernel's code run (`LaunchTrace.lines_not_run`), in the line
    table's terms (`LaunchTrace.kernel_lines`): in the kernel's file, a device function's at the line that calls it,
    except the lines of ``own_lines``, the (rewritten) device functions whose code keeps them, which count as the
    kernel's code whether they are called or not.

    The rewritten kernel runs each statement once for all its threads, and a branch only where some thread takes
    it, so a line that never ran is code that no thread ran. The rewrite marks each stretch of code that runs whole
    once begun (`transform.MARK`); a line ran where its stretch did (`transform.STRETCHES`; in a launch that stops
    at a fault, the rest of that stretch too). A code object's lines are known once a stretch of it ran (a lambda's,
    where some thread needed its value). Unlike a tracer, the markers cost next to nothing, and a debugger or
    coverage may trace alongside."""
    if recorder is None or not recorder.watches_lines or recorder.kernel_file is None:
        yield
        return
    file, ran = recorder.kernel_file, set()
    _watching.append((recorder, ran))
    try:
        yield
    finally:
        _watching.pop()
        for function in own_lines:
            recorder.lines_known.update((file, number) for _, number in dis.findlinestarts(function.__code__) if number)
        for stretch in ran:
            lines, every = STRETCHES[stretch]
            recorder.lines_ran.update((file, number) for number in lines)
            recorder.lines_known.update((file, number) for number in every)


def recorder_for(function, geometry, arguments) -> LaunchTrace | None:
    """A new LaunchTrace when a trace is being recorded, else None."""
    if not _active:
        return None
    launch = LaunchTrace(function.__name__, geometry, [a for a in arguments if isinstance(a, SimArray)], function)
    launch.watches_lines = _active[-1].lines
    _active[-1].launches.append(launch)
    return launch
