"""Module 4's convolutions against cuDNN float32 (TF32 off), on ResNet-50 layers, in one run on a GPU.

    python benchmarks/conv.py             # four ResNet-50 layers at batch 32; writes RESULTS.md
    python benchmarks/conv.py --quick     # the two 3x3 layers at batch 8, 3 samples, prints only
    python benchmarks/conv.py --no-write
    python benchmarks/conv.py --seconds 120   # the goal's layer (conv2_x 3x3) first, the rest while 120 s last

Needs a CUDA GPU; anywhere else it prints one line saying so and exits with status 0.

For each layer (NCHW float32, ``y = conv(x, w)``, no bias) it times, in the same process:

- the reference: ``torch.nn.functional.conv2d`` (cuDNN) on the same NCHW arrays (shared through
  ``__cuda_array_interface__``), once with ``torch.backends.cudnn.benchmark = False`` (cuDNN's
  heuristics pick an algorithm) and once with ``True`` (the first call at a shape times the candidate
  algorithms and caches the winner; that call is in the warm-up, not timed). TF32 is off: the
  environment's ``NVIDIA_TF32_OVERRIDE=0`` and PyTorch's own switches; the accuracy check catches it
  anyway. "% of cuDNN" is a kernel's TFLOP/s over the faster cuDNN row at that layer;
- `gpucourse.kernels.conv`: `conv_direct`, im2col + module 3's `matmul_register_tiled` (two launches;
  its product is ``cols @ w.reshape(M, -1).T``, so it writes y in NHWC), `conv_implicit_gemm`, and
  `conv_implicit_gemm_nhwc` and `conv_implicit_gemm_warp_tiled` on NHWC copies of x and w (converted once,
  outside the timing).

FLOPs: 2 x B x M x Ho x Wo x C x R x S (a multiply and an add per term). Peak extra memory: what a
row allocates beyond x, w and y: the im2col matrix for im2col + GEMM, zero for the course's other
kernels, and for cuDNN PyTorch's peak allocation during a call minus what was allocated before it
and minus y (its workspace).

Correctness, before anything is timed: inputs are standard normal float32; every output is poisoned
with NaN first. Each result is compared with the whole convolution computed by NumPy in float64, by
``||y - ref|| / ||ref||``: the course's kernels, which add their C x R x S terms one by one in float32,
against ``4 x 2^-24 x sqrt(C R S)`` (`matmul.tolerance`); cuDNN against 1e-4, since its Winograd and FFT
algorithms round differently from a sum of products (its error is in the note), while TF32, which errs by
about 3e-4 on such inputs, is still caught. A wrong result is marked WRONG and nothing is recorded.

Timing: as ``matmul.py`` (`gpucourse.run.timing.measure`): CUDA events around back-to-back launches after warm-up,
queued behind a sleeping kernel, median of the samples, rotating over enough sets of arrays to fill
4x the L2 cache.
"""

from __future__ import annotations

import argparse
import functools
import math
import os
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
from matmul import fp32_peak, measured_goal_line, peak_note, percent, pointer, tolerance  # noqa: E402

NAME = "conv"  # its section of benchmarks/RESULTS.md
ITEM = 4  # bytes of a float32
GOAL, GOAL_KERNEL, GOAL_LAYER = 0.50, "conv_implicit_gemm_warp_tiled", "conv2_x 3x3"  # of cuDNN, on an H100 (issue 22)
SAMPLES, QUICK_SAMPLES = 7, 3
BATCH, QUICK_BATCH = 32, 8
CUDNN_OFF, CUDNN_ON = "cuDNN, benchmark off", "cuDNN, benchmark on"
CUDNN_LIMIT = 1e-4  # the relative error allowed to cuDNN (see the module's docstring)


