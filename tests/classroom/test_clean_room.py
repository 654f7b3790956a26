"""What the clean room keeps of an answer cell: definitions, never a patch of the checks."""

import nbformat
import pytest
from nbformat.v4 import new_code_cell

import mini_course as mini
from conftest import ROOT
from gpucourse.classroom.clean_room import instructor_names, bound_names, clean_notebook, definitions_only, left_out, same_code
from nbgrader.utils import is_solution

PROTECTED = {"np", "cuda", "check_kernel", "one_block", "add_one_spec"}


def test_kernels_functions_constants_and_numeric_imports_are_kept():
    answer = ("from numba import cuda, int32\nimport math\nTHREADS = 2 * 16\n"
              "@cuda.jit\ndef add_one(out, a):\n    i = cuda.grid(1)\n    if i < out.size:\n        out[i] = a[i] + 1\n"
              "@cuda.jit(device=True)\ndef twice(x):\n    return 2 * x\n"
              "def blocks_for(n, threads=THREADS):\n    return math.ceil(n / threads)")
    kept = definitions_only(answer, PROTECTED)
    assert "from numba import int32" in kept and "import math" in kept and "THREADS = 2 * 16" in kept
    assert {"add_one", "twice", "blocks_for"} <= bound_names(kept)
    assert "cuda," not in kept  # the instructor's import cell provides it


def test_calls_patches_classes_and_shadowed_checks_are_left_out():
    answer = ("import os\ncheck_kernel = lambda *a, **k: None\nnp.argwhere = None\n"
              "check_kernel.__code__ = (lambda: None).__code__\nclass Fake:\n    pass\nadd_one = Fake()\n"
              "def check_kernel(*args):\n    pass\n"
              "def sneaky(n):\n    np.argwhere = n\n    return n\n"
              "def importer(n):\n    import gpucourse\n    return n\n"
              "def dunder(n):\n    return n.__class__\n"
              "def opener(n):\n    return open(n)\n"
              "@property\ndef decorated(n):\n    return n\n"
              "def defaults(n, k=print('x')):\n    return n\n"
              "print('hello')")
    assert definitions_only(answer, PROTECTED) == ""


def test_nothing_that_unpickles_touches_files_or_raw_memory_is_kept():
    """np.load(..., allow_pickle=True) runs whatever a pickle names: a kept function that wrote one (tofile) and
    loaded it could patch the checks in the clean room too. Every way of naming such a function is left out;
    a variable that happens to be called ``load`` is not such a way."""
    for answer in ("def f(x):\n    x.tofile('p')\n    return np.load('p', allow_pickle=True)",
                   "def f(x):\n    return np.load('p')",
                   "def f(x):\n    return np.lib.format.read_array(x)",
                   "def f(x):\n    return np.ctypeslib.as_array(x)",
                   "def f(x):\n    return x.ctypes.data",
                   "from numpy import load", "L = np.load", "def f(x, reader=np.fromfile):\n    return reader(x)",
                   "def f(x):\n    return np.memmap('p')"):
        assert definitions_only(answer, PROTECTED) == "", answer
    honest = ("def host(x, w):\n    load = np.zeros(3, np.float32)\n    d = cuda.to_device(x.reshape(-1))\n"
              "    return d.copy_to_host() + load.sum()")
    assert definitions_only(honest, PROTECTED) == honest


def test_nothing_that_reaches_the_interpreter_through_a_kept_name_is_kept():
    """numba.cuda holds os, sys and importlib as attributes, numba cloudpickle, NumPy testing.runstring (exec), a
    generator its frame's globals, functools a setattr by name: a kept function that calls one, once a test calls
    it, could patch the checks of every later test (update_wrapper(check_function, f, ("__code__",)) did)."""
    for answer in ("from numpy import *",  # load, fromfile, memmap ... as bare names
                   "def f(x):\n    return cuda.os.popen('cat answers').read()",
                   "def f(x):\n    return cuda.importlib.import_module('pickle').loads(x)",
                   "def f(x):\n    modules = cuda.sys.modules\n    return modules",
                   "import numba\ndef f(x):\n    return numba.core.serialize.pickle.loads(x)",
                   "def f(x):\n    np.testing.runstring('import os', {})",
                   "def f(x):\n    g = (i for i in x)\n    return g.gi_frame.f_globals",
                   "import functools\ndef f(x):\n    functools.update_wrapper(check_kernel, f, ('__code__',), ())",
                   "from numba.cuda import os"):
        kept = definitions_only(answer, PROTECTED)
        assert "def f" not in kept and "import *" not in kept and "import os" not in kept, answer
    honest = "def run(x, save=False):\n    return x\n\ndef twice(x):\n    return run(x, save=True)"
    assert definitions_only(honest, PROTECTED) == honest  # a keyword of the student's own function


def test_an_answer_that_does_not_parse_keeps_nothing():
    assert definitions_only("def broken(:\n    pass", PROTECTED) == ""


def test_an_attribute_in_an_index_is_a_read_not_a_patch():
    answer = ("@cuda.jit\ndef block_total(out, a):\n    out[cuda.blockIdx.x] = a[cuda.threadIdx.x]\n"
              "def sneaky(n):\n    np.linalg.x[0] = n\n    return n\n"
              "def sneakier(n):\n    n, np.x = n, n\n    return n\n")
    kept = definitions_only(answer, PROTECTED)
    assert bound_names(kept) == {"block_total"}


