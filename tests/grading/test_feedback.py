"""In a notebook, a failed check shows its message and no course code or hidden test."""

import nbformat
from nbclient import NotebookClient

FAILING_CELL = '''
from gpucourse.grading import check_kernel, one_block
@cuda.jit
def unguarded(out, a):
    out[cuda.grid(1)] = a[cuda.grid(1)]
check_kernel(unguarded, lambda a: a, one_block([3], extra_threads=2))
HIDDEN_TEST_LINE = 1
'''


def test_failed_check_shows_only_its_message_and_fails_the_cell():
    notebook = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_code_cell("import gpucourse\nfrom numba import cuda"),
        nbformat.v4.new_code_cell(FAILING_CELL),
    ])
    NotebookClient(notebook, timeout=120, kernel_name="python3", allow_errors=True).execute()
    errors = [o for o in notebook.cells[1].outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "CheckFailed"
    traceback = "\\n".join(errors[0].traceback)
    assert traceback.startswith("CheckFailed: unguarded failed with grid=(1,), block=(5,)")
    assert "grading/core.py" not in traceback and "HIDDEN_TEST_LINE" not in traceback


def test_a_long_message_is_shown_wrapped_between_words_and_the_exception_keeps_it_whole():
    from gpucourse.grading import feedback
    from gpucourse.grading.core import CheckFailed

    words = " ".join(f"word{k}" for k in range(60))
    failed = CheckFailed(f"short first line:\n  {words}")
    shown = feedback.shown(CheckFailed, failed)[0].splitlines()
    assert shown[0] == "CheckFailed: short first line:"
    assert all(len(line) <= feedback.WIDTH for line in shown) and len(shown) > 2
    assert shown[1].startswith("  word0 ") and all(line.startswith("    word") for line in shown[2:])
    assert " ".join(shown[1:]).split() == words.split()  # no word cut
    assert str(failed) == f"short first line:\n  {words}"


def test_nbgrader_validate_on_the_command_line_shows_every_line_whole():
    """A student's review (2026-12-02): `nbgrader validate` cut each line of a message at 87 columns, with '...'."""
    from nbgrader.validator import Validator

    from gpucourse.grading import feedback
    from gpucourse.grading.core import CheckFailed

    message = "row 1 is wrong: " + " ".join(f"word{k}" for k in range(60))
    shown = Validator()._indent(feedback.shown(CheckFailed, CheckFailed(message))[0])
    assert "..." not in shown and " ".join(shown.split()) == f"CheckFailed: {message}"
