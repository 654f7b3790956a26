"""Module 6 on a GPU: fp32 vs fp16-storage vs tensor-core GEMMs vs cuBLAS fp16, and a map in fp16 vs fp32.

    python benchmarks/precision.py             # squares 1024 to 4096 and a map of 2^26 elements; writes RESULTS.md
    python benchmarks/precision.py --quick     # 1024^3 and a map of 2^24, 3 samples, prints only
    python benchmarks/precision.py --no-write
    python benchmarks/precision.py --seconds 120   # the map, 4096^3 (the goal's), then the rest while 120 s last

Needs a CUDA GPU of compute capability 7.5 or newer (the tensor-core GEMM's ``mma.sync``); anywhere else it
prints one line saying so and exits with status 0.

GEMM, ``C = A @ B`` of n x n matrices, in TFLOP/s (2 n^3 FLOPs over the time) and in error against float64:
module 3's best, `matmul_warp_tiled`, in float32, `gemm_fp16_fp32acc` (fp16 tiles, fp32 accumulator),
`gemm_tensor_core` (a warp per 16 x 16 of C through the course's `mma_m16n8k8`), `gemm_tensor_core_tiled`
(128 x 128 per block, a warp per 64 x 32, 16 `mma_m16n8k16` per step of 16, double-buffered through registers),
`gemm_tensor_core_async` (the same tiles, filled by cp.async into 2 stages, B's fragments by ldmatrix .trans), and
``torch.matmul`` on float16 tensors (cuBLAS with tensor cores; its C is float16) when PyTorch is installed, on the
same memory through ``__cuda_array_interface__``. The inputs are standard normal values rounded to fp16, so every
path multiplies the same numbers and float64 gives one exact reference (32 rows of C). Goals, for an H100: the
faster of the two tiled tensor-core GEMMs at 4096^3 at least 4x the best course float32 GEMM, its % of cuBLAS
fp16 recorded (issue 22).

Bandwidth: `map_fp16` and `map_fp32` (``y = 2x + 1``, a grid-stride loop over 2^26 elements) in GB/s of
one read and one write; fp16 moves half the bytes, so a memory-bound map should take about half the time.

Correctness, before anything is timed: every output poisoned (NaN), then compared with float64: relative
error ``||got - want|| / ||want||`` under ``4 x 2^-24 x sqrt(K)`` for a float32 C, under 2^-10 for a float16
C (its own rounding is up to 2^-11); the maps exactly. A wrong result is marked WRONG and nothing is
recorded. Timing: `gpucourse.run.timing.measure` (CUDA events, warm-up, launches queued behind a sleeping kernel, the
median of the samples); map launches rotate over enough arrays to fill 4x the L2 cache.
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

NAME = "precision"  # its section of benchmarks/RESULTS.md
SQUARES, QUICK_SQUARES = (1024, 2048, 4096), (1024,)
MAP_SIZE, QUICK_MAP_SIZE = 2**26, 2**24
SAMPLES, QUICK_SAMPLES = 5, 3
CHECKED_ROWS = 32
MAP_THREADS, MAP_BLOCKS_PER_SM = 256, 16
OVER_FP32, GOAL_SIZE = 4.0, 4096
MIN_COMPUTE_CAPABILITY = (7, 5)
FP32 = "`matmul_warp_tiled` (fp32)"  # the best course float32 GEMM
FP16_FP32ACC = "`gemm_fp16_fp32acc`"
TENSOR_CORE = "`gemm_tensor_core`"
TENSOR_CORE_TILED = "`gemm_tensor_core_tiled`"
TENSOR_CORE_ASYNC = "`gemm_tensor_core_async`"
TOP_RUNGS = (TENSOR_CORE_TILED, TENSOR_CORE_ASYNC)  # the goal is the faster one's
CUBLAS_FP16 = "cuBLAS fp16 via `torch.matmul`"


# -- measurements and their report (pure) -----------------------------------------------------------------
@dataclass(frozen=True)
class Measurement:
    path: str
    problem: str  # "gemm" or "map"
    size: int  # n of an n x n x n GEMM, or the map's elements
    ms: float  # median milliseconds per launch
    error: float = math.nan  # relative error against float64
    note: str = ""
    wrong: bool = False
    item: int = 4  # bytes per element of the map

    @property
    def tflops(self) -> float:
        return 2 * self.size**3 / (self.ms * 1e-3) / 1e12

    @property
    def gbps(self) -> float:
        """The map's one read and one write per element, over the time."""
        return 2 * self.size * self.item / (self.ms * 1e-3) / 1e9


