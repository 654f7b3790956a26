"""Tuning (module 7): the tuning problems of the course's kernels, each with its correctness filter.

A problem (`gpucourse.run.tuning.Problem`) puts random inputs on the device at its first launch (a size priced
from its proxy makes no arrays: `Problem.geometry`); every candidate's launch writes into an output poisoned with
NaN first, and `wrong` compares it with the NumPy reference, so an unwritten element or a wrong tile shows.
Spaces: the register-tiled SGEMM's tile shape (`sgemm_problem`; any factory with the same parameters plugs in), the
convolution's algorithm and layout (`conv_problem`, like cuDNN's choice), the fused softmax's kernel and block size
(`softmax_problem`).

The checks of assignment 7: a space's constraint (`check_constraint`, against `staged_constraint`), the cache's key
and lookup (`check_cache_key`, `check_cached_tune`), a kernel without local memory graded on its compiled code
(`check_moving_sum`), occupancy from resources (`check_occupancy`), tuning with the cost model (`check_tuned`), and
a row sum graded by its speed against `row_sums_chunked`, priced by the cost model (the same grade on every
machine; a GPU's measured ratio is printed beside it: `check_row_sums_speed`), and a transpose without 64-bit
division in its innermost loop (`check_transpose`).
Lecture 7's puzzle: a column sum whose innermost loop tests no index's sign (`check_column_sums`).
"""

from __future__ import annotations

import functools
import re
from pathlib import Path

import numpy as np
from numba import cuda

from ..kernels import conv as cv
from ..kernels import fusion as fu
from ..kernels import matmul as mm
from ..kernels import sgemm
from ..run.tuning import Launch, Problem, Space
from .core import WRITE_GUARD_HINT, CheckFailed, call_function, in_place_of_guard_hint, launch_on_copies, plural
from .matmul import float32_only, reads_per_thread

