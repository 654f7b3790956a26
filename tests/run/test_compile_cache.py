"""The PTX check's compilations are kept by what the compiler reads: found again only for the same kernel."""

from types import ModuleType

import numpy as np
import pytest
from numba import cuda

from gpucourse.classroom.preloaded import environment
from gpucourse.run import compile_cache, ptx

SOURCE = """
from numba import cuda
import numpy as np

SCALE = {scale}

@cuda.jit(device=True)
def halve(x):
    y = x * 0.5
    for _ in range(2):
        y = y + 1
    return y

@cuda.jit(device=True)
def scaled(x):
    return halve(x) * SCALE

@cuda.jit
def kernel(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = scaled(a[i])
"""


def fresh(scale=3, lines_above=0):
    """The functions of SOURCE as a new process would define them: new objects, the same code (``lines_above``
    blank lines before it: the same code on other lines)."""
    namespace = {}
    exec(compile("\n" * lines_above + SOURCE.format(scale=scale), "<kernels>", "exec"), namespace)
    return namespace


def argtypes():
    return tuple(ptx.argument_type(np.zeros(4, np.float32)) for _ in range(2))


def named_types(namespace):
    """{function name: {variable: dtype}} the simulator would use for the kernel just compiled."""
    found = ptx.variable_types(namespace["kernel"].py_func, argtypes())
    names = {namespace[n].py_func: n for n in ("kernel", "scaled", "halve")}
    return {names[f]: v for f, v in found.items() if f in names}


@pytest.fixture
def cache(tmp_path, monkeypatch):
    monkeypatch.setenv(compile_cache.ENV, str(tmp_path))
    monkeypatch.setattr(compile_cache, "_memory", {})  # as in a new process: only the disk remembers
    return tmp_path


def compiles(monkeypatch) -> list:
    """The kernels numba compiles from now on."""
    seen = []
    original = cuda.compile_ptx
    monkeypatch.setattr(cuda, "compile_ptx", lambda func, *a, **k: seen.append(func.__name__) or original(func, *a, **k))
    return seen


def test_a_kernel_compiled_in_another_process_is_found_with_its_ptx_and_variable_types(cache, monkeypatch):
    first = fresh()
    cold = ptx.compile_for_gpu(first["kernel"], argtypes())
    cold_types = named_types(first)
    assert cold_types["halve"]["y"] == np.float64 and cold_types["kernel"]["i"] == np.int64
    assert list(cache.rglob("*.json")), "written to the folder"

    monkeypatch.setattr(compile_cache, "_memory", {})
    seen, again = compiles(monkeypatch), fresh()
    assert ptx.compile_for_gpu(again["kernel"], argtypes()) == cold and seen == []
    assert named_types(again) == cold_types  # the device functions' too, as the simulator reads them
    assert ptx.unchecked_kernels(again) == []  # kept counts as checked: the device functions were never compiled
    assert not again["halve"].overloads


@pytest.mark.parametrize("change", ["a global it reads", "a device function's body", "the argument types",
                                    "the compute capability", "its lines"])
def test_any_change_the_compiler_would_see_compiles_again(cache, monkeypatch, change):
    ptx.compile_for_gpu(fresh()["kernel"], argtypes())
    seen = compiles(monkeypatch)
    kernels, types, cc = fresh(), argtypes(), ptx.COMPUTE_CAPABILITY
    if change == "a global it reads":
        kernels = fresh(scale=4)
    elif change == "a device function's body":
        exec("from numba import cuda\n@cuda.jit(device=True)\ndef halve(x):\n    return x * 0.25", kernels)
    elif change == "its lines":  # the types kept name widened operations by their lines (ptx._widened_operations)
        kernels = fresh(lines_above=1)
    elif change == "the argument types":
        types = (types[0], ptx.argument_type(np.zeros(4, np.float64)))
    else:
        cc = (8, 0)
    ptx.compile_for_gpu(kernels["kernel"], types, cc)
    assert seen == ["kernel"]


