"""Module 3's matrix multiplications against cuBLAS float32 (TF32 off), in one run on a GPU.

    python benchmarks/matmul.py             # squares 512 to 8192 and the deep-learning shapes; writes RESULTS.md
    python benchmarks/matmul.py --quick     # squares 512 and 1024, 3 samples, prints only
    python benchmarks/matmul.py --sizes 4096 --no-write
    python benchmarks/matmul.py --seconds 200   # 4096^3 (the goal's shape) first, the rest while 200 s last
    python benchmarks/matmul.py --sizes 4096 --variants --no-write   # the top rung's tile sizes side by side

Needs a CUDA GPU; anywhere else it prints one line saying so and exits with status 0.

For each shape it times, in the same process and on the same arrays:

- the reference: cuBLAS single precision with TF32 off, through ``torch.matmul`` and through
  ``cupy.matmul``, whichever are installed (both when both are); "% of cuBLAS" is a kernel's
  TFLOP/s over the faster of them at that shape. TF32 is turned off three ways before either
  library loads cuBLAS: ``NVIDIA_TF32_OVERRIDE=0`` (read by cuBLAS itself), ``CUPY_TF32=0``, and
  PyTorch's ``torch.backends.cuda.matmul.fp32_precision = "ieee"`` (or, before PyTorch 2.9,
  ``allow_tf32 = False`` with ``set_float32_matmul_precision("highest")``); the accuracy check
  below would catch TF32 anyway (its error on these inputs is over 10x the tolerance);
- the kernels of `gpucourse.kernels.matmul` (`KERNELS`, naive to `matmul_warp_tiled`), each launched as
  `launch` does; with ``--variants``, at 4096^3 also the top rung with the other tile sizes of
  `WARP_TILED_VARIANTS` (what the default `matmul_warp_tiled` should be is a measurement).

The arrays are numba device arrays, shared with PyTorch and CuPy through
``__cuda_array_interface__`` (no copies; the benchmark checks that the pointers agree), and
every launch runs on the legacy default stream. A weight with a batch of 1 (broadcast) is
passed to cuBLAS as one matrix, the batch folded into the rows, as ``torch.nn.Linear`` does.

FLOPs: 2 x M x N x K per batch element (a multiply and an add per term); TFLOP/s = 10^12 FLOP/s.
The FP32 peak is the device's own: SMs x FP32 lanes per SM (by compute capability) x 2 (a fused
multiply-add) x the SM clock the driver reports, its boost clock; a long run may be clocked lower.

Correctness, before anything is timed: inputs are standard normal float32 (zero mean, so the
error of TF32 would not average away); every output is poisoned with NaN first. A few rows of
each result (of the first and last batch elements) are compared with NumPy in float64, and
the whole result with the first cuBLAS result that passed that check (NumPy's float32 product
when there is none), by ``||C - ref|| / ||ref||`` against ``4 x 2^-24 x sqrt(K)``. A wrong
result is marked WRONG and nothing is recorded.

Timing: as ``bandwidth.py`` (`gpucourse.run.timing.measure`): CUDA events around back-to-back launches after
warm-up launches (JIT compilation and first touch excluded), queued behind a kernel that sleeps
on the GPU while Python enqueues them; the median of the samples. Launches rotate over enough
sets of arrays to fill 4x the L2 cache. A kernel is skipped at a shape where its rate at the
largest shape measured so far predicts more than a second per launch (the naive kernels at
8192^3, say), and said so; at the first shape measured (4096^3 in a full run) nothing predicts it.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from numba import cuda

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from common import (  # noqa: E402
    finish,
    L2_ROTATION,
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

NAME = "matmul"  # its section of benchmarks/RESULTS.md
ITEM = 4  # bytes of a float32
SQUARES = (512, 1024, 2048, 4096, 8192)
QUICK_SQUARES = (512, 1024)
GOAL, GOAL_KERNEL, GOAL_SIZE = 0.60, "matmul_warp_tiled", 4096  # of cuBLAS, on an H100 (issue 22)
# `sgemm.make_warp_tiled`'s tile sizes beside the default (128, 128, 8, 64, 32, 4): a deeper k step, 128 threads
# of 128 accumulators (Boehm's best on an A6000: 128 x 128 x 16, warp tiles 64 x 64), wider and taller tiles
WARP_TILED_VARIANTS = (
    dict(BM=128, BN=128, BK=16, WM=64, WN=32, LANES_M=4),
    dict(BM=128, BN=128, BK=8, WM=64, WN=64, LANES_M=4),
    dict(BM=128, BN=128, BK=16, WM=64, WN=64, LANES_M=4),
    dict(BM=128, BN=256, BK=8, WM=64, WN=64, LANES_M=4),
    dict(BM=256, BN=128, BK=8, WM=64, WN=64, LANES_M=4),
    dict(BM=128, BN=128, BK=8, WM=32, WN=64, LANES_M=2),
)
SAMPLES, QUICK_SAMPLES, SLOW_SAMPLES = 7, 3, 3
SKIP_ABOVE_MS = 1000.0  # a kernel predicted slower than this per launch is skipped
SLOW_MS = 100.0  # ... and one predicted slower than this gets SLOW_SAMPLES samples
CHECKED_ROWS = 32  # rows of each checked batch element compared with float64
# FP32 lanes (CUDA cores) per SM, by compute capability
FP32_LANES = {(6, 0): 64, (6, 1): 128, (6, 2): 128, (8, 0): 64, (8, 6): 128, (8, 7): 128, (8, 9): 128,
              (9, 0): 128, (10, 0): 128, (10, 3): 128, (11, 0): 128, (12, 0): 128, (12, 1): 128}


# -- shapes, FLOPs and the device's peak (pure) ------------------------------------------------------------
@dataclass(frozen=True)
class Shape:
    """``C (batch, M, N) = A (batch_a, M, K) @ B (batch_b, K, N)``; a batch of 1 is broadcast."""

    name: str
    batch: int
    M: int
    K: int
    N: int
    batch_b: int | None = None  # None: the same as batch
    batch_a: int | None = None

    @property
    def a_shape(self) -> tuple[int, int, int]:
        return (self.batch_a or self.batch, self.M, self.K)

    @property
    def b_shape(self) -> tuple[int, int, int]:
        return (self.batch_b or self.batch, self.K, self.N)

    @property
    def c_shape(self) -> tuple[int, int, int]:
        return (self.batch, self.M, self.N)

    @property
    def flops(self) -> int:
        return matmul_flops(self.batch, self.M, self.N, self.K)

    @property
    def bytes(self) -> int:
        """Bytes of A, B and C together."""
        return ITEM * sum(math.prod(s) for s in (self.a_shape, self.b_shape, self.c_shape))

    def dims(self) -> str:
        """``"8 x 512x768 @ 768x3072 (B broadcast)"``."""
        product = f"{self.M}x{self.K} @ {self.K}x{self.N}"
        if self.batch == 1:
            return product
        broadcast = [n for n, b in (("A", self.a_shape[0]), ("B", self.b_shape[0])) if b == 1]
        return f"{self.batch} x {product}" + (f" ({', '.join(broadcast)} broadcast)" if broadcast else "")


def matmul_flops(batch: int, M: int, N: int, K: int) -> int:
    """FLOPs of ``batch`` products of (M x K) by (K x N): a multiply and an add per term."""
    return 2 * batch * M * N * K


def square(n: int) -> Shape:
    return Shape(f"{n}^3", 1, n, n, n)


DL_SHAPES = (
    Shape("MLP up-projection, BERT-base (8 x 512 tokens)", 8, 512, 768, 3072, batch_b=1),
    Shape("LLM MLP slice, Llama-2-7B gate (4096 tokens)", 1, 4096, 4096, 11008),
    Shape("attention scores Q K^T (8 x 16 heads, 1024 tokens, d 64)", 128, 1024, 64, 1024),
    Shape("attention output P V (8 x 16 heads, 1024 tokens, d 64)", 128, 1024, 1024, 64),
    Shape("decode, 16 tokens (4096 -> 4096)", 1, 16, 4096, 4096),
)


def fp32_lanes(compute_capability) -> int | None:
    """FP32 lanes per SM: 64 on 7.x and 8.0, 128 on 8.6, 8.9, 9.0 and later; None when not known."""
    if compute_capability is None:
        return None
    major, minor = compute_capability
    if major == 7:
        return 64
    return FP32_LANES.get((major, minor))


def fp32_peak(sms: int, compute_capability, clock_khz) -> float | None:
    """FLOP/s: SMs x FP32 lanes x 2 (a fused multiply-add) x clock; None when a number is unknown."""
    lanes = fp32_lanes(compute_capability)
    if not (lanes and sms and clock_khz):
        return None
    return sms * lanes * 2 * clock_khz * 1e3


def tolerance(K: int) -> float:
    """Relative error allowed for a float32 product of depth K: 4 x 2^-24 x sqrt(K).

    Summing K products one after the other in float32 errs by about 2^-24 x sqrt(K / 2) relative on
    zero-mean inputs (2e-6 at K = 8192, against 2.1e-5 allowed); TF32 (inputs rounded to 10 bits)
    by about 3e-4 at any K, over 10x more than allowed even at K = 8192."""
    return 4 * 2.0**-24 * math.sqrt(K)


def peak_note(device: Device) -> str:
    peak = fp32_peak(device.sms, device.compute_capability, device.clock_khz)
    cc = ".".join(map(str, device.compute_capability)) if device.compute_capability else "?"
    if peak is None:
        return (f"FP32 peak: unknown (compute capability {cc}, {device.sms} SMs, "
                f"clock {device.clock_khz or '?'} kHz): the % of peak column is left empty")
    return (f"FP32 peak: {peak / 1e12:.1f} TFLOP/s = {device.sms} SMs x {fp32_lanes(device.compute_capability)} "
            f"FP32 lanes (compute capability {cc}) x 2 (FMA) x {device.clock_khz / 1e6:.3g} GHz, the boost clock "
            "the driver reports; under a long load the clock can be lower, so the real ceiling can be too")


# -- measurements and their report (pure) ------------------------------------------------------------
@dataclass(frozen=True)
class Measurement:
    kernel: str  # the row's label
    shape: Shape
    ms: float | None  # median milliseconds per launch; None: skipped
    cublas: bool = False  # a cuBLAS reference row
    note: str = ""
    wrong: bool = False

    @property
    def tflops(self) -> float:
        return self.shape.flops / (self.ms * 1e-3) / 1e12 if self.ms else math.nan

    @property
    def skipped(self) -> bool:
        return self.ms is None


def cublas_label(library: str) -> str:
    return f"cuBLAS via `{library}.matmul`"


def kernel_label(kernel) -> str:
    """``"`matmul_tiled`"``; a top-rung variant with its tile sizes: ``"`matmul_warp_tiled` 128x128x16 / 64x64, 4"``."""
    from gpucourse.kernels import sgemm  # noqa: PLC0415

    tiles = getattr(kernel, "tiles", None)
    if tiles is None or tiles == sgemm.matmul_warp_tiled.tiles:
        return f"`{kernel.py_func.__name__}`"
    return (f"`{kernel.py_func.__name__}` {tiles['BM']}x{tiles['BN']}x{tiles['BK']} / {tiles['WM']}x{tiles['WN']}, "
            f"{tiles['LANES_M']}")


def reference(measurements: list[Measurement], shape: Shape) -> Measurement | None:
    """The faster cuBLAS row at ``shape`` (of those measured and right)."""
    rows = [m for m in measurements if m.cublas and m.shape == shape and not m.wrong and not m.skipped]
    return max(rows, key=lambda m: m.tflops) if rows else None


def fraction_of_cublas(m: Measurement, measurements: list[Measurement]) -> float:
    best = reference(measurements, m.shape)
    return m.tflops / best.tflops if best and not m.skipped else math.nan


def percent(fraction: float | None) -> str:
    return "" if fraction is None or math.isnan(fraction) else f"{fraction:.0%}"


def full_table(measurements: list[Measurement], peak: float | None) -> str:
    rows = []
    for m in measurements:
        if m.skipped:
            rows.append([m.kernel, m.shape.name, "", "", "", "", m.note])
            continue
        rows.append([m.kernel, m.shape.name, f"{m.ms:.4g}", f"{m.tflops:.2f}",
                     percent(fraction_of_cublas(m, measurements)), percent(m.tflops * 1e12 / peak if peak else None),
                     ("WRONG result; " if m.wrong else "") + m.note])
    header = ["kernel", "shape", "time (ms)", "TFLOP/s", "% of cuBLAS", "% of FP32 peak", "note"]
    return markdown_table(header, rows, right={2, 3, 4, 5})


def pivot_table(measurements: list[Measurement]) -> str:
    """One row per shape: cuBLAS's TFLOP/s, then each kernel's TFLOP/s and % of cuBLAS."""
    shapes = list(dict.fromkeys(m.shape for m in measurements))
    kernels = list(dict.fromkeys(m.kernel for m in measurements if not m.cublas))
    cell = {(m.kernel, m.shape): m for m in measurements}
    rows = []
    for shape in shapes:
        best = reference(measurements, shape)
        row = [shape.name, shape.dims(), f"{shape.flops / 1e9:,.1f}",
               f"{best.tflops:.1f} ({best.kernel.split('`')[1].split('.')[0]})" if best else "none"]
        for kernel in kernels:
            m = cell.get((kernel, shape))
            if m is None:
                row.append("")
            elif m.skipped:
                row.append("skipped")
            else:
                share = percent(fraction_of_cublas(m, measurements))
                row.append(("WRONG " if m.wrong else "") + f"{m.tflops:.2f}" + (f" ({share})" if share else ""))
        rows.append(row)
    header = ["shape", "product", "GFLOP", "cuBLAS TFLOP/s"] + [f"{k} TFLOP/s (% of cuBLAS)" for k in kernels]
    return markdown_table(header, rows, right=set(range(2, len(header))))


def measured_goal_line(target: str, mine, best, goal: float) -> str:
    """A goal line once the kernel and the library were both measured: met or NOT met, with both speeds."""
    fraction = mine.tflops / best.tflops
    status = "met" if fraction >= goal else "NOT met"
    return (f"{target}: {status} ({fraction:.0%}: {mine.tflops:.1f} TFLOP/s against {best.tflops:.1f} "
            f"for {best.kernel}).")


def goal_line(measurements: list[Measurement]) -> str:
    """Whether `GOAL_KERNEL` reaches GOAL of cuBLAS at GOAL_SIZE^3: met, NOT met or not measured."""
    target = f"Goal: `{GOAL_KERNEL}` at {GOAL_SIZE}^3 >= {GOAL:.0%} of cuBLAS float32"
    shape = square(GOAL_SIZE)
    mine = [m for m in measurements if m.shape == shape and m.kernel == f"`{GOAL_KERNEL}`"]
    best = reference(measurements, shape)
    if not mine:
        return f"{target}: not measured ({GOAL_SIZE}^3 was not in this run)."
    if mine[0].skipped:
        return f"{target}: not measured (skipped: {mine[0].note})."
    if mine[0].wrong:
        return f"{target}: not measured (its result was WRONG)."
    if best is None:
        return f"{target}: not measured (no cuBLAS reference: neither PyTorch nor CuPy was usable)."
    return measured_goal_line(target, mine[0], best, GOAL)


def section(measurements: list[Measurement], device: Device, versions: str, samples: int,
            references: str, note: str = "") -> str:
    """The Markdown recorded in RESULTS.md; ``note``, under the tables: the shapes the time budget left out."""
    peak = fp32_peak(device.sms, device.compute_capability, device.clock_khz)
    return "\n".join([
        "## Matrix multiplication against cuBLAS float32",
        "",
        f"`python benchmarks/matmul.py` on {device.name} ({device.sms} SMs).",
        "",
        f"- Date: {today()}",
        f"- Versions: {versions}",
        f"- {goal_line(measurements)} Set for an H100.",
        f"- Reference: {references}. % of cuBLAS: a kernel's TFLOP/s over the faster cuBLAS at the same shape, "
        "on the same arrays (shared through `__cuda_array_interface__`).",
        f"- {peak_note(device)}.",
        "- FLOPs: 2 x M x N x K per batch element; TFLOP/s = 10^12 FLOP/s. Inputs: standard normal float32.",
        f"- Timing: CUDA events around back-to-back launches after warm-up (JIT excluded), queued behind a "
        f"sleeping kernel so that Python's launch overhead is excluded; median of {samples} "
        f"sample{'s' * (samples != 1)} "
        f"(at most {SLOW_SAMPLES} for launches over {SLOW_MS:g} ms). Arrays rotate over {L2_ROTATION}x the L2 size. "
        f"A kernel predicted to need over {SKIP_ABOVE_MS / 1e3:g} s per launch is skipped.",
        "- Checked before timing: every output poisoned with NaN, then a few rows compared with NumPy in float64 "
        "and the whole result with cuBLAS's, relative error under 4 x 2^-24 x sqrt(K) (TF32 would fail it).",
        "",
        "### TFLOP/s and % of cuBLAS",
        "",
        pivot_table(measurements),
        "",
        "### Every measurement",
        "",
        full_table(measurements, peak),
        *(["", note] if note else []),
    ])


# -- the references: cuBLAS through PyTorch and CuPy, TF32 off ---------------------------------------------
def tf32_off_environment() -> None:
    """Before PyTorch or CuPy is imported: cuBLAS and CuPy must not use TF32 for float32."""
    os.environ["NVIDIA_TF32_OVERRIDE"] = "0"  # cuBLAS and cuDNN: never TF32, whatever the framework asks
    os.environ["CUPY_TF32"] = "0"  # CuPy's default, made sure of (it is read at import)


def tf32_off_torch(torch) -> str:
    """Turn TF32 off for PyTorch's float32 matmul; what was set, in words."""
    matmul = torch.backends.cuda.matmul
    if hasattr(matmul, "fp32_precision"):  # PyTorch 2.9 and later (mixing in the old API is an error there)
        matmul.fp32_precision = "ieee"
        return f'torch.backends.cuda.matmul.fp32_precision = "{matmul.fp32_precision}"'
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.set_float32_matmul_precision("highest")
        matmul.allow_tf32 = False
    return (f"torch.backends.cuda.matmul.allow_tf32 = {matmul.allow_tf32}, "
            f'float32 matmul precision "{torch.get_float32_matmul_precision()}"')


