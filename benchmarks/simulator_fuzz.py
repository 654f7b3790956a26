"""Differential fuzzing of the course simulator against a GPU: random small kernels, the same inputs, both outputs.

    python benchmarks/simulator_fuzz.py --kernels 2000 --seed 1   # on a GPU: records the `fuzz` section
    python benchmarks/simulator_fuzz.py --kernels 50 --cpu-only   # anywhere: generation, simulator, PTX

``--workers`` processes (half the CPUs, at most 8) share the kernels: NVVM compiles each on a CPU, so one
process leaves the GPU idle; 2,000 kernels then fit one of the device tool's 10-minute commands.

Each kernel is drawn from a grammar: integer and float arithmetic over arrays of every numba number type
(int8 to uint64, float16 to float64) and literals, so that numba's mixed-type promotion decides the types;
comparisons, ``min``/``max``, powers with a small integer exponent (``**``, ``pow``, and ``math.pow`` with an int32
exponent), ``divmod`` of integers, ``round`` to a number of digits and conditional expressions;
``if``/``else``, loops of uniform and per-thread length and early returns; a variable assigned an integer and, in
a branch or a loop, a float (or the other way round), which numba types as the two unified; shared memory written by every
thread, a barrier, then read at another thread's place; warp shuffles and votes over full warps; integer
atomics into one total. Outputs go to a float64 array (float results), an int64 array (integer results) and a
float64 array (the running value); a final math function (sqrt, exp, log, sin, cos, tanh) applies to some
float outputs.

The documented bounds, where a GPU and the simulator legitimately differ: results of math functions within
`MATH_ULPS` units in the last place of their type, or both under its smallest normal number (libdevice
against NumPy); everything else bit for bit. Counted apart, with their names and causes (`APART`): kernels whose
every difference a known behaviour of the GPU's compilers accounts for: a bug of its assembler
(`unwraps_int16_negation`: ptxas 12.9 to 13.2 keep -x of an int16 unwrapped where it stays an integer) or NVVM's
sign test of an inexact float remainder, each output matching the simulator as it is or as that compiler computes
it; or a signed integer overflow, which numba leaves undefined (`nsw`), found by the simulator in its run and
reaching every output element that differs.
The grammar leaves out what is not defined or not reproducible: integer division by a value that may be zero,
shifts by the type's width or more, float-to-integer conversions of out-of-range values, a product added to
something (NVVM contracts ``a * b + c`` into a fused multiply-add; the simulator does not), float atomics.
"""

from __future__ import annotations

import argparse
import functools
import importlib.util
import json
import operator
import os
import random
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np

