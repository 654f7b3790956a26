"""Module 5's fused kernels on a GPU: row softmax naive vs fused vs torch.softmax, attention naive vs flash vs SDPA.

    python benchmarks/fusion.py             # every size below; writes RESULTS.md
    python benchmarks/fusion.py --quick     # one softmax and two attention sizes, 3 samples, prints only
    python benchmarks/fusion.py --no-write
    python benchmarks/fusion.py --seconds 150   # the goals' sizes first, the rest while 150 s last

Needs a CUDA GPU; anywhere else it prints one line saying so and exits with status 0.

Softmax of each row of a float32 (rows, cols) matrix, in GB/s of the least traffic a softmax needs (read x once,
write y once: 2 x rows x cols x 4 bytes over the time), beside a device-to-device copy of x measured in the same
run: `softmax_naive`'s three kernels (row max, exp and sum into an intermediate array, divide), `softmax_row_fused`
(one block per row, the row in shared memory, up to 4096 columns), `softmax_online` (running max and sum, two reads
of x), `softmax_registers` (the row in registers, 8 values per thread, all loads issued first),
`softmax_vectorised` (the top rung: 16-byte loads and stores, 32 values per thread in registers, a row held by the
fewest warps that cover it, one barrier; and its build with 16 values per thread, twice the threads per row),
`softmax_pipelined` (the same rows on a persistent grid, each thread's loads of its next row in flight while it
computes the current one) from `gpucourse.kernels.fusion`, and ``torch.softmax`` when PyTorch is installed (on the
same memory, through ``__cuda_array_interface__``). Goals: fused at least 3x naive and at least 80% of
torch.softmax; issue 22: the best fused softmax (the fastest of `softmax_vectorised`'s two builds and
`softmax_pipelined`) at least 90% of the copy's GB/s at 16384 x 4096.

Attention for one head, Q, K, V of (N, d) with d = 64, not causal, N = 1024 ... 16384: time, and the
device memory each path needs beyond Q, K, V and O (its peak extra memory): `attention_naive`'s three
kernels (scores into an N x N array, their softmax into another, times V with module 3's tiled
matmul), `attention_flash` (one thread per query, tiles of K and V in shared memory, no extra memory),
`attention_flash2` (after FlashAttention-2: 64 queries per block of 4 warps, register micro-tiles; where
its grid is small for the GPU's SMs, as `launch_attention` runs it: the keys split into slices whose partial
results `flash2_combine` merges, the partials its extra memory; then also a row with the keys not split),
and ``torch.nn.functional.scaled_dot_product_attention`` (its extra memory from
``torch.cuda.max_memory_allocated``). Goals: a flash attention with no extra memory (`attention_flash2` with
its keys not split) at least 3x faster than the naive attention at N = 4096; issue 22: `attention_flash2` at least 3x
faster than the naive attention and at most 3x SDPA's time at N = 4096, extra memory O(N) (at most
`fusion.MAX_SPLITS` partial results of N x (d + 2) float32).

Correctness, before anything is timed: inputs standard normal float32 (softmax rows scaled by 4);
every output poisoned with NaN; results compared with NumPy float64 (the whole softmax; 32 rows of
attention), relative error ``||got - want|| / ||want||`` under 1e-5 (softmax) and 1e-4 (attention).
A wrong result is marked WRONG and nothing is recorded. Timing: `gpucourse.run.timing.measure` (CUDA events,
warm-up, launches queued behind a sleeping kernel, the median of the samples); softmax launches rotate
over enough copies of x and y to fill 4x the L2 cache. A path predicted to need more than a second
per call (from its time at the largest N so far, growing as N^2) is skipped and said so. With ``--seconds``, the
goals' sizes (softmax 16384 x 4096, attention N = 4096) are measured first, then the others while time lasts.
"""

from __future__ import annotations

import argparse
import functools
import math
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from numba import cuda

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from common import (  # noqa: E402
    L2_ROTATION,
    Device,
    TimeBudget,
    add_time_budget,
    buffer_sets,
    current_device,
    finish,
    markdown_table,
    poison,
    reference_libraries,
    relative_error,
    today,
    versions,
    without_gpu,
)