def pointer(array) -> int:
    return array.__cuda_array_interface__["data"][0]


def cublas_call(library: str, module, a, b, c, shape: Shape) -> Callable[[], None]:
    """``c = a @ b`` by ``library.matmul`` into ``c``, on numba's arrays (shared, not copied). A B with a
    batch of 1 goes in as one matrix, A's batch folded into its rows; a batch of 1 as 2-D matrices."""
    if library == "torch":
        view = functools.partial(module.as_tensor, device="cuda")
        ptr = module.Tensor.data_ptr
        stream = module.cuda.current_stream().cuda_stream
    else:
        view, ptr, stream = module.asarray, (lambda x: x.data.ptr), module.cuda.get_current_stream().ptr
    if stream != 0:
        raise RuntimeError(f"{library} works on stream {stream:#x}, not the default stream that is timed")
    ta, tb, tc = view(a), view(b), view(c)
    for mine, theirs in ((a, ta), (b, tb), (c, tc)):
        if ptr(theirs) != pointer(mine):
            raise RuntimeError(f"{library} copied an array instead of sharing it")
    batch_a, batch_b = shape.a_shape[0], shape.b_shape[0]
    if shape.batch == 1:
        ta, tb, tc = ta[0], tb[0], tc[0]
    elif batch_b == 1 and batch_a == shape.batch:
        ta, tb, tc = ta.reshape(shape.batch * shape.M, shape.K), tb[0], tc.reshape(shape.batch * shape.M, shape.N)
    matmul = module.matmul
    return lambda: matmul(ta, tb, out=tc)


