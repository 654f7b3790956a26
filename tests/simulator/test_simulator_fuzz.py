"""Differential fuzzing: random kernels on the simulator against numba's CPU compilation of the same body.

Hypothesis draws small kernels from a grammar of integer and float expressions over
array elements (float32, float64, int8 to int64, uint8 to uint32), literals, conversions
(``float32(x)``, ``int8(x)`` ...) and the math functions IEEE 754 defines exactly (floor, ceil,
trunc, fabs, copysign, sqrt, isnan, isinf, isfinite), with a variable reassigned in a loop,
variables assigned values of two types in branches and loops (numba types each version of a
variable on its own and converts where a branch or loop joins them: ``v = f[i]; if v < 0: v = 0``
makes ``v`` a float64 after the ``if``, a float32 before it) and read around the join, swapped,
a local array whose stores convert to its type, and a device function whose returns have two types. Each kernel runs on the
simulator and, as ``numba.njit(error_model='numpy')``, over a loop of its threads on the
CPU, which types every expression as numba-cuda does; the outputs must agree bit for bit. A
body that numba refuses to type (``min`` of an int8 and a uint64 is a float64, which ``&``
refuses) must be refused by the simulator too. Where numba's CPU and CUDA targets type a function
differently (``math.floor`` is an int on a CPU, a float on a GPU), the twin calls NumPy's.

Left out, because a GPU and a CPU legitimately differ there: transcendental functions
(libdevice against libm), ``**``, fast-math, fused multiply-add (NVVM contracts ``a * b + c``
on a GPU; neither the CPU build nor the simulator do), integer division and remainder by
a value that may be zero (``//`` and ``%`` take positive literal divisors), a float's ``//``
and ``%`` where the quotient rounds (a GPU's remainder is ``|a| - floor(|a| / |b|) |b|``, not
C's fmod: its dividend is kept within +-1000), shifts by more than a few bits, and float-to-integer
conversions of out-of-range values (outputs are float64; only integers convert to integer types). Deterministic: ``derandomize=True``, a fixed number of examples.
"""

import importlib.util
import itertools
import math
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from numba import types
from numba.core.errors import TypingError
from numba.extending import overload

from gpucourse import simulated
from gpucourse.run import KernelCompileError

THREADS = 70  # three warps, the last one partial
OUTPUTS = 3
# uint64 is left out: numba types uint64 with a signed integer as float64, which this grammar's int/float kinds
# do not follow (benchmarks/simulator_fuzz.py asks numba's typing instead, and has it)
ARRAYS = {"f": np.float32, "g": np.float64, "a": np.int8, "b": np.uint8, "c": np.int16, "d": np.uint16,
          "m": np.int32, "n": np.int64, "u": np.uint32}
FOLDER = Path(tempfile.mkdtemp(prefix="gpucourse_fuzz_"))
_numbers = itertools.count()

INT_LITERALS = st.integers(-7, 7).map(str)
FLOAT_LITERALS = st.sampled_from(["0.5", "-1.25", "3.0", "0.001", "-0.0", "7.75"])


