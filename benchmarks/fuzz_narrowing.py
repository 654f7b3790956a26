"""Where a fuzz kernel's runs on the GPU and on the simulator part: the first statement, then the operation.

benchmarks/simulator_fuzz.py calls `narrow` on the GPU for each disagreement it cannot explain, so that its report
names the operation to look at on the CPU afterwards (device time is scarce: a report that shows only the outputs
left 4 of the H200's 102 disagreements of 2026-11-29 unexplained). Two probed copies of the kernel run on both sides,
each with a float64 array ``probe`` of one row per probe and one column per thread, NaN where a thread never stored:

1. statements: after each assignment, and before each atomic (its value), the thread stores the value; the first
   row, in source order, where the two sides differ names the statement;
2. expressions: just before that statement, every sub-expression of its value is stored in a row of its own; one
   that differs while each of its probed operands agrees is the operation that parts them.

A probe converts its value to float64, as ``out`` does, and can change what the compiler makes of the code around it
(a contraction into an FMA; ptxas's int16 negation, unwrapped only where the value stays an integer): the report
then says that no statement or no operation differs, and shows what it found.
"""

from __future__ import annotations

import ast
import copy
import dataclasses

import numpy as np

PROBE = "probe"
SCALARS = {"i", "j", "t", "m", "k", "v"}  # the fuzz kernels' scalar variables (the others are arrays)
MATH_BOUND = 4 * 2.0**-23  # relative: math functions may differ this much (simulator_fuzz.MATH_ULPS of float32)


def _probe(row: int, value: ast.expr) -> ast.stmt:
    """``probe[row, i] = float64(value)``."""
    store = ast.parse(f"{PROBE}[{row}, i] = float64(0)").body[0]
    store.value.args = [copy.deepcopy(value)]
    return store


def _as_load(target: ast.expr) -> ast.expr:
    load = copy.deepcopy(target)
    for node in ast.walk(load):
        if hasattr(node, "ctx"):
            node.ctx = ast.Load()
    return load


def _probed_value(statement: ast.stmt) -> tuple[ast.expr, ast.expr | None] | None:
    """(the value a statement computes, its target to read back after it, or None: read it before), or None."""
    if isinstance(statement, ast.Assign) and len(statement.targets) == 1:
        value = statement.value
        if isinstance(value, ast.Call) and "shared.array" in ast.unparse(value.func):
            return None
        return value, statement.targets[0]
    if isinstance(statement, ast.AugAssign):
        return statement.value, statement.target
    if isinstance(statement, ast.Expr) and isinstance(statement.value, ast.Call) and \
            ast.unparse(statement.value.func).startswith("cuda.atomic.") and len(statement.value.args) == 3:
        return statement.value.args[2], None
    return None


def _walk(body: list[ast.stmt], visit) -> list[ast.stmt]:
    """``body`` with each probed statement replaced by ``visit(statement, probed value)``'s list (recursively): an
    ``if`` or ``while`` is probed on its condition (before it, so first), then inside."""
    result = []
    for statement in body:
        if isinstance(statement, (ast.If, ast.While)):
            probes = visit(statement, (statement.test, None))  # [probes..., statement]
            statement.body, statement.orelse = _walk(statement.body, visit), _walk(statement.orelse, visit)
            result += probes
        elif isinstance(statement, ast.For):
            statement.body, statement.orelse = _walk(statement.body, visit), _walk(statement.orelse, visit)
            result.append(statement)
        elif (probed := _probed_value(statement)) is not None:
            result += visit(statement, probed)
        else:
            result.append(statement)
    return result


def _function(source: str) -> tuple[ast.Module, ast.FunctionDef]:
    module = ast.parse(source)
    function = module.body[0]
    function.args.args.append(ast.arg(PROBE))
    function.name += "_probed"
    return module, function


def statement_probes(source: str) -> tuple[str, list[ast.stmt]]:
    """The kernel with a probe of each statement's value; those statements, one per probe row."""
    module, function = _function(source)
    statements = []

    def visit(statement, probed):
        value, target = probed
        statements.append(statement)
        row = _probe(len(statements) - 1, value if target is None else _as_load(target))
        return [row, statement] if target is None else [statement, row]

    function.body = _walk(function.body, visit)
    return ast.unparse(ast.fix_missing_locations(module)) + "\n", statements


def _probed_expressions(value: ast.expr) -> list[ast.expr]:
    """The sub-expressions of ``value`` that have a number as value (not a function, an array, a tuple or a
    constant), outermost first."""
    functions = {id(node.func) for node in ast.walk(value) if isinstance(node, ast.Call)}
    found = []
    for node in ast.walk(value):
        if not isinstance(node, ast.expr) or id(node) in functions or isinstance(node, (ast.Constant, ast.Tuple)):
            continue
        if isinstance(node, ast.Name) and node.id not in SCALARS:
            continue
        if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "cuda":
            continue  # cuda.threadIdx: a namespace (cuda.threadIdx.x is a number)
        if isinstance(node, ast.Call) and ast.unparse(node.func) == "divmod":
            continue  # a tuple: divmod(a, b)[0] is probed
        if isinstance(node, ast.UnaryOp) and isinstance(node.operand, ast.Constant):
            continue  # -1.25: a constant
        found.append(node)
    return found


