"""Tuning (module 7): read a kernel's compiled code, and search a space of its parameters for the fastest.

`inspect_compiled` compiles a kernel (PTX, no GPU needed; registers and spills from nvJitLink's assembler) and
says in one plain line per finding what a student should look at: local memory, spills, 64-bit index arithmetic
and 64-bit divisions in the innermost loop, vector loads, FMA density; from SASS where an ``nvdisasm`` is found
(`sass`): global and shared loads by width, LDL/STL, the main loop's FFMA density and 64-bit integer instructions.

`tune` runs a `Space` of named parameters (grid or random search, with a budget) on a `Problem`: every candidate
is launched and checked against the reference first (a wrong one is dropped), then timed on a GPU with CUDA
events (warm-up, median), or, with no GPU, priced by a cost ``model`` (`gpucourse.figures.tuning.cost_model`)
from the simulator's trace of one launch and the compiled resources; the result says which. Results go to a
JSON cache keyed by kernel, shapes, dtypes, device and versions: a hit costs no timing.
"""

from __future__ import annotations

import dataclasses
import hashlib
import itertools
import json
import math
import numbers
import random
import re
import textwrap
from collections import OrderedDict
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Callable

import numpy as np

from . import compile_cache
from .device import chosen_backend
from .ptx import argument_type, checked_for, is_kernel, mode as check_mode
from .assembler import (Resources, compute_capability, lined_ptx, max_registers, ptx_for, resources_problem,
                        shared_bytes)
from .issue import issue_code
from .resources import kernel_resources
# sass_problem: for lecture 07; nvdisasm: for benchmarks/compiled_code.py (its version)
from .sass import (disassemble, global_loads, innermost, nvdisasm, sass_counts, sass_findings,  # noqa: F401
                   sass_problem, start_disassembly)
from .timing import median_seconds

# -- compiled-code inspection ------------------------------------------------------------------------------------
_LABEL = re.compile(r"^(\$L__\w+):", re.M)
_BRANCH = re.compile(r"\bbra(?:\.uni)?\s+(\$L__\w+);")
_INT64 = re.compile(r"^\s*(?:@%p\d+\s+)?(?:mul|mad|add|sub|shl|shr)(?:\.wide|\.lo|\.hi)?\.(?:s64|u64|b64|s32|u32)\b"
                    r"[^;]*%rd\d+[^;]*;", re.M)
_DIVIDE64 = re.compile(r"^\s*(?:@!?%p\d+\s+)?(?:div|rem)\.[su]64\b", re.M)
# the sign of a 64-bit integer, as NVVM tests it: for numba's wrap-around of a negative index (x[-1] is the last
# element) and for signed // and % (rounded toward minus infinity)
_SIGN_TEST = re.compile(r"\b(?:shr\.s64\s+%rd\d+, %rd\d+, 63|and\.b64\s+%rd\d+, %rd\d+, -9223372036854775808);")
_INSTRUCTION = re.compile(r"^\s*(?:@!?%p\d+\s+)?[a-z][\w.]*\s", re.M)
_FMA = re.compile(r"\bfma\.rn\.f32\b")


@dataclass(frozen=True)
class Compiled:
    """What one kernel compiled to, counted from its PTX (and SASS where available)."""

    kernel: str
    registers: int | None  # per thread, from the assembler (None without nvJitLink)
    spilled_bytes: int | None
    shared_bytes: int
    local_bytes: int  # the stack frame per thread: the assembler's (spills included), else the PTX's ``__local_depot``
    local_loads: int  # ld.local in the PTX
    local_stores: int
    inner_loop_int64: int  # 64-bit integer arithmetic in the innermost loops
    inner_loop_divisions64: int  # div / rem of 64-bit integers there (each a long software routine)
    inner_loop_sign_tests: int  # tests of a 64-bit integer's sign there (negative indices, signed // and %)
    inner_loop_instructions: int
    inner_loop_fmas: int
    vector_loads: int  # ld.global / ld.shared of .v2 or .v4
    scalar_global_loads: int
    sass: dict | None = None  # `sass.sass_counts` of the cubin, where an nvdisasm is found (`sass.nvdisasm`)
    findings: list = field(default_factory=list)

    @property
    def fma_density(self) -> float:
        """FMAs per instruction of the innermost loops (1.0: nothing but FMAs)."""
        return self.inner_loop_fmas / self.inner_loop_instructions if self.inner_loop_instructions else 0.0

    def __str__(self) -> str:
        """The kernel's name, then each finding wrapped at `FINDING_WIDTH` columns under its dash (a notebook's
        output would break a long line anywhere, words too)."""
        wrapped = (textwrap.fill(line, FINDING_WIDTH, initial_indent="  - ", subsequent_indent="    ",
                                 break_long_words=False, break_on_hyphens=False) for line in self.findings)
        return "\n".join([f"{self.kernel}:", *wrapped])