@st.composite
def expressions(draw, depth: int = 3, variables: tuple = ("t",), arrays: bool = True, helper: bool = False):
    """(source, kind) of an expression; kind is "int" or "float", which decides what it may be used in (a variable
    or the device function's result counts as a float). It may read the ``variables``, the ``arrays`` at ``i`` and
    call ``helper(a, b)``, the kernel's device function (`helpers`)."""
    if helper and draw(st.integers(0, 3)) == 0:
        first, _ = draw(expressions(1, variables, arrays))
        second, _ = draw(expressions(1, variables, arrays))
        return f"helper({first}, {second})", "float"
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        name = draw(st.sampled_from([*(ARRAYS if arrays else ()), *variables, "int_literal", "float_literal"]))
        if name == "int_literal":
            return draw(INT_LITERALS), "int"
        if name == "float_literal":
            return draw(FLOAT_LITERALS), "float"
        if name in variables:
            return name, "float"
        return f"{name}[i]", "float" if np.dtype(ARRAYS[name]).kind == "f" else "int"
    left, left_kind = draw(expressions(depth - 1, variables, arrays, helper))
    right, right_kind = draw(expressions(depth - 1, variables, arrays, helper))
    both_int = left_kind == right_kind == "int"
    kind = "int" if both_int else "float"
    form = draw(st.sampled_from(["+", "-", "*", "/", "//", "%", "bits", "shift", "unary", "min", "ternary",
                                 "exact"]))
    if form == "exact":  # math functions whose result IEEE 754 defines exactly, on a GPU as on a CPU
        function = draw(st.sampled_from(["floor", "ceil", "trunc", "fabs", "copysign", "sqrt", "isnan", "isinf",
                                         "isfinite"]))
        if function in ("floor", "ceil", "trunc"):  # of a float64: numba-cuda gives a float64, as C (the CPU an int)
            return f"math.{function}(min(max({left}, -1000.0), 1000.0))", "float"
        if function == "copysign":
            return f"math.copysign({left}, {right})", "float"
        if function == "sqrt":
            return f"math.sqrt(abs({left}))", "float"
        if function == "fabs":
            return f"math.fabs({left})", "float"
        return f"(math.{function}({left}) + {right})", kind
    if form in "+-*":
        return f"({left} {form} {right})", kind
    if form == "/":
        return f"({left} / {right})", "float"
    if form in ("//", "%"):  # a float's quotient kept small: where it rounds, a GPU's remainder is not C's fmod
        dividend = left if left_kind == "int" else f"min(max({left}, -1000.0), 1000.0)"
        return f"({dividend} {form} {draw(st.integers(2, 7))})", left_kind
    if form == "bits" and both_int:
        return f"({left} {draw(st.sampled_from(['&', '|', '^']))} {right})", "int"
    if form == "shift" and left_kind == "int":
        return f"({left} {draw(st.sampled_from(['<<', '>>']))} {draw(st.integers(0, 5))})", "int"
    if form == "unary":
        operator = draw(st.sampled_from(["-", "~"] if left_kind == "int" else ["-", "abs"]))
        return (f"abs({left})" if operator == "abs" else f"({operator}{left})"), left_kind
    if form == "min":
        return f"{draw(st.sampled_from(['min', 'max']))}({left}, {right})", kind
    condition, _ = draw(expressions(depth - 1, variables, arrays, helper))
    return f"({left} if {condition} < {right} else {right})", kind


UNSIGNED = [name for name, dtype in ARRAYS.items() if np.dtype(dtype).kind == "u"]
CASTS = ("float32", "float64", "int8", "int16", "int32", "int64", "uint8", "uint16", "uint32")


def stays_integer(expression: str, kind: str) -> bool:
    """Whether an expression of ``kind`` is an integer whatever numba's promotion: it reads no unsigned array (numba
    types a signed and an unsigned 64-bit integer together as float64)."""
    return kind == "int" and not any(f"{name}[i]" in expression for name in UNSIGNED)


@st.composite
def cast(draw, depth: int, variables: tuple = ("t",), arrays: bool = True):
    """``type(expression)``: a float or an integer type of an integer, a float type of a float (a float out of an
    integer's range has no defined conversion; see `stays_integer`)."""
    expression, kind = draw(expressions(depth, variables, arrays))
    name = draw(st.sampled_from(CASTS if stays_integer(expression, kind) else CASTS[:2]))
    return f"{name}({expression})", "float" if name.startswith("float") else "int"