def tolerance(K: int, half_output: bool) -> float:
    """Relative error allowed against float64: a float16 C is rounded once more (up to 2^-11 per element)."""
    return 2.0**-10 if half_output else 4 * 2.0**-24 * math.sqrt(K)


def find(measurements: list[Measurement], path: str, size: int) -> Measurement | None:
    found = [m for m in measurements if m.path == path and m.size == size and not m.wrong]
    return found[0] if found else None


def gemm_table(measurements: list[Measurement]) -> str:
    rows = []
    for m in (m for m in measurements if m.problem == "gemm"):
        fp32 = find(measurements, FP32, m.size)
        rows.append([m.path, f"{m.size}^3", f"{m.ms:.4g}", f"{m.tflops:.1f}", f"{fp32.ms / m.ms:.2f}x" if fp32 else "",
                     f"{m.error:.1e}", ("WRONG result; " if m.wrong else "") + m.note])
    return markdown_table(["GEMM", "n^3", "time (ms)", "TFLOP/s", "over fp32", "error vs float64", "note"], rows,
                          right={2, 3, 4, 5})


def map_table(measurements: list[Measurement]) -> str:
    rows = []
    for m in (m for m in measurements if m.problem == "map"):
        fp32 = find(measurements, "`map_fp32`", m.size)
        rows.append([m.path, f"{m.size:,}", f"{m.ms:.4g}", f"{m.gbps:,.0f}",
                     f"{fp32.ms / m.ms:.2f}x" if fp32 else "", ("WRONG result; " if m.wrong else "") + m.note])
    return markdown_table(["map y = 2x + 1", "elements", "time (ms)", "GB/s (read + write)", "over fp32", "note"],
                          rows, right={1, 2, 3, 4})


def goal_line(measurements: list[Measurement]) -> str:
    target = (f"Goal: the faster of {' and '.join(TOP_RUNGS)} at {GOAL_SIZE}^3 >= {OVER_FP32:g}x the best course "
              "fp32 GEMM, % of cuBLAS fp16 recorded")
    rungs = [m for m in (find(measurements, path, GOAL_SIZE) for path in TOP_RUNGS) if m]
    mine, fp32 = min(rungs, key=lambda m: m.ms, default=None), find(measurements, FP32, GOAL_SIZE)
    if not (mine and fp32):
        return f"{target}: not measured."
    speedup = fp32.ms / mine.ms
    cublas = find(measurements, CUBLAS_FP16, GOAL_SIZE)
    parts = [f"{mine.path} {speedup:.1f}x fp32"] + ([f"{cublas.ms / mine.ms:.0%} of cuBLAS fp16"] if cublas else [])
    met = speedup >= OVER_FP32
    if cublas is None:
        return f"{target}: partly measured (no PyTorch): {parts[0]}{'' if met else ', NOT met'}."
    return f"{target}: {'met' if met else 'NOT met'} ({', '.join(parts)})."