# -- operands, checks and cases ---------------------------------------------------------------------------
@dataclass
class Operands:
    """``sets`` copies of A, B and C for one shape (device arrays), the host inputs, and the checks."""

    shape: Shape
    a: list
    b: list
    c: list
    host_a: np.ndarray
    host_b: np.ndarray
    full_reference: np.ndarray | None = None  # the first checked cuBLAS result, on the host

    @classmethod
    def allocate(cls, shape: Shape, sets: int, seed: int = 0) -> "Operands":
        rng = np.random.default_rng(seed)
        host_a = rng.standard_normal(shape.a_shape, dtype=np.float32)
        host_b = rng.standard_normal(shape.b_shape, dtype=np.float32)
        first_a, first_b = cuda.to_device(host_a), cuda.to_device(host_b)
        a, b, c = [first_a], [first_b], []
        for _ in range(sets - 1):
            a.append(cuda.device_array(shape.a_shape, np.float32))
            b.append(cuda.device_array(shape.b_shape, np.float32))
            a[-1].copy_to_device(first_a)
            b[-1].copy_to_device(first_b)
        for _ in range(sets):
            c.append(cuda.device_array(shape.c_shape, np.float32))
            poison(c[-1])
        return cls(shape, a, b, c, host_a, host_b)

    @functools.cached_property
    def checked_rows(self) -> dict:
        """{(batch element, row indices): their rows of A @ B in float64}, for the first and last batch element."""
        shape = self.shape
        rows = np.unique(np.linspace(0, shape.M - 1, min(shape.M, CHECKED_ROWS)).astype(int))
        expected = {}
        for z in sorted({0, shape.batch - 1}):
            a = self.host_a[min(z, self.host_a.shape[0] - 1), rows].astype(np.float64)
            b = self.host_b[min(z, self.host_b.shape[0] - 1)].astype(np.float64)
            expected[z] = (rows, a @ b)
        return expected

    def whole_reference(self) -> np.ndarray:
        """The first checked cuBLAS result, else NumPy's float32 product (a BLAS too)."""
        if self.full_reference is None:
            self.full_reference = np.matmul(self.host_a, self.host_b)
        return self.full_reference

    def error(self, got: np.ndarray, whole: bool = True) -> float:
        """The largest relative error: of the checked rows against float64 and, if ``whole``, of the
        whole result against `whole_reference` (else only: every element is finite)."""
        errors = [relative_error(got[z, rows], want) for z, (rows, want) in self.checked_rows.items()]
        if whole:
            errors.append(relative_error(got, self.whole_reference()))
        elif not np.all(np.isfinite(got)):
            errors.append(math.inf)
        return max(errors)