FINDING_WIDTH = 100


def innermost_loops(ptx: str) -> list[str]:
    """The bodies of the PTX's innermost loops: from a label to a branch back to it, holding no other such loop."""
    labels = {m.group(1): m.start() for m in _LABEL.finditer(ptx)}
    loops = [(labels[m.group(1)], m.end()) for m in _BRANCH.finditer(ptx)
             if m.group(1) in labels and labels[m.group(1)] < m.start()]
    return [ptx[a:b] for a, b in innermost(loops)]


def _instructions(body: str) -> int:
    return len([m for m in _INSTRUCTION.finditer(body) if not m.group().strip().startswith("$")])


def main_loop_fma_share(ptx: str) -> float | None:
    """FMAs per instruction of the PTX's main loop, the innermost loop with the most ``fma.rn.f32``; None without
    one. Each instruction takes an issue slot from the FMAs: on an SM of 128 FP32 lanes (an H100's, an H200's) a loop
    that is 40% FMAs reaches at most 40% of the FP32 peak. ptxas keeps the loop's shape (over the SGEMM's tile shapes
    the SASS's share is 1.1-1.2 times it). The FMAs of a library function count too (``math.exp`` has some)."""
    loops = [(len(_FMA.findall(body)), _instructions(body)) for body in innermost_loops(ptx)]
    fmas, instructions = max(loops, default=(0, 0))
    return fmas / instructions if fmas else None


def ptx_counts(ptx: str) -> dict:
    """The counts of `Compiled` that the PTX alone gives."""
    loops = innermost_loops(ptx)
    body = "\n".join(loops)
    depots = re.findall(r"\.local\s+\.align\s+\d+\s+\.b8\s+__local_depot\d+\[(\d+)\]", ptx)
    return {
        "local_bytes": sum(int(d) for d in depots),
        "local_loads": len(re.findall(r"\bld\.local\.", ptx)),
        "local_stores": len(re.findall(r"\bst\.local\.", ptx)),
        "inner_loop_int64": len(_INT64.findall(body)),
        "inner_loop_divisions64": len(_DIVIDE64.findall(body)),
        "inner_loop_sign_tests": len(_SIGN_TEST.findall(body)),
        "inner_loop_instructions": _instructions(body),
        "inner_loop_fmas": len(_FMA.findall(body)),
        "vector_loads": len(re.findall(r"\bld\.(?:global|shared)(?:\.\w+)*\.v[24]\.", ptx)),
        "scalar_global_loads": len(re.findall(r"\bld\.global(?:\.nc)?\.(?:f32|b32|u32|s32)\b", ptx)),
    }