# -- layers, FLOPs and bytes (pure) -----------------------------------------------------------------------
@dataclass(frozen=True)
class Layer:
    """A convolution of NCHW ``x`` (B, C, H, W) with ``w`` (M, C, R, S), stride and padding."""

    name: str
    B: int
    C: int
    H: int
    W: int
    M: int
    R: int
    S: int
    stride: int = 1
    padding: int = 0

    @property
    def Ho(self) -> int:
        return (self.H + 2 * self.padding - self.R) // self.stride + 1

    @property
    def Wo(self) -> int:
        return (self.W + 2 * self.padding - self.S) // self.stride + 1

    @property
    def x_shape(self) -> tuple[int, int, int, int]:
        return (self.B, self.C, self.H, self.W)

    @property
    def w_shape(self) -> tuple[int, int, int, int]:
        return (self.M, self.C, self.R, self.S)

    @property
    def y_shape(self) -> tuple[int, int, int, int]:
        return (self.B, self.M, self.Ho, self.Wo)

    @property
    def K(self) -> int:
        return self.C * self.R * self.S

    @property
    def flops(self) -> int:
        return 2 * self.B * self.M * self.Ho * self.Wo * self.K

    @property
    def bytes(self) -> int:
        """Bytes of x, w and y together."""
        return ITEM * sum(math.prod(s) for s in (self.x_shape, self.w_shape, self.y_shape))

    @property
    def im2col_bytes(self) -> int:
        return ITEM * self.B * self.Ho * self.Wo * self.K

    def dims(self) -> str:
        """``"32 x 64x56x56, 64 filters 3x3, stride 1, padding 1"``."""
        return (f"{self.B} x {self.C}x{self.H}x{self.W}, {self.M} filters {self.R}x{self.S}, "
                f"stride {self.stride}, padding {self.padding}")


def resnet50_layers(batch: int) -> tuple[Layer, ...]:
    return (
        Layer("conv2_x 3x3", batch, 64, 56, 56, 64, 3, 3, 1, 1),
        Layer("conv3_x 3x3", batch, 128, 28, 28, 128, 3, 3, 1, 1),
        Layer("conv4_x 3x3", batch, 256, 14, 14, 256, 3, 3, 1, 1),
        Layer("conv2_x 1x1 reduce", batch, 256, 56, 56, 64, 1, 1, 1, 0),
    )


def quick_layers() -> tuple[Layer, ...]:
    return tuple(layer for layer in resnet50_layers(QUICK_BATCH) if layer.name in ("conv2_x 3x3", "conv4_x 3x3"))


def mib(n: int) -> str:
    return f"{n / 2**20:,.1f}"


# -- measurements and their report (pure) ------------------------------------------------------------
@dataclass(frozen=True)
class Measurement:
    kernel: str  # the row's label
    layer: Layer
    ms: float
    extra_bytes: int | None  # peak extra memory; None: unknown
    cudnn: bool = False
    note: str = ""
    wrong: bool = False

    @property
    def tflops(self) -> float:
        return self.layer.flops / (self.ms * 1e-3) / 1e12


def reference(measurements: list[Measurement], layer: Layer) -> Measurement | None:
    """The faster cuDNN row at ``layer`` (of those that were right)."""
    rows = [m for m in measurements if m.cudnn and m.layer == layer and not m.wrong]
    return max(rows, key=lambda m: m.tflops) if rows else None


def fraction_of_cudnn(m: Measurement, measurements: list[Measurement]) -> float:
    best = reference(measurements, m.layer)
    return m.tflops / best.tflops if best else math.nan


def extra_memory(m: Measurement) -> str:
    return "?" if m.extra_bytes is None else mib(m.extra_bytes)


def full_table(measurements: list[Measurement], peak: float | None) -> str:
    rows = [[m.kernel, m.layer.name, f"{m.ms:.4g}", f"{m.tflops:.2f}", percent(fraction_of_cudnn(m, measurements)),
             percent(m.tflops * 1e12 / peak if peak else None), extra_memory(m),
             ("WRONG result; " if m.wrong else "") + m.note]
            for m in measurements]
    header = ["kernel", "layer", "time (ms)", "TFLOP/s", "% of cuDNN", "% of FP32 peak", "extra memory (MiB)", "note"]
    return markdown_table(header, rows, right={2, 3, 4, 5, 6})


