"""A two-exercise course and planted submissions for the class-grading tests (`test_classroom`).

Exercise 1 is a kernel (`add_one`), exercise 2 a host function (`blocks_for`), each with a
visible and a hidden test. A planted submission is the release with some answer cells filled
and, for some students, cells added, copied or changed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import nbformat
from nbformat.v4 import new_code_cell, new_markdown_cell, new_notebook

ASSIGNMENT = "mini"

IMPORTS = "import numpy as np\nfrom numba import cuda\nfrom gpucourse.grading import check_kernel, check_function, one_block"
KERNEL = """@cuda.jit
def add_one(out, a):
    i = cuda.threadIdx.x
    if i < out.size:
        out[i] = a[i] + 1"""
FUNCTION = "def blocks_for(n, threads):\n    return (n + threads - 1) // threads"
STUB = "# YOUR CODE HERE\nraise NotImplementedError()"


def _meta(grade_id: str, **flags) -> dict:
    base = {"grade": False, "grade_id": grade_id, "locked": False, "schema_version": 3, "solution": False,
            "task": False}
    return {"nbgrader": {**base, **flags}}


def source_notebook():
    answer = lambda grade_id, code: new_code_cell(  # noqa: E731
        code.split("\n", 1)[0] + "\n    ### BEGIN SOLUTION\n" + code.split("\n", 1)[1] + "\n    ### END SOLUTION"
        if code.startswith("@") else "### BEGIN SOLUTION\n" + code + "\n### END SOLUTION",
        metadata=_meta(grade_id, solution=True))
    return new_notebook(cells=[
        new_markdown_cell("# Mini assignment"),
        new_code_cell(IMPORTS),
        new_code_cell("def add_one_spec(a):\n    return a + 1", metadata=_meta("add_one_spec", locked=True)),
        answer("add_one", KERNEL),
        new_code_cell("check_kernel(add_one, add_one_spec, one_block([1, 7, 32]), dtype=np.int32)\n"
                      "### BEGIN HIDDEN TESTS\n"
                      "check_kernel(add_one, add_one_spec, one_block([5, 64], extra_threads=3), dtype=np.int32)\n"
                      "### END HIDDEN TESTS",
                      metadata=_meta("test_add_one", grade=True, locked=True, points=1)),
        answer("blocks_for", FUNCTION),
        new_code_cell("check_function(blocks_for, [((10, 4), 3), ((8, 4), 2)])\n"
                      "### BEGIN HIDDEN TESTS\n"
                      "check_function(blocks_for, [((1, 32), 1), ((1000, 256), 4)])\n"
                      "### END HIDDEN TESTS",
                      metadata=_meta("test_blocks_for", grade=True, locked=True, points=1)),
    ], metadata={"kernelspec": {"name": "python3", "display_name": "Python 3", "language": "python"}})


def make_course(root: Path, config: Path) -> Path:
    """A course directory with the mini assignment's source; release it with nbgrader."""
    (root / "solutions" / ASSIGNMENT).mkdir(parents=True)
    shutil.copy(config, root / "nbgrader_config.py")
    nbformat.write(source_notebook(), root / "solutions" / ASSIGNMENT / f"{ASSIGNMENT}.ipynb")
    return root


def _answer_cell(notebook, grade_id: str):
    return next(c for c in notebook.cells if c.metadata.get("nbgrader", {}).get("grade_id") == grade_id)


def submission(release: Path, kernel: str | None = KERNEL, function: str | None = FUNCTION, *, imports=None,
               extra_cells=(), copy_kernel_cell: str | None = None):
    """The release notebook with answers filled (None: left as the stub) and planted changes."""
    notebook = nbformat.read(release, as_version=4)
    if kernel is not None:
        _answer_cell(notebook, "add_one").source = kernel
    if function is not None:
        _answer_cell(notebook, "blocks_for").source = function
    if imports is not None:
        notebook.cells[1].source = imports
    if copy_kernel_cell is not None:  # Jupyter's copy keeps the nbgrader metadata
        original = _answer_cell(notebook, "add_one")
        copy = new_code_cell(copy_kernel_cell, metadata=original.metadata)
        notebook.cells.insert(notebook.cells.index(original) + 1, copy)
    for position, cell in extra_cells:
        notebook.cells.insert(position, cell)
    return notebook


def plant(course: Path, student: str, notebook, name: str = f"{ASSIGNMENT}.ipynb") -> None:
    folder = course / "submitted" / student / ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(notebook, folder / name)