def findings(c: Compiled) -> list[str]:
    """One plain-words line per thing worth knowing about the compiled kernel ``c``."""
    lines = []
    if c.registers is not None:
        lines.append(f"{c.registers} registers per thread" + (
            f", {c.spilled_bytes} bytes spilled to local memory: the registers ran out" if c.spilled_bytes else
            ", no spills"))
    if c.local_loads or c.local_stores:
        lines.append(f"local memory: a {c.local_bytes}-byte stack frame per thread, {c.local_loads} ld.local and "
                     f"{c.local_stores} st.local: an array indexed at run time (or a spill) lives in slow local memory")
    elif c.local_bytes:
        lines.append(f"local memory: a {c.local_bytes}-byte stack frame per thread that the assembler added for "
                     "its spills (the PTX has no ld.local): slow, off-chip memory")
    else:
        lines.append("no local memory: every per-thread array stays in registers")
    if c.inner_loop_int64:
        lines.append(f"{c.inner_loop_int64} 64-bit integer operations in the innermost loops: index arithmetic in "
                     "int64 costs two 32-bit instructions each; compute indices in int32 or hoist them out")
    elif c.inner_loop_instructions:
        lines.append("no 64-bit index arithmetic in the innermost loops")
    if c.inner_loop_divisions64:
        lines.append(f"{c.inner_loop_divisions64} 64-bit integer divisions or remainders (div/rem .s64/.u64) in the "
                     "innermost loops: each is a software routine of dozens of instructions; divide uint32 values "
                     "(numba computes // and % of two int32 in int64) or take the division out of the loop")
    if c.inner_loop_sign_tests:
        lines.append(f"{c.inner_loop_sign_tests} tests of a 64-bit integer's sign in the innermost loops: numba "
                     "wraps a negative index around (x[-1] is the last element) and rounds signed // and % down, "
                     "both need the sign; unsigned indices (numba.uint64) need neither, and neighbouring elements "
                     "become fixed offsets from one address")
    if c.vector_loads:
        lines.append(f"{c.vector_loads} vector loads (ld.v2/ld.v4): several words per instruction")
    else:
        lines.append(f"no vector loads: {c.scalar_global_loads} global loads of one 32-bit word each")
    if c.inner_loop_instructions:
        lines.append(f"FMA density of the innermost loops: {c.inner_loop_fmas} FMAs in {c.inner_loop_instructions} "
                     f"instructions ({c.fma_density:.0%}); the rest is loads, index arithmetic and branches")
    if c.sass is not None:
        lines.extend(sass_findings(c.sass))
    return lines


def inspect_compiled(dispatcher, args, architecture: str = "sm_90", read_sass: bool = True) -> Compiled:
    """Compile ``dispatcher`` for the types of ``args`` (no GPU needed) and count what matters (`Compiled`), under
    the kernel's own cap on registers (``@cuda.jit(max_registers=...)``); ``read_sass=False`` leaves the SASS unread
    (nvdisasm takes most of a second, and its findings depend on whether this machine has one)."""
    if not is_kernel(dispatcher):
        raise TypeError(f"inspect_compiled reads a kernel, a function decorated with @cuda.jit, not "
                        f"{type(dispatcher).__name__} {getattr(dispatcher, '__name__', dispatcher)!r}")
    if not isinstance(args, (tuple, list)):
        raise TypeError(f"args are the kernel's arguments in a tuple, such as (out, x), not one "
                        f"{type(args).__name__}")
    argtypes = tuple(argument_type(a) for a in args)
    ptx = ptx_for(dispatcher, argtypes, architecture)  # compiled for the architecture's compute capability
    resources: Resources | None = kernel_resources(dispatcher, argtypes, architecture)
    shared = shared_bytes(ptx)
    counts = ptx_counts(ptx)
    if resources is not None:  # the assembler's stack frame holds the PTX's and the spills
        counts["local_bytes"] = max(counts["local_bytes"], resources.local_bytes)
    sass, unread = None, None
    if read_sass and resources is not None:
        try:
            sass = disassemble(ptx, architecture, max_registers(dispatcher))
        except RuntimeError as error:  # an nvdisasm older than the assembler (another package's, on a GPU machine)
            unread = f"SASS not read: {error}"
    c = Compiled(dispatcher.py_func.__name__, resources and resources.registers,
                 resources and resources.spilled_bytes, shared, **counts,
                 sass=sass_counts(sass) if sass is not None else None)
    c.findings.extend(findings(c))
    if unread:
        c.findings.append(unread)
    return c


# -- the search space ----------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Space:
    """Named parameters, each with its values, and ``constraint(config) -> None or why not`` on a whole config."""

    name: str
    parameters: dict
    constraint: Callable[[dict], str | None] = lambda config: None

    def __post_init__(self):
        for name, values in self.parameters.items():
            if not isinstance(values, (tuple, list)):
                raise TypeError(f"the space's {name} is {values!r}: give each parameter a tuple of values to try, "
                                f"such as {name}=({values!r},) for one value ((2) is just the number 2; (2,) a tuple)")

    def all(self) -> list[dict]:
        names = list(self.parameters)
        return [dict(zip(names, values)) for values in itertools.product(*self.parameters.values())]

    def valid(self) -> list[dict]:
        """The configs the constraint allows, in grid order."""
        return [c for c in self.all() if self.constraint(c) is None]

    def rejected(self) -> list[tuple[dict, str]]:
        return [(c, why) for c in self.all() if (why := self.constraint(c)) is not None]


