"""The PTX check's compilations (and the cost model's with line tables) kept by what the compiler reads, in memory
and on disk.

numba-cuda takes about a second to compile a kernel to PTX on a laptop, and the course compiles every kernel it
launches (`ptx.check_compiles`) and every kernel whose registers it reports (`assembler.ptx_for`). The same kernel
comes back often: a lecture run again in a fresh kernel, a builder called twice with the same tiles, the test
suite's processes. `key` hashes what the compiler reads of a kernel: the code of the kernel and of every function it
names, the values of the globals and closure variables they name, the argument types, compute capability and launch
bounds, and the versions of the compiler and of the course. A kernel that names anything the hash cannot vouch for
(an object of a class of the student's own, a module other than the course's, numba's and NumPy's) gets no key
and is compiled every time. Only compilations that succeeded are kept.

``GPUCOURSE_COMPILE_CACHE``: the folder (default ``$XDG_CACHE_HOME/gpucourse/ptx``, else ``~/.cache/gpucourse/ptx``),
or ``off`` for none on disk (the grading sandbox sets it: students' code shares no cache).
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
import types as pytypes
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

ENV = "GPUCOURSE_COMPILE_CACHE"
FORMAT = 3  # of `ptx.compile_for_gpu`'s records (3: tuples' kinds); in every key, so another is never read
TRUSTED_PACKAGES = ("gpucourse", "numba", "numpy", "llvmlite", "math", "cmath", "operator", "builtins", "ml_dtypes")

_memory: dict[str, dict] = {}
_environment: str | None = None


class Untrusted(Exception):
    """Something a kernel names that its fingerprint cannot describe by value."""


def folder() -> Path | None:
    """Where compilations are kept on disk, or None (``off``)."""
    setting = os.environ.get(ENV, "").strip()
    if setting.lower() == "off":
        return None
    if setting:
        return Path(setting)
    return Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "gpucourse" / "ptx"


def _trusted(module_name: str | None) -> bool:
    return bool(module_name) and module_name.split(".")[0] in TRUSTED_PACKAGES


def _package_digest() -> str:
    """The course library's sources: a change anywhere in it invalidates every key."""
    root = Path(__file__).resolve().parents[1]
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()


def environment() -> str:
    """What every key shares: the versions that decide what numba-cuda and NVVM make of a function."""
    global _environment
    if _environment is None:
        import llvmlite
        import numba
        import numba_cuda
        from numba.cuda.cudadrv import nvvm

        settings = sorted((k, v) for k, v in os.environ.items() if k.startswith("NUMBA_"))
        _environment = repr((FORMAT, sys.version, numba.__version__, numba_cuda.__version__, llvmlite.__version__,
                             np.__version__, nvvm.NVVM().get_version(), _package_digest(), settings))
    return _environment


def _names(code: pytypes.CodeType) -> set[str]:
    """Every global or attribute name the code and the code nested in it (comprehensions, lambdas) use."""
    names = set(code.co_names)
    for constant in code.co_consts:
        if isinstance(constant, pytypes.CodeType):
            names |= _names(constant)
    return names


def _code(code: pytypes.CodeType) -> tuple:
    """What the compiler reads of a code object, its line numbers included: the variable types kept name the
    operations numba types wider than it computes them by their lines (`ptx._widened_operations`), so a kernel
    whose lines moved (a line added above it in a notebook cell) must not find another's."""
    constants = tuple(_code(c) if isinstance(c, pytypes.CodeType) else (type(c).__name__, repr(c))
                      for c in code.co_consts)
    return (code.co_code, constants, code.co_names, code.co_varnames, code.co_freevars, code.co_cellvars,
            code.co_argcount, code.co_posonlyargcount, code.co_kwonlyargcount, code.co_flags,
            tuple(code.co_lines()))  # (start, end, line) of its bytecode: not columns


