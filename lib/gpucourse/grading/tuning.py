"""Tuning (module 7): the tuning problems of the course's kernels, each with its correctness filter.

A problem (`gpucourse.run.tuning.Problem`) puts random inputs on the device once; every candidate's launch writes
into an output poisoned with NaN first, and `wrong` compares it with the NumPy reference, so an unwritten element
or a wrong tile shows. Spaces: the register-tiled SGEMM's tile shape (`sgemm_problem`; any factory with the same
parameters plugs in), the convolution's algorithm and layout (`conv_problem`, like cuDNN's choice), the fused
softmax's kernel and block size (`softmax_problem`).
"""

from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from ..kernels import conv as cv
from ..kernels import fusion as fu
from ..kernels import matmul as mm
from ..run.tuning import Launch, Problem, Space

SHARED_LIMIT = 48 * 1024  # static shared memory a block may have without opting in
SGEMM_SPACE = {"BM": (32, 64, 128), "BN": (32, 64, 128), "TM": (2, 4, 8), "TN": (2, 4, 8), "BK": (8, 16)}


@functools.lru_cache(maxsize=None)
def _factories(factory):
    """``factory`` remembering the kernels it made: a config compiles once, whatever the problem's size."""
    return functools.lru_cache(maxsize=None)(factory)


