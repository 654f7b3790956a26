"""Check that a kernel run on the CPU would also compile for a real GPU.

The simulator executes a kernel's Python source and accepts Python that the
GPU compiler rejects (lists, runtime-sized shared arrays, unsupported calls).
Before a simulated launch, `check_compiles` compiles the kernel to PTX for the
launch's argument types with numba's real compiler (NVVM, no GPU needed), so
such code fails at once, with numba's explanation, on a laptop too.

``GPUCOURSE_PTX_CHECK``: ``auto`` (default) checks when NVVM is installed,
``require`` fails when it is not (the test suite), ``off`` never checks.

Each compilation also keeps the types numba gives the variables of the kernel
and of its device functions (`variable_types`), which the simulator uses: numba
types each version of a variable and converts them where control flow joins them
(``x = a[i]``, a float32, is a float64 in a loop that assigns ``x = x * 0.5``),
where a value alone would keep its own type, and may type an operation's result
wider than the operation (`_widened_operations`). A device function keeps them per
signature where its signatures differ; one numba inlines (``inline="always"``) is
compiled alone for the types of each call (`inline_variable_types`).

A compilation is kept (`compile_cache`), its PTX and those types, so the same kernel
is not compiled again: in this process, or in another one on this machine.
"""

from __future__ import annotations

import contextlib
import os
import re
from types import SimpleNamespace

import numpy as np
from numba import cuda
from numba.core import types
from numba.cuda import compiler
from numba.cuda.core import ir
from numba.cuda.core.errors import TypingError

from . import compile_cache

MODE_ENV = "GPUCOURSE_PTX_CHECK"
COMPUTE_CAPABILITY = (7, 5)

_compiled: dict = {}  # (py_func, argument types) -> PTX
_checked_for_another_gpu: set = set()  # (py_func, argument types) checked at another compute capability
_check_cc = COMPUTE_CAPABILITY  # what check_compiles compiles for (`checked_for`)
_compiled_functions: set = set()  # every py_func compile_for_gpu compiled, for any compute capability
_kernel_variables: dict = {}  # (py_func, argument types) -> {variable: dtype}
_device_variables: dict = {}  # py_func of a device function -> {variable: dtype}, over all its signatures
_signatures: dict = {}  # (py_func, argument types) -> ({variable: dtype}, [(py_func, argument types) it calls])
_by_arguments: dict = {}  # py_func -> {`argument_kinds`: {variable: dtype}}, each signature compiled
_differing: set = set()  # the py_funcs whose signatures type their variables differently
_toolchain_error: str | None = None


class KernelCompileError(Exception):
    """A kernel runs on the simulator but the GPU compiler rejects it."""


class KernelTypingError(KernelCompileError, TypingError):
    """A kernel the GPU compiler rejects when it types it: also numba-cuda's TypingError, as a GPU raises."""

    def __init__(self, message: str):
        self.msg, self.loc = message, None
        Exception.__init__(self, message)


def mode() -> str:
    value = os.environ.get(MODE_ENV, "auto").strip().lower()
    return value if value in ("auto", "require", "off") else "auto"


def toolchain_problem() -> str | None:
    """None when NVVM is usable, else why not (checked once)."""
    global _toolchain_error
    if _toolchain_error is None:
        try:
            from numba.cuda.cudadrv import nvvm

            nvvm.NVVM()
            _toolchain_error = ""
        except Exception as exc:
            _toolchain_error = f"{type(exc).__name__}: {exc}".strip()
    return _toolchain_error or None


_array_types: dict = {}  # NumPy array properties -> numba type (typeof takes tens of microseconds per launch)


def is_kernel(kernel) -> bool:
    """A ``@cuda.jit`` kernel: not a device function, not some other object that can be indexed and called."""
    from numba.cuda.dispatcher import CUDADispatcher  # noqa: PLC0415

    if isinstance(kernel, CUDADispatcher):
        return not kernel.targetoptions.get("device")
    return type(kernel).__name__ == "FakeCUDAKernel" and not kernel._device  # under numba's own simulator