@dataclass
class Case:
    """One row at one shape: a launch per set of arrays; the first set's C is checked."""

    kernel: str
    launches: list[Callable[[], None]]
    cublas: bool = False
    note: str = ""
    kernel_launches: int = 1


def kernel_cases(operands: Operands, variants: bool = False) -> list[Case]:
    """A case per kernel of the ladder, then (``variants``) per tile sizes of `WARP_TILED_VARIANTS`."""
    from gpucourse.kernels import matmul, sgemm  # noqa: PLC0415

    cases = []
    extra = [sgemm.make_warp_tiled(**tiles) for tiles in WARP_TILED_VARIANTS] if variants else []
    for kernel in [*matmul.KERNELS, *extra]:
        grid, block = matmul.configuration(kernel, operands.shape.c_shape)
        configured = kernel[grid, block]
        launches = [functools.partial(configured, c, a, b) for c, a, b in zip(operands.c, operands.a, operands.b)]
        cases.append(Case(kernel_label(kernel), launches,
                          note=f"grid {'x'.join(map(str, grid))}, blocks of {'x'.join(map(str, block))}"))
    return cases


def cublas_cases(operands: Operands, libraries: dict) -> list[Case]:
    cases = []
    for name, module in libraries.items():
        try:
            launches = [cublas_call(name, module, a, b, c, operands.shape)
                        for c, a, b in zip(operands.c, operands.a, operands.b)]
        except Exception as exc:  # a reference that cannot share the arrays is left out, with the reason
            print(f"  {name}.matmul left out: {type(exc).__name__}: {exc}", flush=True)
            continue
        cases.append(Case(cublas_label(name), launches, cublas=True, note="same arrays"))
    return cases


