"""Module 7's compiler baselines on a GPU: Triton's autotuned matmul and torch.compile, beside cuBLAS and the course.

    python benchmarks/compilers.py            # 1000^3, 1024^3 and 4096^3; writes RESULTS.md
    python benchmarks/compilers.py --quick    # 1000^3 only, 3 samples, prints only
    python benchmarks/compilers.py --no-write
    python benchmarks/compilers.py --seconds 200   # 4096^3 (matmul.py's goal shape) first, the rest while 200 s last

Needs a CUDA GPU, PyTorch and Triton; anywhere else it prints one line saying so and exits with status 0.

At each shape, float32 with TF32 off everywhere (as `matmul.py` turns it off, and Triton's ``tl.dot`` with
``input_precision="ieee"``), in one process on the same arrays (numba's, shared with PyTorch, default stream):

- SGEMM: cuBLAS (`torch.matmul`, and `cupy.matmul` where CuPy is installed), the course's best SGEMM
  (`matmul_warp_tiled`), and `matmul_kernel`, a Triton kernel written here (``BLOCK_M x BLOCK_N`` tiles of C in
  steps of ``BLOCK_K``, ``GROUP_M`` rows of tiles swizzled for L2 reuse, masks for shapes that are not multiples of
  the tiles, fp32 accumulation) under ``@triton.autotune`` over `CONFIGS`, keyed on (M, N, K). Its autotune time
  is the wall time of the first call at a shape (every config compiled and timed by Triton's own benchmarker);
  the config it picked is reported.
- matmul + bias + ReLU, ``relu(A @ B + bias)`` (`graph`): eager PyTorch (cuBLAS, then an add and a ReLU
  kernel), ``torch.compile(mode="max-autotune-no-cudagraphs")`` of the same function (Inductor times its Triton
  GEMM templates, epilogue fused, against cuBLAS and picks; the compile time and the kernels its code calls are
  reported), and module 5's fused `matmul_bias_relu`.

Every output is checked before it is timed: rows against NumPy in float64 and the whole result against cuBLAS's
(eager PyTorch's for the epilogue), relative error under ``4 x 2^-24 x sqrt(K)`` (`matmul.tolerance`; TF32
would fail it); course outputs are poisoned with NaN first. A wrong result is marked WRONG and nothing is recorded.
Timing: `gpucourse.run.timing.measure`, as every benchmark here. % of cuBLAS: over cuBLAS's plain matmul at the
same shape (the epilogue rows do a little more work than that).
"""

from __future__ import annotations

import argparse
import functools
import os
import re
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

import numpy as np
from numba import cuda

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from common import (  # noqa: E402
    TimeBudget,
    add_time_budget,
    buffer_sets,
    current_device,
    finish,
    poison,
    reference_libraries,
    relative_error,
    today,
    without_gpu,
)
from fusion import shared_tensor  # noqa: E402
import matmul as mb  # noqa: E402

try:
    import triton
    import triton.language as tl
except ImportError:  # the course's environment and CI: `main` says so in one line
    triton = tl = None

NAME = "compilers"  # its section of benchmarks/RESULTS.md
SHAPES, QUICK_SHAPES = (1000, 1024, 4096), (1000,)
SAMPLES, QUICK_SAMPLES = 7, 3
COMPILE_MODE = "max-autotune-no-cudagraphs"
TRITON = "Triton `matmul_kernel`, autotuned"
EAGER, COMPILED = "eager PyTorch `graph` (3 kernels)", f'`torch.compile(graph, mode="{COMPILE_MODE}")`'
COURSE_EPILOGUE = "`matmul_bias_relu` (module 5, fused)"


def graph(a, b, bias):
    """The small graph compiled: a matmul with its epilogue (module 5 fuses the same into `matmul_bias_relu`)."""
    return (a @ b + bias).relu()


# Triton's search space: (BLOCK_M, BLOCK_N, BLOCK_K, warps, pipeline stages); GROUP_M is 8 in each
CONFIG_SIZES = ((128, 128, 32, 8, 3), (128, 64, 32, 4, 4), (64, 128, 32, 4, 4), (64, 64, 32, 4, 4),
                (128, 128, 16, 8, 4), (64, 64, 16, 2, 5))

