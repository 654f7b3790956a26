"""`make grade` on a class of planted submissions: crashes, hangs, accidents and cheats.

Each student below did one thing to the mini assignment (`mini_course`): 2 points, one for a
kernel, one for a host function. The whole class goes through the real pipeline (a local Dask
cluster of two workers, nbgrader autograde in a sandbox, the clean room, feedback, grades.csv),
with short time limits.
"""

import csv
import hashlib
import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nbformat.v4 import new_code_cell

import mini_course as mini
from conftest import ROOT
from gpucourse.classroom import sandbox
from gpucourse.classroom.preloaded import environment


pytestmark = pytest.mark.usefixtures("a_sandbox")  # tests/conftest.py: skip without one, or in CI fail


WRONG_KERNEL = "@cuda.jit\ndef add_one(out, a):\n    i = cuda.threadIdx.x\n    if i < out.size:\n        out[i] = a[i]"
WRONG_FUNCTION = "def blocks_for(n, threads):\n    return n // threads"
EXTRA = new_code_cell(mini.FUNCTION, metadata={"nbgrader": {
    "grade": False, "grade_id": "my_own_cell", "locked": False, "schema_version": 3, "solution": True, "task": False}})
LIBRARY = ROOT / "lib" / "gpucourse" / "grading" / "core.py"

# student: (what they submit, expected score, expected status)
CLASS = {
    "full": (dict(), 2, "graded"),
    "zero": (dict(kernel=None, function=None), 0, "zero"),
    "exits": (dict(function="import os\nos._exit(1)"), 1, "graded"),
    "kills_itself": (dict(function="import os, signal\nos.kill(os.getpid(), signal.SIGKILL)"), 1, "graded"),
    "hangs": (dict(function="import time\nwhile True:\n    try:\n        time.sleep(0.1)\n    except:\n        pass"),
              1, "graded"),
    # its parent is the sandbox's init, which ignores the signal
    "kills_parent": (dict(function="import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\n" + mini.FUNCTION),
                     2, "graded"),
    # MemoryError before blocks_for is defined; the clean room keeps only the definition
    "allocates_20_gb": (dict(function="hog = bytearray(20 * 2**30)\n" + mini.FUNCTION), 1, "needs review"),
    # the simulator loops until the cell's time limit: that test only, with a message
    "endless_kernel": (dict(kernel="@cuda.jit\ndef add_one(out, a):\n    i = cuda.threadIdx.x\n    while i < out.size:\n"
                                   "        out[i] = a[i] + 1"), 1, "graded"),
    "function_writes_stderr": (dict(function="import sys\ndef blocks_for(n, threads):\n"
                                             "    print('rounding up', file=sys.stderr)\n"
                                             "    return (n + threads - 1) // threads"), 2, "graded"),
    "prints_4_mb": (dict(kernel=mini.KERNEL + '\nprint("x" * 4_000_000)'), 2, "graded"),  # 200x the output cap
    "warns": (dict(function="import warnings\ndef blocks_for(n, threads):\n    warnings.warn('rounding up')\n"
                            "    return (n + threads - 1) // threads"), 2, "graded"),
    "copies_a_cell": (dict(kernel=mini.STUB, copy_kernel_cell=mini.KERNEL), 2, "graded"),
    "adds_a_graded_cell": (dict(extra_cells=[(3, EXTRA)]), 2, "graded"),
    "prints_hidden_tests": (dict(function='print("\\n".join(In))\n' + mini.FUNCTION), 2, "graded"),
    # cheats: 2 points in the notebook, the clean room's lower score in grades.csv until an instructor settles it
    "rebinds_the_checks": (dict(kernel=WRONG_KERNEL + "\ncheck_kernel = lambda *a, **k: None",
                                function=WRONG_FUNCTION + "\ncheck_function = lambda *a, **k: None"),
                           0, "needs review"),
    "swaps_check_code": (dict(kernel=WRONG_KERNEL + "\ncheck_kernel.__code__ = (lambda *a, **k: None).__code__"),
                         1, "needs review"),
    "patches_numpy": (dict(kernel=WRONG_KERNEL + "\nnp.argwhere = lambda x: np.zeros((0, x.ndim), int)"),
                      1, "needs review"),
    "fakes_the_import_cell": (dict(kernel=WRONG_KERNEL, function=WRONG_FUNCTION,
                                   imports="import numpy as np\nfrom numba import cuda\n"
                                   "check_kernel = check_function = one_block = lambda *a, **k: None"),
                              0, "needs review"),
    "host_object": (dict(kernel="class Fake:\n    def __getitem__(self, config):\n"
                                "        return lambda out, a: out.__setitem__(slice(None), a + 1)\nadd_one = Fake()"),
                    1, "graded"),
    "runs_the_solution": (dict(kernel="import json\nsource = json.load(open('../../../solutions/mini/mini.ipynb'))\n"
                                      "exec(''.join(source['cells'][3]['source']))"), 1, "graded"),
    "writes_the_gradebook": (dict(kernel=mini.KERNEL + "\nimport sqlite3\nsqlite3.connect('../../../gradebook.db')"
                                         ".execute('update grade set manual_score = 99')"), 2, "graded"),
    "appends_to_the_library": (dict(kernel=mini.KERNEL + f"\nopen({str(LIBRARY)!r}, 'a').write('\\nX = 1\\n')"),
                               2, "graded"),
}