def predicted_ms(kernel: str, shape: Shape, measurements: list[Measurement]) -> tuple[float, Measurement] | None:
    """The time per launch at ``shape`` that ``kernel``'s rate at its largest measured shape predicts."""
    done = [m for m in measurements if m.kernel == kernel and not m.skipped and not m.wrong]
    if not done:
        return None
    largest = max(done, key=lambda m: m.shape.flops)
    return shape.flops / (largest.tflops * 1e12) * 1e3, largest


def measure(case: Case, operands: Operands, samples: int, device: Device,
            measurements: list[Measurement]) -> Measurement:
    """Skip when predicted too slow; else warm up (compile, first touch), check the first set, then time."""
    from gpucourse.run import timing  # noqa: PLC0415 (importing gpucourse picks the backend)

    shape = operands.shape
    prediction = predicted_ms(case.kernel, shape, measurements)
    if prediction and prediction[0] > SKIP_ABOVE_MS:
        ms, seen = prediction
        note = f"skipped: about {ms / 1e3:.3g} s per launch at its {seen.tflops:.3g} TFLOP/s of {seen.shape.name}"
        return Measurement(case.kernel, shape, None, case.cublas, note)
    if prediction and prediction[0] > SLOW_MS:
        samples = min(samples, SLOW_SAMPLES)
    poison(operands.c[0])
    for launch in case.launches:
        launch()
    cuda.synchronize()
    got = operands.c[0].copy_to_host()
    first_cublas = case.cublas and operands.full_reference is None
    error = operands.error(got, whole=not first_cublas)
    limit = tolerance(shape.K)
    wrong = not error <= limit
    if first_cublas and not wrong:
        operands.full_reference = got
    timed = timing.measure(case.launches, samples, case.kernel_launches, warmup=0)  # warmed up above
    ms = timed.seconds * 1e3
    note = case.note + (f"; relative error {error:.1e} > {limit:.1e}" if wrong else "")
    if device.real and not timed.queued:
        note += "; the GPU was released before all launches were queued: time may include launch gaps"
    return Measurement(case.kernel, shape, ms, case.cublas, note, wrong)