if triton is not None:
    CONFIGS = [triton.Config({"BLOCK_M": m, "BLOCK_N": n, "BLOCK_K": k, "GROUP_M": 8}, num_warps=w, num_stages=s)
               for m, n, k, w, s in CONFIG_SIZES]

    @triton.autotune(configs=CONFIGS, key=["M", "N", "K"])
    @triton.jit
    def matmul_kernel(a, b, c, M, N, K, a_row, a_col, b_row, b_col, c_row, c_col,
                      BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr):
        """``C = A @ B`` (strides in elements): one program per ``BLOCK_M x BLOCK_N`` tile of C, fp32 throughout."""
        tiles_m, tiles_n = tl.cdiv(M, BLOCK_M), tl.cdiv(N, BLOCK_N)
        pid = tl.program_id(0)
        # GROUP_M rows of tiles are walked column by column, so the tiles running together share A's rows in L2
        group = pid // (GROUP_M * tiles_n)
        first_m = group * GROUP_M
        group_m = tl.minimum(tiles_m - first_m, GROUP_M)
        tile_m = first_m + (pid % (GROUP_M * tiles_n)) % group_m
        tile_n = (pid % (GROUP_M * tiles_n)) // group_m
        rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
        cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
        ks = tl.arange(0, BLOCK_K)
        a_tile = a + rows[:, None] * a_row + ks[None, :] * a_col
        b_tile = b + ks[:, None] * b_row + cols[None, :] * b_col
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
        for start in range(0, K, BLOCK_K):
            inside_k = start + ks < K
            a_values = tl.load(a_tile, mask=(rows[:, None] < M) & inside_k[None, :], other=0.0)
            b_values = tl.load(b_tile, mask=inside_k[:, None] & (cols[None, :] < N), other=0.0)
            acc = tl.dot(a_values, b_values, acc, input_precision="ieee")  # IEEE fp32: no TF32
            a_tile += BLOCK_K * a_col
            b_tile += BLOCK_K * b_row
        tl.store(c + rows[:, None] * c_row + cols[None, :] * c_col, acc, mask=(rows[:, None] < M) & (cols[None, :] < N))


def triton_grid(M: int, N: int):
    return lambda meta: (triton.cdiv(M, meta["BLOCK_M"]) * triton.cdiv(N, meta["BLOCK_N"]),)


def triton_matmul(a, b, c) -> None:
    """``c = a @ b`` for 2-D float32 torch tensors, by `matmul_kernel` (autotuned at the first call per shape)."""
    (M, K), N = a.shape, b.shape[1]
    matmul_kernel[triton_grid(M, N)](a, b, c, M, N, K, *a.stride(), *b.stride(), *c.stride())


def config_text(config) -> str:
    """``"BLOCK_M=128, BLOCK_N=128, BLOCK_K=32, GROUP_M=8, 8 warps, 3 stages"``."""
    sizes = ", ".join(f"{k}={v}" for k, v in config.kwargs.items())
    return f"{sizes}, {config.num_warps} warps, {config.num_stages} stages"


def inductor_calls(code: str) -> list[str]:
    """The kernels that ``call`` in Inductor's generated code launches, in order: ``extern_kernels.mm`` (a library
    GEMM: cuBLAS), ``triton_tem_...`` (a Triton GEMM template), ``triton_poi_...`` (a pointwise kernel), ..."""
    body = code.split("def call(", 1)[-1] if "def call(" in code else ""
    return re.findall(r"\b(extern_kernels\.\w+|(?:triton|cpp)_\w+)(?:\.run)?\(", body)


def inductor_summary(calls: list[str]) -> str:
    """In words: ``"library call (cuBLAS on a GPU) `extern_kernels.addmm` + Triton pointwise `triton_poi_...`"``."""
    words = {"extern_kernels.": "library call (cuBLAS on a GPU)", "triton_tem": "Triton GEMM template",
             "triton_poi": "Triton pointwise", "triton_red": "Triton reduction", "triton_per": "Triton reduction",
             "cpp": "C++ kernel"}
    named = [f"{next((w for prefix, w in words.items() if call.startswith(prefix)), 'kernel')} `{call}`"
             for call in calls]
    return " + ".join(named) or "no kernel found in the generated code"


# -- on the GPU ---------------------------------------------------------------------------------------------
@dataclass
class Row:
    """One row at one shape: a call per set of arrays, and the first set's result on the host (after a call)."""

    kernel: str
    calls: list[Callable[[], None]]
    result: Callable[[], np.ndarray]
    note: str = ""
    kernel_launches: int = 1


def triton_case(operands: mb.Operands, torch) -> mb.Case:
    """Triton's autotuned matmul at this shape: autotuned here (timed), then a `matmul.Case` like the others."""
    views = [[shared_tensor(torch, x)[0] for x in arrays] for arrays in (operands.a, operands.b, operands.c)]
    calls = [functools.partial(triton_matmul, a, b, c) for a, b, c in zip(*views)]
    began = time.perf_counter()
    calls[0]()
    torch.cuda.synchronize()
    tuned = time.perf_counter() - began
    note = (f"picked {config_text(matmul_kernel.best_config)}; autotuned in {tuned:.1f} s "
            f"over {len(CONFIG_SIZES)} configs")
    return mb.Case(TRITON, calls, note=note)