def test_a_closure_value_is_part_of_the_key(cache, monkeypatch):
    def make(width):
        @cuda.jit
        def fill(out):
            i = cuda.grid(1)
            if i < out.size:
                out[i] = width
        return fill

    types = (ptx.argument_type(np.zeros(4, np.int32)),)
    ptx.compile_for_gpu(make(2), types)
    seen = compiles(monkeypatch)
    ptx.compile_for_gpu(make(2), types)
    ptx.compile_for_gpu(make(3), types)
    assert seen == ["fill"]


def test_what_the_key_cannot_describe_is_compiled_every_time(cache, monkeypatch):
    tiles = ModuleType("tiles")  # a student's own module: its attributes can change, its name stays
    tiles.SIZE = 4

    @cuda.jit
    def fill(out):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = tiles.SIZE

    types = (ptx.argument_type(np.zeros(4, np.int32)),)
    assert compile_cache.key(fill.py_func, types, (7, 5), None) is None
    seen = compiles(monkeypatch)
    ptx.compile_for_gpu(fill, types)
    ptx.compile_for_gpu(fill, types)
    assert seen == ["fill", "fill"] and not list(cache.rglob("*.json"))


def test_a_kernel_that_does_not_compile_is_not_kept(cache):
    @cuda.jit
    def broken(out):
        out[0] = [1, 2]  # a list: the GPU compiler refuses it

    types = (ptx.argument_type(np.zeros(4, np.int32)),)
    for _ in range(2):
        with pytest.raises(Exception):
            ptx.compile_for_gpu(broken, types)
    assert not list(cache.rglob("*.json"))


def test_off_keeps_nothing_on_disk_and_a_folder_that_cannot_be_written_costs_nothing(tmp_path, monkeypatch):
    monkeypatch.setattr(compile_cache, "_memory", {})
    monkeypatch.setenv(compile_cache.ENV, "off")
    assert compile_cache.folder() is None
    ptx.compile_for_gpu(fresh()["kernel"], argtypes())
    not_a_folder = tmp_path / "file"
    not_a_folder.write_text("")
    monkeypatch.setenv(compile_cache.ENV, str(not_a_folder))
    monkeypatch.setattr(compile_cache, "_memory", {})
    assert ptx.compile_for_gpu(fresh(scale=5)["kernel"], argtypes()).startswith("//")


def test_students_code_is_graded_without_a_shared_cache():
    assert environment()[compile_cache.ENV] == "off"


def test_a_damaged_record_is_compiled_again_and_rewritten(cache, monkeypatch):
    ptx.compile_for_gpu(fresh()["kernel"], argtypes())
    [record] = cache.rglob("*.json")  # one record: the kernel's, its device functions' types in it
    record.write_text("{ not json")
    monkeypatch.setattr(compile_cache, "_memory", {})
    seen = compiles(monkeypatch)
    ptx.compile_for_gpu(fresh()["kernel"], argtypes())
    assert seen == ["kernel"] and record.read_text().startswith('{"ptx"')


INLINE = """
from numba import cuda

@cuda.jit(device=True, inline="always")
def accumulate(x, n):
    total = x
    for k in range(n):
        total = total + k
    return total
"""


def test_an_inline_device_function_s_types_are_found_in_another_process(cache, monkeypatch):
    """numba types an ``inline="always"`` function only inside its callers, so the simulator compiles it alone for
    its variable types (`ptx.inline_variable_types`): kept too, a second process compiles nothing."""
    from numba.cuda import types

    def inline():
        namespace = {}
        exec(compile(INLINE, "<inline>", "exec"), namespace)
        return namespace["accumulate"].py_func

    argtypes = (types.float32, types.int64)
    cold = ptx.inline_variable_types(inline(), argtypes)
    assert cold["total"] == np.float64  # float32 + int64: numba widens to float64
    monkeypatch.setattr(compile_cache, "_memory", {})
    seen = compiles(monkeypatch)
    assert ptx.inline_variable_types(inline(), argtypes) == cold and seen == []
    other = ptx.inline_variable_types(inline(), (types.float64, types.int32))  # another signature: compiled
    assert (other["x"], other["total"], seen) == (np.float64, np.float64, ["accumulate"])
