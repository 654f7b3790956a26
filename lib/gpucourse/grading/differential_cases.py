"""The kernels of the differential test (`differential`), one block per course module, and the bounds of
the solution kernels.

A module adds its reference kernels in a few lines: a function ``cases(rng) -> list[Case]`` whose
cases build their inputs once (random, non-uniform, sizes that are not multiples of the block, several
launch configurations); ``kernel_case(kernel, grid, block, out_shape, dtype, inputs)`` is the case of
``kernel[grid, block](out, *inputs)``, and a `Case` of its own launches in any other way, returning the
outputs by name. Then ``register(name, cases, ulps=..., why=...)``, the name ``module.kernel``. Module 3, for
example (`_matmul_cases` below, in short):

    def cases(rng):
        A, B = rng.standard_normal((1, 37, 29)).astype(np.float32), ...
        return [kernel_case(matmul.matmul_tiled, grid, block, (1, 37, 45), np.float32, [A, B], "37 x 29 @ 29 x 45")]

    register("matmul.matmul_tiled", cases, ulps=29, why=FMA)  # K = 29 terms, each rounded once more at most

A kernel that only another path launches (a host function's second kernel) is named in `LAUNCHED_BY` with that
path's subject; a test checks every library kernel is one or the other. Solution kernels need only a line in
`SOLUTION_BOUNDS` when they may differ by more than 0 ulps.

On a GPU machine, ``python -m gpucourse.grading.differential_cases`` runs them all (`make gpu-check`
does); ``--markdown FILE`` keeps the report. Without a GPU it says so in one line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
from numba import cuda

from ..kernels import Tensor, axis_reduction, conv, elementwise, fusion, matmul, precision, reduction
from ..run import BACKEND
from .differential import REGISTRY, Case, compare_all, kernel_case, register, report, solution_subjects

ROOT = Path(__file__).resolve().parents[3]
SECTION = "differential"

FMA = ("FMA contraction: the GPU rounds `acc + a * b` once, the simulator may round twice; at most half an ulp "
       "of the running sum per step")


def _poisoned(shape) -> np.ndarray:
    return np.full(shape, np.nan, np.float32)


def _positive(rng, shape) -> np.ndarray:
    """Random, non-uniform and positive: no cancellation, so an ulp bound on the sum holds for every element."""
    return rng.uniform(0.5, 1.5, shape).astype(np.float32)


# -- module 2: map and zip over strided tensors, the sum ladder, the axis reduction --------------------------------
def square(x):
    return x * x


def add(x, y):
    return x + y


def _one_and_grid_stride(make, function) -> dict:
    """The kernel of ``make(function)``, by launch: one thread per element (no blocks given), or a grid-stride loop."""
    return {"one per element": make(function), "grid-stride": make(function, grid_stride=True)}


SQUARE, ADD = _one_and_grid_stride(elementwise.make_map, square), _one_and_grid_stride(elementwise.make_zip, add)


def _elementwise_cases(rng, kernels, inputs: int) -> list[Case]:
    cases = []
    for shape, view, threads, blocks in (((1000,), None, 128, None), ((37, 29), "T", 32, None),
                                         ((5, 1, 33), "broadcast", 256, None), ((300, 7), None, 64, 3)):
        arrays = [rng.standard_normal(shape).astype(np.float32) for _ in range(inputs)]
        kernel = kernels["grid-stride" if blocks else "one per element"]

        def run(arrays=arrays, view=view, threads=threads, blocks=blocks, kernel=kernel):
            tensors = [Tensor.from_numpy(a.copy()) for a in arrays]
            if view == "T":
                tensors = [t.T for t in tensors]
            out_shape = (5, 4, 33) if view == "broadcast" else tensors[0].shape
            out = Tensor.from_numpy(_poisoned(out_shape))
            elementwise.launch_elementwise(kernel, out, *tensors, threads=threads, blocks=blocks)
            return {"out": out.numpy()}

        cases.append(Case(f"{shape}{' ' + view if view else ''}, {threads} threads"
                          f"{f', {blocks} blocks (grid-stride)' if blocks else ''}", run))
    return cases


register("elementwise.make_map(x * x)", lambda rng: _elementwise_cases(rng, SQUARE, 1))
register("elementwise.make_zip(x + y)", lambda rng: _elementwise_cases(rng, ADD, 2))


def _vectorised_cases(kernel, inputs: int):
    def cases(rng) -> list[Case]:  # aligned and not, tails of 0 to 3 elements, grids smaller than the data
        return [kernel_case(kernel, blocks, threads, (n,), np.float32,
                            [rng.standard_normal(n).astype(np.float32) for _ in range(inputs)])
                for n, blocks, threads in ((1000, 2, 64), (1001, 4, 32), (4099, 3, 128), (3, 1, 32))]

    return cases


register("elementwise.make_map_vectorised(x * x)", _vectorised_cases(elementwise.make_map_vectorised(square), 1))
register("elementwise.make_zip_vectorised(x + y)", _vectorised_cases(elementwise.make_zip_vectorised(add), 2))


def _sum_cases(kernel):
    def cases(rng) -> list[Case]:
        made = []
        for n in (1, 1000, 3001, 9001):
            if kernel not in reduction.ONE_LAUNCH:
                made.append(kernel_case(kernel, reduction.blocks_for(kernel, n), reduction.THREADS,
                                        (reduction.blocks_for(kernel, n),), np.float32,
                                        [rng.standard_normal(n).astype(np.float32)], f"n={n}"))
                continue
            a = _positive(rng, n + 1)
            for blocks, offset in ((1, 0), (3, 0), (8, 0), (3, 1)):  # offset 1: not 16-byte aligned (step 7: scalars)
                def run(a=a, n=n, blocks=blocks, offset=offset):  # the total starts at 0: atomics add into it
                    total = cuda.to_device(np.zeros(1, np.float32))
                    kernel[blocks, reduction.THREADS](total, cuda.to_device(a)[offset:offset + n])
                    return {"total": total.copy_to_host()}

                made.append(Case(f"n={n}, {blocks} blocks of {reduction.THREADS}"
                                 f"{', 4 bytes past a 16-byte boundary' if offset else ''}", run))
        return made

    return cases


for _kernel in reduction.LADDER:
    if _kernel not in reduction.ONE_LAUNCH:
        register(f"reduction.{_kernel.py_func.__name__}", _sum_cases(_kernel),
                 why="a tree in a fixed order, the same on both: bit for bit")
register("reduction.sum_grid_stride_atomic", _sum_cases(reduction.sum_grid_stride_atomic), ulps=8,
         why="one atomic add per block (at most 8) in an order the GPU picks: one rounding per block may differ "
             "(positive inputs)")
register("reduction.sum_grid_stride_vectorised", _sum_cases(reduction.sum_grid_stride_vectorised), ulps=8,
         why="one atomic add per block (at most 8) in an order the GPU picks: one rounding per block may differ "
             "(positive inputs); each thread's sum of its vectors and tail in the same order on both")

AXIS_SUM = axis_reduction.make_axis_reduce(add, 0.0)


def _axis_cases(rng) -> list[Case]:
    cases = []
    for shape, axis in (((7, 300), 1), ((130, 5), 0), ((3, 4, 50), 1)):
        a = rng.standard_normal(shape).astype(np.float32)

        def run(a=a, axis=axis):
            out = Tensor.from_numpy(_poisoned(a.shape[:axis] + (1,) + a.shape[axis + 1:]))
            axis_reduction.launch_axis_reduce(AXIS_SUM, out, Tensor.from_numpy(a.copy()), axis)
            return {"out": out.numpy()}

        cases.append(Case(f"{shape} along axis {axis}, {axis_reduction.THREADS} threads", run))
    return cases


register("axis_reduction.make_axis_reduce(+)", _axis_cases,
         why="each thread's loop and the block's tree in a fixed order: bit for bit")


# -- module 3: matrix multiplication --------------------------------------------------------------------------------
MATMUL_K = (29, 70, 1)


def _matmul_cases(kernel):
    def cases(rng) -> list[Case]:
        made = []
        for (batch, M, N), K in zip(((1, 37, 45), (2, 20, 19), (1, 65, 3)), MATMUL_K):
            A, B = _positive(rng, (batch, M, K)), _positive(rng, (1, K, N))  # B broadcast over the batch
            grid, block = matmul.configuration(kernel, (batch, M, N))
            made.append(kernel_case(kernel, grid, block, (batch, M, N), np.float32, [A, B],
                                    f"({batch}, {M}, {K}) @ (1, {K}, {N}), grid {grid}, block {block}"))
        return made

    return cases


for _kernel in matmul.KERNELS:
    register(f"matmul.{_kernel.py_func.__name__}", _matmul_cases(_kernel), ulps=max(MATMUL_K),
             why=f"{FMA}: at most K ulps (K <= {max(MATMUL_K)} here, positive inputs)")

# -- module 4: convolution ---------------------------------------------------------------------------------------------
# (batch, channels, height, width), (filters, taps), stride, padding: odd sizes, stride 2, paddings 0-2, taps 1-5.
CONV_LAYERS = (((1, 3, 11, 13), (5, 3), 1, 1), ((2, 4, 9, 7), (7, 3), 2, 0), ((1, 2, 12, 10), (3, 5), 2, 2),
               ((2, 5, 6, 9), (17, 1), 1, 0))
CONV_TERMS = max(C * R * R for (_, C, _, _), (_, R), _, _ in CONV_LAYERS)


def _conv_cases(kernel):
    nhwc = conv.layout_of(kernel) == "NHWC"

    def cases(rng) -> list[Case]:
        made = []
        for (B, C, H, W), (M, R), stride, padding in CONV_LAYERS:
            x, w = _positive(rng, (B, C, H, W)), _positive(rng, (M, C, R, R))
            if nhwc:
                x, w = np.ascontiguousarray(x.transpose(0, 2, 3, 1)), np.ascontiguousarray(w.transpose(0, 2, 3, 1))
            y_shape = conv.output_shape(x.shape, w.shape, stride, padding, conv.layout_of(kernel))
            grid, block = conv.configuration(kernel, y_shape)
            made.append(kernel_case(kernel, grid, block, y_shape, np.float32, [x, w, stride, padding],
                                    f"x {x.shape}, w {w.shape}, stride {stride}, padding {padding}, grid {grid}"))
        return made

    return cases


def _im2col_cases(rng) -> list[Case]:
    made = []
    for (B, C, H, W), (_, R), stride, padding in CONV_LAYERS:
        x = _positive(rng, (B, C, H, W))
        rows = B * conv.output_size(H, R, stride, padding) * conv.output_size(W, R, stride, padding)
        bx, by = conv.IM2COL_BLOCK
        grid = (-(-C * R * R // bx), -(-rows // by))
        made.append(kernel_case(conv.im2col, grid, conv.IM2COL_BLOCK, (rows, C * R * R), np.float32,
                                [x, R, R, stride, padding], f"x {x.shape}, {R}x{R} taps, stride {stride}, "
                                f"padding {padding}"))
    return made


for _name, _kernel in conv.KERNELS.items():
    register(f"conv.{_kernel.py_func.__name__}", _conv_cases(_kernel), ulps=CONV_TERMS,
             why=f"{FMA}: at most one ulp per term, C x R x S <= {CONV_TERMS} here (positive inputs)")
register("conv.im2col", _im2col_cases, why="a copy with zeros for the padding: bit for bit")

# -- module 5: fusion -------------------------------------------------------------------------------------------------
EXP = "libdevice's expf is within 2 ulps of the simulator's exp (NumPy's, correctly rounded to float32)"


def _gemm_epilogue_cases(rng) -> list[Case]:
    made = []
    for M, N, K in ((37, 45, 29), (20, 19, 70), (65, 3, 1)):
        A, B, bias = rng.standard_normal((M, K)).astype(np.float32), _positive(rng, (K, N)), _positive(rng, N)
        grid, block = fusion.gemm_grid(np.empty((M, N), np.float32))
        made.append(kernel_case(fusion.matmul_bias_relu, grid, block, (M, N), np.float32, [A, B, bias],
                                f"({M}, {K}) @ ({K}, {N}) + bias, grid {grid}"))
    return made


def _softmax_cases(kernel):
    def cases(rng) -> list[Case]:
        made = []
        for (rows, cols), threads in (((5, 37), 32), ((3, 1000), 128), ((4, 129), 256)):
            x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
            x[-1] += 3e4  # large logits: the max must be taken out before exp
            made.append(kernel_case(kernel, rows, threads, (rows, cols), np.float32, [x],
                                    f"{rows} x {cols}, {threads} threads per row"))
        return made

    return cases


def _softmax_vectorised_cases(rng) -> list[Case]:
    """`launch_softmax` of `softmax_vectorised`: rows of one warp (several per block) and of 2 to 5 warps, most of
    them at another place in a 16-byte vector (columns not a multiple of 4: head and tail scalars)."""
    made = []
    for (rows, cols), threads in (((5, 37), 32), ((3, 1000), 128), ((4, 129), 256), ((3, 2051), 128),
                                  ((2, 4099), 128)):
        x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
        x[-1] += 3e4  # large logits: the max must be taken out before exp

        def run(x=x, threads=threads):
            y = cuda.to_device(_poisoned(x.shape))
            fusion.launch_softmax(fusion.softmax_vectorised, y, cuda.to_device(x), threads)
            return {"y": y.copy_to_host()}

        grid, block = fusion.vectorised_configuration(rows, cols, threads)
        made.append(Case(f"{rows} x {cols}, {grid} blocks of {block[1]} rows x {block[0]} threads", run))
    return made


def _softmax_pipelined_cases(rng) -> list[Case]:
    """`softmax_pipelined` on the persistent grid of one SM (2 blocks), so that on the GPU as on the simulator each
    block computes several rows in turns, the next row's loads in flight: rows of one warp (8 per block), 2, 3 and
    5 warps, columns not a multiple of 4 among them."""
    made = []
    for rows, cols in ((29, 37), (19, 1000), (7, 1500), (5, 2051), (6, 4099)):
        x = (rng.standard_normal((rows, cols)) * 4).astype(np.float32)
        x[-1] += 3e4  # large logits: the max must be taken out before exp
        grid, block = fusion.pipelined_configuration(rows, cols, sms=1)

        def run(x=x, grid=grid, block=block):
            y = cuda.to_device(_poisoned(x.size))
            fusion.softmax_pipelined[grid, block](y, cuda.to_device(x.ravel()), x.shape[1])
            return {"y": y.copy_to_host().reshape(x.shape)}

        made.append(Case(f"{rows} x {cols}, {grid} blocks of {block[1]} rows x {block[0]} threads, in turns", run))
    return made


def _attention_cases(kernel):
    def cases(rng) -> list[Case]:
        made = []
        for N, d, causal in ((37, 16, True), (70, 32, False), (33, 64, True)):
            Q, K, V = (rng.standard_normal((N, d)).astype(np.float32) for _ in range(3))
            if kernel is fusion.attention_flash:
                grid, block = -(-N // fusion.BLOCK_ROWS), fusion.BLOCK_ROWS
            else:
                grid, block = N, fusion.THREADS
            made.append(kernel_case(kernel, grid, block, (N, d), np.float32, [Q, K, V, causal],
                                    f"N {N}, d {d}, {'causal' if causal else 'no mask'}"))
        return made

    return cases


register("fusion.matmul_bias_relu", _gemm_epilogue_cases, ulps=max(MATMUL_K),
         why=f"{FMA}: at most K ulps (K <= {max(MATMUL_K)} here); bias and ReLU exact")
for _kernel in fusion.SOFTMAX_KERNELS + [fusion.softmax_registers]:  # each case's row fits softmax_registers
    register(f"fusion.{_kernel.py_func.__name__}", _softmax_cases(_kernel), ulps=16,
             why=f"{EXP}; the row's sum and the division add a few more")
register("fusion.softmax_vectorised", _softmax_vectorised_cases, ulps=16,
         why=f"{EXP}; each value is exp(x - m) times exp(m - M) / L (m: its thread's max, M the row's), and the "
             "row's sum adds a few more")
register("fusion.softmax_pipelined", _softmax_pipelined_cases, ulps=16,
         why=f"{EXP}; as softmax_vectorised's: exp(x - m) times exp(m - M) / L, and the row's sum")
for _kernel in (fusion.attention_row_fused, fusion.attention_flash):
    register(f"fusion.{_kernel.py_func.__name__}", _attention_cases(_kernel), ulps=256,
             why=f"{EXP}; {FMA} in Q K^T (d terms) and in P V (N terms), mixed signs, so in ulps of the largest "
                 "output")


def _flash2_cases(rng) -> list[Case]:
    made = []
    for heads, N, d, causal in ((2, 37, 16, True), (3, 70, 32, False), (1, 97, 64, True), (2, 50, 24, False)):
        Q, K, V = (rng.standard_normal((heads, N, d)).astype(np.float32) for _ in range(3))
        grid, block = fusion.flash2_configuration(Q.shape)
        made.append(kernel_case(fusion.flash2_for(d), grid, block, Q.shape, np.float32, [Q, K, V, causal],
                                f"{heads} heads, N {N}, d {d}, {'causal' if causal else 'no mask'}"))
    return made


register("fusion.attention_flash2", _flash2_cases, ulps=256,
         why="exp2 is ex2.approx on the GPU (within 2 ulps of NumPy's exp2, correctly rounded); "
             f"{FMA} in Q K^T (d terms) and in P V (N terms), mixed signs, so in ulps of the largest output")


def _flash2_split_cases(rng) -> list[Case]:
    """`launch_flash2` split over the keys: slices of 1 or 2 tiles, the last partial, an empty one (N 130, 4 slices)."""
    made = []
    for heads, N, d, causal, splits in ((1, 130, 8, False, 4), (1, 70, 16, True, 3), (1, 97, 40, True, 2)):
        Q, K, V = (rng.standard_normal((heads, N, d)).astype(np.float32) for _ in range(3))

        def run(Q=Q, K=K, V=V, causal=causal, splits=splits):
            O = cuda.to_device(_poisoned(Q.shape))
            parts = [cuda.to_device(_poisoned(p.shape)) for p in fusion.flash2_partials(Q.shape, splits)]
            fusion.launch_flash2(O, *(cuda.to_device(a) for a in (Q, K, V)), causal, splits, parts)
            return {"O": O.copy_to_host(), **{name: p.copy_to_host() for name, p in zip(("O_part", "m_part", "l_part"),
                                                                                       parts)}}

        made.append(Case(f"{heads} heads, N {N}, d {d}, {'causal' if causal else 'no mask'}, {splits} slices", run))
    return made


register("fusion.attention_flash2_split", _flash2_split_cases, ulps=256,
         why="as attention_flash2, and flash2_combine's exp2 weights of the slices (ex2.approx on the GPU)")


def _unfused_epilogue_cases(rng) -> list[Case]:
    """`gemm_bias_relu(fused=False)`: matmul_plain, add_bias and relu, three launches on one C."""
    made = []
    for M, N, K in ((37, 45, 29), (20, 19, 70), (65, 3, 1)):
        A, B, bias = rng.standard_normal((M, K)).astype(np.float32), _positive(rng, (K, N)), _positive(rng, N)

        def run(A=A, B=B, bias=bias):
            C = cuda.to_device(_poisoned((A.shape[0], B.shape[1])))
            fusion.gemm_bias_relu(C, *(cuda.to_device(a) for a in (A, B, bias)), fused=False)
            return {"C": C.copy_to_host()}

        made.append(Case(f"({M}, {K}) @ ({K}, {N}) + bias, then relu: three launches", run))
    return made


def _naive_cases(run_on_host, shapes):
    """A naive path's host function (`softmax_naive`, `attention_naive`: several launches, intermediate arrays)
    on random inputs of ``shapes`` (each a tuple of the function's array shapes and its other arguments)."""
    def cases(rng) -> list[Case]:
        made = []
        for arrays, *others in shapes:
            inputs = [(rng.standard_normal(shape) * 4).astype(np.float32) for shape in arrays]
            made.append(Case(f"{' x '.join(map(str, arrays[0]))}{''.join(f', {o}' for o in others)}",
                             lambda inputs=inputs, others=others: {"out": run_on_host(*inputs, *others)}))
        return made

    return cases


register("fusion.gemm_bias_relu(fused=False)", _unfused_epilogue_cases, ulps=max(MATMUL_K),
         why=f"{FMA} in matmul_plain: at most K ulps (K <= {max(MATMUL_K)} here); add_bias and relu exact")
register("fusion.softmax_naive", _naive_cases(fusion.softmax_naive, [([(5, 37)],), ([(3, 1000)],), ([(4, 129)],)]),
         ulps=16, why=f"{EXP}; the row's sum and the division add a few more")
register("fusion.attention_naive", _naive_cases(fusion.attention_naive, [([(37, 16)] * 3, True),
                                                                      ([(70, 32)] * 3, False),
                                                                      ([(33, 64)] * 3, True)]),
         ulps=256, why=f"{EXP}; {FMA} in Q K^T (d terms) and in P V (N terms), mixed signs, so in ulps of the largest "
                       "output")

# Library kernels that no subject is named after, and the subject that launches each (a test checks it does).
LAUNCHED_BY = {
    "fusion.matmul_plain": "fusion.gemm_bias_relu(fused=False)", "fusion.add_bias": "fusion.gemm_bias_relu(fused=False)",
    "fusion.relu": "fusion.gemm_bias_relu(fused=False)", "fusion.row_max": "fusion.softmax_naive",
    "fusion.exp_and_sum": "fusion.softmax_naive", "fusion.divide": "fusion.softmax_naive",
    "fusion.scores": "fusion.attention_naive", "fusion.flash2_combine": "fusion.attention_flash2_split",
    "sgemm.matmul_warp_tiled": "matmul.matmul_warp_tiled",
}

# -- module 6: precision -----------------------------------------------------------------------------------------------
PRECISION_K = (29, 70, 8, 64)  # K = 64 with N = 24: the tiled kernels' 16-byte copies (70: 3 steps of 32)
MMA = ("a tensor core adds a few products at a time, aligned and truncated (Fasi et al. 2021), the simulator's "
       "model adds them in k order, each rounded to fp32: each within precision.mma_error_bound, 5 * 2^-23 of the "
       "sum of magnitudes per 4 of K, so with positive inputs the two differ by at most 20 ulps per 4 of K")
MMA_ULPS = 20 * -(-max(PRECISION_K) // precision.MMA_GROUP)


def _precision_gemm_cases(kernel):
    def cases(rng) -> list[Case]:
        made = []
        for (M, N), K in zip(((37, 45), (20, 19), (65, 3), (40, 24)), PRECISION_K):
            A, B = _positive(rng, (M, K)).astype(np.float16), _positive(rng, (K, N)).astype(np.float16)
            grid, block = precision.configuration(kernel, (M, N))
            made.append(kernel_case(kernel, grid, block, (M, N), np.float32, [A, B],
                                    f"fp16 ({M}, {K}) @ ({K}, {N}), grid {grid}, block {block}"))
        return made

    return cases


def _fp16_sum_cases(kernel):
    def cases(rng) -> list[Case]:
        dtype = np.float16 if kernel is precision.sum_fp16 else np.float32
        return [kernel_case(kernel, 1, 1, (1,), dtype, [x], f"{x.size} fp16 values")
                for x in (np.ones(3000, np.float16), _positive(rng, 777).astype(np.float16),
                          rng.standard_normal(100).astype(np.float16))]

    return cases


def _fp16_map_cases(kernel):
    def cases(rng) -> list[Case]:
        dtype = np.float16 if kernel is precision.map_fp16 else np.float32
        x = (rng.standard_normal(1000) * 100).astype(dtype)
        return [kernel_case(kernel, blocks, threads, (1000,), dtype, [x], f"1000 values, {blocks} x {threads}")
                for blocks, threads in ((1, 32), (3, 64), (8, 256))]

    return cases


register("precision.gemm_fp16_fp32acc", _precision_gemm_cases(precision.gemm_fp16_fp32acc), ulps=max(PRECISION_K),
         why=f"{FMA}: at most K ulps (K <= {max(PRECISION_K)} here, positive inputs); fp16 products exact in fp32")
for _kernel in (precision.gemm_tensor_core, precision.gemm_tensor_core_tiled, precision.gemm_tensor_core_async):
    register(f"precision.{_kernel.py_func.__name__}", _precision_gemm_cases(_kernel), ulps=MMA_ULPS, why=MMA)
for _kernel in (precision.sum_fp16, precision.sum_fp16_fp32acc):
    register(f"precision.{_kernel.py_func.__name__}", _fp16_sum_cases(_kernel),
             why="one addition after another, each rounded (fp16 or fp32) as on the GPU: bit for bit")
for _kernel in (precision.map_fp16, precision.map_fp32):
    register(f"precision.{_kernel.py_func.__name__}", _fp16_map_cases(_kernel),
             why="2x is exact, so a fused 2x + 1 rounds as the two operations do: bit for bit")

# Solution kernels whose outputs may differ (kernel name -> (ulps, why)); every other one: bit for bit.
SOLUTION_BOUNDS = {
    name: (64, f"{FMA}; mixed signs, so in ulps of the largest output")
    for name in ("matmul_nt_kernel", "matvec_kernel", "matmul_micro_tile_kernel")
} | {"stencil_kernel": (8, f"{FMA}: a few taps per output")} | {
    name: (256, f"{FMA}; sums of up to a few hundred terms (a weight gradient sums over every output pixel), mixed "
                "signs, so in ulps of the largest output")
    for name in ("weight_grad_kernel", "gemm_nchw_kernel", "conv_tiled_kernel", "depthwise_kernel",
                 "input_grad_kernel", "conv_bias_relu_pool_kernel")
} | {
    name: (256, f"{EXP} (GELU's tanh and erf likewise); {FMA}; mixed signs, so in ulps of the largest output")
    for name in ("linear_gelu_kernel", "layernorm_kernel", "softmax_warp_kernel", "softmax_online_kernel",
                 "cross_entropy_kernel", "flash_attention_kernel")
} | {
    "linear_fp16_kernel": (2, f"{FMA} in the fp32 sum; rounded to fp16 at the end, a result near a tie can round "
                              "the other way: an fp16 ulp"),
    "sgd_kernel": (1, f"{FMA}: `master - lr * g` rounded once or twice, and the fp16 weight with it"),
    "tc_gemm_kernel": (64, f"{MMA}; mixed signs, so in ulps of the largest output"),
    "tc_gemm_shared_kernel": (64, f"{MMA}; mixed signs, so in ulps of the largest output"),
    "softmax_fp16_kernel": (2, f"{EXP}; the fp32 sum's order is fixed; rounded to fp16 at the end, a result near a "
                               "tie can round the other way: an fp16 ulp"),
}


def _versions() -> str:
    """Python, numpy, numba, numba-cuda, the CUDA driver."""
    from importlib import metadata

    found = [f"Python {sys.version.split()[0]}"]
    for package in ("numpy", "numba", "numba-cuda"):
        try:
            found.append(f"{package} {metadata.version(package)}")
        except metadata.PackageNotFoundError:
            found.append(f"{package} (not installed)")
    try:
        from numba.cuda.cudadrv import driver

        found.append("CUDA driver " + ".".join(map(str, driver.driver.get_version())))
    except Exception:  # a driver that does not say: the rest still stands
        found.append("CUDA driver (unknown)")
    return ", ".join(found)


# -- the runner `make gpu-check` calls ------------------------------------------------------------------------------------
def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description="Differential test: every reference and solution kernel on the GPU "
                                     "and on the course simulator, outputs compared.")
    parser.add_argument("--no-solutions", action="store_true", help="only the library's reference kernels")
    parser.add_argument("--markdown", type=Path, help=f"also write the report (the `{SECTION}` section of RESULTS.md) "
                        "to this file")
    arguments = parser.parse_args(argv)
    if not BACKEND.on_gpu:
        print(f"The differential test needs a CUDA GPU: skipped ({BACKEND.reason}).")
        return 0
    start = time.perf_counter()
    subjects = list(REGISTRY.values())
    if not arguments.no_solutions:
        for notebook in sorted(ROOT.glob("solutions/*/*.ipynb")):
            subjects += solution_subjects(notebook, SOLUTION_BOUNDS)
    outcomes = compare_all(subjects)
    name = cuda.get_current_device().name
    name = name.decode() if isinstance(name, bytes) else name
    text = (f"## Differential test: the course simulator against a GPU\n\n"
            f"`python -m gpucourse.grading.differential_cases` on {name}.\n\n"
            f"- Date: {time.strftime('%Y-%m-%d')}\n- Versions: {_versions()}\n"
            f"- Cases: {sum(o.cases for o in outcomes)} launches of {len(outcomes)} kernels, each on the GPU and on "
            f"the simulator with the same inputs (`make gpu-check` runs it).\n"
            f"- Bound: ulps of the output's largest magnitude; 0 means bit for bit.\n\n"
            + report(outcomes))
    print(text)
    print(f"({time.perf_counter() - start:.0f} s)")
    if arguments.markdown:
        arguments.markdown.write_text(text)
    return 0 if all(o.agrees for o in outcomes) else 1


if __name__ == "__main__":
    sys.exit(main())