def pivot_table(measurements: list[Measurement]) -> str:
    """One row per layer: each row's TFLOP/s (% of the faster cuDNN) and the im2col matrix's size."""
    layers = list(dict.fromkeys(m.layer for m in measurements))
    kernels = list(dict.fromkeys(m.kernel for m in measurements))
    cell = {(m.kernel, m.layer): m for m in measurements}
    rows = []
    for layer in layers:
        row = [layer.name, layer.dims(), f"{layer.flops / 1e9:,.1f}", f"{mib(layer.im2col_bytes)} "
               f"({layer.im2col_bytes / (ITEM * math.prod(layer.x_shape)):.1f}x x)"]
        for kernel in kernels:
            m = cell.get((kernel, layer))
            share = percent(fraction_of_cudnn(m, measurements)) if m else ""
            row.append("" if m is None else ("WRONG " if m.wrong else "") + f"{m.tflops:.2f}"
                       + (f" ({share})" if share else ""))
        rows.append(row)
    header = ["layer", "shape", "GFLOP", "im2col matrix (MiB)"] + [f"{k} TFLOP/s (% of cuDNN)" for k in kernels]
    return markdown_table(header, rows, right=set(range(2, len(header))))


def goal_line(measurements: list[Measurement]) -> str:
    """Whether `GOAL_KERNEL` reaches GOAL of cuDNN on the 56x56 3x3 layer: met, NOT met or not measured."""
    target = f"Goal: `{GOAL_KERNEL}` on {GOAL_LAYER} (56x56) >= {GOAL:.0%} of cuDNN float32"
    mine = [m for m in measurements if m.layer.name == GOAL_LAYER and m.kernel == f"`{GOAL_KERNEL}`"]
    if not mine:
        return f"{target}: not measured ({GOAL_LAYER} was not in this run)."
    if mine[0].wrong:
        return f"{target}: not measured (its result was WRONG)."
    best = reference(measurements, mine[0].layer)
    if best is None:
        return f"{target}: not measured (no cuDNN reference: PyTorch was not usable)."
    return measured_goal_line(target, mine[0], best, GOAL)


def section(measurements: list[Measurement], device: Device, versions_text: str, samples: int,
            references: str, note: str = "") -> str:
    """The Markdown recorded in RESULTS.md; ``note``, under the tables: the layers the time budget left out."""
    peak = fp32_peak(device.sms, device.compute_capability, device.clock_khz)
    return "\n".join([
        "## Convolution against cuDNN float32",
        "",
        f"`python benchmarks/conv.py` on {device.name} ({device.sms} SMs).",
        "",
        f"- Date: {today()}",
        f"- Versions: {versions_text}",
        f"- {goal_line(measurements)} Set for an H100.",
        f"- Reference: {references}. % of cuDNN: a row's TFLOP/s over the faster cuDNN row at the same layer.",
        f"- {peak_note(device)}.",
        "- FLOPs: 2 x B x M x Ho x Wo x C x R x S; TFLOP/s = 10^12 FLOP/s. Inputs: standard normal float32, NCHW "
        "(`conv_implicit_gemm_nhwc`: NHWC copies). im2col + GEMM writes y in NHWC, the layout of its product.",
        "- Extra memory: beyond x, w and y; for cuDNN, PyTorch's peak allocation during a call minus y (its "
        "workspace).",
        f"- Timing: CUDA events around back-to-back launches after warm-up (JIT and cuDNN's benchmark search "
        f"excluded), queued behind a sleeping kernel; median of {samples} sample{'s' * (samples != 1)}. "
        f"Arrays rotate over {L2_ROTATION}x the L2 size.",
        "- Checked before timing: every output poisoned with NaN, then compared with the convolution in float64 "
        f"(NumPy): relative error under 4 x 2^-24 x sqrt(C R S) for the course's kernels, {CUDNN_LIMIT:g} for cuDNN "
        "(whose Winograd and FFT algorithms round differently; TF32 would fail it).",
        "",
        "### TFLOP/s and % of cuDNN",
        "",
        pivot_table(measurements),
        "",
        "### Every measurement",
        "",
        full_table(measurements, peak),
        *(["", note] if note else []),
    ])