def test_printing_to_stderr_is_kept_and_the_rest_of_sys_is_not():
    answer = ("import sys\ndef blocks_for(n, threads):\n    print('rounding up', file=sys.stderr)\n"
              "    return (n + threads - 1) // threads\n"
              "def tracer(n):\n    sys.settrace(None)\n    return n\n"
              "MODULES = sys.modules\n")
    kept = definitions_only(answer, PROTECTED)
    assert bound_names(kept) == {"sys", "blocks_for"}


def graded_pair(tmp_path, **plant):
    """(the notebook as the autograder ran it, the clean room's notebook) for a mini submission."""
    path = tmp_path / "source.ipynb"
    nbformat.write(mini.source_notebook(), path)
    submitted = mini.submission(path, **plant)
    return submitted, clean_notebook(mini.source_notebook(), submitted)


def test_answers_that_are_definitions_kept_whole_are_not_run_again(tmp_path):
    assert same_code(*graded_pair(tmp_path))
    commented = "# rounds up\ndef blocks_for(n, threads):\n    return (n + threads - 1) // threads  # ceil"
    assert same_code(*graded_pair(tmp_path, function=commented))


@pytest.mark.parametrize("plant", [
    dict(function="%time\n" + mini.FUNCTION),  # a magic: the clean room leaves it out
    dict(function=mini.FUNCTION + "\nprint(blocks_for(10, 4))"),  # a call
    dict(kernel=mini.KERNEL + "\ncheck_kernel = lambda *a, **k: None"),  # a patch of a checker
    dict(function="import numpy as np\n" + mini.FUNCTION),  # an import the instructor's cells already make
    dict(kernel=mini.STUB),  # not written: `raise NotImplementedError()`
    dict(extra_cells=[(3, new_code_cell("x = 1"))]),
    dict(copy_kernel_cell=mini.KERNEL),
], ids=["magic", "call", "patch", "import", "stub", "extra cell", "copied cell"])
def test_anything_the_clean_room_would_change_runs_it_again(tmp_path, plant):
    assert not same_code(*graded_pair(tmp_path, **plant))


def test_a_test_cell_whose_id_changed_runs_it_again(tmp_path):
    """The same code under another id is not the test the gradebook scores: the clean room scores the real one."""
    autograded, clean = graded_pair(tmp_path)
    next(c for c in autograded.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_blocks_for"
         ).metadata["nbgrader"]["grade_id"] = "my_test"
    assert not same_code(autograded, clean)


def test_number_types_and_math_functions_of_constants_are_kept_when_the_instructor_provides_them():
    """``NEG_INF = float32(-math.inf)``, as an exercise's hint suggests, is honest: kept where the instructor's cells
    import float32 and math (the student's cell cannot rebind them); any other call, or a keyword, is not."""
    provided = PROTECTED | {"float32", "math"}
    kept = definitions_only("NEG_INF = float32(-math.inf)\nSCALE = np.float32(math.log2(math.e))\n", provided)
    assert kept == "NEG_INF = float32(-math.inf)\nSCALE = np.float32(math.log2(math.e))"
    assert definitions_only("NEG_INF = float32(-math.inf)", PROTECTED) == ""  # float32 the student's own
    for call in ("X = float32(check_kernel(1))", "X = np.zeros(3)", "X = np.float32(1, dtype=None)",
                 "X = float32(open('answers').read())", "X = np.float32.__call__(1)"):
        assert definitions_only(call, provided) == "", call


def test_what_the_clean_room_leaves_out_is_named_for_the_review():
    answer = ("NEG_INF = float32(-math.inf)  # float32 not the instructor's here: left out\n"
              "@cuda.jit\ndef row_max(out, a):\n    out[0] = NEG_INF\n"
              "check_kernel = lambda *a, **k: None\nprint('hello')")
    assert left_out(answer, PROTECTED) == ["NEG_INF = float32(-math.inf)", "check_kernel = lambda *a, **k: None",
                                           "print('hello')"]
    assert left_out(answer, PROTECTED | {"float32", "math"}) == ["check_kernel = lambda *a, **k: None",
                                                                 "print('hello')"]
    assert left_out("def broken(:\n    pass", PROTECTED) == ["the whole cell (it does not parse)"]
    assert left_out("from numba import cuda\n", PROTECTED) == []  # the instructor's import: nothing is missing


@pytest.mark.parametrize("source", sorted((ROOT / "solutions").glob("*/*.ipynb")), ids=lambda p: p.parent.name)
def test_the_clean_room_keeps_every_answer_of_the_solutions_whole(source):
    """An honest answer written as the solution's needs no review: nothing of it is left out."""
    notebook = nbformat.read(source, as_version=4)
    protected = instructor_names(notebook)
    left = {c.metadata["nbgrader"]["grade_id"]: left_out(c.source, protected) for c in notebook.cells
            if c.cell_type == "code" and is_solution(c)}
    assert {grade_id: lines for grade_id, lines in left.items() if lines} == {}