NAME = "fusion"  # its section of benchmarks/RESULTS.md
ITEM = 4  # bytes of a float32
SOFTMAX_SHAPES = ((4096, 1024), (4096, 4096), (16384, 4096))
QUICK_SOFTMAX = ((4096, 1024),)
ATTENTION_N = (1024, 2048, 4096, 8192, 16384)
QUICK_ATTENTION = (1024, 2048)
HEAD_DIM = 64
SAMPLES, QUICK_SAMPLES = 5, 3
SKIP_ABOVE_MS = 1000.0
SOFTMAX_TOLERANCE, ATTENTION_TOLERANCE = 1e-5, 1e-4
CHECKED_ROWS = 32  # query rows of each attention result compared with float64
FUSED_OVER_NAIVE, FUSED_OF_TORCH = 3.0, 0.8
FLASH_OVER_NAIVE, FLASH_GOAL_N = 3.0, 4096
SOFTMAX_OF_COPY, SOFTMAX_GOAL_SIZE = 0.9, (16384, 4096)  # issue 22
FLASH2_OF_SDPA = 3.0  # issue 22: attention_flash2's time at most 3x SDPA's
REGISTERS_SOFTMAX, FLASH2 = "`softmax_registers`", "`attention_flash2`"
VECTORISED_SOFTMAX = "`softmax_vectorised`"  # the top rung, which issue 22's softmax goal is about
HALF_VECTORS = 4  # its other build timed beside it: half the vectors per thread, twice the threads per row
VECTORISED_HALF = f"`softmax_vectorised`, {HALF_VECTORS} vectors per thread"
PIPELINED_SOFTMAX = "`softmax_pipelined`"  # the same rows, the next row's loads in flight while one is computed
TOP_SOFTMAXES = (VECTORISED_SOFTMAX, VECTORISED_HALF, PIPELINED_SOFTMAX)  # the softmax goal reads the fastest
FLASH2_UNSPLIT = "`attention_flash2`, keys not split"  # its row where the automatic launch splits the keys
FLASH2_FIVE = "`attention_flash2`, 5 blocks per SM"  # launch bounds (128, 5): at most 96 registers, against 128


# -- measurements and their report (pure) -----------------------------------------------------------------
@dataclass(frozen=True)
class Measurement:
    path: str  # the row's label, e.g. "`softmax_row_fused`"
    problem: str  # "softmax" or "attention"
    size: tuple[int, int]  # (rows, cols) or (N, d)
    ms: float | None  # median milliseconds per call; None: skipped
    extra_bytes: int | None = None  # attention: device memory beyond Q, K, V and O
    note: str = ""
    wrong: bool = False
    reference: bool = False  # the copy, torch.softmax or SDPA

    @property
    def skipped(self) -> bool:
        return self.ms is None

    @property
    def gbps(self) -> float:
        """Softmax: the least traffic (read x, write y) over the time, in GB/s."""
        rows, cols = self.size
        return 2 * rows * cols * ITEM / (self.ms * 1e-3) / 1e9 if self.ms else math.nan


def find(measurements: list[Measurement], path: str, size) -> Measurement | None:
    found = [m for m in measurements if m.path == path and m.size == tuple(size) and not m.skipped and not m.wrong]
    return found[0] if found else None


def unsplit_flash2(measurements: list[Measurement], size) -> Measurement | None:
    """`attention_flash2` at ``size`` with no extra memory: its "keys not split" row where the launch split the
    keys, else its own row if that needed none; None if neither."""
    own = find(measurements, FLASH2, size)
    return find(measurements, FLASH2_UNSPLIT, size) or (own if own and own.extra_bytes == 0 else None)


def mib(n: int | None) -> str:
    return "" if n is None else f"{n / 2**20:,.1f}"