@dataclass
class _Walk:
    """One fingerprint: the digest of each function visited, and the function of each digest."""

    functions: dict = field(default_factory=dict)  # digest -> function
    _seen: dict = field(default_factory=dict)  # id(function) -> digest (a placeholder while it is being hashed)

    def function(self, func: pytypes.FunctionType) -> str:
        if id(func) in self._seen:
            return self._seen[id(func)]
        self._seen[id(func)] = f"recursive {func.__module__}.{func.__qualname__}"
        names = _names(func.__code__)
        parts = [func.__module__, func.__qualname__, _code(func.__code__),
                 [(name, self.value(func.__globals__[name])) for name in sorted(names & func.__globals__.keys())],
                 [self.cell(c) for c in func.__closure__ or ()],
                 self.value(func.__defaults__), self.value(func.__kwdefaults__ and sorted(func.__kwdefaults__.items()))]
        digest = hashlib.sha256(repr(parts).encode()).hexdigest()
        self._seen[id(func)], self.functions[digest] = digest, func
        return digest

    def cell(self, cell) -> object:
        try:
            return self.value(cell.cell_contents)
        except ValueError:  # an empty cell: a name assigned later in the enclosing function
            raise Untrusted("a closure variable not yet assigned") from None

    def value(self, value) -> object:
        from llvmlite import ir as llvm_ir
        from numba.core import types
        from numba.core.extending import _Intrinsic
        from numba.cuda.dispatcher import CUDADispatcher

        if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
            return type(value).__name__, repr(value)
        if isinstance(value, (tuple, list)):
            return type(value).__name__, [self.value(v) for v in value]
        if isinstance(value, CUDADispatcher):
            return "dispatcher", self.function(value.py_func), options_of(value)
        if isinstance(value, pytypes.FunctionType):
            return "function", self.function(value)
        if isinstance(value, _Intrinsic):  # numba's @intrinsic: its Python definition says what it emits
            return "intrinsic", self.function(value._defn), sorted((k, repr(v)) for k, v in value._ctor_kwargs.items())
        if isinstance(value, np.ndarray):
            return "ndarray", *array_digest(value)
        if isinstance(value, (np.generic, np.dtype, types.Type)):
            return type(value).__name__, repr(value)
        if isinstance(value, llvm_ir.Type):  # the LLVM types an @intrinsic emits: their IR text says all
            return type(value).__name__, str(value)
        if isinstance(value, pytypes.ModuleType):
            if _trusted(value.__name__):
                return "module", value.__name__
            raise Untrusted(f"module {value.__name__}")
        if isinstance(value, (type, pytypes.BuiltinFunctionType, np.ufunc)) and _trusted(value.__module__ or "numpy"):
            return "named", value.__module__, value.__qualname__ if isinstance(value, type) else value.__name__
        raise Untrusted(f"{type(value).__module__}.{type(value).__qualname__}")


def options_of(dispatcher) -> list:
    """A ``cuda.jit`` dispatcher's compile options (max_registers, launch_bounds, fastmath, ...), as keys hold them."""
    return sorted((k, repr(v)) for k, v in getattr(dispatcher, "targetoptions", {}).items())


def array_digest(value: np.ndarray) -> tuple:
    """(dtype, shape, sha256 of the bytes) of an array, as keys hold it."""
    data = np.ascontiguousarray(value)
    return data.dtype.str, data.shape, hashlib.sha256(data.tobytes()).hexdigest()


@dataclass(frozen=True)
class Key:
    """A compilation's name in the cache, and the functions its fingerprint visited (digest -> function)."""

    name: str
    functions: dict

    def digest_of(self, func) -> str | None:
        return next((d for d, f in self.functions.items() if f is func), None)


def key(py_func, argtypes, cc: tuple, bounds) -> Key | None:
    """The key of ``py_func`` compiled for ``argtypes`` on ``cc`` under launch ``bounds``; None when it has none."""
    walk = _Walk()
    try:
        digest = walk.function(py_func)
    except Untrusted:
        return None
    try:
        shared = environment()
    except Exception:  # no NVVM to ask its version: the compilation itself then says what is missing
        return None
    text = repr((shared, digest, [repr(t) for t in argtypes], tuple(cc), repr(bounds)))
    return Key(hashlib.sha256(text.encode()).hexdigest(), walk.functions)


def _path(name: str) -> Path | None:
    where = folder()
    return None if where is None else where / name[:2] / f"{name}.json"


def load(key: Key) -> dict | None:
    """The record kept under ``key``, from memory or disk; None when there is none (or it cannot be read)."""
    record = _memory.get(key.name)
    if record is None and (path := _path(key.name)) is not None:
        try:
            record = _memory[key.name] = json.loads(path.read_text())
        except (OSError, ValueError):
            return None
    return record


def store(key: Key, record: dict) -> None:
    """Keep ``record`` (JSON-able) under ``key``; a folder that cannot be written keeps it in memory only."""
    _memory[key.name] = record
    path = _path(key.name)
    if path is None:
        return
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.NamedTemporaryFile("w", dir=path.parent, suffix=".tmp", delete=False) as out:
            json.dump(record, out)
        os.replace(out.name, path)  # readers in other processes see a whole file or none
    except OSError:
        pass
