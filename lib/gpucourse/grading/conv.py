"""Checks for module 4's kernels: im2col, the GEMM behind a convolution, tiled, depthwise and fused convolutions.

A launch plan fixes the grid, the block, the shapes, the stride and the padding; the check draws
random, non-uniform inputs, poisons the output (with a canary after it), launches
``kernel[grid, block](out, *inputs, *scalars)`` and compares with the spec computed in float64,
within the rounding of float32 sums (``REDUCTION_RTOL`` times the spec of the absolute values). A
test cell reads::

    check_conv(conv_tiled_kernel, conv_spec, output_tiles([(2, 3, 9, 11, 4, 3, 3)], stride=2, padding=1))

A wrong output is named as what it is: the output pixel ``(h, w)`` of image ``b`` and its channel,
or the row (output pixel) and column (channel and filter tap) of an im2col matrix, with the
expected and the computed value; when every wrong output's window overlaps the padding, the
message says so. Besides the trace's budgets, ``check_conv(..., loop_steps=...)`` bounds the work: the loop
iterations the course simulator runs for a launch.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Callable, Iterable, Sequence

import numpy as np

from ..kernels.conv import im2col_reference, output_size
from ..run import ptx, trace
from ..simulator import BudgetExceeded, EndlessLoop, KernelFault, step_budget
from .core import (POISONED, RETURNED, WRITE_GUARD_HINT, CheckFailed, _is_poison, blocks_needed, budget_list,
                   check_budgets, explain_failure, kernel_name, launch_on_copies, parameter_names, report, run_checked)
from .matmul import float32_only
from .runner import REDUCTION_RTOL, TOLERANCES, Launch, check_launches, expected_of, random_values

# What an element of ``out`` is, by the plan that made it
NCHW, NHWC, COLUMNS, FILTERS, INPUTS = "NCHW", "NHWC", "columns", "filters", "inputs"
ROWS_NHWC = "rows of NHWC"  # an im2col matrix (B*Ho*Wo, R*S*C) of NHWC x, a row per output pixel, k = (p, q, c)


@dataclass(frozen=True)
class ConvCase:
    """One launch: configuration, input shapes, the int arguments after them, and what ``out`` holds."""

    grid: tuple[int, ...]
    block: tuple[int, ...]
    inputs: tuple[tuple[int, ...], ...]
    scalars: tuple[int, ...]  # passed to the kernel after the arrays
    spec_scalars: tuple[int, ...]  # passed to the spec after the arrays
    out: tuple[int, ...]
    kind: str  # NCHW, NHWC (outputs), COLUMNS (an im2col matrix (C*R*S, B*Ho*Wo)), ROWS_NHWC (B*Ho*Wo, R*S*C),
    # FILTERS (M, C, R, S), INPUTS (B, C, H, W)
    geometry: tuple[int, ...]  # (B, C, H, W, R, S, stride, padding, Ho, Wo) of the convolution behind it
    product: bool = False  # a plain matrix product (`gemm_tiles`): no filter, stride or padding to name

    def describe(self) -> str:
        B, C, H, W, R, S, stride, padding, Ho, Wo = self.geometry
        shapes = ", ".join(str(s) for s in self.inputs)
        described = f"grid={self.grid}, block={self.block}, inputs {shapes} -> out {self.out}"
        if self.product:
            return described
        return f"{described} ({R}x{S} filter, stride {stride}, padding {padding})"

    def sizes(self) -> dict[str, int]:
        """The convolution's sizes by name: B, C, H, W, R, S, stride, padding, Ho, Wo, and M (the filters; the
        channels of a depthwise convolution; none for an im2col matrix)."""
        B, C, H, W, R, S, stride, padding, Ho, Wo = self.geometry
        named = dict(B=B, C=C, H=H, W=W, R=R, S=S, stride=stride, padding=padding, Ho=Ho, Wo=Wo)
        M = {NCHW: self.out[1], FILTERS: self.out[0], INPUTS: self.inputs[1][0], NHWC: C}.get(self.kind)
        return named if M is None else {**named, "M": M}


def _geometry(B, C, H, W, R, S, stride, padding) -> tuple[int, ...]:
    Ho, Wo = output_size(H, R, stride, padding), output_size(W, S, stride, padding)
    if Ho < 1 or Wo < 1:
        raise ValueError(f"a {R}x{S} filter does not fit in a {H}x{W} image with padding {padding}")
    return B, C, H, W, R, S, stride, padding, Ho, Wo


# ---------------------------------------------------------------- launch plans


def im2col_columns(shapes: Iterable[Sequence[int]], stride: int = 1, padding: int = 0,
                   block: tuple[int, int] = (32, 8)) -> list[ConvCase]:
    """im2col of NCHW ``x`` into ``cols`` of (C*R*S, B*Ho*Wo): a column per output pixel, a row per (c, p, q).

    Each shape is ``(B, C, H, W, R, S)``; the kernel is ``kernel(cols, x, R, S, stride, padding)``.
    ``threadIdx.x`` runs along the columns of ``cols``: ``grid = (ceil(B*Ho*Wo / bx), ceil(C*R*S / by))``.
    """
    cases = []
    for B, C, H, W, R, S in shapes:
        g = _geometry(B, C, H, W, R, S, stride, padding)
        rows, cols = C * R * S, B * g[8] * g[9]
        cases.append(ConvCase((blocks_needed(cols, block[0]), blocks_needed(rows, block[1])), tuple(block),
                              ((B, C, H, W),), (R, S, stride, padding), (R, S, stride, padding), (rows, cols),
                              COLUMNS, g))
    return cases


def nhwc_rows(shapes: Iterable[Sequence[int]], stride: int = 1, padding: int = 0,
              block: tuple[int, int] = (32, 4)) -> list[ConvCase]:
    """im2col of NHWC ``x`` into ``X`` of (B*Ho*Wo, R*S*C): a row per output pixel, columns ``k = (p, q, c)``.

    Each shape is ``(B, H, W, C, R, S)``; the kernel is ``kernel(X, x, R, S, stride, padding)``.
    ``threadIdx.x`` runs along ``k`` (channels fastest): ``grid = (ceil(R*S*C / bx), ceil(B*Ho*Wo / by))``.
    """
    cases = []
    for B, H, W, C, R, S in shapes:
        g = _geometry(B, C, H, W, R, S, stride, padding)
        rows, cols = B * g[8] * g[9], R * S * C
        cases.append(ConvCase((blocks_needed(cols, block[0]), blocks_needed(rows, block[1])), tuple(block),
                              ((B, H, W, C),), (R, S, stride, padding), (R, S, stride, padding), (rows, cols),
                              ROWS_NHWC, g))
    return cases


def gemm_tiles(shapes: Iterable[Sequence[int]], tile: int = 16) -> list[ConvCase]:
    """``y = w @ cols`` written as NCHW ``y``: ``w`` is (M, K), ``cols`` is (K, B*Ho*Wo), ``y`` is (B, M, Ho, Wo).

    Each shape is ``(B, M, Ho, Wo, K)``; the spec is ``spec(w, cols, B, Ho, Wo)``. One block of ``tile x tile`` threads per tile of the
    product, ``threadIdx.x`` along its columns (output pixels): ``grid = (ceil(B*Ho*Wo / tile), ceil(M / tile))``.
    """
    cases = []
    for B, M, Ho, Wo, K in shapes:
        N = B * Ho * Wo
        cases.append(ConvCase((blocks_needed(N, tile), blocks_needed(M, tile)), (tile, tile), ((M, K), (K, N)), (),
                              (B, Ho, Wo), (B, M, Ho, Wo), NCHW, (B, K, Ho, Wo, 1, 1, 1, 0, Ho, Wo), product=True))
    return cases


def output_tiles(shapes: Iterable[Sequence[int]], stride: int = 1, padding: int = 0, tile: int = 16) -> list[ConvCase]:
    """NCHW convolution, one block of ``tile x tile`` threads per ``tile x tile`` piece of an output channel.

    Each shape is ``(B, C, H, W, M, R, S)``; the kernel is ``kernel(y, x, w, stride, padding)`` with
    ``x`` (B, C, H, W), ``w`` (M, C, R, S) and ``y`` (B, M, Ho, Wo). ``threadIdx.x`` runs along
    ``w``, and layer ``z`` of the grid is image ``z // M``, channel ``z % M``:
    ``grid = (ceil(Wo / tile), ceil(Ho / tile), B * M)``.
    """
    cases = []
    for B, C, H, W, M, R, S in shapes:
        g = _geometry(B, C, H, W, R, S, stride, padding)
        Ho, Wo = g[8], g[9]
        cases.append(ConvCase((blocks_needed(Wo, tile), blocks_needed(Ho, tile), B * M), (tile, tile),
                              ((B, C, H, W), (M, C, R, S)), (stride, padding), (stride, padding), (B, M, Ho, Wo),
                              NCHW, g))
    return cases


def pooled_tiles(shapes: Iterable[Sequence[int]], stride: int = 1, padding: int = 0, tile: int = 16) -> list[ConvCase]:
    """Convolution, bias, ReLU and a 2x2 max-pool in one kernel: ``kernel(out, x, w, bias, stride, padding)``.

    Shapes as `output_tiles`; ``bias`` is (M,), ``out`` is (B, M, Ho // 2, Wo // 2), and one block of
    ``tile x tile`` threads per piece of a pooled channel: ``grid = (ceil(Wo/2 / tile), ceil(Ho/2 / tile), B * M)``.
    """
    cases = []
    for B, C, H, W, M, R, S in shapes:
        g = _geometry(B, C, H, W, R, S, stride, padding)
        Hp, Wp = g[8] // 2, g[9] // 2
        if Hp < 1 or Wp < 1:
            raise ValueError(f"a {g[8]}x{g[9]} output has no 2x2 window to pool")
        cases.append(ConvCase((blocks_needed(Wp, tile), blocks_needed(Hp, tile), B * M), (tile, tile),
                              ((B, C, H, W), (M, C, R, S), (M,)), (stride, padding), (stride, padding),
                              (B, M, Hp, Wp), NCHW, g))
    return cases


def depthwise_pixels(shapes: Iterable[Sequence[int]], stride: int = 1, padding: int = 0,
                     block: tuple[int, int] = (32, 8)) -> list[ConvCase]:
    """Depthwise NHWC convolution: ``kernel(y, x, k, stride, padding)``, ``x`` (B, H, W, C), ``k`` (R, S, C).

    Each shape is ``(B, H, W, C, R, S)``; ``y`` is (B, Ho, Wo, C). ``threadIdx.x`` runs along the
    channels, ``threadIdx.y`` along the output pixels (b, h, w) in order:
    ``grid = (ceil(C / bx), ceil(B*Ho*Wo / by))``.
    """
    cases = []
    for B, H, W, C, R, S in shapes:
        g = _geometry(B, C, H, W, R, S, stride, padding)
        Ho, Wo = g[8], g[9]
        cases.append(ConvCase((blocks_needed(C, block[0]), blocks_needed(B * Ho * Wo, block[1])), tuple(block),
                              ((B, H, W, C), (R, S, C)), (stride, padding), (stride, padding), (B, Ho, Wo, C),
                              NHWC, g))
    return cases


def filter_gradients(shapes: Iterable[Sequence[int]], stride: int = 1, padding: int = 0,
                     block: tuple[int, int] = (32, 4)) -> list[ConvCase]:
    """The weight gradient: ``kernel(dw, dy, x, stride, padding)``, ``dy`` (B, M, Ho, Wo), ``x`` (B, C, H, W).

    Each shape is ``(B, C, H, W, M, R, S)``; ``dw`` is (M, C, R, S) and the spec is
    ``spec(dy, x, R, S, stride, padding)``. One thread per element of ``dw``, ``threadIdx.x``
    along ``k = (c, p, q)`` and ``threadIdx.y`` along the filters:
    ``grid = (ceil(C*R*S / bx), ceil(M / by))``.
    """
    cases = []
    for B, C, H, W, M, R, S in shapes:
        g = _geometry(B, C, H, W, R, S, stride, padding)
        cases.append(ConvCase((blocks_needed(C * R * S, block[0]), blocks_needed(M, block[1])), tuple(block),
                              ((B, M, g[8], g[9]), (B, C, H, W)), (stride, padding), (R, S, stride, padding),
                              (M, C, R, S), FILTERS, g))
    return cases


def input_gradients(shapes: Iterable[Sequence[int]], stride: int = 1, padding: int = 0, tile: int = 16) -> list[ConvCase]:
    """The input gradient: ``kernel(dx, dy, w, stride, padding)``, ``dy`` (B, M, Ho, Wo), ``w`` (M, C, R, S).

    Each shape is ``(B, C, H, W, M, R, S)``; ``dx`` is (B, C, H, W) and the spec is
    ``spec(dy, w, H, W, stride, padding)``. One block of ``tile x tile`` threads per piece of an
    input channel, ``threadIdx.x`` along ``w``, layer ``z`` of the grid image ``z // C``, channel ``z % C``:
    ``grid = (ceil(W / tile), ceil(H / tile), B * C)``.
    """
    cases = []
    for B, C, H, W, M, R, S in shapes:
        g = _geometry(B, C, H, W, R, S, stride, padding)
        cases.append(ConvCase((blocks_needed(W, tile), blocks_needed(H, tile), B * C), (tile, tile),
                              ((B, M, g[8], g[9]), (M, C, R, S)), (stride, padding), (H, W, stride, padding),
                              (B, C, H, W), INPUTS, g))
    return cases


# ---------------------------------------------------------------- the check


def _window_overlaps_padding(kase: ConvCase, h: int, w: int) -> bool:
    B, C, H, W, R, S, stride, padding, Ho, Wo = kase.geometry
    top, left = h * stride - padding, w * stride - padding
    return top < 0 or left < 0 or top + R > H or left + S > W


def element_name(kase: ConvCase, index: tuple[int, ...]) -> str:
    """What ``out[index]`` is, in the convolution's terms."""
    B, C, H, W, R, S, stride, padding, Ho, Wo = kase.geometry
    if kase.kind == COLUMNS:
        k, n = index
        return (f"row k={k} (channel c={k // (R * S)}, filter tap p={k // S % R}, q={k % S}), column n={n} "
                f"(image b={n // (Ho * Wo)}, output pixel h={n // Wo % Ho}, w={n % Wo})")
    if kase.kind == ROWS_NHWC:
        n, k = index
        return (f"row n={n}: image {n // (Ho * Wo)}, output pixel ({n // Wo % Ho}, {n % Wo}); column k={k}: "
                f"tap ({k // (S * C)}, {k // C % S}), channel {k % C}")
    if kase.kind == FILTERS:
        m, c, p, q = index
        return f"filter m={m}, channel c={c}, tap p={p}, q={q}"
    if kase.kind == INPUTS:
        b, c, h, w = index
        return f"image b={b}, input pixel h={h}, w={w}, channel c={c}"
    if kase.kind == NHWC:  # a depthwise convolution: output channel c is input channel c
        b, h, w, c = index
        return f"image b={b}, output pixel h={h}, w={w}, channel c={c}"
    b, m, h, w = index
    return f"image b={b}, output pixel h={h}, w={w}, channel m={m}"


def _unwritten(values: np.ndarray) -> np.ndarray:
    """Which float ``values`` look never written: the check's NaN poison, or a denormal, what leftovers of
    ``cuda.device_array``'s memory (a few bits set) read as."""
    values = np.asarray(values)
    if values.dtype.kind != "f":
        return np.zeros(values.shape, bool)
    return np.isnan(values) | ((values != 0) & (np.abs(values) < np.finfo(values.dtype).tiny))


LEFTOVER = " (a denormal: memory nothing wrote, as cuda.device_array leaves it)"
UNWRITTEN = ("usually a grid too small to cover the output (ceil(N / threads) blocks, not N // threads), or a guard "
             "or an index that skips them (threadIdx.x and threadIdx.y swapped, a wrong Ho or Wo)")


def explain(name: str, kase: ConvCase, got: np.ndarray, expected: np.ndarray, bad: np.ndarray) -> str:
    first = tuple(int(i) for i in bad[0])
    value = got[first]
    lines = [
        f"{name} gave a wrong result with {kase.describe()}:",
        f"  out[{', '.join(map(str, first))}] ({element_name(kase, first)}) should be {expected[first].item()!r}, "
        f"got {value.item()!r}" + (POISONED if _is_poison(value) else LEFTOVER if _unwritten(value) else ""),
        f"  {len(bad)} of {got.size} elements are wrong",
    ]
    unwritten = int(np.count_nonzero(_unwritten(got[tuple(bad.T)])))
    if unwritten and kase.kind != ROWS_NHWC:  # an NHWC im2col matrix's diagnosis says which cells and why
        said = "they were" if unwritten == len(bad) else f"{unwritten} of them were"
        lines.append(f"  {said} never written: {UNWRITTEN}")
    elif kase.kind in (NCHW, NHWC) and kase.geometry[7] > 0:
        hw = [(int(i[2]), int(i[3])) if kase.kind == NCHW else (int(i[1]), int(i[2])) for i in bad]
        if all(_window_overlaps_padding(kase, h, w) for h, w in hw):
            lines.append("  every wrong output's window overlaps the padding: inputs outside the image count as 0 "
                         "(and must not be read)")
    return "\n".join(lines)


HO_WO = "Ho = (H + 2·padding − R) // stride + 1 and Wo = (W + 2·padding − S) // stride + 1"  # output size

# What a guard alone does not fix, by what ``out`` holds: the index a thread computes from its flat position
_INDEX_HINTS = {
    ROWS_NHWC: "its (b, h, v) from n = (b·Ho + h)·Wo + v, with Ho and Wo from the formula for the stride and "
               "padding, or its (p, q, c) from k = (p·S + q)·C + c",
    COLUMNS: "its (c, p, q) from k = (c·R + p)·S + q (p = k // S % R, q = k % S) or its (b, h, v) from "
             "n = (b·Ho + h)·Wo + v, with Ho and Wo from the formula for the stride and padding",
    FILTERS: "its (c, p, q) from k = (c·R + p)·S + q: p = k // S % R, q = k % S (a swap shows only when R ≠ S)",
    NHWC: "its (b, h, v) from n = (b·Ho + h)·Wo + v, with Ho and Wo from y's shape (not x's: they differ "
          "when the stride is 2 or the padding is not 1)",
    NCHW: "its output pixel from the grid, with Ho and Wo from the output's shape (not the input's: they "
          "differ when the stride is 2 or the padding is not 1)",
    INPUTS: "its input pixel from the grid",
}


def _size_hint(kase: ConvCase) -> str:
    """This layer's Ho and Wo, and where they come from: a line."""
    Ho, Wo = kase.geometry[8:]
    if kase.product:
        return f"\n  Here Ho = {Ho} and Wo = {Wo}: y.shape[2] and y.shape[3]."
    return f"\n  This layer has Ho = {Ho}, Wo = {Wo}: {HO_WO}."


def _batch_hint(kase: ConvCase, b: int, pixels: str, column: str = "v") -> str:
    """For a read of image ``b`` past the batch: the flat pixel index was split with a wrong Ho or Wo."""
    B, Ho, Wo = kase.geometry[0], kase.geometry[8], kase.geometry[9]
    return (f"\n  Image b = {b} is past the batch of {B}: the {pixels} are n = (b·Ho + h)·Wo + {column}, and this layer "
            f"has\n  Ho = {Ho}, Wo = {Wo}: {HO_WO}.")


def _x_read_past(message: str) -> tuple[int, ...] | None:
    """The index of a read of `x` out of bounds that ``message`` reports (4-D), or None."""
    found = re.search(r"index (-?\d+), (-?\d+), (-?\d+), (-?\d+) is out of bounds for `x`", message)
    return tuple(int(i) for i in found.groups()) if found else None


def explain_launch_failure(message: str, kase: ConvCase, out_name: str, relaunch: Callable | None = None) -> str:
    """Add to a failed launch's message what the generic advice leaves out for a convolution's kernels.

    ``relaunch()``, given, runs the launch again inside ``trace()`` and returns the trace: for a read of shared
    memory that nothing wrote, what the block did copy tells a patch too small from threads that returned early.
    """
    if message.endswith(f"{WRITE_GUARD_HINT} `{out_name}` needs a guard."):
        message += (f" If it has one, the index it computed is wrong: check {_INDEX_HINTS[kase.kind]}; "
                    "the checks use other strides and paddings, and filters that are not square.")
        if kase.kind in (NCHW, NHWC, COLUMNS, ROWS_NHWC):  # an output pixel's index: Ho and Wo
            message += _size_hint(kase)
    read = _x_read_past(message)
    if read and kase.kind in (COLUMNS, ROWS_NHWC) and read[0] >= kase.geometry[0]:
        message += _batch_hint(kase, read[0], *(("columns", "v") if kase.kind == COLUMNS else ("rows", "w")))
    elif read and kase.kind == ROWS_NHWC:
        message += _nhwc_read_hint(read, kase)
    if "which nothing has written (shared memory" in message:
        message += _unwritten_shared_hint(message, kase, relaunch)
    return message


GEMM_TILES = ("Every step copies both tiles whole, 0 past the edge of the matrix (`w[m, k] if m < M and k < K else "
              "float32(0)`): a load under an `if` with no `else` leaves those elements unwritten, and so does a thread "
              "that returns before the barriers (every thread loads its elements and meets every barrier; guard only "
              "the store to y).")


def _unwritten_shared_hint(message: str, kase: ConvCase, relaunch: Callable | None) -> str:
    """For a read of a shared element nothing wrote: a product's tile not copied whole (`GEMM_TILES`), the patch
    copied smaller than what is read, or threads returned before copying their share."""
    returned = (f"\n  {GEMM_TILES}" if kase.product else
                "" if RETURNED in message else  # the simulator named the threads that returned, and where
                "\n  If threads past the edge of the output return (or skip the copy) before the barrier, "
                "their share of the shared array is never written: every thread of the block copies its "
                "elements and meets every barrier; guard only the final store.")
    found = re.search(r"of block blockIdx=\((\d+), (\d+), (\d+)\) reads `(\w+)\[([-\d, ]+)\]`, which nothing", message)
    recorded = relaunch() if found and relaunch else None
    if not recorded or not len(recorded):
        return returned
    launch = recorded.last
    name, index = found.group(4), tuple(int(i) for i in found.group(5).split(","))
    try:
        array = launch.array(name)
    except KeyError:
        return returned
    block = launch.geometry.block_number(tuple(int(found.group(k)) for k in (1, 2, 3)))
    written = [elements[blocks == block] for kind, _, elements, blocks, _, _ in array.events if kind == "write"]
    written = np.concatenate(written) if written else np.zeros(0, np.int64)
    if not written.size or len(index) != len(array.shape):
        return returned
    extent = [int(axis.max()) + 1 for axis in np.unravel_index(written, array.shape)]
    if all(i < e for i, e in zip(index, extent)):
        return returned
    copied = ", ".join(f"0:{e}" for e in extent)
    past = f"\n  The block copied `{name}[{copied}]` (what its threads wrote) and reads `{name}{list(index)}`, past it"
    if kase.product:
        return f"{past}. {GEMM_TILES}"
    hint = f"{past}: the patch it copies is smaller than what its threads read."
    if kase.kind == NCHW and len(index) == 2:
        tile, (R, S, stride) = kase.block[0], kase.geometry[4:7]
        hint += (f" A block of {tile} x {tile} outputs at stride {stride} reads ((TILE − 1)·stride + R) x "
                 f"((TILE − 1)·stride + S) inputs, {(tile - 1) * stride + R} x {(tile - 1) * stride + S} here: the "
                 "stride belongs in the patch's size and in the copy's row width.")
    return hint


def wrong_outputs(got: np.ndarray, expected: np.ndarray, scale: np.ndarray, dtype) -> np.ndarray:
    """Indices where ``got`` is further from the float64 ``expected`` than float sums of terms of ``scale`` round."""
    dtype = np.dtype(dtype)
    tolerance = REDUCTION_RTOL.get(dtype, 1e-5) * scale + TOLERANCES.get(dtype, (1e-5, 1e-6))[1]
    with np.errstate(invalid="ignore"):
        return np.argwhere(~(np.abs(got.astype(np.float64) - expected) <= tolerance))


def check_conv(
    kernel,
    spec: Callable[..., np.ndarray],
    cases: Iterable[ConvCase],
    *,
    dtype=np.float32,
    seed: int = 0,
    name: str | None = None,
    quiet: bool = False,
    budget=None,
    diagnose: Callable[[ConvCase, list, np.ndarray], str] | None = None,
    loop_steps: Callable[..., int] | None = None,
) -> None:
    """Check ``kernel[grid, block](out, *inputs, *scalars)`` against ``spec(*inputs, *spec_scalars)`` for every case.

    Cases come from a launch plan (`im2col_columns`, `nhwc_rows`, `gemm_tiles`, `output_tiles`, `pooled_tiles`,
    `depthwise_pixels`, `filter_gradients`, `input_gradients`); ``budget`` (one callable or a list) is called with the
    launch's trace once the result is right; ``diagnose(case, inputs, got)``, given, says what a wrong ``got`` is
    (a line, or empty; an im2col matrix of `im2col_columns` has one by default).

    ``loop_steps``, given, is a work budget, applied once the result is right: ``loop_steps(**sizes)`` (the case's
    `ConvCase.sizes`, by name: ``M``, ``R``, ``S``, ``Ho``, ...) is the most loop iterations the launch may run,
    counted by the course simulator (`gpucourse.simulator.step_budget`), which runs all the launch's threads in
    step: an iteration counts once however many threads take it. Its docstring, if any, says in the message what
    the limit stands for.
    """
    __tracebackhide__ = True
    dtype = np.dtype(dtype)
    name = name or kernel_name(kernel)
    parameters = parameter_names(kernel)
    labels = [parameters[0] if parameters else "out"] + [f"`{p}`" for p in parameters[1:]]
    budgets = budget_list(budget)
    rng = np.random.default_rng(seed)
    cases = list(cases)
    for kase in cases:
        inputs = [random_values(rng, shape, dtype) for shape in kase.inputs]
        expected = expected_of(spec, dtype, *inputs, *kase.spec_scalars, shape=kase.out, expects="the case expects")
        scale = np.abs(expected_of(spec, dtype, *[np.abs(x) for x in inputs], *kase.spec_scalars))
        described = kase.describe()
        arguments = [*inputs, *kase.scalars]

        def relaunch(kase=kase, arguments=arguments):
            with trace() as recorded:
                try:
                    launch_on_copies(kernel, kase.grid, kase.block, kase.out, dtype, arguments)
                except KernelFault:  # the fault the first launch stopped at: the trace holds what came before it
                    pass
            return recorded

        try:
            got, recorded = run_checked(kernel, name, described, kase.grid, kase.block, kase.out, dtype, arguments,
                                        labels, budgets)
        except CheckFailed as failed:
            raise CheckFailed(explain_launch_failure(str(failed), kase, labels[0], relaunch)) from None
        bad = wrong_outputs(got, expected, scale, dtype)
        if len(bad):
            diagnosis = diagnose or (_diagnose_columns if kase.kind == COLUMNS else None)
            found = diagnosis(kase, inputs, got) if diagnosis else ""
            raise CheckFailed(explain(name, kase, got, expected, bad) + (f"\n  {found}" if found else ""))
        check_budgets(name, described, budgets, recorded, parameters)
        if loop_steps is not None:
            _check_loop_steps(kernel, name, kase, dtype, arguments, loop_steps)
    report(name, len(cases), quiet)


def _check_loop_steps(kernel, name: str, kase: ConvCase, dtype, arguments: list, at_most: Callable[..., int]) -> None:
    """The launch again, on the course simulator, stopped after ``at_most(**sizes)`` loop iterations: fail if it
    does not finish within them."""
    sizes = kase.sizes()
    limit = int(at_most(**sizes))
    try:
        with trace() as recorded, step_budget(limit):
            launch_on_copies(kernel, kase.grid, kase.block, kase.out, dtype, arguments)
    except EndlessLoop:
        why = " ".join((at_most.__doc__ or "").split())
        shown = ", ".join(f"{k} = {v}" for k, v in sizes.items() if k in ("M", "R", "S", "Ho", "Wo"))
        raise CheckFailed(
            f"{name} is correct but over its budget with {kase.describe()}:\n  its loops ran more than {limit} "
            f"iterations ({shown}; the course simulator runs all threads together and counts an iteration once, "
            f"however many threads take it){': ' + why if why else ''}.") from None
    if not len(recorded):
        raise CheckFailed(f"{name} ran, but not on the course simulator, so its loop iterations cannot be counted: "
                          "define it in a notebook cell or a .py file.")


def check_conv_function(
    function: Callable[..., np.ndarray],
    spec: Callable[..., np.ndarray],
    shapes: Iterable[Sequence[int]],
    *,
    stride: int = 1,
    padding: int = 0,
    seed: int = 0,
    quiet: bool = False,
    kernels: Sequence = (),
) -> None:
    """Check a host function ``function(x, w, stride, padding) -> y`` (NCHW) against ``spec(x, w, stride, padding)``.

    Each shape is ``(B, C, H, W, M, R, S)``; ``x`` and ``w`` are random float32 NumPy arrays. Each call runs on the
    course simulator, traced: a right ``y`` must also come from the device, the function launching a kernel (one
    that computes ``y`` with NumPy or with the spec does not) and every kernel of ``kernels`` (the kernels or their
    names) at least once.
    """
    __tracebackhide__ = True
    name = getattr(function, "__name__", "function")
    required = [k if isinstance(k, str) else kernel_name(k) for k in kernels]
    rng = np.random.default_rng(seed)
    cases = output_tiles(shapes, stride, padding)
    for kase in cases:
        x, w = (random_values(rng, shape, np.float32) for shape in kase.inputs)
        expected = expected_of(spec, np.float32, x, w, stride, padding)
        scale = np.abs(expected_of(spec, np.float32, np.abs(x), np.abs(w), stride, padding))
        call = f"{name}(x of shape {x.shape}, w of shape {w.shape}, stride={stride}, padding={padding})"
        try:
            with trace() as launched:
                got = function(x, w, stride, padding)
        except Exception as exc:
            raise CheckFailed(_explain_function_failure(function, name, call, exc, kase)) from None
        got = np.asarray(got)
        if got.shape != expected.shape:
            raise CheckFailed(f"{call} returned an array of shape {got.shape}, not {expected.shape}")
        bad = wrong_outputs(got, expected, scale, np.float32)
        if len(bad):
            raise CheckFailed(explain(call, kase, got, expected, bad).replace(f" with {kase.describe()}", ""))
        _check_launched(name, call, [launch.kernel for launch in launched.launches], required)
    report(name, len(cases), quiet, unit="call")


def _check_launched(name: str, call: str, launched: list[str], required: list[str]) -> None:
    """A host function's launches: at least one, and each of ``required`` among them."""
    wanted = " and ".join(f"`{k}`" for k in required) or "your kernels"
    if not launched:
        raise CheckFailed(f"{call} launched no kernel: it computed y on the host (with NumPy, or by calling a "
                          f"spec). The exercise computes it on the device: launch {wanted}.")
    missing = [k for k in required if k not in launched]
    if missing:
        ran = ", ".join(f"`{k}`" for k in dict.fromkeys(launched))
        raise CheckFailed(f"{call} launched {ran} but not {' or '.join(f'`{k}`' for k in missing)}: the exercise "
                          f"computes y with {wanted}, each launched on the device, not with NumPy on the host.")


def _explain_function_failure(function, name: str, call: str, exc: BaseException, kase: ConvCase) -> str:
    """Why a host function's call failed, in terms of the kernel that failed inside it (its own output array), with
    a hint for a flat pixel index split with a wrong Ho or Wo and for an array passed with the wrong shape."""
    detail = str(exc)
    launched = re.search(r"kernel `(\w+)`", detail)
    kernel = getattr(function, "__globals__", {}).get(launched.group(1)) if launched else None
    out_name = (parameter_names(kernel) or ["y"])[0] if kernel is not None else "y"
    unpacked = re.search(r"wrong tuple length.*?expected (\d+), got (\d+)", detail)
    if unpacked:
        expected, dimensions = unpacked.groups()
        where = f"kernel `{launched.group(1)}`" if launched else "a kernel"
        line = re.search(r"\n *([^\n]*?)\s*=\s*(\w+)\.shape\s*\n\s*\^", detail)
        if line:
            names, array = line.groups()
            fix = "pass w.reshape(M, C*R*S)" if array == "w" else f"reshape `{array}` on the host"
            said = f"`{names} = {array}.shape` needs a {expected}-D {array}, got a {dimensions}-D one: {fix}"
        else:
            said = (f"it unpacks the shape of a {dimensions}-D array into {expected} names: reshape that array on the "
                    f"host")
        return (f"{name} failed with {call}:\n  {type(exc).__name__}: in {where}, {said} "
                "(a device array keeps the shape of the host array it was copied from).")
    message = explain_failure(name, call, exc, out_name=out_name)
    read = _x_read_past(detail)
    if read and read[0] >= kase.geometry[0]:
        message += _batch_hint(kase, read[0], "output pixels")
    return message


# ---------------------------------------------------------------- budgets


def halo_tile_reads(name: str = "x", tile: int = 16, stride: int = 1):
    """A budget for a tiled convolution: each thread reads ``name`` at most ``C * ceil(patch / tile**2)`` times.

    A block of ``tile x tile`` threads needs a patch of ``((tile-1)*stride + R) x ((tile-1)*stride + S)``
    inputs of each channel, the tile and its halo: copied once into shared memory, its threads
    share the copying. A thread that reads its own ``C*R*S`` inputs is over the budget, and so is a copy in
    two loops over the patch's rows and columns stepping by the block's size, which the message tells apart.
    """

    def budget(t):
        C = t.array(name).shape[1]
        R, S = t.array("w").shape[2:]
        rows, width = (tile - 1) * stride + R, (tile - 1) * stride + S
        patch, share = rows * width, blocks_needed(rows * width, tile * tile)
        reads = t.reads_per_thread(name)
        worst = int(reads.max())
        if worst <= C * share:
            return
        said = (f"{t.kernel}: {t.geometry.thread_name(int(reads.argmax()))} read `{name}` {worst} times, more than "
                f"{C * share}: per channel the block's {tile * tile} threads copy the {patch} inputs of its tile and "
                f"halo into shared memory once, {share} each")
        if _copies_a_grid(t, name, int(reads.argmax())):
            down, across = blocks_needed(rows, tile), blocks_needed(width, tile)
            raise BudgetExceeded(
                f"{said}. Two loops over the patch's rows and columns, stepping by blockDim, share them unevenly: a "
                f"thread gets up to {down} of its {rows} rows and {across} of its {width} columns, {down * across} "
                f"inputs per channel ({C} channels here). The flat copy spreads them: thread t = ty·{tile} + tx "
                f"copies elements e = t, t + {tile * tile}, ... of the patch (row e // width, column e % width)")
        raise BudgetExceeded(f"{said}, and compute from there")

    return budget


def _copies_a_grid(t, name: str, lane: int) -> bool:
    """Whether thread ``lane`` read, in an image channel of NCHW ``name``, a grid of inputs blockDim.y rows and
    blockDim.x columns apart: what two copy loops over a patch's rows and columns, stepping by blockDim, read."""
    array = t.array(name)
    lanes, elements = array.accesses("read")
    b, c, i, j = np.unravel_index(elements[lanes == lane], array.shape)
    mine = (b == b[0]) & (c == c[0])
    rows, columns = np.unique(i[mine]), np.unique(j[mine])
    cells = len(np.unique(i[mine] * array.shape[3] + j[mine]))
    bx, by, _ = t.geometry.block
    return (1 < cells == rows.size * columns.size and not np.any(np.diff(rows) % by)
            and not np.any(np.diff(columns) % bx))


# ---------------------------------------------------------------- the implicit GEMM's loader (assignment 4)

LOADER_TABLES = ("pixel_base", "pixel_h", "pixel_w", "tap_offset", "tap_h", "tap_w")
LOADER_INTEGER_BUDGET = 80  # integer instructions per element: a loader from tables compiles to about 50


def check_loader(kernel, tables: Callable, shapes: Iterable[Sequence[int]], *, stride: int = 1, padding: int = 0,
                 block: tuple[int, int] = (32, 8), budget: bool = True, seed: int = 0, quiet: bool = False) -> None:
    """An implicit-GEMM loader from precomputed tables, and (``budget``) its integer budget.

    ``tables(B, C, H, W, R, S, stride, padding)`` returns the 6 arrays of `LOADER_TABLES`, three of one entry per
    output pixel ``n = (b, h, v)`` and three per tap ``k = (c, p, q)``;
    ``kernel[grid, block](cols, x, *tables, H, W)`` with ``x`` the NCHW input flattened must write the im2col
    matrix ``cols`` (C*R*S, B*Ho*Wo), ``grid`` as `im2col_columns`. Bit for bit (a copy), and, once right, at most
    `LOADER_INTEGER_BUDGET` integer instructions and no integer division or remainder in the kernel's PTX.
    """
    __tracebackhide__ = True
    name = kernel_name(kernel)
    table_name = getattr(tables, "__name__", "tables")
    rng = np.random.default_rng(seed)
    cases = im2col_columns(shapes, stride, padding, block)
    for kase in cases:
        B, C, H, W, R, S, _, _, Ho, Wo = kase.geometry
        call = f"{table_name}({B}, {C}, {H}, {W}, {R}, {S}, {stride}, {padding})"
        try:
            made = tables(B, C, H, W, R, S, stride, padding)
        except Exception as exc:
            raise CheckFailed(explain_failure(table_name, call, exc, out_name="tables")) from None
        made = list(made) if isinstance(made, (tuple, list)) else [made]
        lengths = [B * Ho * Wo] * 3 + [C * R * S] * 3
        if len(made) != len(LOADER_TABLES):
            raise CheckFailed(f"{call} returned {len(made)} arrays, not the {len(LOADER_TABLES)} tables "
                              f"{', '.join(LOADER_TABLES)}")
        for label, table, length in zip(LOADER_TABLES, made, lengths):
            table = np.asarray(table)
            if table.shape != (length,) or table.dtype.kind not in "iu":
                entries = "" if table.shape == (length,) else (
                    f"\n  One entry per output pixel, B·Ho·Wo = {B}·{Ho}·{Wo}: {HO_WO}." if label.startswith("pixel")
                    else f"\n  One entry per tap, C·R·S = {C}·{R}·{S}.")
                raise CheckFailed(f"{call}: `{label}` should be a 1-D integer array of {length} entries, got "
                                  f"{table.dtype} of shape {table.shape}{entries}")
        made = [np.asarray(t, np.int32) for t in made]
        x = random_values(rng, (B, C, H, W), np.float32)
        expected = im2col_reference(x, R, S, stride, padding).T.astype(np.float32)
        described = f"{kase.describe()}, tables from {call}"
        got, _ = run_checked(kernel, name, described, kase.grid, kase.block, kase.out, np.float32,
                             [x.reshape(-1), *made, H, W], ["cols", "`x`", *(f"`{t}`" for t in LOADER_TABLES)], [])
        bad = wrong_outputs(got, expected, np.abs(expected), np.float32)
        if len(bad):
            raise CheckFailed(explain(name, kase, got, expected, bad))
        if budget:
            _integer_budget(kernel, name, [got, x.reshape(-1), *made, H, W])
    report(name, len(cases), quiet)


def _integer_budget(kernel, name: str, arguments: list) -> None:
    ptx.check_compiles(kernel, arguments)
    found = ptx.integer_operations(kernel.py_func)
    if found is None:
        raise CheckFailed(f"{name}: cannot check its integer budget, the kernel was not compiled to PTX "
                          "(NVVM missing, or GPUCOURSE_PTX_CHECK=off).")
    divisions = sum(n for op, n in found.items() if op.startswith(("div.", "rem.")))
    total = sum(found.values())
    if divisions or total > LOADER_INTEGER_BUDGET:
        listed = ", ".join(f"{n} {op}" for op, n in sorted(found.items(), key=lambda item: -item[1])[:6])
        raise CheckFailed(f"{name} is correct but over its budget: {total} integer instructions per element "
                          f"({divisions} divisions or remainders; at most {LOADER_INTEGER_BUDGET}, none of them "
                          f"a division) in its PTX: {listed}, ... The tables hold every quotient and remainder: "
                          "a thread adds a pixel's entry to a tap's and compares with H and W.")


# ---------------------------------------------------------------- lecture 4's puzzle: a strided 1-D convolution


def conv1d_reference(x: np.ndarray, w: np.ndarray, stride: int, padding: int) -> np.ndarray:
    """``y[o] = sum_t w[t] * x[o * stride - padding + t]``, zero outside ``x`` (float64)."""
    padded = np.pad(x.astype(np.float64), padding)
    return np.lib.stride_tricks.sliding_window_view(padded, w.size)[::stride] @ w


def check_conv1d(kernel, stride: int = 2, padding: int = 1, sizes: Iterable[tuple[int, int]] = ((1, 3), (2, 3),
                 (70, 3), (101, 5)), threads: Iterable[int] = (32, 64), quiet: bool = False) -> None:
    """``kernel[ceil(n_out / T), T](y, x, w)``: `conv1d_reference` of ``x`` (n,) with ``w`` (R,), one thread per
    output, for each ``(n, R)`` of ``sizes`` and each ``T`` of ``threads``, in float32 arithmetic only."""
    __tracebackhide__ = True
    rng = np.random.default_rng(0)

    def launches():
        for n, R in sizes:
            x, w = random_values(rng, (n,), np.float32), random_values(rng, (R,), np.float32)
            expected = expected_of(conv1d_reference, np.float32, x, w, stride, padding)
            scale = expected_of(conv1d_reference, np.float32, np.abs(x), np.abs(w), stride, padding)
            for t in threads:
                yield Launch((blocks_needed(expected.size, t),), (t,), f"x of {n}, w of {R} -> y of {expected.size}",
                             [x, w], expected, scale)

    try:
        check_launches(kernel, launches(), dtype=np.float32, name=None, quiet=quiet, budget=float32_only())
    except CheckFailed as failed:
        raise CheckFailed(str(failed) + _diagnose_conv1d(kernel, stride, padding)) from None


def _conv1d_model(x, w, stride, padding, out, step=None, shift=True, taps=None) -> np.ndarray:
    """``out`` outputs as a kernel's indexing makes them: windows ``step`` apart (the stride unless given), the
    padding shift or not, the first ``taps`` taps only."""
    step = stride if step is None else step
    o, t = np.arange(out)[:, None], np.arange(w.size if taps is None else min(taps, w.size))[None, :]
    i = o * step - padding * shift + t
    return np.where((i >= 0) & (i < x.size), x[np.clip(i, 0, x.size - 1)], 0.0) @ w[:t.size].astype(np.float64)


def _diagnose_conv1d(kernel, stride: int, padding: int) -> str:
    """After a failed check: a launch on 70 inputs and 5 taps compared with the usual mistakes; a line or ""."""
    rng = np.random.default_rng(1)
    x, w = random_values(rng, (70,), np.float32), random_values(rng, (5,), np.float32)
    out = output_size(x.size, w.size, stride, padding)
    try:
        got = launch_on_copies(kernel, blocks_needed(out, 32), 32, (out,), np.float32, [x, w])[0]
    except Exception:  # the check's message already says why it cannot run
        return ""
    models = [(dict(step=1), f"the stride is missing: output o's window starts at x[o·{stride} − {padding}]"),
              (dict(shift=False), f"the padding shift is missing: output o's window starts at x[o·{stride} − "
                                  f"{padding}], not x[o·{stride}]"),
              (dict(taps=3), "only 3 taps are summed: loop over all len(w) taps (w has 5 in this launch)")]
    for changed, said in models:
        model = _conv1d_model(x.astype(np.float64), w, stride, padding, out, **changed)
        if np.allclose(got, model, rtol=1e-4, atol=1e-3):
            return "\n  It looks as if " + said + "."
    return ""


# ---------------------------------------------------------------- lecture 4's puzzle: the NHWC loader's cells


def im2col_nhwc_reference(x: np.ndarray, R: int, S: int, stride: int, padding: int) -> np.ndarray:
    """The im2col matrix of NHWC ``x`` (B, H, W, C) in float64: (B*Ho*Wo, R*S*C), a row per output pixel, columns
    ``k = (p, q, c)`` with ``c`` fastest."""
    return im2col_reference(np.transpose(x, (0, 3, 1, 2)), R, S, stride, padding).reshape(
        -1, np.shape(x)[3], R * S).transpose(0, 2, 1).reshape(-1, R * S * np.shape(x)[3])


def _nhwc_cells(x, R, S, stride, padding, Ho, Wo, order="pqc", step=None, shift=True) -> np.ndarray:
    """Cells of the im2col matrix of NHWC ``x`` as a kernel's index arithmetic makes them (float64, NaN where it would
    read past the batch): rows split with ``Ho`` and ``Wo``, columns in ``order``, windows ``step`` apart (the
    stride unless given), the padding shift or not."""
    B, H, W, C = x.shape
    n = np.arange(B * output_size(H, R, stride, padding) * output_size(W, S, stride, padding))[:, None]
    k = np.arange(R * S * C)[None, :]
    b, ho, wo = n // (Ho * Wo), n // Wo % Ho, n % Wo
    p, q, c = (k // (S * C), k // C % S, k % C) if order == "pqc" else (k // S % R, k % S, k // (R * S))
    step = stride if step is None else step
    h, v = ho * step + p - padding * shift, wo * step + q - padding * shift
    inside = (b < B) & (h >= 0) & (h < H) & (v >= 0) & (v < W)
    cells = np.where(inside, x[np.minimum(b, B - 1), np.clip(h, 0, H - 1), np.clip(v, 0, W - 1), c], 0.0)
    return np.where(b < B, cells, np.nan)


def _index_models(x: np.ndarray, kase: ConvCase, order: str, pixels: str) -> list[tuple[np.ndarray | None, str]]:
    """(cells, what is wrong) for the usual index mistakes of an im2col kernel: the cells of the matrix of NHWC
    ``x``, a row per output pixel and columns in ``order``, with the stride or the padding shift left out, or the
    ``pixels`` (rows, or columns of a transposed matrix) split with a wrong Ho or Wo. None where a mistake changes
    nothing in this case."""
    B, C, H, W, R, S, stride, padding, Ho, Wo = kase.geometry
    models = [(_nhwc_cells(x, R, S, stride, padding, Ho, Wo, order, step=1) if stride > 1 else None,
               f"The stride ({stride}) is missing: the window of output pixel (h, w) starts at\n"
               "  input row h·stride − padding, column w·stride − padding."),
              (_nhwc_cells(x, R, S, stride, padding, Ho, Wo, order, shift=False) if padding else None,
               f"The padding shift is missing: tap p of output row h reads input row\n"
               f"  h·stride + p − padding (padding = {padding} here), and the same for columns.")]
    for Ho_, Wo_ in sorted({(Ho + dh, Wo + dw) for dh in (-1, 0, 1) for dw in (-1, 0, 1)} | {(H, W), (Ho, W)}):
        if (Ho_, Wo_) != (Ho, Wo) and min(Ho_, Wo_) > 0:
            models.append((_nhwc_cells(x, R, S, stride, padding, Ho_, Wo_, order),
                           f"The {pixels} are split as if Ho = {Ho_}, Wo = {Wo_}; this layer has Ho = {Ho}, "
                           f"Wo = {Wo}:\n  {HO_WO}."))
    return models


def _diagnose_columns(kase: ConvCase, inputs: list, got: np.ndarray) -> str:
    """What a wrong im2col matrix of NCHW ``x`` in columns (`im2col_columns`) is: the stride or the padding shift
    missing, or Ho or Wo wrong, named; else ""."""
    x = np.transpose(inputs[0], (0, 2, 3, 1)).astype(np.float64)
    for model, said in _index_models(x, kase, "cpq", "columns"):
        if model is not None and np.array_equal(got, model.T.astype(got.dtype)):
            return said
    return ""


def _diagnose_nhwc_rows(kase: ConvCase, inputs: list, got: np.ndarray) -> str:
    """What a wrong im2col matrix of NHWC ``x`` is: an index mistake the puzzle's learners make, named."""
    x = inputs[0].astype(np.float64)
    B, C, H, W, R, S, stride, padding, Ho, Wo = kase.geometry
    in_padding = _nhwc_cells(np.ones_like(x), R, S, stride, padding, Ho, Wo) == 0
    unwritten = np.isnan(got)
    if unwritten.any() and np.all(in_padding[unwritten]):
        return ("The cells whose tap falls in the padding were never written: they must be 0, so write\n"
                "  X[n, k] = float32(0) there (the check fills X with NaN before the launch: a skipped cell stays NaN).")
    if unwritten.any():
        return ("Some cells were never written: one thread per cell of X, `k, n = cuda.grid(2)` (threadIdx.x\n"
                "  along the columns k), guarded by n < X.shape[0] and k < X.shape[1].")
    models = [(_nhwc_cells(x, R, S, stride, padding, Ho, Wo, order="cpq"),
               "The columns are in NCHW's order k = (c, p, q). In NHWC the channels run fastest,\n"
               "  k = (p, q, c): c = k % C, q = k // C % S, p = k // (C·S).")] + _index_models(x, kase, "pqc", "rows")
    for model, said in models:
        if model is not None and np.array_equal(got, model.astype(got.dtype)):
            return said
    right = im2col_nhwc_reference(x, R, S, stride, padding)
    if np.all(in_padding[got != right.astype(got.dtype)]):
        return "Every wrong cell is a tap in the padding: such a cell is 0 (and x is not read there)."
    return ""


def _nhwc_read_hint(read: tuple[int, ...], kase: ConvCase) -> str:
    """For a read of NHWC ``x`` out of bounds, at ``read`` in the batch: a tap in the padding read, or NCHW's index
    order."""
    B, C, H, W, R, S, stride, padding, Ho, Wo = kase.geometry
    b, h, v, c = read
    if -padding <= h < H + padding and -padding <= v < W + padding and 0 <= c < C:
        return (f"\n  Row {h}, column {v} is in the padding of the {H}×{W} image: that cell of X is 0.\n"
                "  Test 0 <= h < H and 0 <= v < W before reading x, as `conv.im2col` does.")
    return (f"\n  x is NHWC, shape (B, H, W, C) = {(B, H, W, C)}: a cell reads x[b, h, v, c]\n"
            "  with c = k % C (not x[b, c, h, v], NCHW's order).")


def check_nhwc_rows(kernel, quiet: bool = False) -> None:
    """Lecture 4's puzzle: ``kernel(X, x, R, S, stride, padding)`` writes the im2col matrix of NHWC ``x``, one thread
    per cell (`nhwc_rows`), on odd sizes, filters that are not square, strides 1 to 3 and paddings 0 to 2. A wrong
    ``X`` is named: NCHW's column order, the stride or the padding shift missing, Ho or Wo off, the padding read, its
    cells left unwritten."""
    __tracebackhide__ = True
    cases = (nhwc_rows([(1, 5, 7, 3, 3, 3), (2, 6, 9, 5, 3, 2)], stride=1, padding=1)
             + nhwc_rows([(2, 9, 7, 3, 3, 3), (1, 8, 11, 2, 2, 3)], stride=2, padding=1, block=(16, 8))
             + nhwc_rows([(1, 10, 9, 4, 3, 3)], stride=3, padding=2) + nhwc_rows([(1, 7, 6, 3, 3, 2)], stride=2))
    check_conv(kernel, im2col_nhwc_reference, cases, quiet=quiet, diagnose=_diagnose_nhwc_rows)