def argument_type(value):
    """The numba type a launch argument has on a real GPU."""
    host = getattr(value, "_ary", None)  # a simulator device array wraps a host array
    value = value if host is None else host
    if type(value) is np.ndarray:  # what numba's typeof of an array depends on
        flags = value.flags
        key = (value.dtype, value.ndim, flags.c_contiguous, flags.f_contiguous, flags.writeable, flags.aligned)
        found = _array_types.get(key)
        if found is None:
            found = _array_types[key] = _typeof(value)
        return found
    return _typeof(value)


def _typeof(value):
    from numba.cuda.typing.typeof import Purpose, typeof  # noqa: PLC0415 (numba-cuda's: it knows bfloat16)

    return typeof(value, Purpose.argument)


def _base_name(variable: str) -> str | None:
    """The source name of an SSA version (``x.2`` -> ``x``); None for numba's temporaries and arguments."""
    if variable.startswith(("$", "arg.")):
        return None
    return variable.split(".")[0]


def _number_dtype(numba_type):
    numba_type = types.unliteral(numba_type)
    if isinstance(numba_type, (types.Number, types.Boolean)):
        from ..simulator.arithmetic import as_dtype  # noqa: PLC0415 (knows bfloat16; not under numba's simulator)

        try:
            return as_dtype(numba_type)
        except NotImplementedError:
            return None
    return None


def _widest(dtypes: list):
    """The one dtype of ``dtypes``, or NumPy's promotion of several (None where it has none: bfloat16 and others)."""
    if len(set(dtypes)) == 1:
        return dtypes[0]
    try:
        return np.result_type(*dtypes)
    except TypeError:
        return None


def _unified_variables(annotation) -> dict:
    """{source variable: dtype} from a compiled function's typemap, and, for a variable whose reads see versions
    of different types, {`assignment_key`: dtype} for each assignment and {`read_key`: dtype} for each read.

    SSA splits a variable into versions (``x``, ``x.1``, ...) joined by copies where control flow meets
    (numba's phi nodes); versions joined so get one type: numba's for the version the copies join into, which it
    unified from theirs (``v = x[i]`` a float32, ``v = 0`` in a branch: float64 where they meet, never the branch's
    integer). Where every read of a variable reads a version of that one type, the variable has it. Else (``v =
    f[i]``, a float32, is read before a branch's ``v = 0`` joins it into a float64; or ``v = 0.5`` then ``v = f[i]``,
    no branch joining them) each assignment gets the type of the version it makes (`_assignment_types`) and each
    read the type of the version it reads (`_reads`), keyed by the line and their order there (by the line alone
    where all the reads of it there read one type), and ``READS`` says so.
    """
    from ..simulator.arithmetic import READS, read_key  # noqa: PLC0415

    typemap = annotation.typemap
    parent = {name: name for name in typemap if _base_name(name)}
    joined = set()  # the versions the copies join into: numba typed each with the unified type

    def root(name):
        while parent[name] != name:
            name = parent[name]
        return name

    for block in annotation.blocks.values():
        for statement in block.body:
            if _joins(statement) and statement.target.name in parent and statement.value.name in parent:
                joined.add(statement.target.name)
                parent[root(statement.target.name)] = root(statement.value.name)
    members: dict = {}
    for name in parent:
        members.setdefault(root(name), []).append(name)
    dtypes: dict = {}
    for versions in members.values():
        typed = [_number_dtype(typemap[v]) for v in versions if v in joined] or [_number_dtype(typemap[versions[0]])]
        unknown = any(t is None for t in typed)  # (`None in typed` is True of float64: np.dtype(None) is float64)
        dtypes.setdefault(_base_name(versions[0]), set()).add(None if unknown else _widest(typed))
    unified = {name: found.pop() for name, found in dtypes.items()
               if len(found) == 1 and not any(f is None for f in found)}
    reads = _reads(annotation)
    keyed = {name for (name, _), read in reads.items()
             if any(d is not None and (name not in unified or d != unified[name]) for d in read)}
    kept = {name: dtype for name, dtype in unified.items() if name not in keyed}
    assignments = _assignment_types(annotation, set(kept))
    reads = {where: read for where, read in reads.items() if where[0] in keyed}  # the keyed variables' reads
    # the lines whose reads of a variable all read one type (`d is not None` first: float64 == None in NumPy)
    alike = {where: read[0] for where, read in reads.items() if all(d is not None and d == read[0] for d in read)}
    read_types = {**_keyed({where: read for where, read in reads.items() if where not in alike}, read_key),
                  **{read_key(*where): dtype for where, dtype in alike.items()}}
    return {**kept, **assignments, **read_types, **({READS: np.dtype(bool)} if read_types else {})}