# -- operands, checks and cases ---------------------------------------------------------------------------
@dataclass
class Operands:
    """``sets`` copies of x, w and y for one layer (device arrays, NCHW), the host inputs, and the check."""

    layer: Layer
    x: list
    w: list
    y: list
    host_x: np.ndarray
    host_w: np.ndarray

    @classmethod
    def allocate(cls, layer: Layer, sets: int, seed: int = 0) -> "Operands":
        rng = np.random.default_rng(seed)
        host_x = rng.standard_normal(layer.x_shape, dtype=np.float32)
        host_w = rng.standard_normal(layer.w_shape, dtype=np.float32)
        x, w, y = [], [], []
        for _ in range(sets):
            x.append(cuda.to_device(host_x))
            w.append(cuda.to_device(host_w))
            y.append(cuda.device_array(layer.y_shape, np.float32))
            poison(y[-1])
        return cls(layer, x, w, y, host_x, host_w)

    @functools.cached_property
    def reference(self) -> np.ndarray:
        """The whole convolution in float64 on the host (a BLAS product of the im2col matrix: seconds)."""
        from gpucourse.kernels import conv  # noqa: PLC0415

        return conv.conv2d_reference(self.host_x, self.host_w, self.layer.stride, self.layer.padding)

    def error(self, got: np.ndarray) -> float:
        """``||got - y|| / ||y||`` for NCHW ``got`` against the float64 convolution."""
        return relative_error(got, self.reference)


@dataclass
class Case:
    """One row at one layer: a launch per set of arrays, where the first set's result is, and its layout."""

    kernel: str
    launches: list[Callable[[], None]]
    result: Callable[[], np.ndarray]  # the first set's y, as NCHW on the host
    extra_bytes: int | None = 0
    cudnn: bool = False
    note: str = ""
    kernel_launches: int = 1


def kernel_label(kernel) -> str:
    return f"`{kernel.py_func.__name__}`"