def softmax_table(measurements: list[Measurement]) -> str:
    rows = []
    for m in (m for m in measurements if m.problem == "softmax"):
        copy = find(measurements, COPY, m.size)
        share = f"{m.gbps / copy.gbps:.0%}" if copy and not m.skipped else ""
        rows.append([m.path, f"{m.size[0]} x {m.size[1]}", "" if m.skipped else f"{m.ms:.4g}",
                     "" if m.skipped else f"{m.gbps:,.0f}", share, ("WRONG result; " if m.wrong else "") + m.note])
    return markdown_table(["softmax", "rows x cols", "time (ms)", "GB/s (read x + write y)", "of copy", "note"],
                          rows, right={2, 3, 4})


def attention_table(measurements: list[Measurement]) -> str:
    rows = []
    for m in (m for m in measurements if m.problem == "attention"):
        rows.append([m.path, str(m.size[0]), str(m.size[1]), "" if m.skipped else f"{m.ms:.4g}",
                     mib(m.extra_bytes), ("WRONG result; " if m.wrong else "") + m.note])
    return markdown_table(["attention", "N", "d", "time (ms)", "extra memory (MiB)", "note"], rows,
                          right={1, 2, 3, 4})


def goal_lines(measurements: list[Measurement]) -> list[str]:
    """Each goal: met, NOT met, or not measured (and why)."""
    lines = []
    largest = max((m.size for m in measurements if m.problem == "softmax"), default=None, key=lambda s: s[0] * s[1])
    target = f"`softmax_row_fused` >= {FUSED_OVER_NAIVE:g}x `softmax_naive` and >= {FUSED_OF_TORCH:.0%} of torch.softmax"
    fused = naive = torch = None
    if largest:
        fused, naive = find(measurements, "`softmax_row_fused`", largest), find(measurements, NAIVE_SOFTMAX, largest)
        torch = find(measurements, TORCH_SOFTMAX, largest)
    if not (fused and naive):
        lines.append(f"Goal: {target}: not measured.")
    else:
        speedup = naive.ms / fused.ms
        parts = [f"{speedup:.1f}x naive"]
        met = speedup >= FUSED_OVER_NAIVE
        if torch:
            parts.append(f"{torch.ms / fused.ms:.0%} of torch.softmax")
            met = met and torch.ms / fused.ms >= FUSED_OF_TORCH
        if not met:
            lines.append(f"Goal: {target} at {largest[0]} x {largest[1]}: NOT met ({', '.join(parts)}).")
        elif torch:
            lines.append(f"Goal: {target} at {largest[0]} x {largest[1]}: met ({', '.join(parts)}).")
        else:
            lines.append(f"Goal: {target} at {largest[0]} x {largest[1]}: partly measured (no torch.softmax): "
                         f"{parts[0]}.")
    # module 5's goal for a flash attention with no extra memory: attention_flash2 with its keys not split (the
    # first kernel, attention_flash, is lecture 5's case study of a design that moves fewer bytes and still loses)
    target = (f"`attention_flash2` with its keys not split >= {FLASH_OVER_NAIVE:g}x `attention_naive` at "
              f"N = {FLASH_GOAL_N}, extra memory 0")
    size = (FLASH_GOAL_N, HEAD_DIM)
    flash, naive = unsplit_flash2(measurements, size), find(measurements, NAIVE_ATTENTION, size)
    if not (flash and naive):
        lines.append(f"Goal: {target}: not measured.")
    else:
        sizes = {m.size for m in measurements if m.path == FLASH2 and not m.skipped}
        linear = all(unsplit_flash2(measurements, n) is not None for n in sizes)
        speedup = naive.ms / flash.ms
        status = "met" if speedup >= FLASH_OVER_NAIVE and linear else "NOT met"
        lines.append(f"Goal: {target}: {status} ({speedup:.1f}x; extra memory "
                     f"{'0 at every N' if linear else 'not 0'}).")
    return lines + fast_goal_lines(measurements)