def sgemm_constraint(config: dict) -> str | None:
    """Why a register-tiled GEMM config cannot run (None when it can): tiles that do not divide, a block of
    too few or too many threads, tile loads that do not share out evenly, too much shared memory, too many
    accumulators for the registers."""
    bm, bn, tm, tn, bk = (config[k] for k in ("BM", "BN", "TM", "TN", "BK"))
    if bm % tm or bn % tn:
        return f"TM={tm} must divide BM={bm} and TN={tn} BN={bn}"
    threads = (bm // tm) * (bn // tn)
    if not 32 <= threads <= 1024:
        return f"{threads} threads per block: a block needs 32 to 1024"
    if (bm * bk) % threads or (bk * bn) % threads:
        return f"the {bm}x{bk} and {bk}x{bn} tiles do not share out evenly over {threads} threads"
    if 4 * bk * (bm + bn) > SHARED_LIMIT:
        return f"{4 * bk * (bm + bn)} bytes of shared memory: more than {SHARED_LIMIT}"
    if tm * tn + tm + tn > 128:
        return f"{tm * tn + tm + tn} floats per thread in registers: more than half of the 255 a thread may have"
    return None


def _arrays(on_device: bool):
    """(to_device, poisoned, to_host): device arrays, or host arrays (what a traced proxy launches on)."""
    def put(a):
        return cuda.to_device(np.ascontiguousarray(a)) if on_device else np.ascontiguousarray(a)

    return (put, lambda shape: put(np.full(shape, np.nan, np.float32)),
            lambda a: a.copy_to_host() if on_device else np.array(a))


def _mismatch(got: np.ndarray, want: np.ndarray, rtol: float) -> str | None:
    if np.isnan(got).any():
        return f"{int(np.isnan(got).sum())} elements left unwritten (NaN)"
    scale = max(float(np.abs(want).max()), 1.0)
    worst = int(np.argmax(np.abs(got - want)))
    if abs(got.flat[worst] - want.flat[worst]) > rtol * scale:
        return f"element {np.unravel_index(worst, got.shape)} is {got.flat[worst]:.6g}, expected {want.flat[worst]:.6g}"
    return None


def sgemm_problem(M: int, N: int, K: int, parameters: dict | None = None, factory=mm.make_register_tiled,
                  seed: int = 0, traced: tuple | None = None, on_device: bool = True) -> Problem:
    """``C = A @ B`` (float32, M x K times K x N) over the tile shapes of ``factory(BM, BN, TM, TN, BK)``;
    ``traced``: the (M, N, K) the cost model traces instead (on host arrays)."""
    put, poisoned, host = _arrays(on_device)
    rng = np.random.default_rng(seed)
    a, b = rng.standard_normal((1, M, K), np.float32), rng.standard_normal((1, K, N), np.float32)
    want = (a[0].astype(np.float64) @ b[0]).astype(np.float32)
    d_a, d_b = put(a), put(b)
    out = {}
    make = _factories(factory)

    def build(config: dict) -> Launch:
        out["C"] = poisoned((1, M, N))
        kernel = make(config["BM"], config["BN"], config["TM"], config["TN"], config["BK"])
        grid = (-(-N // config["BN"]), -(-M // config["BM"]), 1)
        return Launch(kernel, grid, (config["BN"] // config["TN"], config["BM"] // config["TM"]), (out["C"], d_a, d_b))

    def wrong() -> str | None:  # fp32 sums of K products: errors grow like sqrt(K) ulps of the largest term
        return _mismatch(host(out["C"])[0], want, 1e-5 * np.sqrt(K) * 8)

    space = Space(f"{factory.__name__}", dict(parameters or SGEMM_SPACE), sgemm_constraint)
    proxy = traced and sgemm_problem(*traced, parameters, factory, seed, on_device=False)
    return Problem(f"sgemm:{factory.__module__}.{factory.__name__}", space, build, wrong, 2.0 * M * N * K,
                   {"M": M, "N": N, "K": K}, ("float32",), proxy)


def conv_problem(B: int, C: int, H: int, W: int, M: int, R: int = 3, S: int = 3, stride: int = 1, padding: int = 1,
                 seed: int = 0, traced: tuple | None = None, on_device: bool = True) -> Problem:
    """A convolution layer over the algorithms of `kernels.conv.KERNELS` (direct, implicit GEMM in NCHW and NHWC);
    ``traced``: the (B, C, H, W, M) the cost model traces instead."""
    put, poisoned, host = _arrays(on_device)
    rng = np.random.default_rng(seed)
    x, w = rng.standard_normal((B, C, H, W), np.float32), rng.standard_normal((M, C, R, S), np.float32)
    want = cv.conv2d_reference(x, w, stride, padding)
    inputs = {"NCHW": (put(x), put(w)), "NHWC": (put(x.transpose(0, 2, 3, 1)), put(w.transpose(0, 2, 3, 1)))}
    out = {}

    def build(config: dict) -> Launch:
        kernel = cv.KERNELS[config["algorithm"]]
        layout = cv.layout_of(kernel)
        d_x, d_w = inputs[layout]
        shape = cv.output_shape(d_x.shape, d_w.shape, stride, padding, layout)
        out["y"], out["layout"] = poisoned(shape), layout
        grid, block = cv.configuration(kernel, shape)
        return Launch(kernel, grid, block, (out["y"], d_x, d_w, stride, padding))

    def wrong() -> str | None:
        got = host(out["y"])
        if out["layout"] == "NHWC":
            got = got.transpose(0, 3, 1, 2)
        return _mismatch(np.ascontiguousarray(got), want, 1e-5 * np.sqrt(C * R * S) * 8)

    space = Space("conv", {"algorithm": tuple(cv.KERNELS)})
    Ho, Wo = want.shape[2:]
    proxy = traced and conv_problem(*traced, R, S, stride, padding, seed, on_device=False)
    return Problem("conv:gpucourse.kernels.conv", space, build, wrong, 2.0 * B * M * Ho * Wo * C * R * S,
                   {"x": (B, C, H, W), "w": (M, C, R, S), "stride": stride, "padding": padding}, ("float32",), proxy)


def softmax_constraint(config: dict, columns: int) -> str | None:
    if config["kernel"] == "row_fused" and columns > fu.MAX_COLS:
        return f"softmax_row_fused holds a row in shared memory: at most {fu.MAX_COLS} columns"
    return None


SOFTMAX_KERNELS = {"row_fused": fu.softmax_row_fused, "online": fu.softmax_online}


def softmax_problem(rows: int, columns: int, seed: int = 0, threads=(32, 64, 128, 256, 512, 1024),
                    traced: tuple | None = None, on_device: bool = True) -> Problem:
    """Row softmax over the fused kernels of `kernels.fusion` and the threads per block (one block per row);
    ``traced``: the (rows, columns) the cost model traces instead."""
    put, poisoned, host = _arrays(on_device)
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, columns)) * 4).astype(np.float32)
    want = fu.softmax_reference(x).astype(np.float32)
    d_x, out = put(x), {}

    def build(config: dict) -> Launch:
        out["y"] = poisoned((rows, columns))
        return Launch(SOFTMAX_KERNELS[config["kernel"]], (rows,), (config["threads"],), (out["y"], d_x))

    def wrong() -> str | None:  # outputs in [0, 1]: a few float32 ulps of 1, times the row's reductions
        return _mismatch(host(out["y"]), want, 1e-6 * np.log2(columns + 1) * 4)

    space = Space("softmax", {"kernel": tuple(SOFTMAX_KERNELS), "threads": tuple(threads)},
                  functools.partial(softmax_constraint, columns=columns))
    proxy = traced and softmax_problem(*traced, seed, threads, on_device=False)
    return Problem("softmax:gpucourse.kernels.fusion", space, build, wrong, 5.0 * rows * columns,
                   {"x": (rows, columns)}, ("float32",), proxy)
