"""What a call inside a simulated kernel does: device functions, math, casts and builtins.

Kernel code calls scalar functions (``math.exp``, ``min``, ``float32``) that
must here work on arrays of one value per lane, with the dtype numba would give
(`functions`).
Device functions (``@cuda.jit(device=True)``, and ``@numba.jit`` functions,
which numba-cuda compiles as device functions) run rewritten, like the kernel;
one declared with signatures gets its arguments and result converted to the
signature numba picks, as on the GPU. ``numba.cuda.bf16``'s functions and
casts to bfloat16 round as the GPU does (`bfloat16`). A function carrying a
``__simulation__`` (an intrinsic such as `kernels.vector.load4`) runs that
Python function, rewritten like a device function, in its place. ``print`` prints
as numba-cuda's does (`printing`).
"""

from __future__ import annotations

import functools
import inspect

from numba.core import types as numba_types
from numba.core.dispatcher import Dispatcher
from numba.cuda.dispatcher import CUDADispatcher

from . import bfloat16, collective
from .arithmetic import SIGNATURES, argument_kinds, as_dtype, cast, dtype_of, from_dtype
from .errors import UnsupportedInKernel, fault
from .functions import FUNCTIONS, cast_to
from .intrinsics import REPLACEMENTS
from .memory import SimArray, SimView
from .printing import kernel_print
from . import trace as tracing
from .runtime import RUNTIME, UNDEFINED
from .transform import CALL, FUNCTION, MARK, MARKED, RT, UNDEFINED as UNDEFINED_NAME, register_stretches, rewrite

_compiled: dict = {}
# (code, its file) -> the rewrite of that code, compiled: one for every closure of a `def` (a factory's kernels),
# each run in its own namespace (`kernel_globals`)
_rewritten: dict = {}
SIMULATION = "__simulation__"  # what the simulator runs in place of a function that carries it


def _run_device_function(runtime, py_func, args, kwargs, inlined_by_numba: bool = False, run=None):
    """A device function's call (``run``: `device_function` of ``py_func`` unless given). A trace counts its
    accesses where the compiled code's line table has them (`run.assembler.lined_ptx`): at their own lines for one
    of `LaunchTrace.own_line_functions` (compiled with lines), wherever it is called from; else at the line of the
    outermost call made from code with lines (the kernel's, or such a function's), which holds this code
    inlined, and so do the functions it calls, except those with lines of their own; a function numba inlines
    (``inline="always"``) counts as the code it is inlined into: at its own lines inside code with lines."""
    run = run or device_function(py_func)
    trace = runtime.trace
    if trace is None or inlined_by_numba:
        return run(*args, **kwargs)
    outer = trace.call_site
    if py_func in trace.own_line_functions:
        trace.call_site = None
    elif outer is None:
        trace.call_site = runtime.site
    else:
        return run(*args, **kwargs)
    try:
        return run(*args, **kwargs)
    finally:
        trace.call_site = outer


def dispatch(runtime, function, args, kwargs):
    if isinstance(function, Dispatcher) and not isinstance(function, CUDADispatcher):
        return _run_device_function(runtime, function.py_func, args, kwargs)  # @numba.jit: a numba-cuda device fn
    if isinstance(function, CUDADispatcher):
        if not function.targetoptions.get("device"):
            raise fault(UnsupportedInKernel, runtime.where(runtime.site),
                        f"`{function.py_func.__name__}` is a kernel; a kernel can only call device functions "
                        "(@cuda.jit(device=True))")
        if function._can_compile or kwargs:
            inlined = function.targetoptions.get("inline") == "always"
            if inlined:
                _type_inlined(runtime, function, args, kwargs)
            return _run_device_function(runtime, function.py_func, args, kwargs, inlined)
        return _run_device_function(runtime, function.py_func, args, {}, run=_declared_call(function))
    if getattr(function, "__module__", None) == bfloat16.MODULE:
        return _bfloat16_call(runtime, function, args)
    if isinstance(function, numba_types.Number) and as_dtype(function) is bfloat16.BFLOAT16:
        return bfloat16.round_to(*args)  # once, as __double2bfloat16 (NumPy's conversion rounds twice)
    simulation = getattr(function, SIMULATION, None)
    if simulation is not None:  # an intrinsic (inline PTX, vector loads) with plain Python in its place
        if runtime.trace is None:
            return device_function(simulation)(*args, **kwargs)
        with runtime.trace.vector_access(runtime.site):  # its element accesses: one warp instruction
            return _run_device_function(runtime, simulation, args, kwargs)
    emulate = collective.emulation(function)
    if emulate is not None:
        return collective.run_warp_wide(runtime, function, emulate, args)
    if function is print:
        return kernel_print(runtime, args, kwargs)
    return _direct(function)(*args, **kwargs)