NAME = "fuzz"  # its section of benchmarks/RESULTS.md
WORKERS = max(1, min(8, (os.cpu_count() or 1) // 2))  # processes: each compiles its kernels with NVVM on a CPU
THREADS = (32, 64, 96)  # threads per block: whole warps, for the shuffles and votes
ELEMENTS = (37, 100, 130)  # never a multiple of the block
DTYPES = ("int8", "int16", "int32", "int64", "uint8", "uint16", "uint32", "uint64", "float16", "float32",
          "float64")
MATH = ("sqrt", "exp", "log", "sin", "cos", "tanh")
MATH_ULPS = {"float32": 4, "float64": 2}  # libdevice's stated maxima (2 and 1 ulp) plus NumPy's own error
FLOAT_LITERALS = ("0.5", "-1.25", "3.0", "0.1", "-0.0", "7.75")
JOIN_TYPES = {"int": ("int16", "int32", "int64", "uint8"), "float": ("float16", "float32", "float64")}
NARROWED = 10  # disagreements per process run again with probes (`fuzz_narrowing`): two compiles each


INT64, FLOAT64 = np.dtype("int64"), np.dtype("float64")
OPERATORS = {"+": operator.add, "-": operator.sub, "*": operator.mul, "//": operator.floordiv, "%": operator.mod,
             "&": operator.and_, "<<": operator.lshift}


@functools.cache
def _typing():
    from numba.cuda.descriptor import cuda_target  # noqa: PLC0415

    context = cuda_target.typing_context
    context.refresh()
    return context


def result_type(function, *dtypes: np.dtype) -> np.dtype:
    """The type numba-cuda gives ``function`` of values of ``dtypes`` (as a dtype; of each item of the tuple that
    ``divmod`` gives)."""
    from numba.core import types  # noqa: PLC0415
    from numba.np.numpy_support import as_dtype, from_dtype  # noqa: PLC0415

    signature = _typing().resolve_function_type(function, tuple(map(from_dtype, dtypes)), {})
    if signature is None:
        raise TypeError(f"numba-cuda has no {function} for {dtypes}")
    result = signature.return_type
    return as_dtype(result.dtype if isinstance(result, types.UniTuple) else result)


def unified(a: np.dtype, b: np.dtype) -> np.dtype:
    """The type numba unifies the two branches of a conditional expression to."""
    from numba.np.numpy_support import as_dtype, from_dtype  # noqa: PLC0415

    return as_dtype(_typing().unify_types(from_dtype(a), from_dtype(b)))


@dataclass
class Kernel:
    """A generated kernel: its name, source, input dtypes, block size and element count."""

    name: str
    source: str
    dtypes: tuple
    threads: int
    elements: int
    math_dtype: str | None  # the type of the final math function's result, if there is one


class Generator:
    """Random kernel sources from one seed."""

    def __init__(self, seed: int):
        self.random = random.Random(seed)

    def choice(self, options):
        return self.random.choice(options)

    def expression(self, depth: int, kind: str | None = None, under_sum: bool = False) -> tuple[str, np.dtype]:
        """(source, numba's type as a dtype) of an expression over the inputs ``x0[j]``... and ``t``, the thread's
        running value; ``kind`` "int" or "float" asks for one; ``under_sum``: it is an operand of + or -, so it
        may not be a product (no FMA)."""
        for _ in range(20):
            try:
                source, dtype = self._expression(depth, kind, under_sum)
            except TypeError:  # numba-cuda has no such operation for these types: draw another
                continue
            if kind is None or (dtype.kind == "f") == (kind == "float"):
                return source, dtype
        return ("3", INT64) if kind == "int" else ("0.5", FLOAT64)

    def _expression(self, depth: int, kind: str | None, under_sum: bool) -> tuple[str, np.dtype]:
        r = self.random
        if depth == 0 or r.random() < 0.25:
            return self.leaf(kind)
        form = self.choice(["+", "-", "*", "/", "//", "%", "&", "<<", "**", "min", "ternary", "neg", "cmp", "divmod",
                            "round", "math.pow"])
        if form in ("*", "**") and under_sum:  # x ** 2 is the product x * x
            form = "min"
        if form in ("+", "-", "*"):
            left, lt = self.expression(depth - 1, kind, under_sum=form != "*")
            right, rt = self.expression(depth - 1, kind, under_sum=form != "*")
            return f"({left} {form} {right})", result_type(OPERATORS[form], lt, rt)
        if form == "/" and kind != "int":
            left, lt = self.expression(depth - 1)
            right, rt = self.expression(depth - 1)
            divisor = result_type(operator.add, result_type(abs, rt), FLOAT64)
            return f"({left} / (abs({right}) + 1.0))", result_type(operator.truediv, lt, divisor)  # never zero
        if form in ("//", "%", "&", "<<", "/"):
            operator_ = "//" if form == "/" else form
            left, lt = self.expression(depth - 1, "int")
            right, rt = (str(r.randint(1, 7)), INT64) if operator_ in ("//", "%") else (str(r.randint(0, 5)), INT64)
            if operator_ == "&":
                right, rt = self.expression(depth - 1, "int")
            return f"({left} {operator_} {right})", result_type(OPERATORS[operator_], lt, rt)
        if form == "**":  # a small integer exponent: numba squares and multiplies (and inverts), as the simulator
            base, bt = self.expression(depth - 1, kind)  # an integer to a negative literal is a float in numba
            exponent = r.randint(0 if bt.kind in "iu" else -2, 3)
            source = f"pow({base}, {exponent})" if r.random() < 0.3 else f"({base} ** {exponent})"  # the same in numba
            return source, result_type(operator.pow, bt, INT64)
        if form == "divmod" and kind != "float":  # numba's machine integers (int64), its guards
            left, lt = self.expression(depth - 1, "int")
            return f"divmod({left}, {r.randint(1, 7)})[{r.randint(0, 1)}]", result_type(divmod, lt, INT64)
        if form == "round" and kind != "int":  # CPython's old fallback, and __nv_llrint
            value, _ = self.expression(depth - 1, "float")
            dtype = self.choice(["float32", "float64"])
            return f"round({dtype}({value}), {r.randint(-1, 3)})", np.dtype(dtype)
        if form == "math.pow" and kind != "int":  # an int32 exponent: libdevice's square and multiply
            value, _ = self.expression(depth - 1, "float")
            exponent, _ = self.expression(depth - 1, "int")
            dtype = self.choice(["float32", "float64"])
            return f"math.pow({dtype}({value}), int32({exponent} % 9 - 4))", np.dtype(dtype)
        if form == "min":
            left, lt = self.expression(depth - 1, kind)
            right, rt = self.expression(depth - 1, kind)
            function = self.choice([min, max])
            return f"{function.__name__}({left}, {right})", result_type(function, lt, rt)
        if form == "ternary":
            a, at = self.expression(depth - 1, kind)
            b, bt = self.expression(depth - 1, kind)
            condition = self.comparison(depth - 1)
            return f"({a} if {condition} else {b})", unified(at, bt)
        if form == "neg":
            value, vt = self.expression(depth - 1, kind, under_sum)  # -(a * b) + c may become fma(-a, b, c)
            return f"(-{value})", result_type(operator.neg, vt)
        return f"(1 if {self.comparison(depth - 1)} else 0)", INT64

    def comparison(self, depth: int) -> str:
        left, _ = self.expression(depth)
        right, _ = self.expression(depth)
        return f"({left} {self.choice(['<', '<=', '>', '>=', '==', '!='])} {right})"

    def leaf(self, kind: str | None) -> tuple[str, np.dtype]:
        r = self.random
        options = [k for k, dtype in enumerate(self.dtypes) if kind is None or (dtype[0] == "f") == (kind == "float")]
        roll = r.random()
        if roll < 0.15 and kind != "float":
            return str(r.randint(-7, 7)), INT64
        if roll < 0.25 and kind != "int":
            return self.choice(FLOAT_LITERALS), FLOAT64
        if roll < 0.35 and kind != "int":
            return "t", FLOAT64
        if not options:
            return ("3", INT64) if kind == "int" else ("0.5", FLOAT64)
        k = self.choice(options)
        return f"x{k}[j]", np.dtype(self.dtypes[k])

    def kernel(self, number: int) -> Kernel:
        r = self.random
        self.dtypes = tuple(r.sample(DTYPES, r.randint(2, 4)))
        threads, elements = self.choice(THREADS), self.choice(ELEMENTS)
        arguments = ", ".join(f"x{k}" for k in range(len(self.dtypes)))
        lines = [f"def k{number}({arguments}, out, iout, tout, total):",
                 "    i = cuda.grid(1)",
                 "    j = min(i, x0.size - 1)",  # every thread reads; those past the end write nothing
                 "    t = 0.25"]
        features = r.sample(["shared", "warp", "atomic", "loop", "branch", "thread_loop", "while", "join"],
                            r.randint(1, 4))
        for feature in features:
            lines += ["    " + line for line in self.feature(feature, threads)]
        if r.random() < 0.3:  # an early return, after every barrier and warp-wide operation
            condition = self.comparison(1)
            lines += [f"    if {condition} and i % 3 == 0:", "        if i < out.size:",
                      "            tout[i] = t", "        return"]
        value, dtype = self.expression(3)
        kind, math_dtype = "float" if dtype.kind == "f" else "int", None
        if kind == "float" and r.random() < 0.4:
            function, dtype = self.choice(MATH), self.choice(["float32", "float64"])
            argument = {"sqrt": f"abs({dtype}({value}))", "log": f"abs({dtype}({value})) + 1.0",
                        "exp": f"min({dtype}({value}), 20.0)"}.get(function, f"{dtype}({value}) % 100.0")
            value, math_dtype = f"math.{function}({dtype}({argument}))", dtype
        target = "iout" if kind == "int" else "out"
        lines += ["    if i < out.size:", f"        {target}[i] = {value}", "        tout[i] = t"]
        source = "\n".join(lines) + "\n"
        return Kernel(f"k{number}", source, self.dtypes, threads, elements, math_dtype)

    def typed(self, kind: str) -> str:
        """An expression of ``kind`` ("int" or "float"), converted to one of numba's types of that kind at times (a
        float type only of a float: converting one out of an integer's range is undefined), never a product (it is
        added to something)."""
        value, _ = self.expression(2, kind, under_sum=True)
        if self.random.random() < 0.5:
            return value
        return f"{self.choice(JOIN_TYPES[kind])}({value})"

    def join(self) -> list[str]:
        """``v`` assigned a value of one kind and then, in a branch or a loop, of the other (the literal 0, as in a
        ReLU's ``if v < 0: v = 0``, among them): numba types each version of ``v`` on its own and converts them to
        the two unified (float32 and an integer: float64) where the branch or loop joins them, so that ``v`` read
        before the branch, or in it, has its own version's type; then added to ``t``, as it is or through a square
        root (correctly rounded on a GPU too) of ``v`` plus an integer or of ``-v``, whose result numba may type
        wider than it computes it."""
        first = self.choice(["int", "float"])
        start = self.typed(first)
        second = "float" if first == "int" else "int"
        other = self.choice(["0", str(self.random.randint(-7, 7)), self.typed(second)] if second == "int" else
                            [self.choice(FLOAT_LITERALS), self.typed(second)])
        use = self.choice(["t = t + v", f"t = t + math.sqrt(abs(v + {self.leaf('int')[0]}))",
                           "t = t + math.sqrt(abs(-v))"])
        shape = self.choice(["branch", "loop", "read around"])
        if shape == "branch":
            return [f"v = {start}", f"if v < {self.expression(1)[0]}:", f"    v = {other}", use]
        if shape == "read around":  # float32 arithmetic where v is a float32; a division, which NVVM never fuses
            return [f"v = {start}", "t = t + v / float32(0.75)", f"if v < {self.expression(1)[0]}:",
                    f"    v = {other}", "    t = t - v", use]
        return [f"v = {start}", "for k in range(i % 4):", f"    v = v + {other}", use]

    def feature(self, feature: str, threads: int) -> list[str]:
        r = self.random
        value, kind = self.expression(2, "float")
        if feature == "shared":
            dtype = self.choice(["float32", "float64", "int32", "int64"])
            source = value if dtype[0] == "f" else self.expression(2, "int")[0]
            shift = r.randint(1, threads - 1)
            return [f"s = cuda.shared.array({threads}, {dtype})",
                    f"s[cuda.threadIdx.x] = {source}",
                    "cuda.syncthreads()",
                    f"t = t + s[(cuda.threadIdx.x + {shift}) % {threads}]",
                    "cuda.syncthreads()"]
        if feature == "warp":
            operation = self.choice(["shfl_sync", "shfl_down_sync", "shfl_up_sync", "shfl_xor_sync", "all_sync",
                                     "any_sync", "ballot_sync"])
            if operation in ("all_sync", "any_sync", "ballot_sync"):
                return [f"t = t + cuda.{operation}(0xFFFFFFFF, {self.comparison(1)})"]
            dtype = self.choice(["float32", "float64", "int32", "int64"])
            shuffled = f"{dtype}({value})" if dtype[0] == "f" else f"{dtype}({self.expression(2, 'int')[0]})"
            # lanes and offsets past 0..31 too: shfl.sync reads their low 5 bits
            return [f"t = t + cuda.{operation}(0xFFFFFFFF, {shuffled}, {r.randint(-4, 63)})"]
        if feature == "atomic":
            integer, _ = self.expression(2, "int")
            operation = self.choice(["add", "max", "min"])
            return ["if i < out.size:", f"    cuda.atomic.{operation}(total, 0, int64({integer}))"]
        if feature == "loop":
            return [f"for k in range({r.randint(0, 5)}):", f"    t = t / 2.0 + {value} % 10.0"]
        if feature == "thread_loop":
            return ["for k in range(i % 5):", "    t = min(t + k, 100.0)", "    if t > 50.0:", "        break"]
        if feature == "while":
            return ["m = i % 7", "while m > 0:", "    m -= 2", "    t = t - 0.5"]
        if feature == "join":
            return self.join()
        condition = self.comparison(2)
        other, _ = self.expression(2, "float")
        return [f"if {condition}:", f"    t = {value} % 64.0", "else:", f"    t = {other} % 64.0"]


HEADER = "import math\nfrom numba import cuda, float32, float64, int16, int32, int64, uint8\nfrom numba.types import float16\n\n"


def load(kernels: list[Kernel], folder: Path):
    """The kernels as ``cuda.jit`` dispatchers, from a module written to ``folder`` (so that they have source)."""
    from numba import cuda  # noqa: PLC0415

    path = folder / f"fuzz_{abs(hash(kernels[0].source))}.py"
    path.write_text(HEADER + "\n\n".join(k.source for k in kernels))
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return [cuda.jit(getattr(module, k.name)) for k in kernels]


def inputs(kernel: Kernel, seed: int) -> list[np.ndarray]:
    """Random inputs of the kernel's dtypes, from small values to a few extremes of each type."""
    rng = np.random.default_rng(seed)
    arrays = []
    for dtype in map(np.dtype, kernel.dtypes):
        if dtype.kind == "f":
            values = rng.uniform(-8, 8, kernel.elements).astype(dtype)
        else:
            info = np.iinfo(dtype)
            values = rng.integers(max(info.min, -50), min(info.max, 50), kernel.elements, endpoint=True).astype(dtype)
            values[rng.integers(0, kernel.elements, 3)] = (info.min, info.max, 0)
        arrays.append(values)
    return arrays


OUTPUTS = ("iout", "total", "tout", "out")


def launch(dispatcher, kernel: Kernel, arrays: list[np.ndarray], probes: int = 0) -> dict[str, np.ndarray]:
    """One launch on the current backend; the outputs, copied to the host. ``probes``: rows of the ``probe`` array
    of a probed copy (`fuzz_narrowing`), one column per thread, NaN until stored."""
    from numba import cuda  # noqa: PLC0415

    blocks = -(-kernel.elements // kernel.threads)
    outputs = {"out": np.zeros(kernel.elements), "iout": np.zeros(kernel.elements, np.int64),
               "tout": np.zeros(kernel.elements), "total": np.zeros(1, np.int64)}
    if probes:
        outputs["probe"] = np.full((probes, blocks * kernel.threads), np.nan)
    device = [cuda.to_device(a) for a in (*arrays, *outputs.values())]
    dispatcher[blocks, kernel.threads](*device)
    return dict(zip(outputs, (d.copy_to_host() for d in device[len(arrays):])))


def differing(kernel: Kernel, gpu: dict, simulated: dict, name: str) -> np.ndarray:
    """Where output ``name`` differs beyond the documented bounds (a mask)."""
    a, b = gpu[name], simulated[name]
    if name in ("iout", "total"):
        return a != b
    same = (a.view(np.int64) == b.view(np.int64)) | (np.isnan(a) & np.isnan(b))
    if name == "out" and kernel.math_dtype:
        info = np.finfo(kernel.math_dtype)
        with np.errstate(all="ignore"):
            bound = MATH_ULPS[kernel.math_dtype] * info.eps * np.maximum(np.abs(a), np.abs(b)) + info.tiny
            same |= np.abs(a - b) <= bound
    return ~same


def disagreement(kernel: Kernel, gpu: dict, simulated: dict, names=OUTPUTS) -> str | None:
    """What differs beyond the documented bounds in the outputs ``names`` (None: nothing)."""
    for name in names:
        where = np.flatnonzero(differing(kernel, gpu, simulated, name))[:5].tolist()
        if where:
            return f"{name} differs at {where}: {gpu[name][where].tolist()} against {simulated[name][where].tolist()}"
    return None


def simulated_launch(dispatcher, kernel: Kernel, arrays: list[np.ndarray], probes: int = 0) -> dict[str, np.ndarray]:
    """`launch` on the simulator."""
    from gpucourse.run import simulated  # noqa: PLC0415

    with simulated():
        return launch(dispatcher, kernel, arrays, probes)


def unwraps_int16_negation(assembler) -> bool:
    """Whether ``assembler`` (`launch_assembler`) is a ptxas that leaves -x of an int16 unwrapped where it stays an
    integer: 12.9 to 13.2 do (read on their SASS; older ones taken to), 13.3 and later wrap as PTX says."""
    return assembler is not None and assembler[1] < (13, 3)


# Known behaviours of the GPU's compilers, not the simulator's: a kernel whose every difference one of them
# accounts for is counted apart under its name, with what the section says of it.
APART = {
    "the assembler's int16 negation": (
        "-x of an int16 -32768 kept as 32768 where it stays an integer, which ptxas 12.9 to 13.2 do (read on their "
        "SASS; older ones are taken to) where PTX, numba and ptxas 13.3 and later wrap it to -32768, as the "
        "simulator does; each output matched the simulator run as that assembler computes it "
        "(`int16_negation_unwrapped`)"),
    "NVVM's remainder sign": (
        "a float `%` or `//` whose quotient |a / b| reaches 2^53, where the GPU's remainder (NVVM's `frem`: |a| - "
        "floor(|a| / |b|) |b| in one fused multiply-add) is not exact and can have the other sign than a: numba "
        "moves it into the divisor's sign by its sign, which NVVM's optimizer replaces by the dividend's where it "
        "can prove that (a from an unsigned integer, say); each output matched the simulator run so "
        "(`remainder_sign_of_dividend`)"),
    "signed overflow": (
        "a signed integer `+`, `-` or `*` overflowed in the simulator's run (`signed_overflows`, the first "
        "named) and reached every output element that differs (through the threads that overflowed and what they "
        "stored, shuffled or voted): numba marks them `nsw`, so LLVM and NVVM compile as if it never happens "
        "(`x + y < y` becomes `x < 0`) and the GPU's result is undefined, where the simulator wraps"),
}


def explanation(kernel: Kernel, gpu: dict, on_simulator: dict, dispatcher, arrays, unwrapping: bool) -> str | None:
    """The `APART` name (``"signed overflow (int64 +: ...)"`` with what overflowed) of the known compiler behaviour
    that accounts for each output the GPU gives, or None. The int16 negation only where ``unwrapping`` (the GPU's
    assembler is one that `unwraps_int16_negation`); it and the remainder's sign where each output is the
    simulator's as it is or as the simulator computes with that behaviour; a signed overflow where it reached
    every output element that differs (`Overflows`: through the threads that overflowed and what they stored,
    shuffled or voted)."""
    from gpucourse.simulator import (  # noqa: PLC0415
        int16_negation_unwrapped, remainder_sign_of_dividend, signed_overflows)

    def outputs(behaviour):
        try:
            with behaviour() as found:
                return simulated_launch(dispatcher, kernel, arrays), found
        except Exception:  # noqa: BLE001 (a fault of the other simulation: not explained, reported as it is)
            return None, None

    def each_output_explained(behaviour) -> bool:
        other, _ = outputs(behaviour)
        return other is not None and not any(
            disagreement(kernel, gpu, on_simulator, (name,)) and disagreement(kernel, gpu, other, (name,))
            for name in OUTPUTS)

    if unwrapping and each_output_explained(int16_negation_unwrapped):
        return "the assembler's int16 negation"
    if each_output_explained(remainder_sign_of_dividend):
        return "NVVM's remainder sign"
    _, overflows = outputs(signed_overflows)
    if not overflows or not overflows.found:
        return None
    for name in OUTPUTS:
        differs, reached = differing(kernel, gpu, on_simulator, name), overflows.reached(name)
        if differs.any() and (reached is None or (differs & ~reached).any()):
            return None
    return f"signed overflow ({overflows.found[0]})"


def cause(explained: str) -> str:
    """The `APART` name of an `explanation`."""
    return explained.split(" (")[0]


def run(count: int, seed: int, on_gpu: bool, batch: int = 50, report=print, shard: tuple[int, int] = (0, 1)
        ) -> tuple[int, list[str], list[str]]:
    """Generate ``count`` kernels from ``seed``, run each on the simulator (and the GPU when ``on_gpu``); the
    number run, the disagreements, each with its kernel's source, and the kernels counted apart, each as
    ``"k12: <explanation>"`` (a known behaviour of the GPU's compilers accounts for every difference: `explanation`).
    Each disagreement also says where the two runs part (`fuzz_narrowing.narrow`).
    ``shard`` (k, n): only the kernels whose number is k modulo n (every kernel is still generated, so that each has
    the same source in every shard)."""
    from fuzz_narrowing import narrow  # noqa: PLC0415 (benchmarks/, on the path of this script)

    from gpucourse.run import launch_assembler  # noqa: PLC0415

    generator = Generator(seed)
    every = [generator.kernel(number) for number in range(count)]
    mine = [(number, kernel) for number, kernel in enumerate(every) if number % shard[1] == shard[0]]
    folder = Path(tempfile.mkdtemp(prefix="gpucourse_fuzz_"))
    sys.path.insert(0, str(folder))
    disagreements, apart, done = [], [], 0
    unwrapping = on_gpu and unwraps_int16_negation(launch_assembler())
    for start in range(0, len(mine), batch):
        numbered = mine[start:start + batch]
        for (number, kernel), dispatcher in zip(numbered, load([k for _, k in numbered], folder)):
            arrays = inputs(kernel, seed * 100_003 + number)
            on_simulator = simulated_launch(dispatcher, kernel, arrays)
            if on_gpu:
                gpu_outputs = launch(dispatcher, kernel, arrays)
                problem = disagreement(kernel, gpu_outputs, on_simulator)
                explained = problem and explanation(kernel, gpu_outputs, on_simulator, dispatcher, arrays, unwrapping)
                if explained:
                    apart.append(f"{kernel.name}: {explained}")
                elif problem:
                    where = narrow(kernel, arrays, launch, simulated_launch, lambda ks: load(ks, folder)) \
                        if len(disagreements) < NARROWED else f"narrowed: not probed (only the first {NARROWED} are)"
                    disagreements.append(f"{problem}\n{where}\n{kernel.source}")
            done += 1
        where = f"shard {shard[0] + 1} of {shard[1]}: " if shard[1] > 1 else ""
        report(f"{where}{done} kernels, {counted(disagreements, apart)}", flush=True)
    return done, disagreements, apart


def by_cause(apart: list[str]) -> dict[str, list[str]]:
    """The kernels counted apart (`run`'s ``"k12: explanation"``) by `APART` name, in `APART`'s order and by number."""
    kernels = sorted(apart, key=lambda entry: int(entry.split(":")[0][1:]))
    return {name: [k for k in kernels if cause(k.split(": ", 1)[1]) == name] for name in APART
            if any(cause(k.split(": ", 1)[1]) == name for k in kernels)}


def counted(disagreements: list, apart: list) -> str:
    """``"3 disagreements"``, and the kernels counted apart by cause where there are any."""
    causes = ", ".join(f"{len(kernels)} {name}" for name, kernels in by_cause(apart).items())
    return f"{len(disagreements)} disagreements" + (f", {len(apart)} apart ({causes})" if apart else "")


def run_in_processes(count: int, seed: int, cpu_only: bool, workers: int) -> tuple[int, list[str], list[str]]:
    """`run` split over ``workers`` processes, each with its own CUDA context (NVVM compiles on the CPU: one
    process would leave the GPU idle); their counts and lists put together."""
    import subprocess  # noqa: PLC0415

    folder = Path(tempfile.mkdtemp(prefix="gpucourse_fuzz_shards_"))
    shards = [subprocess.Popen([sys.executable, __file__, "--kernels", str(count), "--seed", str(seed),
                                "--shard", f"{k}/{workers}", "--shard-result", str(folder / f"{k}.json"),
                                *(["--cpu-only"] if cpu_only else [])]) for k in range(workers)]
    failed = [k for k, process in enumerate(shards) if process.wait() != 0]
    if failed:
        raise SystemExit(f"simulator_fuzz: shard {', '.join(str(k + 1) for k in failed)} of {workers} failed "
                         "(its output is above)")
    results = [json.loads((folder / f"{k}.json").read_text()) for k in range(workers)]
    return (sum(r["done"] for r in results), [d for r in results for d in r["disagreements"]],
            [k for r in results for k in r["apart"]])


def section(count: int, disagreements: list[str], seed: int, device: str, apart: list[str] = (),
            assembler=None) -> str:
    """The `fuzz` section of RESULTS.md; ``assembler``: `launch_assembler`'s (name, version)."""
    from common import package_versions, today  # noqa: PLC0415

    lines = [
        "## Differential fuzzing: random kernels on the GPU and on the simulator",
        "",
        f"`python benchmarks/simulator_fuzz.py --kernels {count} --seed {seed}` on {device}.",
        "",
        f"- Date: {today()}",
        f"- Versions: {package_versions('numba', 'numba-cuda', 'numpy')}",
        "- Assembler of the GPU's code: " + (f"{assembler[0]} {'.'.join(map(str, assembler[1]))}" if assembler
                                               else "unknown"),
        f"- Seed: {seed}",
        f"- **{count:,} kernels**, **{len(disagreements)} disagreements** beyond the documented bounds (math "
        f"functions within {MATH_ULPS['float32']} ulp in float32 and {MATH_ULPS['float64']} ulp in float64; "
        "everything else bit for bit).",
    ]
    for name, kernels in by_cause(apart).items():
        count_words = f"{len(kernels)} kernel{'s' * (len(kernels) != 1)}"
        lines.append(f"- Apart, {name}: {count_words} whose every difference is a known behaviour of the GPU's "
                     f"compilers, not the simulator's: {APART[name]}: " + "; ".join(
                         k.replace(f": {name}", "") for k in kernels) + ".")
    if disagreements:
        lines += ["", f"The first {min(10, len(disagreements))}: the output that differs, the GPU's values against "
                      "the simulator's, and the kernel (`--log` writes them all)."]
    for problem in disagreements[:10]:
        lines += ["", "```", problem.strip(), "```"]
    return "\n".join(lines)


def main() -> int:
    """0, or 1 when the GPU and the simulator disagreed (the section records them all the same)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kernels", type=int, default=2000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--cpu-only", action="store_true", help="generate and simulate only; record nothing")
    parser.add_argument("--quick", action="store_true", help="100 kernels, record nothing (gpu-check --quick)")
    parser.add_argument("--workers", type=int, default=WORKERS,
                        help=f"processes that share the kernels (default here {WORKERS}: half the CPUs, at most 8)")
    parser.add_argument("--log", type=Path, help="write every disagreement to this file (gpu-check: to its --out)")
    parser.add_argument("--shard", help=argparse.SUPPRESS)  # "k/n": one worker's share
    parser.add_argument("--shard-result", type=Path, help=argparse.SUPPRESS)  # where that worker writes its result
    arguments = parser.parse_args()
    if arguments.quick:
        arguments.kernels = 100
    sys.path.insert(0, str(Path(__file__).parent))
    from common import without_gpu  # noqa: PLC0415 (the benchmarks' one line when no GPU is here)

    if not arguments.cpu_only and without_gpu("simulator_fuzz.py"):  # before gpucourse, which refuses a missing GPU
        return 0
    import gpucourse  # noqa: PLC0415
    on_gpu = gpucourse.BACKEND.on_gpu and not arguments.cpu_only
    if arguments.shard:
        shard = tuple(map(int, arguments.shard.split("/")))
        done, disagreements, apart = run(arguments.kernels, arguments.seed, on_gpu, shard=shard)
        arguments.shard_result.write_text(json.dumps({"done": done, "disagreements": disagreements,
                                                      "apart": apart}))
        return 0
    if arguments.workers > 1:
        count, disagreements, apart = run_in_processes(arguments.kernels, arguments.seed, not on_gpu,
                                                       arguments.workers)
        print(f"{count} kernels in {arguments.workers} processes, {counted(disagreements, apart)}")
    else:
        count, disagreements, apart = run(arguments.kernels, arguments.seed, on_gpu)
    if on_gpu and not arguments.quick:
        from numba import cuda  # noqa: PLC0415

        from gpucourse.course import record  # noqa: PLC0415

        name = cuda.get_current_device().name
        from gpucourse.run import launch_assembler  # noqa: PLC0415

        text = section(count, disagreements, arguments.seed, name.decode() if isinstance(name, bytes) else name,
                       apart, launch_assembler())
        print(text)
        record(NAME, text)
    if arguments.log is not None:
        listed = "".join(f"Counted apart ({name}): {'; '.join(kernels)}\n\n"
                         for name, kernels in by_cause(apart).items())
        arguments.log.write_text(f"{len(disagreements)} disagreements in {count} kernels, seed {arguments.seed}: "
                                 "the GPU's values against the simulator's\n\n" + listed + "\n".join(disagreements))
    return 1 if disagreements else 0


if __name__ == "__main__":
    sys.exit(main())