def expression_probes(source: str, index: int) -> tuple[str, list[ast.expr]]:
    """The kernel with a probe of each sub-expression of statement ``index``'s value (of `statement_probes`),
    just before it; those sub-expressions, one per probe row."""
    module, function = _function(source)
    seen, expressions = [], []

    def visit(statement, probed):
        seen.append(statement)
        if len(seen) - 1 != index:
            return [statement]
        expressions.extend(_probed_expressions(probed[0]))
        return [*(_probe(row, e) for row, e in enumerate(expressions)), statement]

    function.body = _walk(function.body, visit)
    return ast.unparse(ast.fix_missing_locations(module)) + "\n", expressions


def _probed_operands(expression: ast.expr, rows: dict) -> list[int]:
    """The probe rows of the nearest probed sub-expressions of ``expression`` (through those not probed: the call
    in ``divmod(a, b)[0]``)."""
    found = []
    for child in ast.iter_child_nodes(expression):
        found += [rows[id(child)]] if id(child) in rows else _probed_operands(child, rows)
    return found


def _differs(a: np.ndarray, b: np.ndarray, tolerant: bool) -> np.ndarray:
    """Where two rows of probes differ: bit for bit (NaN equals NaN), or beyond `MATH_BOUND` where ``tolerant``."""
    same = (a.view(np.int64) == b.view(np.int64)) | (np.isnan(a) & np.isnan(b))
    if tolerant:
        with np.errstate(all="ignore"):
            same |= np.isfinite(a) & np.isfinite(b) & (np.abs(a - b) <= MATH_BOUND * np.maximum(np.abs(a), np.abs(b)))
    return ~same


def _has_math(node: ast.AST) -> bool:
    return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "math"
               for n in ast.walk(node))


def _header(statement: ast.stmt) -> str:
    """A statement's source; of an ``if`` or ``while``, its first line (its condition is what is probed)."""
    return ast.unparse(statement).splitlines()[0] if isinstance(statement, (ast.If, ast.While)) \
        else ast.unparse(statement)


def _values(gpu: np.ndarray, simulated: np.ndarray, thread: int) -> str:
    return f"GPU {float(gpu[thread])!r}, simulator {float(simulated[thread])!r}"


def narrow(kernel, arrays: list, on_gpu, on_simulator, load) -> str:
    """Lines that name the first statement and the operation where ``kernel``'s two runs part.

    ``on_gpu`` and ``on_simulator``: ``(dispatcher, kernel, arrays, probes) -> outputs`` (with ``"probe"``), the
    two sides; ``load``: ``(kernels) -> dispatchers`` (simulator_fuzz.load). Never raises: what went wrong is the
    report."""
    try:
        return "\n".join(_narrow(kernel, arrays, on_gpu, on_simulator, load))
    except Exception as exc:  # noqa: BLE001 (a report line, never the end of the fuzzing)
        return f"narrowed: could not probe the kernel ({type(exc).__name__}: {str(exc).strip()[:200]})"


def _run_both(kernel, source: str, rows: int, arrays, on_gpu, on_simulator, load):
    probed = dataclasses.replace(kernel, name=kernel.name + "_probed", source=source)
    dispatcher = load([probed])[0]
    return (on_gpu(dispatcher, probed, arrays, rows)["probe"], on_simulator(dispatcher, probed, arrays, rows)["probe"])


def _narrow(kernel, arrays, on_gpu, on_simulator, load):
    source, statements = statement_probes(kernel.source)
    gpu, simulated = _run_both(kernel, source, len(statements), arrays, on_gpu, on_simulator, load)
    differs = [_differs(gpu[row], simulated[row], _has_math(s)) for row, s in enumerate(statements)]
    first = next((row for row, where in enumerate(differs) if where.any()), None)
    if first is None:
        yield ("narrowed: no probed statement differs (a probe changes the compiled code around it, or the "
               "difference is in how a store converts its value)")
        return
    statement = statements[first]
    thread = int(np.flatnonzero(differs[first])[0])
    yield (f"narrowed: the first statement that differs, line {statement.lineno} of the kernel: "
           f"`{_header(statement)}`; thread {thread}: {_values(gpu[first], simulated[first], thread)}")
    source, expressions = expression_probes(kernel.source, first)
    gpu, simulated = _run_both(kernel, source, len(expressions), arrays, on_gpu, on_simulator, load)
    differs = [_differs(gpu[row], simulated[row], _has_math(e)) for row, e in enumerate(expressions)]
    rows = {id(e): row for row, e in enumerate(expressions)}
    culprits = []
    for row, expression in enumerate(expressions):
        operands = _probed_operands(expression, rows)
        where = differs[row] & ~np.logical_or.reduce([differs[k] for k in operands], initial=False)
        if where.any():
            culprits.append((row, int(np.flatnonzero(where)[0]), operands))
    if not culprits:
        yield "  no operation in it differs when probed (a probe changes the compiled code around it)"
    named = []  # each operation once (an expression can occur twice), innermost first, at most 3
    for row, thread, operands in culprits[::-1]:
        text = ast.unparse(expressions[row])
        if text in named or len(named) == 3:
            continue
        named.append(text)
        agree = "; ".join(f"`{ast.unparse(expressions[k])}` = {float(gpu[k][thread])!r}" for k in operands)
        yield (f"  the operation that differs: `{text}`; thread {thread}: {_values(gpu[row], simulated[row], thread)}"
               + (f"; its operands agree: {agree}" if agree else ""))