def kernel_cases(operands: Operands) -> list[Case]:
    from gpucourse.kernels import conv, matmul  # noqa: PLC0415

    layer = operands.layer
    sets = list(zip(operands.y, operands.x, operands.w))
    first_y = operands.y[0]
    cases = []
    for kernel in (conv.conv_direct, conv.conv_implicit_gemm):
        grid, block = conv.configuration(kernel, layer.y_shape)
        configured = kernel[grid, block]
        launches = [functools.partial(configured, y, x, w, layer.stride, layer.padding) for y, x, w in sets]
        cases.append(Case(kernel_label(kernel), launches, first_y.copy_to_host,
                          note=f"grid {'x'.join(map(str, grid))}, blocks of {'x'.join(map(str, block))}"))

    # im2col + GEMM: cols (B*Ho*Wo, K) @ w.T (K, M) -> (B*Ho*Wo, M), y in NHWC
    cols = cuda.device_array((layer.B * layer.Ho * layer.Wo, layer.K), np.float32)
    bx, by = conv.IM2COL_BLOCK
    im2col = conv.im2col[(-(-cols.shape[1] // bx), -(-cols.shape[0] // by)), conv.IM2COL_BLOCK]
    filters = cuda.to_device(np.ascontiguousarray(operands.host_w.reshape(layer.M, -1).T)[None])
    products = [cuda.device_array((1, cols.shape[0], layer.M), np.float32) for _ in sets]
    gemm_grid, gemm_block = matmul.configuration(matmul.matmul_register_tiled, products[0].shape)
    gemm = matmul.matmul_register_tiled[gemm_grid, gemm_block]
    shaped = cols.reshape((1,) + cols.shape)

    def im2col_gemm(product, x):
        im2col(cols, x, layer.R, layer.S, layer.stride, layer.padding)
        gemm(product, shaped, filters)

    def nhwc_result(y):
        return np.ascontiguousarray(y.copy_to_host().reshape(layer.B, layer.Ho, layer.Wo, layer.M)
                                    .transpose(0, 3, 1, 2))

    for product in products:
        poison(product)
    cases.append(Case("im2col + `matmul_register_tiled`",
                      [functools.partial(im2col_gemm, p, x) for p, x in zip(products, operands.x)],
                      functools.partial(nhwc_result, products[0]), extra_bytes=cols.nbytes,
                      note="two launches; y in NHWC", kernel_launches=2))

    x_nhwc = [cuda.to_device(np.ascontiguousarray(operands.host_x.transpose(0, 2, 3, 1))) for _ in sets]
    w_nhwc = cuda.to_device(np.ascontiguousarray(operands.host_w.transpose(0, 2, 3, 1)))
    y_nhwc = [cuda.device_array((layer.B, layer.Ho, layer.Wo, layer.M), np.float32) for _ in sets]
    for y in y_nhwc:
        poison(y)
    for kernel in (conv.conv_implicit_gemm_nhwc, conv.conv_implicit_gemm_warp_tiled):
        grid, block = conv.configuration(kernel, y_nhwc[0].shape)
        configured = kernel[grid, block]
        cases.append(Case(kernel_label(kernel),
                          [functools.partial(configured, y, x, w_nhwc, layer.stride, layer.padding)
                           for y, x in zip(y_nhwc, x_nhwc)],
                          functools.partial(nhwc_result, y_nhwc[0]),
                          note=f"x, w and y in NHWC; grid {'x'.join(map(str, grid))}, blocks of "
                               f"{'x'.join(map(str, block))}"))
    return cases


# -- the reference: cuDNN through PyTorch, TF32 off ------------------------------------------------------
def tf32_off_torch(torch) -> str:
    """Turn TF32 off for PyTorch's float32 convolutions; what was set, in words."""
    cudnn = torch.backends.cudnn
    if hasattr(cudnn, "conv") and hasattr(cudnn.conv, "fp32_precision"):  # PyTorch 2.9 and later
        cudnn.conv.fp32_precision = "ieee"
        return f'torch.backends.cudnn.conv.fp32_precision = "{cudnn.conv.fp32_precision}"'
    cudnn.allow_tf32 = False
    return f"torch.backends.cudnn.allow_tf32 = {cudnn.allow_tf32}"


def cudnn_case(torch, operands: Operands, benchmark: bool) -> Case:
    """``torch.nn.functional.conv2d`` on numba's x and w (shared, not copied), with cuDNN's benchmark mode."""
    stream = torch.cuda.current_stream().cuda_stream
    if stream != 0:
        raise RuntimeError(f"torch works on stream {stream:#x}, not the default stream that is timed")
    layer = operands.layer
    xs = [torch.as_tensor(x, device="cuda") for x in operands.x]
    ws = [torch.as_tensor(w, device="cuda") for w in operands.w]
    for mine, theirs in [*zip(operands.x, xs), *zip(operands.w, ws)]:
        if theirs.data_ptr() != pointer(mine):
            raise RuntimeError("torch copied an array instead of sharing it")
    conv2d = torch.nn.functional.conv2d
    outputs = [None] * len(xs)

    def call(k):
        torch.backends.cudnn.benchmark = benchmark  # read at each call: the row sets its own mode
        outputs[k] = conv2d(xs[k], ws[k], stride=layer.stride, padding=layer.padding)

    call(0)  # with benchmark mode, this call times cuDNN's algorithms and caches the winner for the shape
    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    call(0)
    torch.cuda.synchronize()
    workspace = torch.cuda.max_memory_allocated() - before - ITEM * math.prod(layer.y_shape)
    return Case(CUDNN_ON if benchmark else CUDNN_OFF, [functools.partial(call, k) for k in range(len(xs))],
                lambda: outputs[0].cpu().numpy(), extra_bytes=max(0, workspace), cudnn=True,
                note="torch.nn.functional.conv2d on the same x and w")


def measure(case: Case, operands: Operands, samples: int, device: Device) -> Measurement:
    """Warm up (compile, first touch), check the first set's result, then time."""
    from gpucourse.run import timing  # noqa: PLC0415 (importing gpucourse picks the backend)

    for launch in case.launches:
        launch()
    cuda.synchronize()
    error = operands.error(case.result())
    limit = CUDNN_LIMIT if case.cudnn else tolerance(operands.layer.K)
    wrong = not error <= limit
    timed = timing.measure(case.launches, samples, case.kernel_launches, warmup=0)  # warmed up above
    ms = timed.seconds * 1e3
    note = case.note + (f"; relative error {error:.1e} > {limit:.1e}" if wrong else
                        f"; relative error {error:.1e}" if case.cudnn else "")
    if device.real and not timed.queued:
        note += "; the GPU was released before all launches were queued: time may include launch gaps"
    return Measurement(case.kernel, operands.layer, ms, case.extra_bytes, case.cudnn, note, wrong)


def measure_layer(layer: Layer, device: Device, samples: int, torch=None) -> list[Measurement]:
    """cuDNN (benchmark off, then on) first, then every kernel, at one layer."""
    operands = Operands.allocate(layer, buffer_sets(layer.bytes, device.l2_bytes))
    cases = [cudnn_case(torch, operands, benchmark) for benchmark in (False, True)] if torch else []
    measurements = []
    for case in [*cases, *kernel_cases(operands)]:
        m = measure(case, operands, samples, device)
        measurements.append(m)
        print(f"  {m.kernel:34} {layer.name:20} {m.ms:10.4g} ms {m.tflops:7.2f} TFLOP/s "
              f"{percent(fraction_of_cudnn(m, measurements)):>5} {extra_memory(m):>9} MiB extra"
              f"{'  WRONG' if m.wrong else ''}", flush=True)
    return measurements


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help=f"the two 3x3 layers at batch {QUICK_BATCH}, {QUICK_SAMPLES} samples, prints only")
    parser.add_argument("--samples", type=int, default=None, help=f"samples per median (default {SAMPLES})")
    parser.add_argument("--no-write", action="store_true", help="print the table only")
    add_time_budget(parser)
    options = parser.parse_args(argv)

    if without_gpu("conv.py"):
        return 0

    layers = quick_layers() if options.quick else resnet50_layers(BATCH)
    samples = options.samples or (QUICK_SAMPLES if options.quick else SAMPLES)
    os.environ["NVIDIA_TF32_OVERRIDE"] = "0"  # cuDNN and cuBLAS: never TF32, read when they load
    device = current_device()
    torch = reference_libraries().get("torch")
    if torch:
        references = ("`torch.nn.functional.conv2d` (cuDNN float32, NCHW), benchmark mode off and on, TF32 off: "
                      f"NVIDIA_TF32_OVERRIDE=0; {tf32_off_torch(torch)}")
    else:
        references = "none (PyTorch is not usable)"
    print(f"{device.name}: {device.sms} SMs; {peak_note(device)}\nreference: {references}", flush=True)

    budget = TimeBudget(options.seconds)
    measurements = []
    for layer in budget.rows(layers, label=lambda layer: layer.name, first={GOAL_LAYER}):
        measurements += measure_layer(layer, device, samples, torch)
    measurements.sort(key=lambda m: layers.index(m.layer))  # the goal's layer measured first, tabled in order
    found = versions({"torch": torch} if torch else {})
    if torch:
        found += f", cuDNN {torch.backends.cudnn.version()}"
    text = section(measurements, device, found, samples, references, budget.note("conv.py"))
    return finish(NAME, text, measurements, write=not options.quick and not options.no_write)


if __name__ == "__main__":
    sys.exit(main())