@st.composite
def joined(draw, name: str) -> list[str]:
    """``name`` assigned one type and then, in a branch or a loop, another: numba types each version of the variable
    on its own and converts them to the two unified (float32 and an integer: float64) where the branch or loop joins
    them, so a read before the join or inside the branch sees its version's type ("read around")."""
    first, _ = draw(st.one_of(expressions(1), cast(1)))
    second, _ = draw(st.one_of(expressions(1), cast(1), INT_LITERALS.map(lambda s: (s, "int"))))
    condition, _ = draw(expressions(1))
    shape = draw(st.sampled_from(["if", "if-else", "for", "while", "break", "read around"]))
    if shape == "read around":  # reads of each version: before the branch, in it, after the join
        return [f"{name} = {first}", f"{name}e = {name} * float32(0.75) + {condition}", f"if {condition} < {second}:",
                f"    {name} = {second}", f"    {name}e = {name}e - {name}", f"{name} = {name} + {name}e"]
    if shape == "if":
        return [f"{name} = {first}", f"if {condition} < {second}:", f"    {name} = {second}"]
    if shape == "if-else":
        other, _ = draw(st.one_of(expressions(1), INT_LITERALS.map(lambda s: (s, "int"))))
        return [f"if {condition} < 0:", f"    {name} = {first}", "else:", f"    {name} = {other}"]
    if shape == "for":
        return [f"{name} = {first}", f"for k in range(u[i] % 4):", f"    {name} = {name} + {second}"]
    if shape == "while":
        return [f"{name} = {first}", "k = b[i] % 5", "while k > 0:", f"    {name} = min({name}, {second})",
                "    k -= 2"]
    return [f"{name} = {first}", "for k in range(3):", f"    if {condition} < k:", "        break",
            f"    {name} = {second}"]


LOCAL_TYPES = ("float32", "float64", "int16", "int32", "uint8")


@st.composite
def local_array(draw, variables: tuple) -> list[str]:
    """``loc``, a local array of 3 of one type, its elements stored from expressions (an integer type only from
    integers that stay integers, else a literal, which wraps: -5 in a uint8 is 251) and from each other."""
    dtype = draw(st.sampled_from(LOCAL_TYPES))
    lines = [f"loc = cuda.local.array(3, {dtype})"]
    for k in range(2):
        expression, kind = draw(expressions(2, variables))
        if dtype.startswith("float") or stays_integer(expression, kind):
            lines.append(f"loc[{k}] = {expression}")
        else:
            lines.append(f"loc[{k}] = {draw(INT_LITERALS)}")
    lines.append(f"loc[2] = loc[0] {draw(st.sampled_from(['+', '-', '*']))} loc[1]")
    return lines


@st.composite
def helpers(draw) -> list[str]:
    """A device function ``helper(p, q)`` whose returns or assignments have different types (numba unifies them:
    a branch that returns the integer 0 where the other returns a float32 makes the result a float64), at times
    ``inline="always"`` (``# inline`` after its ``def``: numba types it inside each caller)."""
    def value(depth=2):
        return draw(st.one_of(expressions(depth, ("p", "q"), arrays=False), INT_LITERALS.map(lambda s: (s, "int"))))[0]

    shape = draw(st.sampled_from(["early", "branch", "loop"]))
    if shape == "early":
        body = [f"if p < {value(1)}:", f"    return {value()}", f"return {value()}"]
    elif shape == "branch":
        body = [f"r = {value()}", f"if q < {value(1)}:", f"    r = {value()}", "return r"]
    else:
        body = [f"r = {value()}", "for k in range(3):", f"    r = r * 0.5 + {value()}", "return r"]
    return ["def helper(p, q):" + "  # inline" * draw(st.booleans()), *(f"    {line}" for line in body)]


@st.composite
def kernel_bodies(draw) -> list[str]:
    """Statements of one thread: a variable reassigned in a loop, variables whose assignments have different types
    (`joined`), then one expression per output column."""
    start, _ = draw(expressions(1, ()))
    step, _ = draw(expressions(2))
    body = [f"t = {start}", "for k in range(2):", f"    t = t * 0.5 + {step}"]
    names = [f"v{n}" for n in range(draw(st.integers(0, 2)))]
    for name in names:
        body += draw(joined(name))
    if len(names) == 2 and draw(st.booleans()):  # a swap: each takes the other's types too
        body.append("v0, v1 = v1, v0")
    if draw(st.booleans()):  # a local array: each store converted to its type
        body += draw(local_array(("t", *names)))
        names.append("loc[2]")
    helper = draw(st.booleans())
    if helper:  # its lines come first; `build` defines it beside the kernel
        body = draw(helpers()) + body
    for column in range(OUTPUTS):
        expression, _ = draw(st.one_of(expressions(3, ("t", *names), helper=helper), cast(2, ("t", *names))))
        if names:  # every variable read at least once
            expression = f"{expression} - {names[column % len(names)]}"
        body.append(f"out[i, {column}] = {expression}")
    return body