def fast_goal_lines(measurements: list[Measurement]) -> list[str]:
    """Issue 22's goals: the softmax at the copy's bandwidth, flash attention near SDPA."""
    lines = []
    rows, cols = SOFTMAX_GOAL_SIZE
    target = (f"the faster of {VECTORISED_SOFTMAX} and {PIPELINED_SOFTMAX} >= {SOFTMAX_OF_COPY:.0%} of the copy's "
              f"GB/s at {rows} x {cols}")
    builds = [m for m in (find(measurements, path, SOFTMAX_GOAL_SIZE) for path in TOP_SOFTMAXES) if m]
    copy = find(measurements, COPY, SOFTMAX_GOAL_SIZE)
    if not (builds and copy):
        lines.append(f"Goal: {target}: not measured.")
    else:
        fast = min(builds, key=lambda m: m.ms)
        share = copy.ms / fast.ms
        lines.append(f"Goal: {target}: {'met' if share >= SOFTMAX_OF_COPY else 'NOT met'} ({share:.0%} of the "
                     f"copy: {fast.path}).")
    from gpucourse.kernels import fusion  # noqa: PLC0415

    target = (f"{FLASH2} >= {FLASH_OVER_NAIVE:g}x `attention_naive` and <= {FLASH2_OF_SDPA:g}x SDPA's time at "
              f"N = {FLASH_GOAL_N}, extra memory O(N)")
    size = (FLASH_GOAL_N, HEAD_DIM)
    flash, naive, sdpa = (find(measurements, path, size) for path in (FLASH2, NAIVE_ATTENTION, SDPA))
    if not (flash and naive and sdpa):
        lines.append(f"Goal: {target}: not measured.")
    else:
        linear = all(m.extra_bytes <= fusion.MAX_SPLITS * m.size[0] * (m.size[1] + 2) * ITEM
                     for m in measurements if m.path == FLASH2 and not m.skipped)
        over_naive, of_sdpa = naive.ms / flash.ms, flash.ms / sdpa.ms
        met = over_naive >= FLASH_OVER_NAIVE and of_sdpa <= FLASH2_OF_SDPA and linear
        bound = f"{fusion.MAX_SPLITS} partial results of N x (d + 2)"
        lines.append(f"Goal: {target}: {'met' if met else 'NOT met'} ({over_naive:.1f}x naive, {of_sdpa:.1f}x "
                     f"SDPA's time; extra memory {'at most ' if linear else 'over '}{bound}"
                     f"{' at every N' if linear else ''}).")
    return lines


def section(measurements: list[Measurement], device: Device, versions: str, samples: int, note: str = "") -> str:
    """The Markdown recorded in RESULTS.md; ``note``, under the tables: the sizes the time budget left out."""
    return "\n".join([
        "## Fusion: row softmax and attention",
        "",
        f"`python benchmarks/fusion.py` on {device.name} ({device.sms} SMs).",
        "",
        f"- Date: {today()}",
        f"- Versions: {versions}",
        *[f"- {line}" for line in goal_lines(measurements)],
        "- Softmax GB/s: 2 x rows x cols x 4 bytes (read x once, write y once) over the time, beside a "
        "device-to-device copy of x in the same run. Attention: one head, not causal; extra memory is what a path "
        "allocates beyond Q, K, V and O (naive: the scores and the probabilities, N x N each; SDPA: "
        "torch.cuda.max_memory_allocated).",
        f"- Timing: CUDA events, warm-up first, launches queued behind a sleeping kernel; median of {samples} "
        f"samples; softmax arrays rotate over {L2_ROTATION}x the L2 size. Checked first against NumPy float64 "
        f"(relative error under {SOFTMAX_TOLERANCE:g} for softmax, {ATTENTION_TOLERANCE:g} for attention).",
        "",
        "### Row softmax",
        "",
        softmax_table(measurements),
        "",
        "### Attention, d = 64",
        "",
        attention_table(measurements),
        *(["", note] if note else []),
    ])


# -- cases: what is launched, and how it is checked ------------------------------------------------------
COPY = "device-to-device copy"
NAIVE_SOFTMAX = "`softmax_naive` (3 kernels)"
TORCH_SOFTMAX = "`torch.softmax`"
NAIVE_ATTENTION = "`attention_naive` (3 kernels)"
SDPA = "`torch.nn.functional.scaled_dot_product_attention`"