def candidates(space: Space, strategy: str = "grid", budget: int | None = None, seed: int = 0) -> list[dict]:
    """The configs to try: all valid ones in order (``"grid"``), or ``budget`` of them drawn at random."""
    if budget is not None and not (isinstance(budget, numbers.Integral) and budget >= 1):
        raise ValueError(f"budget is how many configs to try, a whole number from 1 up such as 8, not {budget!r}")
    valid = space.valid()
    if strategy == "grid":
        return valid[:budget] if budget is not None else valid
    if strategy == "random":
        return random.Random(seed).sample(valid, min(len(valid), budget if budget is not None else len(valid)))
    raise ValueError(f"strategy is 'grid' or 'random', not {strategy!r}")


# -- the problem and the cache -----------------------------------------------------------------------------------
@dataclass(frozen=True)
class Launch:
    """One candidate, ready to run: ``kernel[grid, block](*args)``."""

    kernel: object
    grid: tuple
    block: tuple
    args: tuple

    def __call__(self) -> None:
        self.kernel[self.grid, self.block](*self.args)

    @property
    def threads(self) -> int:
        return math.prod(self.block)

    @property
    def blocks(self) -> int:
        return math.prod(self.grid)


@dataclass(frozen=True)
class Problem:
    """What to tune: a ``space``; ``build(config) -> Launch`` on inputs already on the device; ``wrong() -> None or
    a message``, comparing the output of the last launch with a reference; ``flops`` of one launch; the ``shapes``
    and ``dtypes`` that key the cache."""

    kernel: str
    space: Space
    build: Callable[[dict], Launch]
    wrong: Callable[[], str | None]
    flops: float
    shapes: dict
    dtypes: tuple
    proxy: "Problem | None" = None  # the same space at a size the simulator traces quickly, for the cost model
    # ``config -> (kernel, grid, block)``, none of the arrays made: what the model prices a size by (else `build`)
    geometry: Callable[[dict], tuple] | None = None


class WrongResult(Exception):
    """A candidate's output differs from the reference."""


_TRACED: OrderedDict = OrderedDict()  # {`_launch_key`: (launch trace, resources)} of this process, newest last
TRACES_KEPT = 64  # a tuning sweep's candidates, and the graders' problems a process prices again


def _launch_key(launch: Launch, argtypes: tuple, architecture: str) -> tuple | None:
    """What decides a traced launch and its resources: the kernel as the compile cache keys it (its code, what it
    reads, the course's and the compilers' versions) with its compile options, the launch's shape, each argument's
    bytes (and a device array's written mask), the PTX check's mode and the tools that read resources and SASS here;
    None where the compile cache gives the kernel no key."""
    py_func = getattr(launch.kernel, "py_func", None)
    compiled = py_func and compile_cache.key(py_func, argtypes, compute_capability(architecture), None)
    if not compiled:
        return None
    arguments = []
    for value in launch.args:
        if hasattr(value, "shape") and hasattr(value, "dtype"):
            written = getattr(value, "written", None)
            arguments.append((compile_cache.array_digest(np.asarray(value)),
                              written is not None and compile_cache.array_digest(np.asarray(written))))
        else:
            arguments.append((type(value).__name__, repr(value)))
    return (compiled.name, tuple(compile_cache.options_of(launch.kernel)), launch.grid, launch.block,
            tuple(arguments), architecture, check_mode(), resources_problem(), nvdisasm())


def _trace(traced: Problem, config: dict, architecture: str) -> tuple:
    """(launch trace, resources, launch) of ``config`` launched once on the simulator at ``traced``'s size, checked:
    a wrong result raises `WrongResult`. It is compiled once, for ``architecture``, with the line table the cost
    model reads (`assembler.lined_ptx`); that compilation, its table taken out, is its PTX check's (`ptx.checked_for`:
    not also for the oldest GPU) and gives its resources. nvdisasm reads its SASS while the simulator runs it. The
    same launch again (same `_launch_key`) in this process is not run again: the trace and resources it gave are
    kept (the last `TRACES_KEPT`), and the launch had given a right result."""
    launch = traced.build(config)
    argtypes = tuple(argument_type(a) for a in launch.args)
    key = _launch_key(launch, argtypes, architecture)
    if key in _TRACED:
        _TRACED.move_to_end(key)
        return (*_TRACED[key], launch)
    launch_trace, resources = _run_traced(traced, launch, argtypes, architecture)
    if key is not None:
        _TRACED[key] = (launch_trace, resources)
        while len(_TRACED) > TRACES_KEPT:
            _TRACED.popitem(last=False)
    return launch_trace, resources, launch