def _joins(statement) -> bool:
    """Whether ``statement`` is a copy of one version of a variable into another (``v.2 = v``: numba's phi)."""
    return (isinstance(statement, ir.Assign) and isinstance(statement.value, ir.Var)
            and _base_name(statement.target.name) is not None
            and _base_name(statement.target.name) == _base_name(statement.value.name))


def _reads(annotation) -> dict:
    """{(variable, line): [the dtype of the version each read of it there reads, None where not a number]}, in the
    order they run, as `simulator.transform.read_keys` counts the source's reads; a join's copy is no read."""
    found: dict = {}
    for _, block in sorted(annotation.blocks.items()):
        for statement in block.body:
            if isinstance(statement, ir.Del) or _joins(statement):
                continue
            if isinstance(statement, ir.Assign):
                value = statement.value
                used = [value] if isinstance(value, ir.Var) else value.list_vars() if isinstance(value, ir.Expr) else []
            else:
                used = statement.list_vars()
            for variable in used:
                name = _base_name(variable.name)
                if name is not None and variable.name in annotation.typemap:
                    found.setdefault((name, statement.loc.line), []).append(
                        _number_dtype(annotation.typemap[variable.name]))
    return found


def _assignment_types(annotation, unified: set) -> dict:
    """{`assignment_key`: dtype} of the source's assignments to the variables not in ``unified``: the type of the
    version each creates (an SSA copy that joins versions of one variable is no assignment of the source)."""
    from ..simulator.arithmetic import assignment_key  # noqa: PLC0415

    found: dict = {}  # (variable, line) -> [the dtype of each assignment's version, or None]
    for _, block in sorted(annotation.blocks.items()):
        for statement in block.body:
            if not isinstance(statement, ir.Assign) or (name := _base_name(statement.target.name)) is None \
                    or name in unified or _joins(statement):
                continue
            found.setdefault((name, statement.loc.line), []).append(
                _number_dtype(annotation.typemap[statement.target.name]))
    return _keyed(found, assignment_key)


def _keyed(found: dict, key) -> dict:
    """{``key(*where, ordinal, count)``: dtype} from ``found``, {where (a variable or a kind of operation, and a
    line): [a dtype or None for each, in the order they run]}, for those with a dtype."""
    return {key(*where, k, len(dtypes)): dtype for where, dtypes in found.items()
            for k, dtype in enumerate(dtypes) if dtype is not None}


def _operation_kind(expression, binary: dict, unary: dict, slices: set) -> str | None:
    """What `operation_key` calls the operation of an IR expression (as `simulator.transform` names the source's);
    None for what the source has no operation of: the ``bool()`` numba calls on a branch's condition, the
    ``slice()`` it calls for ``a[1:n]`` (``slices``: the variables that hold the builtin)."""
    if expression.op == "binop":
        return binary.get(expression.fn)
    if expression.op == "unary":
        return unary.get(expression.fn)
    if expression.op == "call" and not expression.func.name.startswith("$bool") and expression.func.name not in slices:
        return "Call"
    return None


