"""Memory bandwidth of module 2's kernels against a device-to-device copy, in one run on a GPU.

    python benchmarks/bandwidth.py            # 1 MiB to 1 GiB, writes its section of RESULTS.md
    python benchmarks/bandwidth.py --quick    # 1, 16 and 256 MiB, 3 samples, prints only
    python benchmarks/bandwidth.py --sizes 64 256 --no-write
    python benchmarks/bandwidth.py --seconds 120   # every kernel compiled at 1 MiB, then the goals' sizes (256 MiB
                                                   # up) first, the rest while 120 s last

Needs a CUDA GPU; anywhere else it prints one line saying so and exits with status 0.

At each size (float32 arrays; 1 MiB = 2^20 bytes) it times, in the same process:

- the reference: a device-to-device copy, ``dst.copy_to_device(src)`` (cuMemcpyDtoD);
- map (``x + x``) and zip (``x + y``) of `gpucourse.kernels.elementwise` on contiguous 1-D
  tensors, through the strided kernels that the lecture teaches (shape and strides arrays,
  one thread per element, and the grid-stride version with the best of several grid sizes),
  and through the vectorised ones (16-byte loads, several in flight per thread; best grid size);
  for comparison, the same functions in a plain contiguous kernel defined here (not in the library);
  and the map of a square matrix's transposed view, one thread per element (uncoalesced reads);
- the seven steps of the sum ladder of `gpucourse.kernels.reduction`, each all the way to one
  value: steps 1-5 relaunch on their partial sums exactly as `block_sums_to_total` does, steps 6
  and 7 (grid-stride loop, one atomic add per block; step 7 with 16-byte loads, several in flight
  per thread) with the best of several grid sizes;
- the axis reduction of `gpucourse.kernels.axis_reduction` on a square matrix, along its last
  axis (rows, contiguous) and along its first (columns, strided);
- ``cupy.sum`` and ``torch.sum`` of the same input, where they are installed.

Bytes counted (GB/s = 10^9 bytes per second): every input element read once and every output
element written once. The copy and map move 2 x 4n bytes (read + write), zip 3 x 4n, a sum 4n
(its partial sums are not counted), an axis reduction its input plus its output. The copy's GB/s
counts bytes read plus bytes written too; "% of copy" is a kernel's GB/s over the copy's at the
same size.

Timing: the library's timer, `gpucourse.run.timing.measure`: CUDA events around many back-to-back
launches, after warm-up launches (JIT compilation and first touch excluded); the median of the
samples. The launches of a sample are queued behind a kernel that sleeps on the GPU while Python
enqueues them, so Python's launch overhead is not in the numbers. Each launch gets its arrays
ready on the device (shapes and strides are tuples, passed by value: nothing to copy). The
launches rotate over enough sets of buffers to fill 4x the L2 cache, so small sizes measure device
memory, not the cache. Every kernel's output is checked against NumPy once, on poisoned (NaN)
outputs; a wrong result is reported and nothing is recorded.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
from numba import cuda

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from common import (  # noqa: E402, F401 (MAX_SETS: for the tests)
    finish,
    L2_ROTATION,
    MAX_SETS,
    Device,
    TimeBudget,
    add_time_budget,
    buffer_sets,
    current_device,
    without_gpu,
    markdown_table,
    poison,
    reference_libraries,
    relative_error,
    today,
    versions,
)

NAME = "bandwidth"  # its section of benchmarks/RESULTS.md
MIB = 2**20
ITEM = 4  # bytes of a float32
SIZES_MIB = (1, 4, 16, 64, 256, 1024)
QUICK_SIZES_MIB = (1, 16, 256)
GOAL_FROM_MIB = 256
WARM_UP_MIB = 1  # --seconds: every kernel compiled at this size first, its time no row's
GOALS = {"map": 0.90, "zip": 0.90, "sum": 0.85}  # fraction of the copy's GB/s, on an H100
SAMPLES, QUICK_SAMPLES = 7, 3
BLOCK_MULTIPLES = (2, 4, 8, 16)  # grid sizes tried for the grid-stride kernels, times the SM count
TOLERANCE = {"exact": 1e-6, "sum": 1e-3}  # relative error ||out - ref|| / ||ref|| against float64


# -- what is moved ------------------------------------------------------------------------------------
def bytes_moved(kind: str, shape: tuple[int, ...], axis: int | None = None) -> int:
    """Bytes one launch must move: inputs read once, outputs written once (float32)."""
    n = math.prod(shape)
    if kind in ("copy", "map"):
        return 2 * n * ITEM
    if kind == "zip":
        return 3 * n * ITEM
    if kind == "sum":
        return n * ITEM
    if kind == "axis":
        return (n + n // shape[axis]) * ITEM
    raise ValueError(f"unknown kind {kind!r}: one of copy, map, zip, sum, axis")


def matrix_shape(n: int) -> tuple[int, int]:
    """A (rows, columns) matrix of at most ``n`` elements, square when ``n`` is an even power of 2."""
    rows = 1 << (max(n, 1).bit_length() - 1) // 2
    return rows, n // rows


# -- measurements and their report (pure) ------------------------------------------------------------
@dataclass(frozen=True)
class Measurement:
    kernel: str  # the row's label, the same at every size
    size: int  # bytes of one input array
    moved: int  # bytes moved per launch (`bytes_moved`)
    ms: float  # median milliseconds per launch (a whole reduction, relaunches included)
    goal: str | None = None  # the key of GOALS it counts towards
    note: str = ""
    wrong: bool = False

    @property
    def gbps(self) -> float:
        return self.moved / (self.ms * 1e-3) / 1e9


COPY = "copy: `cuMemcpyDtoD` (reference)"


def copy_gbps(measurements: list[Measurement], size: int) -> float | None:
    for m in measurements:
        if m.kernel == COPY and m.size == size:
            return m.gbps
    return None


def fraction_of_copy(m: Measurement, measurements: list[Measurement]) -> float:
    reference = copy_gbps(measurements, m.size)
    return m.gbps / reference if reference else math.nan


def size_label(size: int) -> str:
    return f"{size / MIB:g}"


def row_label(size: int) -> str:
    """``"256 MiB"``: a size as the time budget names it."""
    return f"{size_label(size)} MiB"


def pivot_table(measurements: list[Measurement]) -> str:
    """One row per kernel, one column per size: % of copy (the copy's own row: its GB/s)."""
    sizes = sorted({m.size for m in measurements})
    kernels = list(dict.fromkeys(m.kernel for m in measurements))
    cell = {(m.kernel, m.size): m for m in measurements}
    rows = []
    for kernel in kernels:
        row = [kernel]
        for size in sizes:
            m = cell.get((kernel, size))
            if m is None:
                row.append("")
            elif kernel == COPY:
                row.append(f"{m.gbps:,.0f} GB/s")
            else:
                row.append(("WRONG " if m.wrong else "") + f"{fraction_of_copy(m, measurements):.0%}")
        rows.append(row)
    header = ["kernel"] + [f"{size_label(s)} MiB" for s in sizes]
    return markdown_table(header, rows, right=set(range(1, len(header))))


def full_table(measurements: list[Measurement]) -> str:
    rows = [[m.kernel, size_label(m.size), f"{m.ms:.4g}", f"{m.gbps:,.0f}", f"{fraction_of_copy(m, measurements):.0%}",
             ("WRONG result; " if m.wrong else "") + m.note] for m in measurements]
    header = ["kernel", "size (MiB)", "time (ms)", "GB/s", "% of copy", "note"]
    return markdown_table(header, rows, right={1, 2, 3, 4})


def verdict(measurements: list[Measurement]) -> list[str]:
    """One line per goal: the best kernel of its group at each size from GOAL_FROM_MIB, and whether it is met."""
    big = sorted({m.size for m in measurements if m.size >= GOAL_FROM_MIB * MIB})
    if not big:
        return [f"Goals: none measured (they apply from {GOAL_FROM_MIB} MiB)."]
    lines = []
    for goal, target in GOALS.items():
        best = []
        for size in big:
            group = [m for m in measurements if m.goal == goal and m.size == size and not m.wrong]
            if group:
                best.append(max(group, key=lambda m: fraction_of_copy(m, measurements)))
        if not best:
            lines.append(f"Goal {goal} >= {target:.0%} of copy: not measured.")
            continue
        worst = min(fraction_of_copy(m, measurements) for m in best)
        status = "reached" if worst >= target else "NOT reached"
        each = "; ".join(f"{size_label(m.size)} MiB: {fraction_of_copy(m, measurements):.0%} ({m.kernel})"
                         for m in best)
        lines.append(f"Goal {goal} >= {target:.0%} of copy from {GOAL_FROM_MIB} MiB: {status}. Best: {each}.")
    return lines


def section(measurements: list[Measurement], device: Device, versions: str, samples: int, note: str = "") -> str:
    """The Markdown recorded in RESULTS.md; ``note``, under the tables: the sizes the time budget left out."""
    return "\n".join([
        "## Bandwidth of map, zip and the reductions against a device copy",
        "",
        f"`python benchmarks/bandwidth.py` on {device.name} ({device.sms} SMs, {device.l2_bytes / MIB:g} MiB of L2).",
        "",
        f"- Date: {today()}",
        f"- Versions: {versions}",
        f"- Timing: float32, CUDA events around back-to-back launches after warm-up (JIT excluded), queued "
        f"behind a sleeping kernel so that Python's launch overhead is excluded; median of {samples} samples. "
        f"Buffers rotate over {L2_ROTATION}x the L2 size, so small sizes read device memory, not the cache.",
        "- Launches: the library's own kernels with their arguments on the device already (`launch_elementwise` "
        "and `launch_axis_reduce` pass shapes and strides as tuples, by value, with nothing to copy); "
        "sum steps 1-5 include every relaunch down to one value, with the partial-sum buffers allocated once "
        "(`block_sums_to_total` allocates them at each call); steps 6 and 7 include zeroing their total.",
        "- Inputs: contiguous 1-D arrays, as tensors of one dimension through the library's kernels, which read "
        "shapes and strides; the transposed row maps a square matrix's transposed view (strides (1, side)).",
        "- Bytes: inputs read once plus outputs written once; GB/s = 10^9 bytes/s; 1 MiB = 2^20 bytes. "
        "The copy counts bytes read + bytes written (2 x size); % of copy = GB/s / the copy's GB/s at that size. "
        "Sums count their input only; the axis reductions reduce a square matrix.",
        *[f"- {line}" for line in verdict(measurements)],
        f"- Goals were set for an H100 (map and zip {GOALS['map']:.0%}, the best sum {GOALS['sum']:.0%} of copy).",
        "",
        "### % of the copy's bandwidth",
        "",
        pivot_table(measurements),
        "",
        "### Every measurement",
        "",
        full_table(measurements),
        *(["", note] if note else []),
    ])


# -- GPU side ---------------------------------------------------------------------------------------
def double(x):
    return x + x


def add(x, y):
    return x + y


def contiguous_map(fn):
    """The benchmark's own comparison: ``out[i] = fn(a[i])`` on contiguous 1-D arrays, no shapes or strides."""
    f = cuda.jit(device=True)(fn)

    @cuda.jit
    def map_contiguous(out, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = f(a[i])

    return map_contiguous


def contiguous_zip(fn):
    f = cuda.jit(device=True)(fn)

    @cuda.jit
    def zip_contiguous(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = f(a[i], b[i])

    return zip_contiguous


MAP_CONTIGUOUS, ZIP_CONTIGUOUS = contiguous_map(double), contiguous_zip(add)
THREADS = 256  # for the elementwise kernels


class Recorder:
    """Takes a kernel's place in a library launch function: records the launch instead of running it."""

    def __getitem__(self, configuration):
        def record(*arguments):
            self.configuration, self.arguments = configuration, arguments

        return record


def staged(kernel, launch_function, *args, **options) -> Callable[[], None]:
    """A launch of ``kernel`` as ``launch_function(kernel, *args, **options)`` makes it (merged shape and strides,
    launch configuration), worked out once, here: each call only launches. The tensors' storage is on the device
    already, and the shape and stride tuples go by value, so a launch copies nothing."""
    recorder = Recorder()
    launch_function(recorder, *args, **options)
    configured = kernel[recorder.configuration]
    return lambda: configured(*recorder.arguments)


def sum_launches(kernel, data, blocks: int | None = None):
    """``(launch, result, kernel_launches)``: the launches of ``block_sums_to_total(kernel, data, blocks)``
    with its buffers allocated once, here; after ``launch()``, ``result[0]`` is the sum."""
    from gpucourse.kernels import reduction  # noqa: PLC0415

    if kernel in reduction.ONE_LAUNCH:
        total, zero = cuda.device_array(1, np.float32), cuda.to_device(np.zeros(1, np.float32))
        configured = kernel[blocks or reduction.blocks_for(kernel, data.size), reduction.THREADS]

        def launch():
            total.copy_to_device(zero)
            configured(total, data)

        return launch, total, 1
    steps = []
    while True:
        count = reduction.blocks_for(kernel, data.size)
        partial = cuda.device_array(count, np.float32)
        steps.append((kernel[count, reduction.THREADS], partial, data))
        if count == 1:
            break
        data = partial

    def launch():
        for configured, out, a in steps:
            configured(out, a)

    return launch, partial, len(steps)


@dataclass
class Buffers:
    """The arrays of one size: ``sets`` copies of the inputs ``a``, ``b`` and of the output ``out``."""

    n: int
    a: list
    b: list
    out: list
    host_a: np.ndarray
    host_b: np.ndarray

    @classmethod
    def allocate(cls, n: int, sets: int, seed: int = 0) -> "Buffers":
        rng = np.random.default_rng(seed)
        host_a, host_b = rng.random(n, dtype=np.float32), rng.random(n, dtype=np.float32)
        first_a, first_b = cuda.to_device(host_a), cuda.to_device(host_b)
        a, b, out = [first_a], [first_b], []
        for _ in range(sets - 1):
            a.append(cuda.device_array(n, np.float32))
            b.append(cuda.device_array(n, np.float32))
            a[-1].copy_to_device(first_a)
            b[-1].copy_to_device(first_b)
        for _ in range(sets):
            out.append(cuda.device_array(n, np.float32))
            poison(out[-1])
        return cls(n, a, b, out, host_a, host_b)

    @functools.cached_property
    def total(self) -> np.ndarray:
        return np.array([self.host_a.sum(dtype=np.float64)])

    def expected_total(self) -> np.ndarray:
        return self.total


@dataclass
class Case:
    """One row of the table at one size: a launch per buffer set, and how to check the first set's result."""

    kernel: str
    kind: str  # of `bytes_moved`
    shape: tuple
    launches: list[Callable[[], None]]
    result: Callable[[], np.ndarray]  # the first set's output, on the host
    expected: Callable[[], np.ndarray]
    tolerance: float
    poisoned: list = field(default_factory=list)  # outputs to fill with NaN before the warm-up
    axis: int | None = None
    goal: str | None = None
    note: str = ""
    kernel_launches: int = 1  # per launch of ``launches`` (a reduction's relaunches)


def tensor(storage, shape):
    from gpucourse.kernels import Tensor, contiguous_strides  # noqa: PLC0415

    return Tensor(storage, tuple(shape), contiguous_strides(shape))


def copy_case(buffers: Buffers) -> Case:
    launches = [functools.partial(out.copy_to_device, a) for out, a in zip(buffers.out, buffers.a)]
    return Case(COPY, "copy", (buffers.n,), launches, buffers.out[0].copy_to_host, lambda: buffers.host_a,
                TOLERANCE["exact"], poisoned=[buffers.out[0]], note="bytes read + bytes written")


def elementwise_cases(buffers: Buffers, device: Device) -> list[list[Case]]:
    """Map and zip: the library's kernels (one thread per element; grid-stride, one case per grid size)
    and the contiguous comparison. A list of alternatives per row: the fastest is kept."""
    from gpucourse.kernels import elementwise  # noqa: PLC0415

    n = buffers.n
    functions = {
        "map": (elementwise.make_map, elementwise.make_map_vectorised, double, MAP_CONTIGUOUS,
                [(a,) for a in buffers.a], functools.cache(lambda: buffers.host_a + buffers.host_a)),
        "zip": (elementwise.make_zip, elementwise.make_zip_vectorised, add, ZIP_CONTIGUOUS,
                list(zip(buffers.a, buffers.b)), functools.cache(lambda: buffers.host_a + buffers.host_b)),
    }
    rows = []
    for kind, (make, make_vectorised, fn, contiguous, inputs, expected) in functions.items():
        def case(label, launches, note, goal=kind, expected=expected):
            return Case(label, kind, (n,), launches, buffers.out[0].copy_to_host, expected, TOLERANCE["exact"],
                        poisoned=[buffers.out[0]], goal=goal, note=note)

        def library(kernel, blocks=None, inputs=inputs):
            return [staged(kernel, elementwise.launch_elementwise, tensor(out, (n,)),
                           *(tensor(x, (n,)) for x in xs), threads=THREADS, blocks=blocks)
                    for out, xs in zip(buffers.out, inputs)]

        one_per_element = library(make(fn))
        rows.append([case(f"{kind}: one thread per element", one_per_element,
                          f"{-(-n // THREADS)} blocks of {THREADS}")])
        if kind == "map" and matrix_shape(n)[0] == matrix_shape(n)[1]:  # the same map, reading across the rows
            rows.append([transposed_case(buffers, make(fn), expected)])
        rows.append([case(f"{kind}: grid-stride", library(make(fn, grid_stride=True), m * device.sms),
                          f"{m * device.sms} blocks ({m} x SMs) of {THREADS}") for m in BLOCK_MULTIPLES])
        vectorised = make_vectorised(fn)
        rows.append([case(f"{kind}: 16-byte vectors, grid-stride", [
            staged(vectorised, elementwise.launch_vectorised, tensor(out, (n,)), *(tensor(x, (n,)) for x in xs),
                   sms=device.sms, blocks_per_sm=m) for out, xs in zip(buffers.out, inputs)],
            f"{m * device.sms} blocks ({m} x SMs) of {elementwise.VECTOR_THREADS}, {elementwise.CHUNKS} loads "
            "of 16 bytes per input in flight per thread") for m in BLOCK_MULTIPLES])
        configured = contiguous[max(1, -(-n // THREADS)), THREADS]
        plain = [functools.partial(configured, out, *xs) for out, xs in zip(buffers.out, inputs)]
        rows.append([case(f"{kind}: contiguous 1-D (benchmark only)", plain, f"{-(-n // THREADS)} blocks of "
                          f"{THREADS}, no shapes or strides", goal=None)])
    return rows


def transposed_case(buffers: Buffers, kernel, expected) -> Case:
    """The map of a square matrix's transposed view (``a.T``: strides (1, side)), one thread per element of the
    contiguous output: a warp reads 32 elements a row apart, each in its own sector (lecture 2a's coalescing)."""
    from gpucourse.kernels import elementwise  # noqa: PLC0415

    side = matrix_shape(buffers.n)[0]
    launches = [staged(kernel, elementwise.launch_elementwise, tensor(out, (side, side)), tensor(a, (side, side)).T,
                       threads=THREADS) for out, a in zip(buffers.out, buffers.a)]
    want = functools.cache(lambda: np.ascontiguousarray(expected().reshape(side, side).T).reshape(-1))
    return Case("map: one thread per element, transposed input", "map", (buffers.n,), launches,
                buffers.out[0].copy_to_host, want, TOLERANCE["exact"], poisoned=[buffers.out[0]],
                note=f"a {side} x {side} matrix read through its transpose; {-(-buffers.n // THREADS)} blocks of "
                     f"{THREADS}")


def sum_cases(buffers: Buffers, device: Device) -> list[list[Case]]:
    """The seven steps of the ladder, each to one value; steps 6 and 7 once per grid size."""
    from gpucourse.kernels import elementwise, reduction  # noqa: PLC0415

    rows = []
    for step, kernel in enumerate(reduction.LADDER, start=1):
        atomic = kernel in reduction.ONE_LAUNCH
        alternatives = []
        for m in BLOCK_MULTIPLES if atomic else (None,):
            blocks = m * device.sms if atomic else None
            planned = [sum_launches(kernel, a, blocks) for a in buffers.a]
            launches = [launch for launch, _, _ in planned]
            _, result, count = planned[0]
            note = f"{blocks} blocks ({m} x SMs) of {reduction.THREADS}" if atomic else \
                f"{count} launches to one value, {reduction.THREADS} threads/block"
            if kernel is reduction.sum_grid_stride_vectorised:
                note += f", {elementwise.CHUNKS} loads of 16 bytes in flight per thread"
            alternatives.append(Case(f"sum {step}: `{kernel.py_func.__name__}`", "sum", (buffers.n,), launches,
                                     result.copy_to_host, buffers.expected_total, TOLERANCE["sum"],
                                     poisoned=[] if atomic else [result], goal="sum", note=note,
                                     kernel_launches=count))
        rows.append(alternatives)
    return rows


def axis_cases(buffers: Buffers) -> list[list[Case]]:
    """The axis reduction (a sum) of a square matrix along its last axis and along its first."""
    from gpucourse.kernels import axis_reduction  # noqa: PLC0415

    kernel = axis_reduction.make_axis_reduce(add, 0.0)
    rows_, cols = shape = matrix_shape(buffers.n)
    rows = []
    for axis, label in ((1, "axis sum: last axis (along rows, contiguous)"),
                        (0, "axis sum: first axis (down columns, strided)")):
        out_shape = (rows_, 1) if axis == 1 else (1, cols)
        outs = [cuda.device_array(math.prod(out_shape), np.float32) for _ in buffers.a]
        launches = [staged(kernel, axis_reduction.launch_axis_reduce, tensor(out, out_shape),
                           tensor(a[:rows_ * cols], shape), axis) for out, a in zip(outs, buffers.a)]
        expected = functools.partial(np.sum, buffers.host_a[:rows_ * cols].reshape(shape), axis=axis,
                                     dtype=np.float64)
        rows.append([Case(label, "axis", shape, launches, outs[0].copy_to_host, expected,
                          TOLERANCE["sum"], poisoned=[outs[0]], axis=axis,
                          note=f"{rows_} x {cols}, {axis_reduction.THREADS} threads per output")])
    return rows


def library_sum_cases(buffers: Buffers, libraries: dict) -> list[list[Case]]:
    """``cupy.sum`` and ``torch.sum`` of the same input arrays (shared, not copied: `__cuda_array_interface__`)."""
    rows = []
    for name, module in libraries.items():
        try:
            if name == "cupy":
                arrays = [module.asarray(a) for a in buffers.a]
                launches = [functools.partial(module.sum, x) for x in arrays]
            else:
                arrays = [module.as_tensor(a, device="cuda") for a in buffers.a]
                launches = [x.sum for x in arrays]
        except Exception as exc:  # a reference that cannot share the array is left out, with the reason
            print(f"  {name}.sum left out: {type(exc).__name__}: {exc}", flush=True)
            continue
        first = launches[0]
        rows.append([Case(f"{name}.sum", "sum", (buffers.n,), launches, lambda first=first: np.array([float(first())]),
                          buffers.expected_total, TOLERANCE["sum"], note="same input arrays")])
    return rows


def measure(case: Case, size: int, samples: int, device: Device) -> Measurement:
    """Warm up (compile, first touch), check the first set's result, then time."""
    from gpucourse.run import timing  # noqa: PLC0415 (importing gpucourse picks the backend)

    for array in case.poisoned:
        poison(array)
    for launch in case.launches:
        launch()
    cuda.synchronize()
    error = relative_error(case.result(), case.expected())
    wrong = not error <= case.tolerance
    timed = timing.measure(case.launches, samples, case.kernel_launches, warmup=0)  # warmed up above
    ms = timed.seconds * 1e3
    note = case.note + (f"; relative error {error:.1e} > {case.tolerance:g}" if wrong else "")
    if device.real and not timed.queued:
        note += "; the GPU was released before all launches were queued: time may include launch gaps"
    return Measurement(case.kernel, size, bytes_moved(case.kind, case.shape, case.axis), ms, case.goal, note,
                       wrong)


def measure_size(size: int, device: Device, samples: int, libraries: dict) -> list[Measurement]:
    """Every row at one size (bytes of one input array); for rows with alternatives, the fastest."""
    n = size // ITEM
    buffers = Buffers.allocate(n, buffer_sets(size, device.l2_bytes))
    rows = [[copy_case(buffers)], *elementwise_cases(buffers, device), *sum_cases(buffers, device),
            *axis_cases(buffers), *library_sum_cases(buffers, libraries)]
    measurements = []
    for alternatives in rows:
        tried = [measure(case, size, samples, device) for case in alternatives]
        best = min(tried, key=lambda m: (m.wrong, m.ms))
        if len(tried) > 1:
            best = Measurement(best.kernel, best.size, best.moved, best.ms, best.goal,
                               best.note + f"; best of {', '.join(f'{m} x' for m in BLOCK_MULTIPLES)} SMs",
                               any(m.wrong for m in tried))
        measurements.append(best)
        print(f"  {best.kernel:48} {size_label(size):>6} MiB {best.ms:10.4g} ms {best.gbps:8,.0f} GB/s "
              f"{fraction_of_copy(best, measurements):5.0%}{'  WRONG' if best.wrong else ''}", flush=True)
    return measurements


def fits(size: int, device: Device) -> str | None:
    """None when one size's buffers fit in free device memory, else why they do not."""
    need = 4 * size * buffer_sets(size, device.l2_bytes) + 64 * MIB  # a, b, out, axis outputs and partials
    context = cuda.current_context()
    context.deallocations.clear()  # the last size's buffers, which numba frees lazily
    free, _ = context.get_memory_info()
    return None if need <= free else f"needs about {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"sizes {', '.join(map(str, QUICK_SIZES_MIB))} MiB, {QUICK_SAMPLES} samples, prints only")
    parser.add_argument("--sizes", type=int, nargs="+", metavar="MIB", help="sizes in MiB (prints only)")
    parser.add_argument("--samples", type=int, default=None, help=f"samples per median (default {SAMPLES})")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    add_time_budget(parser)
    options = parser.parse_args(argv)

    if without_gpu("bandwidth.py"):
        return 0

    sizes = [mib * MIB for mib in options.sizes or (QUICK_SIZES_MIB if options.quick else SIZES_MIB)]
    samples = options.samples or (QUICK_SAMPLES if options.quick else SAMPLES)
    full = not options.quick and not options.sizes
    device, libraries = current_device(), reference_libraries()
    print(f"{device.name}: {device.sms} SMs, {device.l2_bytes / MIB:g} MiB of L2; "
          f"references: {', '.join(['copy', *(f'{n}.sum' for n in libraries)])}", flush=True)

    budget = TimeBudget(options.seconds)
    if options.seconds is not None:  # each kernel compiled at a small size first: 256 MiB then leaves time for 1 GiB
        budget.warm_up(lambda: measure_size(WARM_UP_MIB * MIB, device, 1, libraries))
    goals = {row_label(size) for size in sizes if size >= GOAL_FROM_MIB * MIB}  # the sizes the goals are read from
    measurements, skipped = [], []
    for size in budget.rows(sizes, label=row_label, first=goals):
        reason = fits(size, device)
        if reason:
            skipped.append(size)
            print(f"  {row_label(size)} skipped: {reason}", flush=True)
            continue
        measurements += measure_size(size, device, samples, libraries)
    measurements.sort(key=lambda m: sizes.index(m.size))  # measured goals first, tabled in the sizes' order

    text = section(measurements, device, versions(libraries), samples, budget.note("bandwidth.py"))
    return finish(NAME, text, measurements, write=full and not skipped and not options.no_write)


if __name__ == "__main__":
    sys.exit(main())