def _type_inlined(runtime, dispatcher, args, kwargs) -> None:
    """Give the launch the variable types of an ``inline="always"`` device function for these arguments (keyword
    and default ones in their places), which numba types only inside its callers (the launch's ``inline_types``
    compiles it alone): none where the launch has no types at all (the PTX check off)."""
    if runtime.inline_types is None or not runtime.variable_types:
        return
    if kwargs or len(args) != dispatcher.py_func.__code__.co_argcount:
        bound = inspect.signature(dispatcher.py_func).bind(*args, **kwargs)
        bound.apply_defaults()
        args = bound.args
    table = runtime.variable_types.setdefault((dispatcher.py_func, SIGNATURES), {})
    kinds = argument_kinds(args)
    if kinds not in table:
        argtypes = tuple(map(_numba_type, args))
        table[kinds] = {} if any(t is None for t in argtypes) else runtime.inline_types(dispatcher.py_func, argtypes)


def _bfloat16_call(runtime, function, args):
    implementation = bfloat16.operation(function)
    if implementation is None:
        name = getattr(function, "__name__", repr(function)).lstrip("_")
        raise fault(UnsupportedInKernel, runtime.where(runtime.site),
                    f"the course simulator does not simulate numba.cuda.bf16's `{name}`"
                    + ("" if bfloat16.BFLOAT16 is not None else " (bfloat16 needs the ml_dtypes package: "
                       "pip install ml_dtypes)"))
    return implementation(*args)


def _numba_type(value):
    """The numba type of a value passed to a device function (None: not a number, an array or a tuple of them)."""
    if type(value) in (SimArray, SimView):
        return numba_types.Array(from_dtype(value.dtype), value.ndim, "A")
    if type(value) is tuple:
        elements = tuple(map(_numba_type, value))
        return None if None in elements else numba_types.BaseTuple.from_types(elements)
    dtype = dtype_of(value)
    return None if dtype is None else from_dtype(dtype)


@functools.cache
def _declared_signature(dispatcher, argtypes: tuple):
    """The declared signature numba picks for ``argtypes`` (None: none fits; the PTX check says so)."""
    return dispatcher.typingctx.resolve_overload(dispatcher.py_func, dispatcher.nopython_signatures, argtypes, {})


def _as_numba_type(value, numba_type):
    if isinstance(numba_type, (numba_types.Number, numba_types.Boolean)) and dtype_of(value) is not None:
        return cast(value, as_dtype(numba_type))
    return value


def _declared_call(dispatcher):
    """A call of a device function declared with signatures: arguments and result in the signature's types."""
    run = device_function(dispatcher.py_func)

    def call(*args):
        argtypes = tuple(map(_numba_type, args))
        signature = None if any(t is None for t in argtypes) else _declared_signature(dispatcher, argtypes)
        if signature is None:
            return run(*args)
        result = run(*[_as_numba_type(a, t) for a, t in zip(args, signature.args)])
        return _as_numba_type(result, signature.return_type)

    return call


def _plain_call(function):
    """``function`` called as it is (the last case of `dispatch`): a variable read before assigned is refused."""

    def plain(*args, **kwargs):
        for value in args:
            if value is UNDEFINED:
                raise fault(UnsupportedInKernel, RUNTIME.where(RUNTIME.site),
                            "a variable is used before it is assigned")
        return function(*args, **kwargs)

    return plain


def _bfloat16_aware(function, mapped):
    """``mapped``, or numba.cuda.bf16's function in its place where an argument is a bfloat16."""

    def apply(*args, **kwargs):
        if any(dtype_of(a) is bfloat16.BFLOAT16 for a in args):
            return bfloat16.MATH[function](*args)  # math.sqrt of a bfloat16 is hsqrt in numba-cuda
        return mapped(*args, **kwargs)

    return apply


def _direct(function):
    """What a call of ``function`` runs, whatever the arguments, where that depends on the function alone (math
    and builtins, casts, cuda.grid and the like); None for the cases `dispatch` decides first."""
    if isinstance(function, (Dispatcher, CUDADispatcher)) or function is print:
        return None
    try:
        mapped = FUNCTIONS.get(function)
    except TypeError:  # unhashable
        mapped = None
    if mapped is not None:
        return _bfloat16_aware(function, mapped) if function in bfloat16.MATH else mapped
    if getattr(function, "__module__", None) == bfloat16.MODULE:
        return None
    if isinstance(function, numba_types.Number) or function is numba_types.boolean:
        dtype = as_dtype(function)
        return None if dtype is bfloat16.BFLOAT16 else cast_to(dtype)
    if getattr(function, SIMULATION, None) is not None or collective.emulation(function) is not None:
        return None
    return _plain_call(function)