@dataclass
class Case:
    """One path at one size: calls (one per set of arrays), the result of the first set, extra memory."""

    path: str
    calls: list[Callable[[], None]]
    result: Callable[[], np.ndarray] | None  # None: nothing to check (the copy)
    kernel_launches: int = 1
    extra_bytes: Callable[[], int] | None = None
    reference: bool = False
    note: str = ""


def pointer(array) -> int:
    return array.__cuda_array_interface__["data"][0]


def shared_tensor(torch, array):
    """``array`` as a torch tensor on the same memory (checked: no copy)."""
    tensor = torch.as_tensor(array, device="cuda")
    if tensor.data_ptr() != pointer(array):
        raise RuntimeError("torch copied an array instead of sharing it")
    return tensor


def softmax_cases(xs: list, ys: list, libraries: dict) -> list[Case]:
    from gpucourse.kernels import fusion  # noqa: PLC0415

    rows, cols = xs[0].shape
    first = ys[0]
    cases = [Case(COPY, [functools.partial(y.copy_to_device, x) for x, y in zip(xs, ys)], None, reference=True)]
    m, l = cuda.device_array(rows, np.float32), cuda.device_array(rows, np.float32)
    e = cuda.device_array((rows, cols), np.float32)

    def naive(y, x):
        fusion.row_max[rows, fusion.THREADS](m, x)
        fusion.exp_and_sum[rows, fusion.THREADS](e, l, x, m)
        fusion.divide[rows, fusion.THREADS](y, e, l)

    cases.append(Case(NAIVE_SOFTMAX, [functools.partial(naive, y, x) for x, y in zip(xs, ys)], first.copy_to_host,
                      kernel_launches=3, note="intermediate e of rows x cols"))
    for kernel in fusion.SOFTMAX_KERNELS:
        if kernel is fusion.softmax_row_fused and cols > fusion.MAX_COLS:
            continue
        calls = [functools.partial(fusion.launch_softmax, kernel, y, x) for x, y in zip(xs, ys)]
        cases.append(Case(f"`{kernel.py_func.__name__}`", calls, first.copy_to_host,
                          note=f"{rows} blocks of {fusion.THREADS}"))
    threads = fusion.registers_threads(cols)
    if threads <= 32 * fusion.MAX_WARPS:
        calls = [functools.partial(fusion.launch_softmax, fusion.softmax_registers, y, x, threads)
                 for x, y in zip(xs, ys)]
        cases.append(Case(REGISTERS_SOFTMAX, calls, first.copy_to_host,
                          note=f"{rows} blocks of {threads}, {fusion.SOFTMAX_VALUES} values per thread"))
    if cols <= fusion.VECTORISED_MAX_COLS:
        calls = [functools.partial(fusion.launch_softmax, fusion.softmax_vectorised, y, x) for x, y in zip(xs, ys)]
        grid, (row_threads, rows_per_block) = fusion.vectorised_configuration(rows, cols)
        cases.append(Case(VECTORISED_SOFTMAX, calls, first.copy_to_host,
                          note=f"{grid} blocks of {rows_per_block} x {row_threads} threads (rows x threads per row), "
                               f"{fusion.SOFTMAX_VECTORS * fusion.WIDTH} values per thread, 16-byte accesses"))
    if cols <= fusion.VECTORISED_MAX_COLS * HALF_VECTORS // fusion.SOFTMAX_VECTORS:
        half = fusion.make_softmax_vectorised(HALF_VECTORS)
        grid, block = fusion.vectorised_configuration(rows, cols, vectors=HALF_VECTORS)
        calls = [functools.partial(half[grid, block], y.ravel(), x.ravel(), cols) for x, y in zip(xs, ys)]
        cases.append(Case(VECTORISED_HALF, calls, first.copy_to_host,
                          note=f"{grid} blocks of {block[1]} x {block[0]} threads, {HALF_VECTORS * fusion.WIDTH} "
                               "values per thread (`make_softmax_vectorised`)"))
    if cols <= fusion.PIPELINED_MAX_COLS:
        calls = [functools.partial(fusion.launch_softmax, fusion.softmax_pipelined, y, x) for x, y in zip(xs, ys)]
        grid, block = fusion.pipelined_configuration(rows, cols)
        cases.append(Case(PIPELINED_SOFTMAX, calls, first.copy_to_host,
                          note=f"persistent grid {grid} ({fusion.PIPELINED_BLOCKS_PER_SM} per SM), blocks of "
                               f"{block[1]} x {block[0]} threads, rows per block: at most "
                               f"{fusion.pipelined_turns(rows, grid, block)} (one per turn), "
                               f"{fusion.SOFTMAX_PIPELINED_VECTORS * fusion.WIDTH} values per thread and row"))
    if "torch" in libraries:
        torch = libraries["torch"]
        tensors = [shared_tensor(torch, x) for x in xs]
        output = {}

        def torch_softmax(k):
            output[k] = torch.softmax(tensors[k], dim=-1)

        cases.append(Case(TORCH_SOFTMAX, [functools.partial(torch_softmax, k) for k in range(len(xs))],
                          lambda: output[0].cpu().numpy(), reference=True, note="same x; allocates its y"))
    return cases