def run(course: Path, *args: str, python: str = sys.executable) -> subprocess.CompletedProcess:
    return subprocess.run([python, *args], cwd=course, env=environment(), capture_output=True, text=True,
                          timeout=1800)


@pytest.fixture(scope="module")
def graded(a_sandbox, tmp_path_factory):
    """The class graded once: the course, the summary printed, grades.csv as {student: row}."""
    course = mini.make_course(tmp_path_factory.mktemp("course"), ROOT / "nbgrader_config.py")
    assert run(course, "-m", "nbgrader", "generate_assignment", mini.ASSIGNMENT, "--force").returncode == 0
    release = course / "assignments" / mini.ASSIGNMENT / f"{mini.ASSIGNMENT}.ipynb"
    for student, (plant, _, _) in CLASS.items():
        mini.plant(course, student, mini.submission(release, **plant))
    mini.plant(course, "renames_the_notebook", mini.submission(release), name="mini (1).ipynb")
    deleted = mini.submission(release)  # one test cell deleted, the other's id changed: 0 points in the notebook
    deleted.cells = [c for c in deleted.cells if c.metadata.get("nbgrader", {}).get("grade_id") != "test_blocks_for"]
    next(c for c in deleted.cells if c.metadata.get("nbgrader", {}).get("grade_id") == "test_add_one"
         ).metadata["nbgrader"]["grade_id"] = "my_add_one_test"
    mini.plant(course, "deletes_and_renames_test_cells", deleted)
    broken = course / "submitted" / "sends_a_broken_file" / mini.ASSIGNMENT
    broken.mkdir(parents=True)
    (broken / "mini.ipynb").write_text("{ this is not a notebook")
    library = hashlib.sha256(LIBRARY.read_bytes()).hexdigest()
    done = run(course, "-m", "gpucourse.classroom.grade", mini.ASSIGNMENT, "--cell-timeout", "10",
               "--notebook-timeout", "60", "--jobs", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert hashlib.sha256(LIBRARY.read_bytes()).hexdigest() == library, "a student changed the course library"
    with (course / "grades.csv").open() as f:
        grades = {row["student"]: row for row in csv.DictReader(f)}
    return course, done.stdout, grades


@pytest.mark.parametrize("student", sorted(CLASS))
def test_each_planted_submission_gets_the_grade_a_careful_instructor_would_give(graded, student):
    _, summary, grades = graded
    _, score, status = CLASS[student]
    row = grades[student]
    assert (float(row["score"]), row["status"]) == (score, status), f"{student}: {row}\n{summary}"


def test_cheats_are_flagged_with_the_tests_that_differ_and_their_feedback_held(graded):
    course, summary, grades = graded
    notes = grades["rebinds_the_checks"]["notes"]
    assert "test_add_one: 1 in the notebook, 0 in the clean room" in notes
    assert "scored with the lower of each; feedback held until the review is settled" in notes
    assert float(grades["rebinds_the_checks"]["clean_room_score"]) == 0
    assert not (course / "feedback" / "rebinds_the_checks" / mini.ASSIGNMENT).exists()
    assert (course / "feedback" / "full" / mini.ASSIGNMENT / "mini.html").exists()
    assert "feedback held for 6 submission(s) that need review" in summary
    assert "make grade-one A=mini S=<student> ARGS='--settle notebook'" in summary


def test_a_crash_or_a_hang_keeps_earlier_points_and_says_why(graded):
    course, _, grades = graded
    assert "cells not run: the kernel died in an earlier cell" in grades["exits"]["notes"]
    assert "ran past its time limit" in grades["hangs"]["notes"]
    assert "stopped at its time limit (an endless loop?): test_add_one" in grades["endless_kernel"]["notes"]
    feedback = (course / "feedback" / "endless_kernel" / mini.ASSIGNMENT / "mini.html").read_text()
    assert "this cell did not finish in its time limit" in feedback
    feedback = (course / "feedback" / "exits" / mini.ASSIGNMENT / "mini.html").read_text()
    assert "KernelDied" in feedback and "not run: the kernel died in an earlier cell" in feedback


def test_accidents_grade_normally_and_a_broken_file_is_not_a_silent_zero(graded):
    _, summary, grades = graded
    assert (float(grades["renames_the_notebook"]["score"]), grades["renames_the_notebook"]["status"]) == (2, "graded")
    assert "graded mini (1).ipynb as mini.ipynb (renamed)" in grades["renames_the_notebook"]["notes"]
    broken = grades["sends_a_broken_file"]
    assert broken["status"] == "failed to grade" and float(broken["max_score"]) == 2
    assert "mini.ipynb is not valid JSON (Expecting property name enclosed in double quotes at line 1, column 3)" \
        in broken["notes"]
    assert "1 failed to grade" in summary.splitlines()[-1]


def test_missing_test_cells_need_review_named_with_their_points(graded):
    course, _, grades = graded
    deleted = grades["deletes_and_renames_test_cells"]
    assert (float(deleted["score"]), float(deleted["clean_room_score"]), deleted["status"]) == (0, 2, "needs review")
    for note in ("cells missing from mini.ipynb (deleted, or their id changed): test_add_one (1 point), "
                 "test_blocks_for (1 point)", "ids the assignment does not have (not graded): my_add_one_test",
                 "test_add_one: not in the notebook, 1 in the clean room",
                 "test_blocks_for: not in the notebook, 1 in the clean room"):
        assert note in deleted["notes"]
    assert not (course / "feedback" / "deletes_and_renames_test_cells" / mini.ASSIGNMENT).exists()


def test_grades_csv_writes_every_score_in_one_format(graded):
    _, _, grades = graded
    scores = [row[k] for row in grades.values() for k in ("score", "max_score", "clean_room_score") if row[k]]
    assert scores and all(re.fullmatch(r"\d+\.\d+", score) for score in scores), scores


def test_feedback_carries_no_hidden_test_and_no_huge_output(graded):
    course, _, _ = graded
    hidden = ["check_kernel(add_one, add_one_spec, one_block([5, 64], extra_threads=3), dtype=np.int32)",
              "check_function(blocks_for, [((1, 32), 1), ((1000, 256), 4)])"]
    pages = list((course / "feedback").rglob("*.html"))
    for page in pages:
        text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text()))
        assert not [line for line in hidden if line in text], f"{page} shows a hidden test"
    contents = pages[0].read_text()  # each test named by its grade_id, not "Test cell" each time
    assert '<a href="#test_add_one"><code>test_add_one</code></a>' in contents and ">Test cell<" not in contents
    autograded = course / "autograded" / "prints_4_mb" / mini.ASSIGNMENT / "mini.ipynb"
    assert autograded.stat().st_size < 1_000_000