@st.composite
def statements(draw, depth: int, arrays: bool = True) -> list[str]:
    """Statements over ``p`` and ``q``: assignments of values of every type, ``+=``, reads into a float32 ``acc``,
    nested in branches (with or without ``else``), ``for`` and ``while`` loops, to ``depth`` levels: each variable's
    versions meet, with their types, wherever control flow joins them. Without ``arrays`` (a device function's
    body) the values read its arguments ``x`` and ``y`` instead, and loops run 3 times."""
    variables, trips = (("p", "q"), "b[i] % 3") if arrays else (("x", "y", "p", "q"), "3")

    def value(variables=variables) -> str:
        return draw(st.one_of(expressions(1, variables, arrays), cast(1, variables, arrays)))[0]

    def block(depth: int, pad: str) -> list[str]:
        lines = []
        for _ in range(draw(st.integers(1, 3))):
            shape = draw(st.sampled_from(["assign", "assign", "update", "read", *(["if", "for", "while"] * bool(depth))]))
            name = draw(st.sampled_from(["p", "q"]))
            if shape == "assign":
                lines.append(f"{pad}{name} = {value()}")
            elif shape == "update":
                lines.append(f"{pad}{name} += {value()}")
            elif shape == "read":
                lines.append(f"{pad}acc = acc + {name} * float32(0.75)")
            elif shape == "if":
                lines += [f"{pad}if {value()} < {value()}:", *block(depth - 1, pad + "    ")]
                if draw(st.booleans()):
                    lines += [f"{pad}else:", *block(depth - 1, pad + "    ")]
            elif shape == "for":
                lines += [f"{pad}for k{len(pad)} in range({trips}):", *block(depth - 1, pad + "    ")]
            else:
                counter = f"w{len(pad)}"
                lines += [f"{pad}{counter} = 0", f"{pad}while {counter} < {trips}:", *block(depth - 1, pad + "    "),
                          f"{pad}    {counter} += 1"]
        return lines

    first = variables[:-2]  # the arguments, or nothing
    return [f"p = {value(first)}", f"q = {value(first)}", "acc = float32(0)", *block(depth, "")]


@st.composite
def programs(draw) -> list[str]:
    """`statements` of one thread, three deep, then p, q and acc as the outputs."""
    return ["t = 0.0", *draw(statements(3)), "out[i, 0] = p", "out[i, 1] = q", "out[i, 2] = acc"]


ARGUMENT_PAIRS = ("f[i], c[i]", "a[i], g[i]", "m[i], f[i]", "1, 0.5", "b[i], b[i]", "g[i], g[i]")


@st.composite
def device_programs(draw) -> list[str]:
    """A device function ``helper(x, y)`` of `statements`, two deep, at times ``inline="always"``, called with three
    pairs of arguments of different types: numba compiles (or, inlined, types) it for each, its variables typed
    differently in each."""
    body = [*draw(statements(2, arrays=False)), f"return {draw(st.sampled_from(['p + q + acc', 'p', 'acc - q']))}"]
    pairs = draw(st.lists(st.sampled_from(ARGUMENT_PAIRS), min_size=3, max_size=3, unique=True))
    return ["def helper(x, y):" + "  # inline" * draw(st.booleans()), *(f"    {line}" for line in body),
            "t = 0.0", *(f"out[i, {k}] = helper({pair})" for k, pair in enumerate(pairs))]


def gpu_min(a, b):
    """``min`` as numba-cuda compiles it (the CPU twin's; see `_gpu_min_max`)."""


def gpu_max(a, b):
    """``max`` as numba-cuda compiles it (the CPU twin's; see `_gpu_min_max`)."""