def flash2_cases(Q, K, V, O, sms: int) -> list[Case]:
    """`attention_flash2` as `launch_attention` runs it on ``sms`` SMs (its keys split where its grid is small, into
    partial results allocated here, before the timing), and, where that splits, with the keys not split."""
    from gpucourse.kernels import fusion  # noqa: PLC0415

    shape = (1,) + Q.shape
    O3, Q3, K3, V3 = (a.reshape(shape) for a in (O, Q, K, V))
    splits = fusion.flash2_splits(1, Q.shape[0], sms)
    partials = fusion.flash2_partials(shape, splits) if splits > 1 else None
    blocks = (f"blocks of {fusion.FLASH_THREADS} threads for {fusion.FLASH_QUERIES} queries, tiles of "
              f"{fusion.FLASH_KEYS} keys")
    cases = [Case(FLASH2, [functools.partial(fusion.launch_flash2, O3, Q3, K3, V3, False, splits, partials)],
                  O.copy_to_host, kernel_launches=1 if splits == 1 else 2,
                  extra_bytes=lambda: sum(p.nbytes for p in partials or ()),
                  note=blocks + (f"; keys in {splits} slices, merged by `flash2_combine`" if splits > 1 else ""))]
    if splits > 1:
        cases.append(Case(FLASH2_UNSPLIT, [functools.partial(fusion.launch_flash2, O3, Q3, K3, V3, False, 1)],
                          O.copy_to_host, extra_bytes=lambda: 0, note=blocks))
    five = fusion.flash2_splits(1, Q.shape[0], sms, blocks_per_sm=5)
    five_partials = fusion.flash2_partials(shape, five) if five > 1 else None
    cases.append(Case(FLASH2_FIVE, [functools.partial(fusion.launch_flash2, O3, Q3, K3, V3, False, five,
                                                      five_partials, blocks_per_sm=5)],
                      O.copy_to_host, kernel_launches=1 if five == 1 else 2,
                      extra_bytes=lambda: sum(p.nbytes for p in five_partials or ()),
                      note="launch bounds (128, 5): at most 96 registers, against 128 at 4 blocks per SM"
                           + (f"; keys in {five} slices" if five > 1 else "")))
    return cases