_DIRECT: dict = {}  # function -> what calls it (`_direct`), or None where `dispatch` decides per call


def call(site, function, *args, **kwargs):
    """A call in a rewritten kernel: runs ``function`` for the active lanes (see `dispatch`)."""
    RUNTIME.site = site
    try:
        direct = _DIRECT[function]
    except KeyError:
        direct = _direct(function)
        if len(_DIRECT) < 4096:  # kept for the kernels' functions, not for every object ever called
            _DIRECT[function] = direct
    except TypeError:  # unhashable
        direct = None
    if direct is not None:
        return direct(*args, **kwargs)
    return dispatch(RUNTIME, function, args, kwargs)


def kernel_globals(py_func) -> dict:
    """The globals a rewritten function runs with: its own, with numba.cuda swapped for `SIM_CUDA`."""
    namespace = {}
    for name, value in py_func.__globals__.items():
        namespace[name] = REPLACEMENTS.get(id(value), value)
    if py_func.__closure__:
        for name, cell in zip(py_func.__code__.co_freevars, py_func.__closure__):
            value = cell.cell_contents
            namespace[name] = REPLACEMENTS.get(id(value), value)
    namespace[RT] = RUNTIME
    namespace[CALL] = call
    namespace[MARK], namespace[MARKED] = tracing.mark, tracing.marked
    namespace[UNDEFINED_NAME] = UNDEFINED
    namespace[FUNCTION] = py_func
    namespace.setdefault("__builtins__", __builtins__)
    return namespace


def called_device_functions(function) -> list:
    """The device functions ``function`` calls, directly or through each other: the CUDA device functions compiled
    for their callers' types (not declared with signatures) among the values of its globals whose names its code
    uses (attribute names included) and of its closure's filled cells, and so on for theirs."""
    found, seen, todo = [], {function}, [function]
    while todo:
        current = todo.pop()
        codes, names = [current.__code__], set()
        while codes:
            code = codes.pop()
            names.update(code.co_names)
            codes.extend(c for c in code.co_consts if hasattr(c, "co_names"))
        values = [current.__globals__.get(name) for name in names]
        values += [cell.cell_contents for cell in current.__closure__ or () if _filled(cell)]
        for value in values:
            if (isinstance(value, CUDADispatcher) and value.targetoptions.get("device") and value._can_compile
                    and value.py_func not in seen):
                seen.add(value.py_func)
                found.append(value)
                todo.append(value.py_func)
    return found


def of_its_file(kernel) -> list:
    """The device functions ``kernel`` calls (`called_device_functions`) that are written in its file: where they are
    compiled with lines (`own_line_functions`, or inlined by numba into such code) their lines are the line
    table's (`run.assembler.lined_ptx`)."""
    file = kernel.__code__.co_filename
    return [f for f in called_device_functions(kernel) if f.py_func.__code__.co_filename == file]


def own_line_functions(functions: list) -> frozenset:
    """The Python functions of those of ``functions`` (`of_its_file`) whose code keeps its own lines in the kernel's
    line table: compiled apart (numba does not inline them: an ``inline="always"`` function takes the lines of the
    code it is inlined into)."""
    return frozenset(f.py_func for f in functions if f.targetoptions.get("inline") != "always")


def _filled(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018 - an empty cell raises
    except ValueError:
        return False
    return True


def device_function(py_func):
    """The rewritten, runnable version of a kernel or device function (cached)."""
    compiled = _compiled.get(py_func)
    if compiled is None:
        key = (py_func.__code__, py_func.__code__.co_filename)
        code = _rewritten.get(key)
        if code is None:
            module, filename = rewrite(py_func)
            code = _rewritten[key] = compile(module, filename, "exec")
            register_stretches(code)
        namespace = kernel_globals(py_func)
        exec(code, namespace)  # noqa: S102 (our own rewrite of the kernel)
        compiled = _compiled[py_func] = namespace[py_func.__name__]
    return compiled


__all__ = ["dispatch", "call", "device_function", "kernel_globals", "called_device_functions", "of_its_file",
           "own_line_functions"]