def _gpu_min_max(smaller: bool):
    """numba-cuda compiles ``min``/``max`` of two float32 or float64 values to PTX's ``min``/``max`` (a NaN
    loses to a number, -0.0 < +0.0: `max.f32` in the PTX), and anything else as numba's CPU target does (the
    first of equal values stays): the CPU twin's ``min``/``max``, so that it computes what a GPU does."""
    def typer(a, b):
        if not all(isinstance(t, types.Float) and t.bitwidth >= 32 for t in (a, b)):
            return (lambda a, b: min(a, b)) if smaller else (lambda a, b: max(a, b))

        def ptx(a, b):
            if a != a:
                return b
            if b != b:
                return a
            if a == 0 and b == 0:
                return a if (math.copysign(1.0, a) < 0) == smaller else b
            return a if (a < b) == smaller else b
        return ptx
    return typer


overload(gpu_min)(_gpu_min_max(True))
overload(gpu_max)(_gpu_min_max(False))


def build(body: list[str]):
    """The kernel and its CPU twin, from a module written to a file (the simulator reads kernels' source); a
    ``def helper`` that opens the body is compiled as a device function and, as ``helper_cpu``, for the twin."""
    arguments = ", ".join([*ARRAYS, "out"])
    start = body.index(next(line for line in body if not line.startswith(("def helper", " "))))
    helper, body = "\n".join(body[:start]), body[start:]
    kernel_lines = "\n".join(f"        {line}" for line in body)

    def on_the_cpu(lines: str) -> str:
        lines = lines.replace("min(", "gpu_min(").replace("max(", "gpu_max(").replace("helper(", "helper_cpu(")
        for function in ("floor", "ceil", "trunc"):  # numba's CPU math.floor gives an int, numba-cuda's a float
            lines = lines.replace(f"math.{function}(", f"np.{function}(")
        for dtype in LOCAL_TYPES:
            lines = lines.replace(f"cuda.local.array(3, {dtype})", f"np.zeros(3, np.{dtype})")
        return lines

    twin_lines = on_the_cpu(kernel_lines)
    inline = ', inline="always"' if helper.split("\n")[0].endswith("# inline") else ""
    helpers_source = (f"@cuda.jit(device=True{inline})\n{helper}\n\n\n@numba.njit(error_model='numpy')\n"
                      f"{on_the_cpu(helper)}\n\n\n") if helper else ""
    source = (
        "import math\nimport numba\nimport numpy as np\nfrom numba import cuda, " + ", ".join(CASTS) + "\n\n\n"
        + helpers_source +
        f"@cuda.jit\ndef kernel({arguments}):\n    i = cuda.grid(1)\n    if i < out.shape[0]:\n"
        + "\n".join(f"    {line}" for line in kernel_lines.splitlines()) + "\n\n\n"
        f"@numba.njit(error_model='numpy')\ndef on_cpu({arguments}):\n    for i in range(out.shape[0]):\n{twin_lines}\n"
    )
    path = FOLDER / f"fuzz_{next(_numbers)}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(path.stem, path)
    module = importlib.util.module_from_spec(spec)
    module.gpu_min, module.gpu_max = gpu_min, gpu_max
    spec.loader.exec_module(module)
    return module.kernel, module.on_cpu


def inputs() -> list[np.ndarray]:
    rng = np.random.default_rng(5)
    arrays = []
    for dtype in ARRAYS.values():
        if np.dtype(dtype).kind == "f":
            arrays.append(rng.uniform(-4, 4, THREADS).astype(dtype))
        else:
            low = 1 if np.dtype(dtype).kind == "u" else -50
            arrays.append(rng.integers(low, 50, THREADS).astype(dtype))
    return arrays


def same_bits(a: np.ndarray, b: np.ndarray) -> bool:
    """Equal values, NaN where the other is NaN, and the same sign of zero. A NaN's own sign is not compared:
    IEEE 754 leaves the sign of the NaN that ``0.0 / 0.0`` makes to the machine (x86 makes a negative one), and
    negating a NaN flips its sign in NumPy but not always in compiled code, so ``-(0.0 / 0.0)`` has either."""
    numbers = ~np.isnan(a)
    return bool(np.array_equal(a, b, equal_nan=True) and np.array_equal(np.signbit(a[numbers]), np.signbit(b[numbers])))