def _widened_operations(annotation) -> dict:
    """{`operation_key`: dtype} of the operations (binary and unary operators, calls) whose result numba types wider
    than the operation computes.

    Type inference sees a variable's types one after another: while ``v`` is still an int16 that a loop later makes
    a float32, ``v + c[i]`` (c an int16) gives an int64, then a float32, and numba types the result as their union, a
    float64, though it computes the add as ``(float32, float32) -> float32``; what uses the result gets a float64
    (``-v``, ``math.sqrt(v)`` and ``min(v, d[i])`` alike). numba's IR places an operation by its line only: the key
    counts the operations of that kind on the line in the order they run, and a line whose count the source does not
    repeat (an operation CPython folded away, a branch numba pruned, a ``while`` test CPython evaluates in two
    places) matches no key.
    """
    from ..simulator.arithmetic import BINARY, UNARY, operation_key  # noqa: PLC0415

    binary = {function: name for name, function in BINARY.items()}
    unary = {function: name for name, function in UNARY.items()}
    slices = {statement.target.name for block in annotation.blocks.values() for statement in block.body
              if isinstance(statement, ir.Assign) and isinstance(statement.value, ir.Global)
              and statement.value.value is slice}
    # a result assigned to a variable takes the type of that variable's version (``v = v + x``: numba's float64
    # temporary is converted back to v's float32 there), not that of a version a join copies it into (``w = v * 3``,
    # numba's int64 assigned to w at once, then joined into a float64 by a branch's ``w = 0.5``)
    assigned = {statement.value.name: statement.target.name for block in annotation.blocks.values()
                for statement in block.body if isinstance(statement, ir.Assign)
                and isinstance(statement.value, ir.Var) and _base_name(statement.target.name)
                and not _joins(statement)}
    found: dict = {}  # (kind, line) -> [the result's dtype where wider than the operation's, or None]
    for _, block in sorted(annotation.blocks.items()):
        for statement in block.body:
            value = getattr(statement, "value", None)
            if not (isinstance(statement, ir.Assign) and isinstance(value, ir.Expr) and value in annotation.calltypes
                    and (kind := _operation_kind(value, binary, unary, slices)) is not None):
                continue
            result = _number_dtype(annotation.typemap[assigned.get(statement.target.name, statement.target.name)])
            computed = _number_dtype(annotation.calltypes[value].return_type)
            wider = result if result is not None and computed is not None and result != computed else None
            found.setdefault((kind, value.loc.line), []).append(wider)
    return _keyed(found, operation_key)


def _calls(annotation) -> list:
    """(py_func, argument types) of each device function a compiled function calls."""
    calls = []
    for block in annotation.blocks.values():
        for statement in block.body:
            value = getattr(statement, "value", None)
            if isinstance(statement, ir.Assign) and isinstance(value, ir.Expr) and value.op == "call":
                callee = annotation.typemap[value.func.name]
                if isinstance(callee, types.Dispatcher):
                    calls.append((callee.dispatcher.py_func, tuple(annotation.calltypes[value].args)))
    return calls


def _argument_kinds(argtypes) -> tuple:
    """`simulator.arithmetic.argument_kinds` of a signature's numba types (an omitted argument's: its default's)."""
    return tuple(map(_kind, argtypes))


def _kind(numba_type) -> str:
    from ..simulator.arithmetic import argument_kinds  # noqa: PLC0415

    if isinstance(numba_type, types.Omitted):
        return argument_kinds((numba_type.value,))[0]
    numba_type = types.unliteral(numba_type)
    if isinstance(numba_type, types.Array):
        return f"{_number_dtype(numba_type.dtype)}[{numba_type.ndim}]"
    if isinstance(numba_type, types.BaseTuple) and type(numba_type) in (types.Tuple, types.UniTuple):
        return f"({', '.join(map(_kind, numba_type.types))})"
    return str(_number_dtype(numba_type))


def _merge_variables(py_func, variables: dict, kinds: tuple) -> None:
    """Keep the variable types of one signature of ``py_func`` (its `_argument_kinds`), and those all its
    signatures agree on (what a call whose arguments match no signature gets)."""
    known = _device_variables.setdefault(py_func, dict(variables))
    # (not `variables.get(n) != known[n]`: NumPy takes None for float64, so a float64 one signature alone has, a
    # widened operation's among them, would stay for every signature)
    for name in [n for n in known if n not in variables or variables[n] != known[n]]:
        del known[name]  # several signatures that type it differently, or one that does not have it
    signatures = _by_arguments.setdefault(py_func, {})
    if signatures.setdefault(kinds, variables) != variables:
        signatures[kinds] = None  # signatures `argument_kinds` cannot tell apart (of records): neither's types
    if any(other != variables for other in signatures.values()):
        _differing.add(py_func)
    _compiled_functions.add(py_func)