def attention_cases(Q, K, V, O, libraries: dict, sms: int) -> list[Case]:
    from gpucourse.kernels import fusion  # noqa: PLC0415
    from gpucourse.kernels import matmul  # noqa: PLC0415

    N = Q.shape[0]
    S, P = cuda.device_array((N, N), np.float32), cuda.device_array((N, N), np.float32)
    tile = fusion.TILE

    def naive():
        fusion.scores[(-(-N // tile), -(-N // tile)), (tile, tile)](S, Q, K, False)
        fusion.launch_softmax(fusion.softmax_online, P, S)
        matmul.launch(matmul.matmul_tiled, O.reshape((1,) + O.shape), P.reshape((1, N, N)), V.reshape((1,) + V.shape))

    cases = [Case(NAIVE_ATTENTION, [naive], O.copy_to_host, kernel_launches=3,
                  extra_bytes=lambda: S.nbytes + P.nbytes, note="scores and probabilities: N x N each"),
             Case("`attention_flash`", [functools.partial(fusion.launch_attention, fusion.attention_flash, O, Q, K, V)],
                  O.copy_to_host, extra_bytes=lambda: 0,
                  note=f"blocks of {fusion.BLOCK_ROWS} queries, tiles of {fusion.BLOCK_KEYS} keys"),
             *flash2_cases(Q, K, V, O, sms)]
    if "torch" in libraries:
        torch = libraries["torch"]
        q, k, v = (shared_tensor(torch, a)[None, None] for a in (Q, K, V))
        output = {}
        sdpa = torch.nn.functional.scaled_dot_product_attention

        def call():
            output[0] = sdpa(q, k, v)

        def extra() -> int:
            torch.cuda.synchronize()
            before = torch.cuda.memory_allocated()
            torch.cuda.reset_peak_memory_stats()
            call()
            torch.cuda.synchronize()
            return max(0, torch.cuda.max_memory_allocated() - before - O.nbytes)

        cases.append(Case(SDPA, [call], lambda: output[0][0, 0].cpu().numpy(), extra_bytes=extra, reference=True,
                          note="same Q, K, V; float32"))
    return cases


# -- measuring --------------------------------------------------------------------------------------------
def predicted_ms(path: str, N: int, measurements: list[Measurement]) -> float | None:
    """The time at ``N`` that ``path``'s time at its largest measured N predicts (growing as N^2)."""
    done = [m for m in measurements if m.path == path and m.problem == "attention" and not m.skipped]
    if not done:
        return None
    largest = max(done, key=lambda m: m.size[0])
    return largest.ms * (N / largest.size[0]) ** 2


def measure(case: Case, problem: str, size, expected: Callable[[np.ndarray], float], poisoned: list,
            samples: int, device: Device, tolerance: float) -> Measurement:
    """Poison, call once (warm-up and check), then time; WRONG when the relative error is over ``tolerance``."""
    from gpucourse.run import timing  # noqa: PLC0415 (importing gpucourse picks the backend)

    for array in poisoned:
        poison(array)
    for call in case.calls:
        call()
    cuda.synchronize()
    error = expected(case.result()) if case.result else 0.0
    wrong = not error <= tolerance
    extra = case.extra_bytes() if case.extra_bytes else None
    timed = timing.measure(case.calls, samples, case.kernel_launches, warmup=0)  # warmed up above
    ms = timed.seconds * 1e3
    note = case.note + (f"; relative error {error:.1e} > {tolerance:g}" if wrong else "")
    if device.real and not timed.queued:
        note += "; the GPU was released before all launches were queued: time may include launch gaps"
    return Measurement(case.path, problem, tuple(size), ms, extra, note, wrong, case.reference)


def measure_softmax(shape, device: Device, samples: int, libraries: dict, seed: int = 0) -> list[Measurement]:
    rows, cols = shape
    host = (np.random.default_rng(seed).standard_normal(shape) * 4).astype(np.float32)
    want = np.exp(host - host.max(axis=1, keepdims=True)).astype(np.float64)
    want /= want.sum(axis=1, keepdims=True)
    sets = buffer_sets(2 * host.nbytes, device.l2_bytes)
    xs = [cuda.to_device(host) for _ in range(sets)]
    ys = [cuda.device_array(shape, np.float32) for _ in range(sets)]
    measurements = []
    for case in softmax_cases(xs, ys, libraries):
        m = measure(case, "softmax", shape, lambda got: relative_error(got, want), ys[:1], samples, device,
                    SOFTMAX_TOLERANCE)
        measurements.append(m)
        print(f"  {m.path:40} {rows:6} x {cols:<6} {m.ms:10.4g} ms {m.gbps:8.0f} GB/s"
              f"{'  WRONG' if m.wrong else ''}", flush=True)
    return measurements


def measure_attention(N: int, device: Device, samples: int, libraries: dict, earlier: list[Measurement] = (),
                      d: int = HEAD_DIM, seed: int = 0) -> list[Measurement]:
    from gpucourse.kernels import fusion  # noqa: PLC0415

    rng = np.random.default_rng(seed)
    hosts = [rng.standard_normal((N, d)).astype(np.float32) for _ in range(3)]
    rows = np.unique(np.linspace(0, N - 1, min(N, CHECKED_ROWS)).astype(int))
    want = fusion.attention_reference(hosts[0][rows], hosts[1], hosts[2])
    Q, K, V = (cuda.to_device(h) for h in hosts)
    O = cuda.device_array((N, d), np.float32)
    measurements = []
    for case in attention_cases(Q, K, V, O, libraries, device.sms):
        prediction = predicted_ms(case.path, N, [*earlier, *measurements])
        if prediction and prediction > SKIP_ABOVE_MS:
            m = Measurement(case.path, "attention", (N, d), None, None,
                            f"skipped: about {prediction / 1e3:.3g} s per call predicted", reference=case.reference)
        else:
            m = measure(case, "attention", (N, d), lambda got: relative_error(got[rows], want), [O], samples, device,
                        ATTENTION_TOLERANCE)
        measurements.append(m)
        print(f"  {m.path:52} N={N:<6} " + (m.note if m.skipped else f"{m.ms:10.4g} ms  extra {mib(m.extra_bytes)} MiB"
                                             + ("  WRONG" if m.wrong else "")), flush=True)
    return measurements


def row_label(row) -> str:
    """``"softmax 16384 x 4096"``, ``"attention N = 4096"``: a row ``(problem, size)`` as the time budget names it."""
    problem, size = row
    return f"softmax {size[0]} x {size[1]}" if problem == "softmax" else f"attention N = {size[0]}"


# measured first: the sizes of the softmax goal (issue 22) and of the attention goals
GOAL_ROWS = {row_label(("softmax", SOFTMAX_GOAL_SIZE)), row_label(("attention", (FLASH_GOAL_N, HEAD_DIM)))}


def fits(N: int) -> str | None:
    """None when the naive attention's two N x N arrays (and the rest) fit in free device memory."""
    need = 2 * N * N * ITEM + 4 * N * HEAD_DIM * ITEM + 256 * 2**20
    context = cuda.current_context()
    context.deallocations.clear()
    free, _ = context.get_memory_info()
    return None if need <= free else f"needs about {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a few sizes, 3 samples, prints only")
    parser.add_argument("--samples", type=int, default=None, help=f"samples per median (default {SAMPLES})")
    parser.add_argument("--no-write", action="store_true", help="print the tables only")
    add_time_budget(parser)
    options = parser.parse_args(argv)

    if without_gpu("fusion.py"):
        return 0
    samples = options.samples or (QUICK_SAMPLES if options.quick else SAMPLES)
    device, libraries = current_device(), reference_libraries()
    libraries.pop("cupy", None)  # the references here are PyTorch's
    print(f"{device.name}: {device.sms} SMs; references: {', '.join(libraries) or 'none (no PyTorch)'}", flush=True)
    # one list, so that both goals' sizes come before the other sizes of either problem
    rows = [*(("softmax", shape) for shape in (QUICK_SOFTMAX if options.quick else SOFTMAX_SHAPES)),
            *(("attention", (N, HEAD_DIM)) for N in (QUICK_ATTENTION if options.quick else ATTENTION_N))]
    budget = TimeBudget(options.seconds)
    measurements, skipped = [], False
    for problem, size in budget.rows(rows, label=row_label, first=GOAL_ROWS):
        if problem == "softmax":
            measurements += measure_softmax(size, device, samples, libraries)
            continue
        reason = fits(size[0])
        if reason:
            skipped = True
            print(f"  attention N={size[0]} skipped: {reason}", flush=True)
            continue
        measurements += measure_attention(size[0], device, samples, libraries, measurements)
    measurements.sort(key=lambda m: rows.index((m.problem, m.size)))  # the goals measured first, tabled in order
    text = section(measurements, device, versions(libraries), samples, budget.note("fusion.py"))
    return finish(NAME, text, measurements, write=not options.quick and not skipped and not options.no_write)


if __name__ == "__main__":
    sys.exit(main())