def section(measurements: list[Measurement], device: Device, versions: str, samples: int, note: str = "") -> str:
    """The Markdown recorded in RESULTS.md; ``note``, under the tables: the GEMM sizes the time budget left out."""
    return "\n".join([
        "## Precision: fp16 storage, fp32 accumulation, tensor cores",
        "",
        f"`python benchmarks/precision.py` on {device.name} ({device.sms} SMs).",
        "",
        f"- Date: {today()}",
        f"- Versions: {versions}",
        f"- {goal_line(measurements)} Set for an H100.",
        "- GEMM: n x n x n, 2 n^3 FLOPs; inputs standard normal rounded to fp16 (the same numbers for every "
        "path), error ||C - exact|| / ||exact|| on 32 rows against float64. cuBLAS's C is float16.",
        "- Map: y = 2x + 1 computed in float32, stored in the array's format; GB/s of one read and one write.",
        f"- Timing: CUDA events, warm-up first, launches queued behind a sleeping kernel; median of {samples} "
        f"samples; map arrays rotate over {L2_ROTATION}x the L2 size.",
        "",
        "### GEMM",
        "",
        gemm_table(measurements),
        "",
        "### Memory-bound map",
        "",
        map_table(measurements),
        *(["", note] if note else []),
    ])


# -- cases and measuring --------------------------------------------------------------------------------------
@dataclass
class Case:
    path: str
    call: Callable[[], None]
    result: Callable[[], np.ndarray]  # the (first CHECKED_ROWS rows of the) output, as float64
    poisoned: object  # the device array to poison before the check
    half_output: bool = False
    note: str = ""


def pointer(array) -> int:
    return array.__cuda_array_interface__["data"][0]