def _keep_variable_types(py_func, argtypes, annotation, return_type) -> None:
    from ..simulator.arithmetic import RETURNED  # noqa: PLC0415

    variables = {**_unified_variables(annotation), **_widened_operations(annotation)}
    returned = _number_dtype(return_type)
    if returned is not None:  # `return q` (a uint64) and `return 5` elsewhere: numba returns a float64 from both
        variables[RETURNED] = returned
    _signatures[(py_func, tuple(argtypes))] = (variables, _calls(annotation))
    _kernel_variables[(py_func, tuple(argtypes))] = variables
    _merge_variables(py_func, variables, _argument_kinds(argtypes))


@contextlib.contextmanager
def target_device(cc: tuple = COMPUTE_CAPABILITY):
    """Compile for the simulated device: answer its compute capability (or ``cc``) to device functions that ask
    for the current device's, and keep the variable types of each function compiled."""
    from numba.cuda import dispatcher

    fake = SimpleNamespace(compute_capability=cc)
    original_device, original_compile = dispatcher.get_current_device, compiler.compile_extra

    def compile_extra(*args, **kwargs):
        result = original_compile(*args, **kwargs)
        if result.type_annotation is not None:
            _keep_variable_types(kwargs["func"], kwargs["args"], result.type_annotation, result.signature.return_type)
        return result

    dispatcher.get_current_device = lambda: fake
    compiler.compile_extra = compile_extra
    try:
        yield
    finally:
        dispatcher.get_current_device, compiler.compile_extra = original_device, original_compile


def variable_types(py_func, argtypes) -> dict:
    """{function: {variable: dtype}} numba gives the kernel ``py_func`` compiled for ``argtypes`` and every
    device function compiled so far (empty when the kernel was not compiled: no NVVM, or the check is off)."""
    from ..simulator.arithmetic import SIGNATURES  # noqa: PLC0415

    kernel = _kernel_variables.get((py_func, tuple(argtypes)))
    if kernel is None:
        return {}
    # (not the kernel's own: its exact argument types name its signature)
    each = {(function, SIGNATURES): _by_arguments[function] for function in _differing if function is not py_func}
    return {**_device_variables, **each, py_func: kernel}


def inline_variable_types(py_func, argtypes: tuple) -> dict:
    """{variable: dtype} of an ``inline="always"`` device function called with ``argtypes``: numba copies such a
    function into its callers and types it only there, so it is compiled alone here, once per signature, for the
    compute capability the checks compile for ({} where it does not compile alone); its types are kept in the
    `compile_cache` like a kernel's."""
    signature = (py_func, tuple(argtypes))
    if signature in _signatures:
        return _signatures[signature][0]
    key = compile_cache.key(py_func, signature[1], _check_cc, "inline device function")
    kept = key and compile_cache.load(key)
    if kept and _restore(kept, key, signature[1]):
        _signatures.setdefault(signature, (_kernel_variables[signature], []))
        return _signatures[signature][0]
    try:
        with target_device(_check_cc):
            cuda.compile_ptx(py_func, signature[1], device=True, cc=_check_cc)
    except Exception:  # noqa: BLE001 (what compiles only inlined, as a tuple of arrays returned: no types)
        _signatures[signature] = ({}, [])
        return {}
    _keep(key, py_func, signature[1], None)
    return _signatures.get(signature, ({}, []))[0]


def compile_for_gpu(dispatcher, argtypes, cc: tuple = COMPUTE_CAPABILITY) -> str:
    """PTX of ``dispatcher`` for ``argtypes``, compiled for compute capability ``cc`` (by default the oldest the
    course runs on; code may depend on it, as `kernels.precision.mma_m16n8k16` does); raises numba's error when
    it does not compile."""
    py_func, argtypes, bounds = dispatcher.py_func, tuple(argtypes), _launch_bounds(dispatcher)
    key = compile_cache.key(py_func, argtypes, cc, bounds)
    kept = key and compile_cache.load(key)
    if kept and _restore(kept, key, argtypes):
        return kept["ptx"]
    with target_device(cc):
        ptx, _ = cuda.compile_ptx(py_func, argtypes, cc=cc, launch_bounds=bounds)
    _compiled_functions.add(py_func)
    _keep(key, py_func, argtypes, ptx)
    return ptx


