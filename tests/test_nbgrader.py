"""nbgrader round trip in a temporary course directory, for every assignment (found in solutions/).

The committed release is exactly what ``generate_assignment`` makes from the
source; graded as a class (`make grade`, on a local Dask cluster: all assignments'
submissions at once), the solution scores full marks, also in the clean room, and
the untouched release scores zero without crashing.
"""

import html
import re
import shutil
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import nbformat
import pytest
from nbgrader.api import Gradebook

from gpucourse.classroom.grade import Result, connect, grade, needs_gpu
from gpucourse.classroom.preloaded import run_module
from gpucourse.classroom.regions import lines_by_region
from gpucourse.classroom.submission import Limits

from conftest import ROOT
from notebook_runner import stderr_outputs

ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir() and p.name[:2].isdigit())
WORKERS = 2  # the Dask workers that grade the round trips (this file runs in one pytest worker)


def nbgrader(course: Path, *args: str) -> None:
    result = run_module(course, "nbgrader", *args, timeout=1200)  # as `make grade` runs it
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


def course_of(root: Path, assignment: str) -> Path:
    """A course directory of its own for one assignment, released with nbgrader."""
    course = root / assignment
    (course / "solutions").mkdir(parents=True)
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions" / assignment, course / "solutions" / assignment)
    nbgrader(course, "generate_assignment", assignment, "--force")
    return course


def round_trip(root: Path, assignment: str, client) -> tuple[Path, dict[str, Result], str]:
    """Release one assignment, submit the solution and the untouched release, grade them on ``client``."""
    course = course_of(root, assignment)
    for student, source in {"solver": course / "solutions", "untouched": ROOT / "assignments"}.items():
        target = course / "submitted" / student / assignment
        target.mkdir(parents=True)
        for notebook in (source / assignment).glob("*.ipynb"):
            shutil.copy(notebook, target)
    results, summary = grade(course, assignment, ["solver", "untouched"], Limits(), client)
    return course, {r.student: r for r in results}, summary


@pytest.fixture(scope="module")
def graded(tmp_path_factory) -> dict[str, tuple[Path, dict[str, Result], str]]:
    """Every assignment's round trip, all at once on one local Dask cluster (as `make grade` runs them)."""
    root = tmp_path_factory.mktemp("courses")
    with connect(None, WORKERS) as client, ThreadPoolExecutor(len(ASSIGNMENTS)) as pool:
        return dict(zip(ASSIGNMENTS, pool.map(lambda a: round_trip(root, a, client), ASSIGNMENTS)))


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_is_generated_from_solutions(graded, assignment):
    generated = graded[assignment][0] / "assignments" / assignment
    committed = ROOT / "assignments" / assignment
    names = sorted(p.relative_to(generated) for p in generated.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    for name in names:
        assert (generated / name).read_bytes() == (committed / name).read_bytes(), (
            f"assignments/{assignment}/{name} is out of date: run `make release`"
        )


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_autograde_gives_full_marks_to_the_solution_and_zero_to_the_release(graded, assignment):
    course, results, summary = graded[assignment]
    assert results["solver"].status == "graded", summary  # the clean room agrees: no review
    assert results["untouched"].status == "zero", summary
    if needs_gpu(course, assignment):  # this cluster has no worker with the GPU resource
        assert "no GPU worker (dask worker --resources GPU=1): GPU exercises scored on the CPU simulator" in summary
        assert all("scored on the CPU: no GPU worker" in r.notes for r in results.values()), summary
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        solved = gradebook.find_submission(assignment, "solver")
        untouched = gradebook.find_submission(assignment, "untouched")
        assert solved.max_score > 0
        assert solved.score == solved.max_score, f"the solution scored {solved.score}/{solved.max_score}"
        assert untouched.score == 0
    for notebook in (course / "autograded" / "solver" / assignment).glob("*.ipynb"):  # the solution, run whole
        assert stderr_outputs(nbformat.read(notebook, as_version=4)) == [], f"{notebook.name} wrote to stderr"

    hidden = hidden_test_lines(course / "solutions" / assignment)
    assert hidden, "every assignment has hidden tests"
    for student in results:
        pages = list((course / "feedback" / student / assignment).glob("*.html"))
        assert pages, f"no feedback for {student}"
        for page in pages:
            text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
            shown = {line.strip() for line in text.splitlines()}
            leaked = [line for line in hidden if line in shown]
            assert not leaked, f"{student}'s feedback shows hidden tests: {leaked[:3]}"


def hidden_test_lines(folder: Path) -> list[str]:
    """Lines that appear only inside ### BEGIN/END HIDDEN TESTS regions of the sources."""
    regions = [lines_by_region(notebook) for notebook in folder.glob("*.ipynb")]
    hidden = set().union(*[r["hidden tests"] for r in regions])
    return sorted(hidden - set().union(*[r["public"] | r["solution"] for r in regions]))


def test_zip_collect_reads_canvas_and_moodle_file_names(tmp_path):
    """The README's LMS route: `nbgrader zip_collect` with the course's nbgrader_config.py, no extra option."""
    import zipfile

    course, assignment = tmp_path, ASSIGNMENTS[0]
    shutil.copy(ROOT / "nbgrader_config.py", course)
    notebook = next((ROOT / "assignments" / assignment).glob("*.ipynb"))
    archive = course / "downloaded" / assignment / "archive"
    archive.mkdir(parents=True)
    names = {"doejane": f"doejane_12345_67890_{notebook.name}", "roe": f"roe_LATE_12345_67890_{notebook.name}",
             "Jane Doe": f"Jane Doe_123456_assignsubmission_file_{notebook.name}"}
    with zipfile.ZipFile(archive / "download.zip", "w") as download:
        for name in names.values():
            download.write(notebook, name)
    nbgrader(course, "zip_collect", assignment)
    collected = sorted(p.relative_to(course / "submitted").as_posix() for p in (course / "submitted").rglob("*.ipynb"))
    assert collected == sorted(f"{student}/{assignment}/{notebook.name}" for student in names)