NOT_LAUNCHED = "nothing launched to check: launch build(config) first"  # `wrong` of a problem only priced so far
SHARED_LIMIT = 48 * 1024  # static shared memory a block may have without opting in
SGEMM_SPACE = {"BM": (32, 64, 128), "BN": (32, 64, 128), "TM": (2, 4, 8), "TN": (2, 4, 8), "BK": (8, 16)}
# module 3's top rung, `sgemm.make_warp_tiled`: block tile, k step, warp tile and the warp's lanes along rows
WARP_TILED_SPACE = {"BM": (64, 128, 256), "BN": (64, 128, 256), "BK": (8, 16), "WM": (32, 64), "WN": (32, 64),
                    "LANES_M": (2, 4, 8)}


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
    """``C = A @ B`` (float32, M x K times K x N) over the tile shapes of ``factory``: module 3's register-tiled
    ``factory(BM, BN, TM, TN, BK)`` (or any factory with those parameters), or its top rung
    `sgemm.make_warp_tiled` (``BM, BN, BK, WM, WN, LANES_M``); ``traced``: the (M, N, K) the cost model traces
    instead (on host arrays)."""
    put, poisoned, host = _arrays(on_device)

    @functools.cache
    def inputs() -> tuple:  # A, B and their copies to launch on: made at the first launch (pricing makes none)
        rng = np.random.default_rng(seed)
        a, b = rng.standard_normal((1, M, K), np.float32), rng.standard_normal((1, K, N), np.float32)
        return a, b, put(a), put(b)

    want = functools.cache(lambda: (inputs()[0][0].astype(np.float64) @ inputs()[1][0]).astype(np.float32))
    out = {}
    make = _factories(factory)
    warp_tiled = factory is sgemm.make_warp_tiled

    def geometry(config: dict) -> tuple:
        if warp_tiled:
            kernel = make(**config)
            return (kernel, *sgemm.configuration(kernel, (1, M, N)))
        kernel = make(config["BM"], config["BN"], config["TM"], config["TN"], config["BK"])
        return kernel, (-(-N // config["BN"]), -(-M // config["BM"]), 1), (config["BN"] // config["TN"],
                                                                            config["BM"] // config["TM"])

    def build(config: dict) -> Launch:
        out["C"] = poisoned((1, M, N))
        return Launch(*geometry(config), (out["C"], *inputs()[2:]))

    def wrong() -> str | None:  # fp32 sums of K products: errors grow like sqrt(K) ulps of the largest term
        if "C" not in out:  # priced from its proxy only (`geometry`)
            return NOT_LAUNCHED
        return _mismatch(host(out["C"])[0], want(), 1e-5 * np.sqrt(K) * 8)

    space = (Space(factory.__name__, dict(parameters or WARP_TILED_SPACE), warp_tiled_constraint) if warp_tiled
             else Space(factory.__name__, dict(parameters or SGEMM_SPACE), sgemm_constraint))
    needed = WARP_TILED_SPACE if warp_tiled else SGEMM_SPACE
    if set(space.parameters) != set(needed):
        raise ValueError(f"{factory.__name__}'s space needs the parameters {', '.join(needed)}, got "
                         f"{', '.join(space.parameters)}")
    proxy = traced and sgemm_problem(*traced, parameters, factory, seed, on_device=False)
    return Problem(f"sgemm:{factory.__module__}.{factory.__name__}", space, build, wrong, 2.0 * M * N * K,
                   {"M": M, "N": N, "K": K}, ("float32",), proxy, geometry)


def warp_tiled_constraint(config: dict) -> str | None:
    """Why `sgemm.make_warp_tiled` refuses a config (`sgemm.parameter_problem`), None when it builds."""
    return sgemm.parameter_problem(**config)


def conv_problem(B: int, C: int, H: int, W: int, M: int, R: int = 3, S: int = 3, stride: int = 1, padding: int = 1,
                 seed: int = 0, traced: tuple | None = None, on_device: bool = True) -> Problem:
    """A convolution layer over the algorithms of `kernels.conv.KERNELS` (direct, implicit GEMM in NCHW and NHWC);
    ``traced``: the (B, C, H, W, M) the cost model traces instead."""
    put, poisoned, host = _arrays(on_device)
    layouts = {"NCHW": ((B, C, H, W), (M, C, R, S)), "NHWC": ((B, H, W, C), (M, R, S, C))}

    @functools.cache
    def inputs() -> tuple:  # x, w and their copies in both layouts: made at the first launch (pricing makes none)
        rng = np.random.default_rng(seed)
        x, w = rng.standard_normal((B, C, H, W), np.float32), rng.standard_normal((M, C, R, S), np.float32)
        return x, w, {"NCHW": (put(x), put(w)), "NHWC": (put(x.transpose(0, 2, 3, 1)), put(w.transpose(0, 2, 3, 1)))}

    want = functools.cache(lambda: cv.conv2d_reference(*inputs()[:2], stride, padding))
    out = {}

    def shape_of(kernel) -> tuple:
        return cv.output_shape(*layouts[cv.layout_of(kernel)], stride, padding, cv.layout_of(kernel))

    def geometry(config: dict) -> tuple:
        kernel = cv.KERNELS[config["algorithm"]]
        return (kernel, *cv.configuration(kernel, shape_of(kernel)))

    def build(config: dict) -> Launch:
        kernel, grid, block = geometry(config)
        out["y"], out["layout"] = poisoned(shape_of(kernel)), cv.layout_of(kernel)
        return Launch(kernel, grid, block, (out["y"], *inputs()[2][out["layout"]], stride, padding))

    def wrong() -> str | None:
        if "y" not in out:  # priced from its proxy only (`geometry`)
            return NOT_LAUNCHED
        got = host(out["y"])
        if out["layout"] == "NHWC":
            got = got.transpose(0, 3, 1, 2)
        return _mismatch(np.ascontiguousarray(got), want(), 1e-5 * np.sqrt(C * R * S) * 8)

    space = Space("conv", {"algorithm": tuple(cv.KERNELS)})
    Ho, Wo = cv.output_shape(*layouts["NCHW"], stride, padding)[2:]
    proxy = traced and conv_problem(*traced, R, S, stride, padding, seed, on_device=False)
    return Problem("conv:gpucourse.kernels.conv", space, build, wrong, 2.0 * B * M * Ho * Wo * C * R * S,
                   {"x": (B, C, H, W), "w": (M, C, R, S), "stride": stride, "padding": padding}, ("float32",), proxy,
                   geometry)


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

    @functools.cache
    def inputs() -> tuple:  # x and its copy to launch on: made at the first launch (pricing makes none)
        x = (np.random.default_rng(seed).standard_normal((rows, columns)) * 4).astype(np.float32)
        return x, put(x)

    want = functools.cache(lambda: fu.softmax_reference(inputs()[0]).astype(np.float32))
    out = {}

    def geometry(config: dict) -> tuple:
        return SOFTMAX_KERNELS[config["kernel"]], (rows,), (config["threads"],)

    def build(config: dict) -> Launch:
        out["y"] = poisoned((rows, columns))
        return Launch(*geometry(config), (out["y"], inputs()[1]))

    def wrong() -> str | None:  # outputs in [0, 1]: a few float32 ulps of 1, times the row's reductions
        if "y" not in out:  # priced from its proxy only (`geometry`)
            return NOT_LAUNCHED
        return _mismatch(host(out["y"]), want(), 1e-6 * np.log2(columns + 1) * 4)

    space = Space("softmax", {"kernel": tuple(SOFTMAX_KERNELS), "threads": tuple(threads)},
                  functools.partial(softmax_constraint, columns=columns))
    proxy = traced and softmax_problem(*traced, seed, threads, on_device=False)
    return Problem("softmax:gpucourse.kernels.fusion", space, build, wrong, 5.0 * rows * columns,
                   {"x": (rows, columns)}, ("float32",), proxy, geometry)


# -- the checks of assignment 7 ------------------------------------------------------------------------------------
STAGED_SHARED = 48 * 1024  # bytes of static shared memory per block
STAGED_REGISTERS = 255  # per thread
REGISTER_FILE = 65536  # 32-bit registers per SM: one block's threads x registers must fit


def staged_constraint(config: dict) -> str | None:
    """Assignment 7's space of a staged kernel (``threads``, ``items``, ``stages``): why a config cannot run."""
    threads, items, stages = config["threads"], config["items"], config["stages"]
    if threads % 32 or not 32 <= threads <= 1024:
        return f"{threads} threads per block: a multiple of 32, from 32 to 1024"
    if 4 * threads * items * stages > STAGED_SHARED:
        return f"{4 * threads * items * stages} bytes of shared memory: more than {STAGED_SHARED}"
    registers = 32 + 4 * items  # one stage's items in registers; the stages wait in shared memory
    if registers > STAGED_REGISTERS:
        return f"{registers} registers per thread: more than {STAGED_REGISTERS}, the most a thread may have"
    if registers * threads > REGISTER_FILE:
        return (f"{registers} registers per thread, {registers * threads} per block: more than the {REGISTER_FILE} "
                "of an SM")
    return None


RULE_WORDS = ("threads", "shared", "registers")  # the reasons of staged_constraint name one each


def _call(function, name: str, *args):
    """``function(*args)`` (`core.call_function`), a CheckFailed too when it is not a function."""
    __tracebackhide__ = True
    if not callable(function):
        raise CheckFailed(f"{name} should be the function you defined, not a {type(function).__name__} ({function!r}): "
                          f"pass it by its name, without quotes or parentheses")
    return call_function(function, name, args)


def check_constraint(constraint, configs) -> None:
    """``constraint(config)`` is None exactly for the configs `staged_constraint` allows, and names the first rule
    broken (a word of `RULE_WORDS`) for the others."""
    __tracebackhide__ = True
    for config in configs:
        want, got = staged_constraint(config), _call(constraint, "constraint", dict(config))
        if got is not None and not isinstance(got, str):
            raise CheckFailed(f"constraint({config}) returned {got!r}: return None (it can run) or a string (why not)")
        if want is None and got is not None:
            raise CheckFailed(f"constraint({config}) rejected a config that can run: {got!r}")
        if want is not None and got is None:
            raise CheckFailed(f"constraint({config}) allowed a config that cannot run: {want}")
        if want is not None:
            word = next(w for w in RULE_WORDS if w in want)
            later = [w for w in RULE_WORDS[RULE_WORDS.index(word) + 1:] if w in got.lower()]
            if word not in got.lower() or later:
                raise CheckFailed(f"constraint({config}) should name the first rule it breaks ({word!r} in the "
                                  f"reason, and no rule after it{': not ' + repr(later[0]) if later else ''}): "
                                  f"{want}; yours said {got!r}")
    print(f"✓ constraint: right on {len(configs)} configs")


KEY_FIELDS = {"kernel": "sgemm", "shapes": {"M": 512, "N": 256, "K": 128}, "dtypes": ("float16", "float32"),
              "device": "NVIDIA A100-SXM4-40GB", "compute_capability": (8, 0),
              "versions": {"numba-cuda": "0.20.0", "numpy": "2.3.0"}}
KEY_CHANGES = {  # each field alone changed, in the ways a key that keeps only part of it misses
    "kernel": ["softmax"],
    "shapes": [{"M": 512, "N": 256, "K": 129}, {"M": 256, "N": 512, "K": 128},  # a value; two values swapped
               {"M": 12, "N": 256, "K": 1285}, {"M": 5122, "N": 56, "K": 128}],  # the same digits run together
    "dtypes": [("float32",), ("float32", "float16")],  # the order says which array has which dtype
    "device": ["Tesla T4"],
    "compute_capability": [(9, 0), (8, 6)],  # the minor version too: 8.6 has less shared memory than 8.0
    "versions": [{"numba-cuda": "0.21.0", "numpy": "2.3.0"}, {"numba-cuda": "0.20.0", "numpy": "2.4.0"}]}


def _digits_alike(shapes: dict) -> bool:
    """Whether ``shapes``' sizes, written one after another (by name or as listed), read as KEY_FIELDS' do."""
    def digits(sizes, order):
        return "".join(str(sizes[name]) for name in order(sizes))
    return any(digits(shapes, order) == digits(KEY_FIELDS["shapes"], order) for order in (sorted, list))


def check_cache_key(key) -> None:
    """``key(kernel, shapes, dtypes, device, compute_capability, versions)``: a string, the same for the same
    fields (whatever the order of ``shapes``' entries), different when any one field differs."""
    __tracebackhide__ = True
    from ..run.tuning import cache_key as library_key  # noqa: PLC0415

    code, scope = getattr(key, "__code__", None), getattr(key, "__globals__", {})
    if any(name == "cache_key" or scope.get(name) is library_key for name in getattr(code, "co_names", ())):
        raise CheckFailed("cache_key calls the library's cache_key: write the key yourself (the fields as JSON text, "
                          "or its hash with hashlib)")
    if "hash" in getattr(code, "co_names", ()):
        raise CheckFailed("cache_key calls hash(): Python salts the hash of a string afresh in every process, so the "
                          "same fields get another key after a restart and the cache file never hits. Use "
                          "hashlib.sha256(text.encode()).hexdigest(), or the JSON text itself")
    base = _call(key, "cache_key", *KEY_FIELDS.values())
    if not isinstance(base, str):
        raise CheckFailed(f"cache_key returned a {type(base).__name__}: a JSON file's keys are strings")
    again = dict(KEY_FIELDS, shapes=dict(reversed(list(KEY_FIELDS["shapes"].items()))))
    if _call(key, "cache_key", *again.values()) != base:
        raise CheckFailed("cache_key gave a different key for the same shapes listed in another order: sort them "
                          "(json.dumps(..., sort_keys=True))")
    for field, values in KEY_CHANGES.items():
        for value in values:
            if _call(key, "cache_key", *dict(KEY_FIELDS, **{field: value}).values()) == base:
                alike = field == "shapes" and _digits_alike(value)
                hint = (" (their sizes' digits, written one after another, read the same: put a separator or the "
                        "names between them, as json.dumps does)") if alike else ""
                raise CheckFailed(f"cache_key gave the same key when only {field} changed ({KEY_FIELDS[field]!r} -> "
                                  f"{value!r}): a result tuned for the old {field} would be reused for the new{hint}")
    print(f"✓ cache_key: the same for the same fields, different when any of {len(KEY_CHANGES)} changes")


CACHED_RESULTS = ({"best": {"BM": 64}, "seconds": 1e-3}, {"best": {"BM": 32}, "seconds": 2e-3},
                  {"best": {"BM": 128}, "seconds": 3e-3})


def check_cached_tune(cached_tune, results=CACHED_RESULTS) -> None:
    """``cached_tune(cache, key, tune)``: a hit returns the stored result and calls nothing; a miss calls ``tune()``
    once, stores its result (a dict) under ``key`` and returns it. Each check starts from an empty cache file; the
    keys are the library's (`run.tuning.cache_key`), so that this check does not depend on the student's. ``results``:
what three calls of ``tune`` return (the second, on a hit, must not be)."""
    __tracebackhide__ = True
    import tempfile  # noqa: PLC0415

    with tempfile.TemporaryDirectory() as directory:
        _check_cached_tune(cached_tune, Path(directory) / "assignment7-cache.json", results)
    print("✓ cached_tune: a miss tunes once and stores, a hit tunes nothing")


def _check_cached_tune(cached_tune, path: Path, results) -> None:
    __tracebackhide__ = True
    from ..run.tuning import Cache, cache_key  # noqa: PLC0415

    cache = Cache(path)
    calls = []

    def tune(result):
        def run():
            calls.append(result)
            return dict(result)
        return run

    keys = [cache_key(*dict(KEY_FIELDS, kernel=kernel).values()) for kernel in ("a", "b")]
    first = _call(cached_tune, "cached_tune", cache, keys[0], tune(results[0]))
    if len(calls) != 1 or first != results[0]:
        raise CheckFailed(f"on a miss cached_tune should call tune() once and return its result: it called tune() "
                          f"{plural(len(calls), 'time')} and returned {first!r}")
    if Cache(cache.path).get(keys[0]) != first:
        raise CheckFailed("on a miss cached_tune should store the result in the cache (cache.put(key, result))")
    again = _call(cached_tune, "cached_tune", cache, keys[0], tune(results[1]))
    if len(calls) != 1:
        raise CheckFailed(f"on a hit (the stored result is {first!r}) cached_tune called tune() again: a hit must "
                          "cost no timing (a miss is cache.get(key) is None)")
    if again != first:
        raise CheckFailed(f"on a hit cached_tune should return the stored result {first!r}, not {again!r}")
    other = _call(cached_tune, "cached_tune", cache, keys[1], tune(results[2]))
    if len(calls) != 2 or other != results[2]:
        raise CheckFailed("another key is a miss: cached_tune should tune it, not return the first key's result")


def _kernel_or_fail(kernel, name: str) -> None:
    from .core import is_kernel  # noqa: PLC0415

    if not is_kernel(kernel):
        raise CheckFailed(f"{name} is not a kernel: write it as a function decorated with @cuda.jit "
                          f"(got {type(kernel).__name__}).")


def _value(got: float, digits: int = 6) -> str:
    """An output value for a message; NaN is the poison the output was filled with before the launch."""
    return (f"{got:.{digits}g}" if not np.isnan(got) else
            "nan (the check fills the output with NaN before the launch: never written, or added to)")


def _launch(kernel, name: str, grid, block, out_shape, arguments) -> np.ndarray:
    """``kernel[grid, block](out, *arguments)`` on a NaN-poisoned ``out``; the failure explained, not raised."""
    from .core import explain_failure, launch_on_copies  # noqa: PLC0415

    try:
        return launch_on_copies(kernel, grid, block, out_shape, np.float32, arguments)[0]
    except CheckFailed:
        raise
    except Exception as exc:
        raise CheckFailed(explain_failure(name, f"grid={grid}, block={block}", exc)) from None


def moving_sum_reference(x: np.ndarray, width: int = 4) -> np.ndarray:
    """``out[i] = x[i] + ... + x[i + width - 1]`` for the ``len(x) - width + 1`` windows, in float64."""
    return np.convolve(x.astype(np.float64), np.ones(width), "valid")


def check_moving_sum(kernel, sizes, items: int, threads: int, seed: int = 0) -> None:
    """``kernel[blocks, threads](out, x, items)``: each thread writes ``items`` consecutive windows of 4; correct for
    every size, each thread reading its ``items + 3`` values of ``x`` once (a window that slides, in a traced launch
    at the largest size) and computing in float32 only, and its compiled code uses no local memory (no stack frame,
    no ld.local / st.local)."""
    __tracebackhide__ = True
    from ..run.tuning import inspect_compiled  # noqa: PLC0415
    from .core import check_budgets, run_checked  # noqa: PLC0415

    _kernel_or_fail(kernel, "moving_sum")
    rng = np.random.default_rng(seed)
    for n in sizes:
        x = rng.standard_normal(n + 3).astype(np.float32)
        blocks = max(1, -(-n // (items * threads)))
        got = _launch(kernel, "moving_sum", blocks, threads, (n,), (x, items))
        want = moving_sum_reference(x)
        bound = 3.01 * 2.0 ** -24 * moving_sum_reference(np.abs(x))  # 3 float32 additions of these 4 values
        bad = np.flatnonzero(~(np.abs(got - want) <= bound))
        if bad.size:
            i = int(bad[0])
            drift = abs(got[i] - want[i]) < 1e-4 * bound[i] / 2.0 ** -24  # off by a few roundings, not a value
            raise CheckFailed(f"moving_sum with n={n}, items={items}, {plural(blocks, 'block')} of {threads}: out[{i}] is "
                              f"{_value(got[i], 9)}, expected {want[i]:.9g} (x[{i}] + ... + x[{i + 3}], within "
                              f"{bound[i]:.2g}: the rounding of 3 float32 additions)" + (
                                  ". Add the four values of each window: a running total that adds one and subtracts "
                                  "one drifts by a rounding each step" if drift else ""))
    n = max(sizes)
    blocks = max(1, -(-n // (items * threads)))
    described = f"n={n}, items={items}, {plural(blocks, 'block')} of {threads}"
    budgets = [reads_per_thread("x", items + 3), float32_only()]  # a window of 4 sliding over `items` outputs
    _, recorded = run_checked(kernel, "moving_sum", described, blocks, threads, (n,), np.float32,
                              (rng.standard_normal(n + 3).astype(np.float32), items), ("out", "x", "items"), budgets)
    check_budgets("moving_sum", described, budgets, recorded, ["out", "x", "items"])
    try:
        compiled = inspect_compiled(kernel, (np.zeros(8, np.float32), np.zeros(11, np.float32), items),
                                    read_sass=False)
    except Exception as exc:
        raise CheckFailed(f"moving_sum did not compile for the GPU: {type(exc).__name__}: {exc}") from None
    if compiled.local_bytes or compiled.local_loads or compiled.local_stores:
        raise CheckFailed(f"moving_sum is correct but still uses local memory: a {compiled.local_bytes}-byte stack "
                          f"frame, {compiled.local_loads} ld.local and {compiled.local_stores} st.local. An array "
                          "indexed at run time lives there: keep the window in scalar variables instead")
    print(f"✓ moving_sum: correct on {plural(len(sizes), 'size')}, no local memory "
          f"({compiled.registers} registers per thread)")



_FLOAT_DIVISION = re.compile(r"^\s*(?:@!?%p\d+\s+)?(?:div|rcp)(?:\.\w+)*\.f(?:32|64)\b", re.M)


def _inner_loop_float_divisions(kernel, arguments) -> int:
    """div / rcp of float32 or float64 in the innermost loops of ``kernel``'s PTX for ``arguments``."""
    from ..run.ptx import argument_type, compile_for_gpu  # noqa: PLC0415
    from ..run.tuning import innermost_loops  # noqa: PLC0415

    ptx = compile_for_gpu(kernel, tuple(argument_type(a) for a in arguments))
    return len(_FLOAT_DIVISION.findall("\n".join(innermost_loops(ptx))))


def check_transpose(kernel, shapes, blocks: int, threads: int, seed: int = 0) -> None:
    """``kernel[blocks, threads](out, x)`` writes ``out = x.T`` for every shape (rows, columns), and its compiled
    code has no 64-bit integer division or remainder in its innermost loops."""
    __tracebackhide__ = True
    from ..run.tuning import inspect_compiled  # noqa: PLC0415

    _kernel_or_fail(kernel, "transpose_fast")
    rng = np.random.default_rng(seed)
    for rows, cols in shapes:
        x = rng.standard_normal((rows, cols)).astype(np.float32)
        try:
            got = _launch(kernel, "transpose_fast", blocks, threads, (cols, rows), (x,))
        except CheckFailed as failed:  # past the end of out: not a missing guard, the indices swapped
            if f"\n  {WRITE_GUARD_HINT}" not in str(failed):
                raise
            raise CheckFailed(in_place_of_guard_hint(
                str(failed), f"\n  out is x's transpose, {cols} x {rows}: x[r, c] goes to out[c, r]. Check the order "
                             "of the indices (a loop over rows x cols needs no other guard).")) from None
        bad = np.argwhere(got != x.T)
        if bad.size:
            c, r = (int(v) for v in bad[0])
            raise CheckFailed(f"transpose_fast of a {rows} x {cols} matrix, {plural(blocks, 'block')} of {threads}: "
                              f"out[{c}, {r}] "
                              f"is {_value(got[c, r])}, expected x[{r}, {c}] = {x[r, c]:.6g}")
    try:
        arguments = (np.zeros((3, 2), np.float32), np.zeros((2, 3), np.float32))
        compiled = inspect_compiled(kernel, arguments, read_sass=False)
    except Exception as exc:
        raise CheckFailed(f"transpose_fast did not compile for the GPU: {type(exc).__name__}: {exc}") from None
    if compiled.inner_loop_divisions64:
        raise CheckFailed(f"transpose_fast is correct but its innermost loop still divides 64-bit integers: "
                          f"{compiled.inner_loop_divisions64} div/rem .s64 or .u64 in the PTX (the compiler unrolls the "
                          "loop: each division of your code appears once per copy). numba computes // and % of two "
                          "int32 in int64 too, and of a uint32 and an int64 (x.shape[1] is one): divide two uint32 "
                          "values, or move the division out of the loop")
    float_divisions = _inner_loop_float_divisions(kernel, arguments)
    if float_divisions:
        raise CheckFailed(f"transpose_fast divides in floating point in its innermost loop "
                          f"({float_divisions} div/rcp .f32 or .f64 in the PTX): a float32 holds "
                          "integers exactly only up to 2**24, so the row and column go wrong on large matrices, and "
                          "a float64 division is a long routine too. Divide uint32 values, or move the division out "
                          "of the loop")
    print(f"✓ transpose_fast: correct on {plural(len(shapes), 'shape')}, no 64-bit division in its innermost loop")


@cuda.jit
def column_sums(out, x):
    """``out[j] = x[0, j] + ... + x[rows - 1, j]``, a thread per column, numba's signed indices (lecture 7)."""
    j = cuda.grid(1)
    if j < x.shape[1]:
        total = np.float32(0)
        for i in range(x.shape[0]):
            total += x[i, j]
        out[j] = total


def check_column_sums(kernel, shapes=((1, 1), (7, 33), (70, 100)), threads=(32, 64)) -> None:
    """``kernel[ceil(columns / T), T](out, x)`` sums the columns of ``x`` (rows, columns) for every shape and ``T``
    in float32 only, and the innermost loop of its compiled code never tests a 64-bit index's sign (`column_sums`'s
    does)."""
    __tracebackhide__ = True
    from ..run.tuning import inspect_compiled  # noqa: PLC0415
    from .core import blocks_needed, case, check_kernel, kernel_name  # noqa: PLC0415

    name = kernel_name(kernel)
    cases = [case(blocks_needed(cols, t), t, [(rows, cols)], out=(cols,)) for rows, cols in shapes for t in threads]
    try:
        check_kernel(kernel, lambda x: x.astype(np.float64).sum(axis=0), cases, quiet=True, budget=float32_only())
    except CheckFailed as failed:
        raise CheckFailed(f"{failed}{_rows_left_out(kernel)}") from None
    arguments = (np.zeros(2, np.float32), np.zeros((3, 2), np.float32))
    try:
        got = inspect_compiled(kernel, arguments, read_sass=False)
    except Exception as exc:
        raise CheckFailed(f"{name} did not compile for the GPU: {type(exc).__name__}: {exc}") from None
    signed = inspect_compiled(column_sums, arguments, read_sass=False)
    if got.inner_loop_sign_tests:
        raise CheckFailed(f"{name} is correct, but its innermost loop still tests the sign of a 64-bit index "
                          f"{got.inner_loop_sign_tests} times ({got.inner_loop_instructions} instructions there). The "
                          "loop's own index is the one to change: numba.uint64 on the range, or on the index where "
                          "it is used, tells the compiler it is never negative")
    print(f"✓ {name}: correct on {len(cases)} launches; its innermost loop: no sign test, "
          f"{got.inner_loop_instructions} instructions (column_sums: {signed.inner_loop_sign_tests} sign tests, "
          f"{signed.inner_loop_instructions} instructions)")


def _rows_left_out(kernel) -> str:
    """For wrong column sums: the kernel again on a 7 x 40 matrix, where a sum over all rows but the first or the
    last (a loop's bounds off by one) is named; else ""."""
    x = np.random.default_rng(5).standard_normal((7, 40)).astype(np.float32)
    try:
        got = launch_on_copies(kernel, (2,), (32,), (40,), np.float32, [x])[0]
    except Exception:  # a fault: the message already says what went wrong
        return ""
    for rows, which in ((slice(1, None), "the first row"), (slice(None, -1), "the last row"),
                        (slice(1, -1), "the first and the last rows")):
        if np.allclose(got, x[rows].astype(np.float64).sum(axis=0), rtol=1e-5, atol=1e-5):
            return (f"\n  Each sum leaves out {which}: the loop over the rows must run from 0 to rows - 1 "
                    "(range(x.shape[0]) does; with uint64, start at uint64(0) and stop at uint64(x.shape[0])).")
    return ""


def check_occupancy(occupancy, cases, reference) -> None:
    """``occupancy(threads, registers, shared_bytes)`` -> (blocks per SM, limiting resource), as ``reference`` (the
    test cell's: `figures.occupancy.blocks_per_sm` for a GPU) computes them (any of the budgets that tie is
    accepted); ``occupancy`` may not call ``reference`` nor anything named ``blocks_per_sm``."""
    __tracebackhide__ = True
    code, scope = getattr(occupancy, "__code__", None), getattr(occupancy, "__globals__", {})
    for name in getattr(code, "co_names", ()):
        if name == "blocks_per_sm" or scope.get(name) is reference:
            raise CheckFailed(f"occupancy calls {name}: compute the four limits yourself")
    for threads, registers, shared in cases:
        want = reference(threads, registers, shared)
        try:
            got = _call(occupancy, "occupancy", threads, registers, shared)
        except CheckFailed as failed:
            if shared == 0 and "ZeroDivisionError" in str(failed):
                raise CheckFailed(f"{failed} (a block with no shared memory of its own still takes the 1024 bytes "
                                  "the runtime reserves)") from None
            raise
        if not (isinstance(got, tuple) and len(got) == 2):
            raise CheckFailed(f"occupancy({threads}, {registers}, {shared}) returned {got!r}: return a pair "
                              "(blocks, limiting resource)")
        if isinstance(got[0], str) and not isinstance(got[1], str):
            raise CheckFailed(f"occupancy({threads}, {registers}, {shared}) returned {got!r}: the blocks come first, "
                              "return (blocks, limit)")
        blocks, limit = got
        if blocks != want.blocks:
            raise CheckFailed(f"occupancy({threads}, {registers}, {shared}) gave {blocks!r} blocks per SM, expected "
                              f"{want.blocks} (limits: {want.limits})")
        if limit not in want.limited_by.split(" and "):
            raise CheckFailed(f"occupancy({threads}, {registers}, {shared}): {want.blocks} blocks, limited by "
                              f"{want.limited_by!r}, not {limit!r} (name the limit as one of "
                              f"{', '.join(repr(name) for name in want.limits)})")
    print(f"✓ occupancy: right on {len(cases)} kernels")


def check_tuned(tune_and_explain, problem: Problem, model) -> None:
    """``tune_and_explain(problem, model)`` -> (result, bound_by, waves): ``result`` is `run.tuning.tune` of
    ``problem`` by ``model`` (measure=False), every valid config tried, the fastest picked; ``bound_by`` and
    ``waves``: the roof that binds the pick and its waves, as the model says."""
    __tracebackhide__ = True
    from ..run.tuning import Result, prediction  # noqa: PLC0415

    answer = _call(tune_and_explain, "tune_and_explain", problem, model)
    if not (isinstance(answer, tuple) and len(answer) == 3):
        raise CheckFailed(f"tune_and_explain returned {type(answer).__name__}: return (result, bound_by, waves)")
    result, bound_by, waves = answer
    if not isinstance(result, Result):
        raise CheckFailed(f"result should be what rt.tune returns, not a {type(result).__name__}")
    if "cost model" not in result.how:
        raise CheckFailed(f"result was {result.how}: tune with the cost model (model=..., measure=False)")
    if "measure=False" not in result.how:
        raise CheckFailed(f"result was {result.how}: pass measure=False, so that the cost model ranks the "
                          "candidates on a GPU too (there, without it, rt.tune times them)")
    if f"for {model.device} " not in result.how:
        raise CheckFailed(f"result was {result.how}: tune with the model tune_and_explain is given (the "
                          f"{model.device}'s), not another")
    tried = [t["config"] for t in result.trials]
    if sorted(map(str, tried)) != sorted(map(str, problem.space.valid())):
        raise CheckFailed(f"result tried {len(tried)} configs, the space has {len(problem.space.valid())} valid ones: "
                          "search the whole grid (no budget)")
    timed = [t for t in result.trials if "seconds" in t]
    if not timed or result.best != min(timed, key=lambda t: t["seconds"])["config"]:
        raise CheckFailed("result.best is not the config with the least predicted time")
    picked = prediction(problem, result.best, model)
    for name, got, want in (("bound_by", bound_by, picked.bound_by), ("waves", waves, picked.waves)):
        if got != want:
            raise CheckFailed(f"the cost model says the pick {result.best} has {name.lower()} = {want!r}, not "
                              f"{got!r}: see rt.prediction(problem, result.best, model)")
    print(f"✓ tuned: {result.best}, bound by {bound_by}, {waves} wave{'s' if waves != 1 else ''}")


REFERENCE_THREADS = 128


@cuda.jit
def row_sums_chunked(out, x):
    """The reference of the performance exercise: a block per row, each thread adding a contiguous chunk of it
    (neighbouring threads read addresses a chunk apart: uncoalesced), then a tree in shared memory."""
    partial = cuda.shared.array(REFERENCE_THREADS, np.float32)
    row, t = cuda.blockIdx.x, cuda.threadIdx.x
    chunk = (x.shape[1] + REFERENCE_THREADS - 1) // REFERENCE_THREADS
    total = np.float32(0)
    for col in range(t * chunk, min((t + 1) * chunk, x.shape[1])):
        total += x[row, col]
    partial[t] = total
    cuda.syncthreads()
    step = REFERENCE_THREADS // 2
    while step > 0:
        if t < step:
            partial[t] += partial[t + step]
        cuda.syncthreads()
        step //= 2
    if t == 0:
        out[row] = partial[0]


ROW_SUMS_SHAPE = (8192, 4096)  # timed on a GPU, or priced by the cost model from a trace of ROW_SUMS_TRACED
ROW_SUMS_TRACED = (32, 4096)  # the GPU's row length: the chunks (and the coalescing) as there


def _row_sums_case(kernel, name: str, rows: int, cols: int, threads: int, seed: int) -> None:
    x = np.random.default_rng(seed).standard_normal((rows, cols)).astype(np.float32)
    got = _launch(kernel, name, rows, threads, (rows,), (x,))
    want = x.astype(np.float64).sum(axis=1)
    bound = 1e-6 * np.log2(cols + 1) * 4 * np.abs(x).sum(axis=1) + 1e-6  # float32 sums, tree or sequential
    bad = np.flatnonzero(~(np.abs(got - want) <= bound))
    if bad.size:
        i = int(bad[0])
        halving = "" if threads & (threads - 1) == 0 else (
            f" (if a tree halves the block: {threads} threads is not a power of two, and halving it leaves partial sums "
            "out)")
        raise CheckFailed(f"{name}[{rows}, {threads}] on a {rows} x {cols} matrix: out[{i}] is {_value(got[i])}, "
                          f"expected {want[i]:.6g}{halving}")


def _check_row_reads_coalesce(kernel, threads: int) -> None:
    """A warp's load of ``x`` touches at most the sectors of 32 neighbouring loads on average, in a traced launch over
    2 rows of the GPU's length: 4 sectors of 32 bytes for 4-byte loads, 8 for 8-byte and 16 for 16-byte vector loads
    (a vector load is one request of its whole width). And no float64 arithmetic in its PTX: the cost model does not
    price it, a GPU does (at 1/2 to 1/64 of the float32 rate)."""
    from ..run.ptx import argument_type, compile_for_gpu  # noqa: PLC0415
    from .core import check_budgets, run_checked  # noqa: PLC0415

    rows, cols = 2, ROW_SUMS_TRACED[1]
    x = np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32)
    described = f"grid={rows}, block={threads} on a {rows} x {cols} matrix"
    ptx = compile_for_gpu(kernel, (argument_type(np.zeros(rows, np.float32)), argument_type(x)))
    width = 4 if "ld.global.v4.f32" in ptx else 2 if "ld.global.v2.f32" in ptx else 1  # floats a lane loads at once
    budgets = [lambda t: t.assert_sectors_per_request("x", 4 * width), float32_only()]  # 0. sums in float64
    _, recorded = run_checked(kernel, "row_sums_fast", described, rows, threads, (rows,), np.float32, (x,),
                              ("out", "x"), budgets)
    check_budgets("row_sums_fast", described, budgets, recorded, ["out", "x"])


def _row_sums_problem(kernel, threads: int, rows: int, cols: int, on_device: bool, proxy=None) -> Problem:
    """One launch of ``kernel`` over a ``rows x cols`` matrix, a block per row, as a `Problem` of one config (for
    `run.tuning.price`)."""
    put = cuda.to_device if on_device else np.asarray
    x = put(np.random.default_rng(0).standard_normal((rows, cols)).astype(np.float32))
    out = put(np.zeros(rows, np.float32))
    launch = Launch(kernel, (rows,), (threads,), (out, x))
    return Problem("row_sums", Space("row_sums", {}), lambda _config: launch, lambda: None, float(rows * cols),
                   {"x": (rows, cols)}, ("float32",), proxy)


def row_sums_speedup(kernel, threads: int, model) -> tuple[float, str, tuple[str, str]]:
    """(reference time / ``kernel``'s time, how, what binds each: (the reference's, ``kernel``'s)) at
    `ROW_SUMS_SHAPE`, predicted by the cost ``model`` from one traced launch of each at `ROW_SUMS_TRACED`: the same
    figure on every machine, so the same grade. On a GPU ``how`` also gives the ratio `timing.median_seconds`
    measures there, shown and not graded (a timing varies with the GPU, its clocks and its caches)."""
    from ..run.device import chosen_backend  # noqa: PLC0415
    from ..run.timing import median_seconds  # noqa: PLC0415
    from ..run.tuning import prediction  # noqa: PLC0415

    rows, cols = ROW_SUMS_SHAPE
    pairs = [(row_sums_chunked, REFERENCE_THREADS), (kernel, threads)]
    reference, yours = (prediction(_row_sums_problem(k, t, rows, cols, False,
                                                     _row_sums_problem(k, t, *ROW_SUMS_TRACED, False)), {}, model)
                        for k, t in pairs)
    how = (f"predicted for the {model.device} by the cost model ({rows} x {cols}, from a traced "
           f"{ROW_SUMS_TRACED[0]} x {ROW_SUMS_TRACED[1]} launch)")
    if chosen_backend().on_gpu:
        device = cuda.get_current_device().name
        device = device.decode() if isinstance(device, bytes) else device
        timed = [median_seconds(_row_sums_problem(k, t, rows, cols, True).build({})) for k, t in pairs]
        how += f"; timed on {device}: {timed[0] / timed[1]:.2f}x (shown, not graded)"
    bounds = tuple(p.bound_by + (f" ({p.busiest_pipe} pipe)" if p.bound_by == "instruction issue" and p.busiest_pipe
                                 else "") for p in (reference, yours))
    return reference.seconds / yours.seconds, how, bounds


# what a kernel bound by each of the cost model's limits can change (lecture 7, sections 4 and 7)
BOUND_ADVICE = {"global memory": "read each element once, in full sectors (coalesced, or wider loads)",
                "instruction issue": "issue fewer instructions per element (index arithmetic, a loop or a sum "
                                     "that one thread does alone while the others wait)",
                "a block's own time": "wait less per block: more loads in flight at once (fewer round trips each) "
                                      "or more warps to share them, and no long serial step in one thread"}


def check_row_sums_speed(kernel, threads: int, sizes, at_least: float, model) -> None:
    """``kernel[rows, threads](out, x)`` sums the rows of ``x`` correctly, and is at least ``at_least`` times as
    fast as `row_sums_chunked` by the cost ``model`` (on a GPU the measured ratio is printed beside it)."""
    __tracebackhide__ = True
    _kernel_or_fail(kernel, "row_sums_fast")
    if not (isinstance(threads, int) and 32 <= threads <= 1024 and threads % 32 == 0):
        raise CheckFailed(f"ROW_THREADS is {threads!r}: a multiple of 32 from 32 to 1024")
    for seed, (rows, cols) in enumerate(sizes):
        _row_sums_case(kernel, "row_sums_fast", rows, cols, threads, seed)
    _check_row_reads_coalesce(kernel, threads)
    ratio, how, (reference_bound, bound) = row_sums_speedup(kernel, threads, model)
    if ratio < at_least:
        advice = next((f": {advice}" for limit, advice in BOUND_ADVICE.items() if bound.startswith(limit)), "")
        raise CheckFailed(f"row_sums_fast is {ratio:.2f}x as fast as row_sums_chunked ({how}); this test asks for "
                          f"{at_least}x. The model finds yours bound by {bound} (row_sums_chunked by "
                          f"{reference_bound}){advice}")
    print(f"✓ row_sums_fast: correct on {plural(len(sizes), 'shape')}, {ratio:.2f}x as fast as row_sums_chunked\n"
          f"  ({how})")