def _launch_bounds(dispatcher):
    return getattr(dispatcher, "targetoptions", {}).get("launch_bounds")  # cuda.jit(launch_bounds=): fewer registers


def _keep(key, py_func, argtypes: tuple, ptx: str | None) -> None:
    """Keep the variable types of ``py_func`` compiled for ``argtypes`` (and its ``ptx``, unless None) under ``key``."""
    signatures = key and _reached(py_func, argtypes, key)
    if signatures:
        compile_cache.store(key, ({} if ptx is None else {"ptx": ptx}) | {"signatures": signatures})


def keep_compilation(dispatcher, argtypes, cc: tuple, ptx: str) -> None:
    """Keep ``ptx`` as `compile_for_gpu`'s compilation of ``dispatcher`` for ``argtypes`` on ``cc``, unless one is
    kept: the same code compiled with its line table (`assembler.lined_ptx`), the table taken out, so that a kernel
    the cost model reads with its lines is not compiled a second time without them. The variable types are those
    that compilation kept, as `compile_for_gpu`'s own."""
    py_func, argtypes = dispatcher.py_func, tuple(argtypes)
    key = compile_cache.key(py_func, argtypes, cc, _launch_bounds(dispatcher))
    if key and not compile_cache.load(key):
        _compiled_functions.add(py_func)
        _keep(key, py_func, argtypes, ptx)


def _reached(py_func, argtypes, key) -> list | None:
    """[digest, variables, argument kinds] of the kernel compiled for ``argtypes`` and of each device function it
    reaches, the kernel first; None when one of them was not seen compiled or is not among the key's functions."""
    found, todo, seen = [], [(py_func, argtypes)], {(py_func, argtypes)}
    while todo:
        signature = todo.pop(0)
        digest = key.digest_of(signature[0])
        if signature not in _signatures or digest is None:
            return None
        variables, calls = _signatures[signature]
        found.append([digest, {name: str(dtype) for name, dtype in variables.items()},
                      list(_argument_kinds(signature[1]))])
        for call in calls:
            if call not in seen:
                seen.add(call)
                todo.append(call)
    return found


def _dtype(name: str):
    try:
        return np.dtype(name)
    except TypeError:  # bfloat16: NumPy knows it only through numba-cuda's type
        from numba.cuda import types as cuda_types  # noqa: PLC0415

        return _number_dtype(getattr(cuda_types, name))


def _restore(kept: dict, key, argtypes) -> bool:
    """Keep the variable types of a kept compilation as if it had been compiled here; False when one of its
    functions is not among the key's."""
    functions = [(key.functions.get(digest), {name: _dtype(dtype) for name, dtype in variables.items()}, tuple(kinds))
                 for digest, variables, kinds in kept["signatures"]]
    if any(function is None for function, _, _ in functions):
        return False
    for function, variables, kinds in functions:
        _merge_variables(function, variables, kinds)
    _kernel_variables[(functions[0][0], argtypes)] = functions[0][1]
    return True


_SPECIFIC = re.compile(r"raised a specific error:\s*\n\s*(?:\w+Error: )?(.+)")  # a function's own typing message


# a shared or local array whose shape numba sees as a run-time integer (``cuda.blockDim.x``, an argument)
_RUN_TIME_SHAPE = re.compile(r"function (shared|local)\.array\b[^\n]*\) found for signature:\s*>>> array\("
                            r"(u?int\d+,|(?:Uni)?Tuple\([^\n]*?\bu?int\d+\b)")  # a number, or a tuple holding one