def _run_traced(traced: Problem, launch: Launch, argtypes: tuple, architecture: str) -> tuple:
    """`_trace`'s (launch trace, resources), from running ``launch``."""
    from .cpu_backend import trace  # noqa: PLC0415 - the simulator, also on a GPU machine

    readable = resources_problem() is None  # nvJitLink: resources, and SASS where there is an nvdisasm
    waiting = readable and _start_sass_with_lines(launch.kernel, argtypes, architecture)
    try:
        with trace(lines=True) as t, checked_for(compute_capability(architecture)):
            launch()
    finally:
        sass = waiting and _finished(waiting)
    if (wrong := traced.wrong()) is not None:
        raise WrongResult(wrong)
    t.last.keep_counts_only()  # kept in _TRACED: the model reads counts only
    resources = kernel_resources(launch.kernel, argtypes, architecture)
    if resources is not None:  # the cost model's issue roof and a block's own time
        ptx = ptx_for(launch.kernel, argtypes, architecture)
        sass = sass or _sass_without_lines(ptx, architecture, max_registers(launch.kernel))
        resources = dataclasses.replace(resources, fma_share=main_loop_fma_share(ptx),
                                        global_loads=sass and global_loads(sass), issue_code=sass and issue_code(sass))
    return t.last, resources


def _start_sass_with_lines(kernel, argtypes, architecture: str) -> Callable[[], str] | None:
    """`sass.start_disassembly` of the kernel compiled with its line table (`assembler.lined_ptx`); None where there
    is none (a kernel linked with CUDA C++, or one that does not compile), no nvdisasm, or an nvJitLink that refuses
    the line table."""
    lined = lined_ptx(kernel, argtypes, architecture)
    try:
        return lined and start_disassembly(lined, architecture, max_registers(kernel), line_table=True)
    except RuntimeError:
        return None


def _finished(waiting: Callable[[], str]) -> str | None:
    try:
        return waiting()
    except RuntimeError:  # an nvdisasm older than the assembler
        return None


def _sass_without_lines(ptx: str, architecture: str, registers: int | None) -> str | None:
    """The SASS without its line table, where the one with it could not be read; None where no nvdisasm reads it
    (the model then leaves out the copy's round trips and counts the issue from the main loop alone)."""
    try:
        return disassemble(ptx, architecture, registers)
    except RuntimeError:
        return None


def _traced(problem: Problem, config: dict, architecture: str) -> tuple:
    """What a cost model is called with for ``config`` at ``problem``'s size: (launch trace, resources, launch,
    FLOPs, scale), from one traced launch (`_trace`): the ``proxy``'s when the problem has one, its counts then
    scaled by the ratio of FLOPs."""
    if problem.proxy is None:
        return (*_trace(problem, config, architecture), problem.flops, 1.0)
    launch_trace, resources, _ = _trace(problem.proxy, config, architecture)
    return launch_trace, resources, _shape_of(problem, config), problem.flops, problem.flops / problem.proxy.flops


def _shape_of(problem: Problem, config: dict) -> Launch:
    """``problem``'s launch of ``config`` for the model, which reads its grid and block: without arguments where the
    problem has a ``geometry`` (a full-size problem priced from its proxy need not make its arrays)."""
    return Launch(*problem.geometry(config), ()) if problem.geometry else problem.build(config)


def _checked_cost_model(model):
    """``model`` if it is a cost model (it has the ``architecture`` it predicts for); else a TypeError that says
    what to pass (a GPU's name is not one)."""
    if not hasattr(model, "architecture"):
        raise TypeError(f"model={model!r} is not a cost model: pass model=gpucourse.figures.tuning.cost_model('H100') "
                        "(or another GPU the cost model knows)")
    return model


def prediction(problem: Problem, config: dict, model):
    """``model``'s `Prediction` for ``config`` (time, the roof that binds, waves): see `_traced`."""
    model = _checked_cost_model(model)
    return model.prediction(*_traced(problem, config, model.architecture))