def test_a_second_run_skips_the_students_already_graded(graded):
    course, _, grades = graded
    again = run(course, "-m", "gpucourse.classroom.grade", mini.ASSIGNMENT, "--jobs", "1")
    assert again.returncode == 0, again.stderr[-3000:]
    graded_before = sum(row["status"] != "failed to grade" for row in grades.values())
    assert f"{graded_before} student(s) already graded, skipped" in again.stderr
    assert "sends_a_broken_file" in again.stdout  # failed to grade: tried again


def test_a_resubmission_is_graded_again_and_a_review_is_settled_by_the_instructor(graded):
    course, _, _ = graded
    release = course / "assignments" / mini.ASSIGNMENT / f"{mini.ASSIGNMENT}.ipynb"
    folder = course / "submitted" / "zero" / mini.ASSIGNMENT
    shutil.rmtree(folder)
    mini.plant(course, "zero", mini.submission(release))  # all answers written this time
    again = run(course, "-m", "gpucourse.classroom.grade", mini.ASSIGNMENT, "--jobs", "1")
    assert again.returncode == 0, again.stderr[-3000:]
    assert "resubmitted since their grading, graded again: zero" in again.stderr
    settled = run(course, "-m", "gpucourse.classroom.grade", mini.ASSIGNMENT, "--student", "rebinds_the_checks",
                  "--settle", "notebook")
    assert settled.returncode == 0, settled.stderr[-3000:]
    with (course / "grades.csv").open() as f:
        grades = {row["student"]: row for row in csv.DictReader(f)}
    assert (float(grades["zero"]["score"]), grades["zero"]["status"]) == (2, "graded")
    row = grades["rebinds_the_checks"]
    assert (float(row["score"]), row["status"]) == (2, "graded")
    assert "reviewed: the notebook's scores stand (2 test(s) differed)" in row["notes"]
    assert (course / "feedback" / "rebinds_the_checks" / mini.ASSIGNMENT / "mini.html").exists()
    student = "deletes_and_renames_test_cells"  # the clean room ran the tests it lacks on its answers
    settled = run(course, "-m", "gpucourse.classroom.grade", mini.ASSIGNMENT, "--student", student,
                  "--settle", "clean-room")
    assert settled.returncode == 0, settled.stderr[-3000:]
    with (course / "grades.csv").open() as f:
        row = next(row for row in csv.DictReader(f) if row["student"] == student)
    assert (float(row["score"]), row["status"]) == (2, "graded")
    assert "reviewed: the clean-room's scores stand (2 test(s) differed)" in row["notes"]
    feedback = html.unescape(re.sub(r"<[^>]+>", "", (course / "feedback" / student / mini.ASSIGNMENT / "mini.html")
                                    .read_text()))
    assert "Tests missing from your notebook (deleted, or their cell id changed): test_add_one (1 point), " \
           "test_blocks_for (1 point)." in feedback
    unknown = run(course, "-m", "gpucourse.classroom.grade", mini.ASSIGNMENT, "--student", "nobody")
    assert "no submission of 'nobody' in submitted/nobody/mini/; students with one: " in unknown.stderr