@settings(max_examples=20, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(kernel_bodies())
def test_simulator_computes_what_numba_compiles(body):
    kernel, on_cpu = build(body)
    arrays = inputs()
    simulated_out, compiled_out = np.zeros((THREADS, OUTPUTS)), np.zeros((THREADS, OUTPUTS))
    try:
        on_cpu(*arrays, compiled_out)
    except TypingError:  # numba types nothing of it: a GPU would not compile it either
        with pytest.raises(KernelCompileError), simulated():
            kernel[3, 32](*arrays, simulated_out)
        return
    with simulated():
        kernel[3, 32](*arrays, simulated_out)
    assert same_bits(simulated_out, compiled_out), "\n".join(body)


@settings(max_examples=25, derandomize=True, deadline=None, database=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(programs(), device_programs()))
def test_structured_programs_agree(body):
    """Branches and loops nested around the variables' assignments and reads, in a kernel or a device function
    called with arguments of several types (before the fix of read typing, 33 of 150 kernels drawn at random
    differed from numba's; before per-signature types, 12 of 400 device functions)."""
    test_simulator_computes_what_numba_compiles.hypothesis.inner_test(body)


@pytest.mark.parametrize("body", [
    ["t = f[i]", "for k in range(2):", "    t = t * 0.5 + f[i]", "out[i, 0] = t", "out[i, 1] = m[i] // 3",
     "out[i, 2] = (u[i] - n[i]) % 5"],
    # 0.0 / 0.0 negated: a NaN of either sign (found by 600 random examples; x86's compiled code keeps its sign)
    ["t = 0.0", "out[i, 0] = (-((u[i] % 4) / (g[i] // 6)))", "out[i, 1] = -0.0 * f[i]", "out[i, 2] = t"],
    # integer exponents by squaring and multiplying, as numba's int_power (NumPy's pow rounds x ** 3 once);
    # an integer base with a negative exponent: 0, 1, -1 or (for 0) the lowest integer
    ["t = g[i] ** 3", "out[i, 0] = t + f[i] ** -2", "out[i, 1] = m[i] ** -1 + (m[i] % 3 - 1) ** -3",
     "out[i, 2] = g[i] ** (u[i] % 9) + 1.5 ** 3"],
    # the pow builtin is **; divmod in numba's machine integers; round to digits by CPython's old fallback (scaled,
    # rounded, scaled back), which numba compiles for the CPU and the GPU alike and Python no longer uses
    ["t = round(g[i] * 3.75, 2)", "out[i, 0] = t + round(f[i] * 10.5, 1) + round(g[i], -1)",
     "out[i, 1] = pow(g[i], 3) + pow(f[i], -2) + divmod(m[i], 3)[0]", "out[i, 2] = divmod(n[i], -4)[1] + divmod(g[i], 0.75)[1]"],
    # a ReLU: v is float32 and an integer, float64 everywhere (the simulator once kept v's integer version's type)
    ["t = 0.0", "v0 = f[i]", "if v0 < 0:", "    v0 = 0", "v1 = float32(c[i]) * 0.5", "for k in range(u[i] % 3):",
     "    v1 = v1 + int8(n[i])", "out[i, 0] = v0", "out[i, 1] = v1", "out[i, 2] = int16(m[i] * 1000) + uint8(n[i])"],
    # a device function returning the integer 0 or a float32 product (numba unifies its result to a float64), and
    # math functions exact in IEEE 754 (floor is a float on a GPU: the twin calls np.floor)
    ["def helper(p, q):", "    if p < 0:", "        return 0", "    return p * q", "t = 0.0",
     "out[i, 0] = helper(f[i], f[i]) + helper(c[i], 3)",
     "out[i, 1] = math.floor(min(max(g[i] * 7.5, -1000.0), 1000.0)) + math.sqrt(abs(f[i]))",
     "out[i, 2] = math.copysign(3.0, f[i]) + math.isnan(g[i]) + math.trunc(min(max(f[i], -1000.0), 1000.0))"],
    # v0 an int16 that the loop makes float32: numba computes v0 + c[i] in float32 but types the result float64
    # (the union of what it saw while inferring), so each root is a float64's; several on a line, one CPython folds
    ["t = 0.0", "v0 = c[i]", "for k in range(u[i] % 4):", "    v0 = v0 + float32(0.25)",
     "out[i, 0] = math.sqrt(abs(v0 + c[i])) + math.sqrt(abs((2 * 3) + v0 + c[i]))",
     "out[i, 1] = (math.sqrt(abs(v0 + a[i])) if v0 < 0 else math.sqrt(abs(v0 + c[i] + 1)))",
     "out[i, 2] = math.sqrt(abs(v0 * c[i] - v0)) + math.sqrt(abs(f[i] + c[i]))"],
    # the same widening of a negation, of calls (fabs of the int16 is a float64, min of it and a uint16 an int32)
    # and of a sum of a variable assigned v0 once, on lines with a conditional expression or a slice (numba calls
    # bool() and slice() there, which the source does not)
    ["t = 0.0", "v0 = c[i]", "for k in range(u[i] % 4):", "    v0 = v0 + float32(0.25)", "w = v0",
     "out[i, 0] = (-v0) * f[i] if f[i] > 0 else math.fabs(v0) * f[i]",
     "out[i, 1] = min(v0, d[i]) * f[i] + math.sqrt(abs(w + c[i])) + f[0:2][0]",
     "out[i, 2] = (math.sqrt(v0 + 60.0) * f[i] if v0 > 0 and f[i] < 2 else -w * f[i])"],
    # the same widening of a negation and of a call's result (min(v0, a[i]): int64 while v0 was an int16, then float32)
    ["t = 0.0", "v0 = c[i]", "for k in range(u[i] % 4):", "    v0 = v0 + float32(0.25)",
     "out[i, 0] = math.sqrt(abs(-v0))", "out[i, 1] = math.sqrt(min(v0, a[i]) + 100)",
     "out[i, 2] = math.sqrt(abs(float32(v0) - c[i])) + math.sqrt(abs(v0)) * 2"],
    # a swap of a float32 and a float64 (no branch joins v1's versions: each keeps its type, in the lanes past the
    # end too), and literals out of a uint8's range stored into a local array (they wrap)
    ["t = 0.0", "v0 = float32(abs(g[i]))", "v1 = float64(f[i])", "v0, v1 = v1, v0", "loc = cuda.local.array(3, uint8)",
     "loc[0] = -5", "loc[1] = 300", "loc[2] = loc[0] + loc[1]", "out[i, 0] = uint8(n[i]) - v1",
     "out[i, 1] = loc[2] - v0", "out[i, 2] = loc[0] * f[i]"],
    # v0 an int8 or a uint16 (joined: an int32), swapped with an int64: each assignment's version keeps its type,
    # -9 stays -9 (not a uint16's 65527)
    ["t = 0.0", "v0 = a[i]", "if f[i] < 0:", "    v0 = uint16(m[i] & 255)", "v1 = c[i] + b[i]", "v0, v1 = v1, v0",
     "out[i, 0] = uint16(m[i]) - v0", "out[i, 1] = (~-5) - v1", "out[i, 2] = v1 * f[i]"],
    # v0 a float32 read before the branch joins it with a float64 (float32 arithmetic there), then the branch's
    # version read in it, then the float64 they join into
    ["t = 0.0", "v0 = float32(f[i] * 1.5)", "v0e = v0 * float32(0.75) + f[i]", "if f[i] < 0:", "    v0 = g[i]",
     "    v0e = v0e - v0", "v0 = v0 + v0e", "out[i, 0] = v0", "out[i, 1] = v0e", "out[i, 2] = t"],
    # q, a float32, read into acc before the branch joins it with a float64: float32 arithmetic (found by random
    # structured programs)
    ["t = 0.0", "p = int16(c[i])", "q = f[i]", "acc = float32(0)", "acc = acc + q * float32(0.75)",
     "if 0.5 < (int16(c[i]) * f[i]):", "    q = ((u[i] + 3) - (m[i] * f[i]))", "    p = (float32(f[i] * 1.5) - p)",
     "else:", "    p = c[i]", "out[i, 0] = p", "out[i, 1] = q", "out[i, 2] = acc"],
    # q = 0 (an integer) in a loop the lanes leave at different times: the lanes that left keep their float32 q (the
    # simulator had made all of q that version's integer, truncating them)
    ["t = 0.0", "p = n[i]", "q = float32(0.25)", "acc = float32(0)", "q = f[i]", "p = max((f[i] * 0.5), c[i])",
     "w0 = 0", "while w0 < b[i] % 3 and p < 1e6:", "    p = (int32(m[i]) - abs(int16(c[i])))",
     "    for k1 in range(b[i] % 3):", "        q = min(abs(-2), (-1.25 * g[i]))", "        q += b[i]",
     "        q = abs(uint8(b[i]))", "    q = 0", "    w0 += 1", "out[i, 0] = p", "out[i, 1] = q", "out[i, 2] = acc"],
    # v0 an int64 in the branch, read where numba and the source count its reads differently: a while test (CPython
    # evaluates it in two places) and a chained comparison (numba reads its middle twice); each line's reads all
    # read one version, which types them (the simulator took the merged float64 there and refused its bits)
    ["t = 0.0", "v0 = float32(f[i] * 1.5)", "if f[i] < 0:", "    v0 = n[i] + 60", "    while (v0 & 3) != 0:",
     "        v0 = v0 - 1", "        t = t + 1", "    t = t + (v0 & 1) + (1.0 if -70 < v0 < 40 else 2.0)",
     "out[i, 0] = v0", "out[i, 1] = t", "out[i, 2] = v0 * f[i]"],
    # v1 = v0 * 3 makes v1's int64 version at once, which the branch's v1 = 0.5 joins into a float64: the product is
    # an int64 (the simulator took it for one numba widens to that float64, and lost the low bits above 2**53)
    ["t = 0.0", "v0 = n[i]", "v0 = v0 + 9007199254740993", "v1 = v0 * 3", "out[i, 0] = v1 & 7", "if f[i] < 0:",
     "    v1 = 0.5", "out[i, 1] = v1", "out[i, 2] = t"],
    # a device function called with tuples of different types, (float32, int64) first: each call gets its own
    # signature's types (both were named ("None", "int64") and the last compiled, the int16's, typed both)
    ["def helper(x, y):", "    v = x[0] * float32(1.1)", "    if v < 0:", "        v = x[1]",
     "        return (v & 3) + v", "    return v * float32(0.3)", "t = 0.0",
     "out[i, 0] = helper((f[i], n[i] * 1000), 0)", "out[i, 1] = helper((f[i], c[i]), 0)",
     "out[i, 2] = helper((f[i], n[i]), 0.5)"],
    # the same inlined: a tuple's numba type (compiled alone for none before); and an omitted argument named by its
    # default, a keyword one in its place (v & 3 was refused, v's merged float lanes taken for its only type)
    ["def helper(x, y):  # inline", "    v = x[0] * float32(1.1)", "    if v < 0:", "        v = x[1]",
     "        return (v & 3) + v", "    return v * float32(0.3)", "t = 0.0",
     "out[i, 0] = helper((f[i], n[i] * 1000), 0)", "out[i, 1] = helper((f[i], c[i]), 0)",
     "out[i, 2] = helper((f[i], n[i]), 0.5)"],
    ["def helper(x, y=3):", "    v = x * float32(1.1)", "    if x < 0:", "        v = y", "        return v & 3",
     "    return v * float32(0.3)", "t = 0.0", "out[i, 0] = helper(f[i])", "out[i, 1] = helper(f[i], c[i])",
     "out[i, 2] = helper(g[i])"],
    ["def helper(x, y=3):  # inline", "    v = x * float32(1.1)", "    if x < 0:", "        v = y",
     "        return v & 3", "    return v * float32(0.3)", "t = 0.0", "out[i, 0] = helper(f[i])",
     "out[i, 1] = helper(f[i], y=c[i])",
     "out[i, 2] = helper(x=g[i])"],
    # numba refuses it (min of an int8 and a uint64 is a float64, and & takes no float): so does the simulator
    ["t = 0.0", "out[i, 0] = f[i]", "out[i, 1] = f[i]", "out[i, 2] = (n[i] & min(a[i], (b[i] + u[i])))"],
])
def test_a_known_kernel_agrees(body):
    """The fuzzing harness itself on a hand-written body."""
    test_simulator_computes_what_numba_compiles.hypothesis.inner_test(body)