# an index that numba typed as a float: most often a uint64 variable given a signed result (`i += 1`), which numba
# unifies as float64 (uint64 arithmetic with a signed operand is int64; a comparison with one is done in float64)
_FLOAT_INDEX = re.compile(r"Unsupported array index type float(?:32|64)")
FLOAT_INDEX = ("an index is a float, and an array takes integer indices only. In numba a uint64 variable given a "
               "signed result becomes a float64 (i += 1 with i a uint64), and a uint64 compared with a signed integer "
               "(i < x.shape[0]) is compared in float64: keep both sides unsigned (i += uint64(1)) or both signed; a "
               "division (/) gives a float too: use //. numba says:")
# storing an array into an element: `out[i, j] = w[m, k]` with a 4-D `w`
_ARRAY_STORED = re.compile(r">>> setitem\(array\([^)]*\), [^\n]*?, array\(")
# numba's list of every implementation it tried for a call, each with its registered types: dozens of lines that bury
# the one that says which call, with which types, found none (up to the line that says where, when it gives one)
_CANDIDATES = re.compile(r"^There are (\d+) candidate implementations:\n.*?(?=^During:|\Z)", re.M | re.S)


def _short(message: str, limit: int = 40) -> str:
    """numba's message, at most ``limit`` lines, without its list of the implementations a call did not match;
    only the message of the function a call was refused by, where it gave one (a course intrinsic's, such as a
    fragment of the wrong size): numba's list of candidates adds nothing to it. A shared or local array sized at
    run time, or an array stored into an element, gets one plain line first."""
    specific = _SPECIFIC.search(str(message))
    if specific:
        said = specific.group(1).strip()
        return f"{FLOAT_INDEX}\n{said}" if _FLOAT_INDEX.search(said) else said
    message = _CANDIDATES.sub(lambda m: f"(numba then lists the {m.group(1)} implementations it tried: none takes "
                                        "these types)\n", str(message))
    lines = [line for line in message.splitlines() if line.strip()]
    if _ARRAY_STORED.search(message):
        lines.insert(0, "the value stored is an array, not a number: an array indexed with fewer indices than it has "
                        "dimensions gives an array (an argument with more dimensions than the kernel indexes, such "
                        "as 4-D filters where the kernel reads w[m, k]? flatten it, w.reshape(M, -1)). numba says:")
    if _FLOAT_INDEX.search(message):
        lines.insert(0, FLOAT_INDEX)
    shape = _RUN_TIME_SHAPE.search(message)
    if shape:
        lines.insert(0, f"cuda.{shape.group(1)}.array needs a shape the compiler knows: an integer literal, a global "
                        "constant or a tuple of them, not a value known only at run time (cuda.blockDim.x, an "
                        "argument, a variable, or arithmetic such as TILE + 1 in the call: name it at module level, "
                        "PADDED = TILE + 1). numba says:")
    return "\n".join(lines[:limit])


@contextlib.contextmanager
def checked_for(cc: tuple):
    """Inside, launches check that kernels compile for compute capability ``cc`` instead of the oldest the course
    runs on (the tuner's, for the GPU its cost model predicts: `run.tuning`). Such a check stands for the kernel's
    later launches with the same types, so that a candidate is compiled once, for that GPU."""
    global _check_cc
    before, _check_cc = _check_cc, cc
    try:
        yield
    finally:
        _check_cc = before


def check_compiles(dispatcher, args, argtypes: tuple | None = None) -> dict:
    """Raise `KernelCompileError` if the kernel would not compile for these arguments (or ``argtypes``), for the
    compute capability of `checked_for` (by default the oldest the course runs on).

    Returns the `variable_types` of the compiled kernel (empty when it was not compiled).
    """
    if mode() == "off":
        return {}
    problem = toolchain_problem()
    if problem:
        if mode() == "require":
            raise KernelCompileError(
                f"cannot check kernels for the GPU: NVVM is missing ({problem}). "
                "Install the course with its cu12 or cu13 extra, or a CUDA toolkit."
            )
        return {}
    argtypes = argtypes or tuple(argument_type(a) for a in args)
    key = (dispatcher.py_func, argtypes)
    if key in _compiled or key in _checked_for_another_gpu:
        return variable_types(*key)
    try:
        ptx = compile_for_gpu(dispatcher, argtypes, _check_cc)
    except Exception as exc:
        name = dispatcher.py_func.__name__
        raise (KernelTypingError if isinstance(exc, TypingError) else KernelCompileError)(
            f"kernel `{name}` would not compile for a real GPU, so the simulator does not run it either "
            f"(arguments: {', '.join(map(str, argtypes))}).\n{_short(exc)}"
        ) from None
    if _check_cc == COMPUTE_CAPABILITY:
        _compiled[key] = ptx
    else:
        _checked_for_another_gpu.add(key)
    return variable_types(*key)