def test_a_kernel_that_does_not_start_fails_to_grade_and_a_symlinked_environment_grades(tmp_path):
    """A course whose .venv is a symlink (to this environment): its kernels start by the link's path. Where no
    kernel can start (here: too little memory for Python), no student code ran: failed to grade, never a zero."""
    course = mini.make_course(tmp_path / "course", ROOT / "nbgrader_config.py")
    (course / ".venv").symlink_to(Path(sys.prefix).resolve())
    python = str(course / ".venv" / "bin" / "python")
    assert run(course, "-m", "nbgrader", "generate_assignment", mini.ASSIGNMENT, "--force").returncode == 0
    mini.plant(course, "ann", mini.submission(course / "assignments" / mini.ASSIGNMENT / f"{mini.ASSIGNMENT}.ipynb"))
    for options, (score, status) in ((["--memory-limit", "1000000"], (0, "failed to grade")), ([], (2, "graded"))):
        done = run(course, "-m", "gpucourse.classroom.grade", mini.ASSIGNMENT, "--jobs", "1", *options, python=python)
        assert done.returncode == 0, done.stderr[-3000:]
        with (course / "grades.csv").open() as f:
            (row,) = csv.DictReader(f)
        assert (float(row["score"]), row["status"]) == (score, status), done.stdout
        if status == "failed to grade":
            assert "KernelDidNotStart: no student code ran, the grading machine failed: RuntimeError: Kernel died " \
                   "before replying to kernel_info" in row["notes"]
            assert not (course / "autograded").exists() and not (course / "feedback").exists()
    assert (course / "feedback" / "ann" / mini.ASSIGNMENT / "mini.html").exists()


def test_the_feedback_wraps_a_long_line_instead_of_scrolling_sideways(graded, page):
    """prints_4_mb's output, capped, is one line of 20,000 characters: in Chromium at 1280 x 720 neither the page
    nor any box of code or output in it is wider than the window."""
    course, _, _ = graded
    feedback = course / "feedback" / "prints_4_mb" / mini.ASSIGNMENT / "mini.html"
    assert "x" * 20_000 in feedback.read_text()
    page.goto(feedback.as_uri())
    assert page.evaluate("document.documentElement.scrollWidth") <= page.viewport_size["width"]
    wide = page.evaluate("[...document.querySelectorAll('pre')].filter(p => p.scrollWidth > p.clientWidth + 1).length")
    assert wide == 0  # no box of code or output scrolls sideways either