def price(problem: Problem, config: dict, model) -> float:
    """``model``'s time in seconds for ``config`` at ``problem``'s size: any callable
    ``model(trace, resources, launch, flops, scale)`` with an ``architecture``."""
    model = _checked_cost_model(model)
    return model(*_traced(problem, config, model.architecture))


def price_each(problems: list, config: dict, model) -> list[float]:
    """`price` of ``config`` at the size of each of ``problems``, from one traced launch: problems of one kernel
    whose proxies have one size (``sgemm_problem(M, N, K, traced=...)`` with the same ``traced``)."""
    model, first = _checked_cost_model(model), problems[0]
    proxies = {(p.kernel, p.dtypes, repr(p.proxy and p.proxy.shapes)) for p in problems}
    if first.proxy is None or len(proxies) > 1:
        raise ValueError("price_each traces one launch for all the problems: give problems of one kernel and "
                         "dtypes, each with a proxy of the same size (traced=...); else call price on each")
    launch_trace, resources, _ = _trace(first.proxy, config, model.architecture)
    return [model(launch_trace, resources, _shape_of(p, config), p.flops, p.flops / p.proxy.flops) for p in problems]


def sweep(problems: list, model=None) -> list[tuple[dict, list[float]]]:
    """Every valid config of ``problems``' space (one kernel at several sizes) with its seconds at each size: timed
    on a GPU when ``model`` is None (`tune` checks each first; one that fails or is wrong takes infinite time),
    else priced by ``model`` from one traced launch per config (`price_each`)."""
    configs = problems[0].space.valid()
    if model is not None:
        return [(config, price_each(problems, config, model)) for config in configs]
    timed = [{json.dumps(t["config"], sort_keys=True): t.get("seconds", math.inf) for t in tune(p).trials}
             for p in problems]
    return [(config, [run[json.dumps(config, sort_keys=True)] for run in timed]) for config in configs]


def versions() -> dict:
    """The versions a tuning result depends on: the compiler stack's packages."""
    found = {}
    for package in ("numba-cuda", "numba", "numpy", "llvmlite"):
        try:
            found[package] = metadata.version(package)
        except metadata.PackageNotFoundError:
            found[package] = None
    return found


def cache_key(kernel: str, shapes: dict, dtypes, device: str, compute_capability, versions_: dict,
              search: dict | None = None) -> str:
    """The cache's key: a hash of everything the best config depends on (a different one is a miss); ``search``:
    the space's parameters and how it was searched."""
    blob = json.dumps({"kernel": kernel, "shapes": shapes, "dtypes": [str(d) for d in dtypes], "device": device,
                       "compute_capability": list(compute_capability or ()), "versions": versions_,
                       "search": search or {}}, sort_keys=True, default=list)
    return hashlib.sha256(blob.encode()).hexdigest()[:24]


class Cache:
    """Tuning results in one JSON file: key -> the result's dict."""

    def __init__(self, path):
        self.path = Path(path)
        if self.path.is_dir():
            raise ValueError(f"a Cache is one JSON file, and {str(path)!r} is a directory: give a file's path, such as "
                             f"{str(self.path / 'tuning.json')!r}")

    def _read(self) -> dict:
        try:
            return json.loads(self.path.read_text())
        except (FileNotFoundError, json.JSONDecodeError):
            return {}

    def get(self, key: str) -> dict | None:
        return self._read().get(key)

    def put(self, key: str, value: dict) -> None:
        entries = self._read()
        entries[key] = value
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self.path.write_text(json.dumps(entries, indent=1, sort_keys=True))


# -- tuning --------------------------------------------------------------------------------------------------------
@dataclass
class Result:
    kernel: str
    best: dict | None
    seconds: float | None  # the best config's time (measured or predicted)
    how: str  # "measured on <GPU>", or "predicted for <GPU> by the cost model (measure=False)" or "(no GPU here ...)"
    trials: list  # [{"config": ..., "seconds": ...} or {"config": ..., "error": ...}]
    from_cache: bool = False

    def as_dict(self) -> dict:
        return {"kernel": self.kernel, "best": self.best, "seconds": self.seconds, "how": self.how,
                "trials": self.trials}


def _device():
    """(name, compute capability) of the GPU kernels run on, or None on the simulator."""
    if not chosen_backend().on_gpu:
        return None
    from numba import cuda  # noqa: PLC0415

    device = cuda.get_current_device()
    name = device.name.decode() if isinstance(device.name, bytes) else device.name
    return name, tuple(device.compute_capability)