def epilogue_rows(operands: mb.Operands, biases: list, torch) -> list[Row]:
    """Eager PyTorch, torch.compile and the course's fused kernel, each on every set of arrays."""
    from gpucourse.kernels import fusion  # noqa: PLC0415 (importing gpucourse picks the backend)

    a, b = ([shared_tensor(torch, x)[0] for x in arrays] for arrays in (operands.a, operands.b))
    bias = [shared_tensor(torch, x) for x in biases]
    out = {}

    def run(function, k):
        out[k] = function(a[k], b[k], bias[k])

    def first():
        return out[0].cpu().numpy()

    compiled = torch.compile(graph, mode=COMPILE_MODE, dynamic=False)
    from torch._inductor.utils import run_and_get_code  # noqa: PLC0415 (the code Inductor generated, first call)

    began = time.perf_counter()
    out[0], code = run_and_get_code(compiled, a[0], b[0], bias[0])
    torch.cuda.synchronize()
    seconds = time.perf_counter() - began
    calls = inductor_calls("\n".join(code))
    course = [functools.partial(fusion.gemm_bias_relu, c[0], x[0], y[0], z)
              for c, x, y, z in zip(operands.c, operands.a, operands.b, biases)]
    return [Row(EAGER, [functools.partial(run, graph, k) for k in range(len(a))], first, "cuBLAS, add, ReLU",
                kernel_launches=3),
            Row(COMPILED, [functools.partial(run, compiled, k) for k in range(len(a))], first,
                f"compiled and autotuned in {seconds:.1f} s; calls {inductor_summary(calls)}",
                kernel_launches=max(1, len(calls))),
            Row(COURSE_EPILOGUE, course, lambda: operands.c[0].copy_to_host()[0], "16 x 16 shared-memory tiles")]


def epilogue_check(operands: mb.Operands, bias: np.ndarray) -> Callable[[np.ndarray, np.ndarray | None], float]:
    """The relative error of a result: its checked rows against NumPy in float64, and the whole of it against
    ``whole`` (eager PyTorch's result, once that has passed the first check)."""
    rows, product = operands.checked_rows[0]
    want = np.maximum(product + bias.astype(np.float64), 0)

    def error(got, whole):
        return max(relative_error(got[rows], want), relative_error(got, whole) if whole is not None else 0.0)

    return error


def measure_epilogue(shape: mb.Shape, operands: mb.Operands, samples: int, device, torch) -> list[mb.Measurement]:
    from gpucourse.run import timing  # noqa: PLC0415

    rng = np.random.default_rng(1)
    host_bias = rng.standard_normal(shape.N, dtype=np.float32)
    biases = [cuda.to_device(host_bias) for _ in operands.a]
    error, eager, limit = epilogue_check(operands, host_bias), None, mb.tolerance(shape.K)
    measurements = []
    for row in epilogue_rows(operands, biases, torch):
        poison(operands.c[0])
        for call in row.calls:
            call()
        cuda.synchronize()
        got = row.result()
        e = error(got, eager)
        wrong = not e <= limit
        if row.kernel == EAGER and not wrong:
            eager = got
        timed = timing.measure(row.calls, samples, row.kernel_launches, warmup=0)  # warmed up above
        note = row.note + (f"; relative error {e:.1e} > {limit:.1e}" if wrong else "")
        if device.real and not timed.queued:
            note += "; the GPU was released before all launches were queued: time may include launch gaps"
        measurements.append(mb.Measurement(row.kernel, shape, timed.seconds * 1e3, note=note, wrong=wrong))
    return measurements


def measure_shape(shape: mb.Shape, device, samples: int, libraries: dict) -> list[mb.Measurement]:
    from gpucourse.kernels import matmul  # noqa: PLC0415

    operands = mb.Operands.allocate(shape, buffer_sets(shape.bytes, device.l2_bytes))
    course = [c for c in mb.kernel_cases(operands) if c.kernel == mb.kernel_label(matmul.matmul_warp_tiled)]
    measurements = []
    for case in [*mb.cublas_cases(operands, libraries), *course, triton_case(operands, libraries["torch"])]:
        measurements.append(mb.measure(case, operands, samples, device, measurements))
    measurements += measure_epilogue(shape, operands, samples, device, libraries["torch"])
    for m in measurements:
        print(f"  {m.kernel:60} {shape.name:8} {m.ms:10.4g} ms {m.tflops:7.2f} TFLOP/s "
              f"{mb.percent(mb.fraction_of_cublas(m, measurements)):>5}{'  WRONG' if m.wrong else ''}  {m.note}",
              flush=True)
    return measurements