def _float_operation(width: int) -> re.Pattern:
    return re.compile(rf"^\s*(?!ld\.|st\.|mov\.)([a-z]+(?:\.[a-z0-9]+)*\.f{width})\b", re.M)


INTEGER_OPERATION = re.compile(r"^\s*((?:add|sub|mul|mad|div|rem|shl|shr|and|or|xor|neg|min|max|abs|selp|setp)"
                               r"(?:\.[a-z0-9]+)*\.[sub](?:16|32|64))\b", re.M)


def _counts(text: str, pattern: re.Pattern) -> dict[str, int]:
    counts: dict[str, int] = {}
    for operation in pattern.findall(text):
        counts[operation] = counts.get(operation, 0) + 1
    return counts


def _texts(py_func, argtypes: tuple | None = None) -> list[str]:
    """The PTX of each compilation of ``py_func`` (of the one for ``argtypes`` alone, where they are given)."""
    return [ptx for (function, types), ptx in _compiled.items()
            if function is py_func and (argtypes is None or types == tuple(argtypes))]


def float_operations(py_func, width: int = 64, argtypes: tuple | None = None) -> dict[str, int] | None:
    """Instructions that compute on or convert from or to floats of ``width`` bits (``add.f64``, ``cvt.f32.f16``,
    ``cvt.rn.f16.f32``; loads, stores and moves aside) in the PTX compiled for ``py_func``, summed over its
    compilations, or in the one for ``argtypes`` (None: never compiled)."""
    texts = _texts(py_func, argtypes)
    if not texts:
        return None
    counts: dict[str, int] = {}
    for text in texts:
        for operation, n in _counts(text, _float_operation(width)).items():
            counts[operation] = counts.get(operation, 0) + n
    return counts


def shuffles(py_func) -> set[str] | None:
    """The kinds of warp shuffle (``down``, ``up``, ``bfly`` for xor, ``idx``) in the PTX compiled for ``py_func``
    (None: never compiled)."""
    texts = _texts(py_func)
    return None if not texts else {kind for text in texts for kind in re.findall(r"\bshfl\.sync\.(\w+)", text)}


def local_memory(py_func) -> tuple[int, int] | None:
    """(``ld.local``, ``st.local``) in the PTX compiled for ``py_func``, the most of its compilations (None: never
    compiled): a per-thread array the compiler could not keep in registers."""
    texts = _texts(py_func)
    if not texts:
        return None
    return max((text.count("ld.local"), text.count("st.local")) for text in texts)


def integer_operations(py_func) -> dict[str, int] | None:
    """Integer arithmetic, logic, shifts, comparisons and selects (``add.s64``, ``div.u32``, ``setp.lt.s64``) in
    the largest of the PTX compiled for ``py_func`` (None: never compiled). For a kernel without loops, whose
    thread computes one element, that is the integer work per element."""
    texts = _texts(py_func)
    if not texts:
        return None
    return max((_counts(text, INTEGER_OPERATION) for text in texts), key=lambda c: sum(c.values()))


def unchecked_kernels(namespace: dict) -> list[str]:
    """Names of the kernels and device functions in ``namespace`` never compiled for the GPU.

    The notebook tests call this after a notebook ran: every kernel it defines must have
    been launched (and so compiled) at least once, or compiled for an architecture (`assembler.ptx_for`).
    """
    from numba.cuda.dispatcher import CUDADispatcher

    missing = []
    for name, value in namespace.items():
        if not isinstance(value, CUDADispatcher):
            continue
        if value.targetoptions.get("device"):
            if not value.overloads and value.py_func not in _compiled_functions:
                missing.append(name)
        elif value.py_func not in _compiled_functions:
            missing.append(name)
    return sorted(missing)