# CUDA errors after which the context is lost: every later launch of the process fails the same way
STICKY_ERRORS = ("ILLEGAL_ADDRESS", "LAUNCH_FAILED", "MISALIGNED_ADDRESS", "ILLEGAL_INSTRUCTION", "HARDWARE_STACK_ERROR",
                 "INVALID_PC", "ASSERT")


class ContextLost(RuntimeError):
    """A candidate broke the CUDA context: the search cannot go on in this process."""


def _launch_error(exc: Exception, launch: Launch | None) -> str:
    """A failed trial's error in one line; a GPU's refusal of a block too big for an SM's registers, in words."""
    said = f"{type(exc).__name__}: {' '.join(str(exc).split())[:200]}"
    if launch is not None and "OUT_OF_RESOURCES" in said and launch.threads * 255 > 65536:
        return (f"cannot launch: a block of {launch.threads} threads may use {65536 // launch.threads} registers a "
                "thread (65,536 an SM), and this config's kernel needs more (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES): "
                "fewer threads per block, or launch bounds that cap its registers")
    return said


def tune(problem: Problem, model=None, strategy: str = "grid", budget: int | None = None, cache=None,
         seed: int = 0, measure: bool | None = None) -> Result:
    """The fastest valid, correct config of ``problem``'s space.

    On a GPU each candidate is timed (`timing.median_seconds`); without one (or with ``measure=False``) ``model``
    (a `gpucourse.figures.tuning.cost_model`) predicts its time, and the result's ``how`` says so. ``cache``: a
    `Cache` (or a path) consulted first and written after.
    """
    if model is not None:
        _checked_cost_model(model)
    device = _device() if measure is not False else None
    if device is None and model is None:
        raise ValueError("no GPU here to time the candidates: pass model=gpucourse.figures.tuning.cost_model('H100') "
                         "to rank them with the cost model instead")
    if device is not None:
        how, cc = f"measured on {device[0]}", device[1]
    else:
        why = "measure=False" if measure is False else "no GPU here to time it"
        how, cc = f"predicted for {model.device} by the cost model ({why})", model.compute_capability
    cache = Cache(cache) if isinstance(cache, (str, Path)) else cache
    if cache is not None and not (hasattr(cache, "get") and hasattr(cache, "put")):
        raise TypeError(f"cache is a Cache or the path of its JSON file, such as cache='tuning.json', not "
                        f"{type(cache).__name__} {cache!r}")
    search = {"parameters": problem.space.parameters, "strategy": strategy, "budget": budget, "seed": seed}
    key = cache_key(problem.kernel, problem.shapes, problem.dtypes, device[0] if device else f"model:{model.device}",
                    cc, versions(), search)
    if cache is not None and (hit := cache.get(key)) is not None:
        return Result(hit["kernel"], hit["best"], hit["seconds"], hit["how"], hit["trials"], from_cache=True)
    trials = []
    for config in candidates(problem.space, strategy, budget, seed):
        launch = None
        try:
            if device is None:
                seconds = price(problem, config, model)
            else:
                launch = problem.build(config)
                launch()
                if (wrong := problem.wrong()) is not None:
                    raise WrongResult(wrong)
                seconds = median_seconds(launch)
        except WrongResult as exc:
            trials.append({"config": config, "error": f"wrong result: {exc}"})
            continue
        except Exception as exc:  # a config that does not compile or launch is a trial that failed, not a crash
            said = _launch_error(exc, launch)
            if device is not None and any(f"CUDA_ERROR_{name}" in str(exc) for name in STICKY_ERRORS):
                raise ContextLost(f"config {config} broke the GPU's CUDA context ({said}), after {len(trials)} "
                                  "trials: every later launch of this process would fail too. Fix the kernel for this "
                                  "config (run it on the simulator, which names the faulting thread), or leave the "
                                  "config out of the space; then restart the kernel (Python) and tune again") from exc
            trials.append({"config": config, "error": said})
            continue
        trials.append({"config": config, "seconds": seconds})
    timed = [t for t in trials if "seconds" in t]
    best = min(timed, key=lambda t: t["seconds"]) if timed else None
    result = Result(problem.kernel, best and best["config"], best and best["seconds"], how, trials)
    if cache is not None and best is not None:
        cache.put(key, result.as_dict())
    return result