def measure_shape(shape: Shape, device: Device, samples: int, libraries: dict,
                  earlier: list[Measurement] = (), variants: bool = False) -> list[Measurement]:
    """cuBLAS first, then every kernel (and the top rung's ``variants``), at one shape; ``earlier`` measurements
    predict the slow ones."""
    operands = Operands.allocate(shape, buffer_sets(shape.bytes, device.l2_bytes))
    measurements = []
    for case in [*cublas_cases(operands, libraries), *kernel_cases(operands, variants)]:
        m = measure(case, operands, samples, device, [*earlier, *measurements])
        measurements.append(m)
        if m.skipped:
            print(f"  {m.kernel:34} {shape.name:58} {m.note}", flush=True)
        else:
            print(f"  {m.kernel:34} {shape.name:58} {m.ms:10.4g} ms {m.tflops:7.2f} TFLOP/s "
                  f"{percent(fraction_of_cublas(m, measurements)):>5}{'  WRONG' if m.wrong else ''}", flush=True)
    return measurements


def fits(shape: Shape, device: Device) -> str | None:
    """None when one shape's arrays fit in free device memory, else why they do not."""
    need = shape.bytes * buffer_sets(shape.bytes, device.l2_bytes) + 256 * 2**20  # + cuBLAS's workspace
    context = cuda.current_context()
    context.deallocations.clear()  # the last shape's arrays, which numba frees lazily
    free, _ = context.get_memory_info()
    return None if need <= free else f"needs about {need / 2**30:.1f} GiB, {free / 2**30:.1f} GiB free"