def section(measurements: list[mb.Measurement], device, versions: str, samples: int, references: str,
            note: str = "") -> str:
    """The Markdown recorded in RESULTS.md; ``note``, under the tables: the shapes the time budget left out."""
    peak = mb.fp32_peak(device.sms, device.compute_capability, device.clock_khz)
    return "\n".join([
        "## Compilers as baselines: Triton's autotuned matmul and torch.compile",
        "",
        f"`python benchmarks/compilers.py` on {device.name} ({device.sms} SMs).",
        "",
        f"- Date: {today()}",
        f"- Versions: {versions}",
        f"- TF32 off: {references}; Triton's `tl.dot(..., input_precision=\"ieee\")`.",
        f"- Triton: `matmul_kernel` under `@triton.autotune` over {len(CONFIG_SIZES)} configs keyed on (M, N, K); "
        "autotune time: the first call's wall time at the shape (every config compiled and timed), cold (a new "
        "`TRITON_CACHE_DIR`).",
        f"- `torch.compile(graph, mode=\"{COMPILE_MODE}\")` of `graph(a, b, bias) = (a @ b + bias).relu()`: "
        "compile time is the first call's wall time, cold (Inductor's `force_disable_caches`); the kernels are "
        "those its generated code calls.",
        "- % of cuBLAS: over cuBLAS's plain float32 matmul at the same shape, on the same arrays; the epilogue rows "
        "add a bias and a ReLU (M x N more reads and writes at most). FLOPs: 2 x M x N x K.",
        f"- {mb.peak_note(device)}.",
        f"- Timing: `gpucourse.run.timing.measure`, median of {samples} samples after warm-up (compiling and "
        "autotuning excluded), arrays rotating over 4x the L2.",
        "- Checked before timing: rows against NumPy float64 and the whole result against cuBLAS's (eager PyTorch's "
        "for the epilogue), relative error under 4 x 2^-24 x sqrt(K); course outputs poisoned with NaN first.",
        "",
        "### TFLOP/s and % of cuBLAS",
        "",
        mb.pivot_table(measurements),
        "",
        "### Every measurement (the config Triton picked, the kernels Inductor generated)",
        "",
        mb.full_table(measurements, peak),
        *(["", note] if note else []),
    ])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="1000^3 only, 3 samples, prints only")
    parser.add_argument("--samples", type=int, default=None, help=f"samples per median (default {SAMPLES})")
    parser.add_argument("--no-write", action="store_true", help="print the tables only")
    add_time_budget(parser)
    options = parser.parse_args(argv)

    if without_gpu("compilers.py"):
        return 0
    mb.tf32_off_environment()
    device, libraries = current_device(), reference_libraries()
    if triton is None or "torch" not in libraries:
        missing = " and ".join(name for name, absent in (("PyTorch with CUDA", "torch" not in libraries),
                                                          ("Triton", triton is None)) if absent)
        print(f"benchmarks/compilers.py needs {missing}, not installed here; nothing measured, "
              "RESULTS.md left as it was.")
        return 0
    settings = ["NVIDIA_TF32_OVERRIDE=0", mb.tf32_off_torch(libraries["torch"])]
    samples = options.samples or (QUICK_SAMPLES if options.quick else SAMPLES)
    print(f"{device.name}: {device.sms} SMs; {mb.peak_note(device)}", flush=True)
    shapes = [mb.square(n) for n in (QUICK_SHAPES if options.quick else SHAPES)]
    budget = TimeBudget(options.seconds)
    measurements = []
    with tempfile.TemporaryDirectory() as cache:  # cold compiles: Triton's kernels and Inductor's graphs uncached
        os.environ["TRITON_CACHE_DIR"] = cache
        from torch._inductor import config  # noqa: PLC0415

        config.force_disable_caches = True
        for shape in budget.rows(shapes, label=lambda shape: shape.name, first={mb.square(mb.GOAL_SIZE).name}):
            measurements += measure_shape(shape, device, samples, libraries)
    measurements.sort(key=lambda m: shapes.index(m.shape))  # matmul.py's goal shape measured first, tabled in order
    versions = f"{mb.matmul_versions(libraries)}, triton {triton.__version__}"
    text = section(measurements, device, versions, samples, "; ".join(settings), budget.note("compilers.py"))
    return finish(NAME, text, measurements, write=not options.quick and not options.no_write)


if __name__ == "__main__":
    sys.exit(main())