def gemm_cases(n: int, A16, B16, libraries: dict) -> list[Case]:
    from gpucourse.kernels import matmul, precision  # noqa: PLC0415

    rows = min(n, CHECKED_ROWS)
    A32 = cuda.to_device(A16.copy_to_host().astype(np.float32).reshape(1, n, n))
    B32 = cuda.to_device(B16.copy_to_host().astype(np.float32).reshape(1, n, n))
    C32 = cuda.device_array((1, n, n), np.float32)
    C = cuda.device_array((n, n), np.float32)

    def first_rows(array):
        # numba's device arrays take no `...`: a contiguous reshape to rows of n, then a slice
        return lambda: array.reshape(array.size // n, n)[:rows].copy_to_host().astype(np.float64)

    cases = [Case(FP32, functools.partial(matmul.launch, matmul.matmul_warp_tiled, C32, A32, B32),
                  first_rows(C32), C32, note="module 3, float32 inputs")]
    for kernel in precision.GEMM_KERNELS:
        label = f"`{kernel.py_func.__name__}`"
        grid, block = precision.configuration(kernel, (n, n))
        cases.append(Case(label, functools.partial(precision.launch_gemm, kernel, C, A16, B16), first_rows(C), C,
                          note=f"grid {grid[0]}x{grid[1]}, block {'x'.join(map(str, block))}"))
    if "torch" in libraries:
        torch = libraries["torch"]
        a, b = torch.as_tensor(A16, device="cuda"), torch.as_tensor(B16, device="cuda")
        if (a.data_ptr(), b.data_ptr()) != (pointer(A16), pointer(B16)):
            raise RuntimeError("torch copied an array instead of sharing it")
        out = torch.empty((n, n), dtype=torch.float16, device="cuda")
        cases.append(Case(CUBLAS_FP16, lambda: torch.matmul(a, b, out=out),
                          lambda: out[:rows].float().cpu().numpy().astype(np.float64), out, half_output=True,
                          note="float16 C"))
    return cases


def measure_gemm(n: int, samples: int, libraries: dict, seed: int = 0) -> list[Measurement]:
    from gpucourse.run import timing  # noqa: PLC0415 (importing gpucourse picks the backend)

    rng = np.random.default_rng(seed)
    A, B = (rng.standard_normal((n, n)).astype(np.float16) for _ in range(2))
    want = A[:CHECKED_ROWS].astype(np.float64) @ B.astype(np.float64)
    measurements = []
    for case in gemm_cases(n, cuda.to_device(A), cuda.to_device(B), libraries):
        if hasattr(case.poisoned, "fill_"):
            case.poisoned.fill_(float("nan"))
        else:
            poison(case.poisoned)
        case.call()
        cuda.synchronize()
        error = relative_error(case.result(), want)
        wrong = not error <= tolerance(n, case.half_output)
        ms = timing.measure([case.call], samples, warmup=0).seconds * 1e3  # the check above warmed up
        note = case.note + (f"; error over {tolerance(n, case.half_output):.1e}" if wrong else "")
        m = Measurement(case.path, "gemm", n, ms, error, note, wrong)
        measurements.append(m)
        print(f"  {m.path:34} {n:5}^3 {m.ms:10.4g} ms {m.tflops:8.1f} TFLOP/s  error {error:.1e}"
              f"{'  WRONG' if wrong else ''}", flush=True)
    return measurements


def measure_map(size: int, device: Device, samples: int, seed: int = 0) -> list[Measurement]:
    from gpucourse.kernels import precision  # noqa: PLC0415
    from gpucourse.run import timing  # noqa: PLC0415

    host = np.random.default_rng(seed).standard_normal(size).astype(np.float32)
    blocks = max(1, device.sms * MAP_BLOCKS_PER_SM)
    measurements = []
    for kernel, dtype in ((precision.map_fp32, np.float32), (precision.map_fp16, np.float16)):
        x = host.astype(dtype)
        want = (x.astype(np.float32) * np.float32(2) + np.float32(1)).astype(dtype)
        sets = buffer_sets(2 * x.nbytes, device.l2_bytes)
        xs = [cuda.to_device(x) for _ in range(sets)]
        ys = [cuda.device_array(size, dtype) for _ in range(sets)]
        calls = [functools.partial(precision.launch_map, kernel, y, xi, blocks, MAP_THREADS) for xi, y in zip(xs, ys)]
        ys[0].copy_to_device(np.full(size, np.nan, dtype))
        calls[0]()
        wrong = not np.array_equal(ys[0].copy_to_host(), want)
        ms = timing.measure(calls, samples, warmup=0).seconds * 1e3  # the check above warmed up
        m = Measurement(f"`{kernel.py_func.__name__}`", "map", size, ms, 0.0 if not wrong else math.nan,
                        f"{blocks} blocks of {MAP_THREADS}, grid-stride" + ("; result differs" if wrong else ""),
                        wrong, np.dtype(dtype).itemsize)
        measurements.append(m)
        print(f"  {m.path:34} {size:>12,} {m.ms:10.4g} ms {m.gbps:8.0f} GB/s{'  WRONG' if wrong else ''}", flush=True)
    return measurements


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1024^3 and a smaller map, 3 samples, prints only")
    parser.add_argument("--samples", type=int, default=None, help=f"samples per median (default {SAMPLES})")
    parser.add_argument("--no-write", action="store_true", help="print the tables only")
    add_time_budget(parser)
    options = parser.parse_args(argv)

    if without_gpu("precision.py"):
        return 0
    device, libraries = current_device(), reference_libraries()
    if device.compute_capability < MIN_COMPUTE_CAPABILITY:
        print(f"benchmarks/precision.py needs compute capability 7.5 or newer for mma.sync; {device.name} has "
              f"{device.compute_capability}: nothing measured.")
        return 0
    libraries.pop("cupy", None)  # the reference here is PyTorch's
    samples = options.samples or (QUICK_SAMPLES if options.quick else SAMPLES)
    print(f"{device.name}: {device.sms} SMs; cuBLAS fp16 through: {', '.join(libraries) or 'none (no PyTorch)'}")
    # the map first, outside the time budget (its clock starts at the GEMMs): a few seconds, wanted in every run
    maps = measure_map(QUICK_MAP_SIZE if options.quick else MAP_SIZE, device, samples)
    squares = QUICK_SQUARES if options.quick else SQUARES
    budget = TimeBudget(options.seconds)
    gemms = []
    for n in budget.rows(squares, label=lambda n: f"{n}^3", first={f"{GOAL_SIZE}^3"}):
        gemms += measure_gemm(n, samples, libraries)
    gemms.sort(key=lambda m: squares.index(m.size))  # the goal's size measured first, tabled in order
    measurements = gemms + maps
    text = section(measurements, device, versions(libraries), samples, budget.note("precision.py"))
    return finish(NAME, text, measurements, write=not options.quick and not options.no_write)


if __name__ == "__main__":
    sys.exit(main())