def matmul_versions(libraries: dict) -> str:
    """`common.versions` and the cuBLAS each library uses."""
    found = [versions(libraries)]
    if "torch" in libraries:
        torch = libraries["torch"]
        found.append(f"torch built for CUDA {torch.version.cuda}")
        from importlib import metadata  # noqa: PLC0415

        for wheel in ("nvidia-cublas", "nvidia-cublas-cu13", "nvidia-cublas-cu12"):  # the cuBLAS torch loads
            try:
                found.append(f"{wheel} {metadata.version(wheel)}")
            except metadata.PackageNotFoundError:
                pass
    if "cupy" in libraries:
        cupy = libraries["cupy"]
        try:
            found.append(f"cupy's cuBLAS {cupy.cuda.cublas.getVersion(cupy.cuda.device.get_cublas_handle())}")
        except Exception as exc:
            found.append(f"cupy's cuBLAS version unknown ({type(exc).__name__})")
    return ", ".join(found)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"squares {', '.join(map(str, QUICK_SQUARES))}, {QUICK_SAMPLES} samples, prints only")
    parser.add_argument("--sizes", type=int, nargs="+", metavar="N", help="squares N^3 only (prints only)")
    parser.add_argument("--samples", type=int, default=None, help=f"samples per median (default {SAMPLES})")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    parser.add_argument("--variants", action="store_true",
                        help=f"at {GOAL_SIZE}^3 also the top rung with the tile sizes of WARP_TILED_VARIANTS")
    add_time_budget(parser)
    options = parser.parse_args(argv)

    if without_gpu("matmul.py"):
        return 0

    if options.sizes:
        shapes = [square(n) for n in options.sizes]
    elif options.quick:
        shapes = [square(n) for n in QUICK_SQUARES]
    else:
        shapes = [*(square(n) for n in SQUARES), *DL_SHAPES]
    samples = options.samples or (QUICK_SAMPLES if options.quick else SAMPLES)
    full = not options.quick and not options.sizes

    tf32_off_environment()
    device, libraries = current_device(), reference_libraries()
    settings = ["NVIDIA_TF32_OVERRIDE=0"]
    if "cupy" in libraries:
        settings.append("CUPY_TF32=0")
    if "torch" in libraries:
        settings.append(tf32_off_torch(libraries["torch"]))
    references = (" and ".join(f"`{name}.matmul`" for name in libraries) + " (cuBLAS float32), TF32 off: "
                  + "; ".join(settings)) if libraries else "none (neither PyTorch nor CuPy is usable)"
    print(f"{device.name}: {device.sms} SMs; {peak_note(device)}\nreference: {references}", flush=True)

    budget = TimeBudget(options.seconds)
    measurements, skipped = [], []
    for shape in budget.rows(shapes, label=lambda shape: shape.name, first={square(GOAL_SIZE).name}):
        reason = fits(shape, device)
        if reason:
            skipped.append(shape)
            print(f"  {shape.name} skipped: {reason}", flush=True)
            continue
        variants = options.variants and shape == square(GOAL_SIZE)
        measurements += measure_shape(shape, device, samples, libraries, measurements, variants)
    measurements.sort(key=lambda m: shapes.index(m.shape))  # the goal's shape measured first, tabled in order

    text = section(measurements, device, matmul_versions(libraries), samples, references, budget.note("matmul.py"))
    return finish(NAME, text, measurements, write=full and not skipped and not options.no_write)


if __name__ == "__main__":
    sys.exit(main())
