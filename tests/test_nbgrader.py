"""nbgrader round trip in a temporary course directory, for every assignment.

The committed release is exactly what ``generate_assignment`` makes from the
source; graded as a class (`make grade`), the solution scores full marks, also
in the clean room, and the untouched release scores zero without crashing.
"""

import html
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from nbgrader.api import Gradebook

from gpucourse.grading.regions import lines_by_region

from conftest import ROOT

ASSIGNMENTS = sorted(p.name for p in (ROOT / "solutions").iterdir() if p.is_dir() and p.name[:2].isdigit())
NBGRADER = [sys.executable, "-m", "nbgrader"]


def nbgrader(course: Path, *args: str) -> None:
    # nbgrader runs `alembic` to set up its database: the environment's bin/ must be on PATH.
    env = dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ["PATH"]]))
    result = subprocess.run([*NBGRADER, *args], cwd=course, env=env, capture_output=True, text=True, timeout=1200)
    assert result.returncode == 0, f"nbgrader {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"


@pytest.fixture(scope="module")
def course(tmp_path_factory) -> Path:
    course = tmp_path_factory.mktemp("course")
    shutil.copy(ROOT / "nbgrader_config.py", course)
    shutil.copytree(ROOT / "solutions", course / "solutions")
    return course


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_release_is_generated_from_solutions(course, assignment):
    nbgrader(course, "generate_assignment", assignment, "--force")
    generated = course / "assignments" / assignment
    committed = ROOT / "assignments" / assignment
    names = sorted(p.relative_to(generated) for p in generated.rglob("*") if p.is_file())
    assert names == sorted(p.relative_to(committed) for p in committed.rglob("*") if p.is_file())
    for name in names:
        assert (generated / name).read_bytes() == (committed / name).read_bytes(), (
            f"assignments/{assignment}/{name} is out of date: run `make release`"
        )


@pytest.mark.parametrize("assignment", ASSIGNMENTS)
def test_autograde_gives_full_marks_to_the_solution_and_zero_to_the_release(course, assignment):
    nbgrader(course, "generate_assignment", assignment, "--force")
    submissions = {"solver": course / "solutions" / assignment, "untouched": ROOT / "assignments" / assignment}
    for student, source in submissions.items():
        nbgrader(course, "db", "student", "add", student)
        target = course / "submitted" / student / assignment
        target.mkdir(parents=True)
        for notebook in source.glob("*.ipynb"):
            shutil.copy(notebook, target)
    graded = subprocess.run([sys.executable, "-m", "gpucourse.grading.classroom", assignment], cwd=course,
                            capture_output=True, text=True, timeout=1800)
    assert graded.returncode == 0, graded.stderr[-3000:]
    assert re.search(r"^solver .* graded$", graded.stdout, re.M), graded.stdout  # the clean room agrees: no review
    assert re.search(r"^untouched .* zero$", graded.stdout, re.M), graded.stdout
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        solved = gradebook.find_submission(assignment, "solver")
        untouched = gradebook.find_submission(assignment, "untouched")
        assert solved.max_score > 0
        assert solved.score == solved.max_score, f"the solution scored {solved.score}/{solved.max_score}"
        assert untouched.score == 0

    hidden = hidden_test_lines(course / "solutions" / assignment)
    assert hidden, "every assignment has hidden tests"
    for student in submissions:
        for page in (course / "feedback" / student / assignment).glob("*.html"):
            text = html.unescape(re.sub(r"<[^>]+>", "", page.read_text(encoding="utf-8")))
            shown = {line.strip() for line in text.splitlines()}
            leaked = [line for line in hidden if line in shown]
            assert not leaked, f"{student}'s feedback shows hidden tests: {leaked[:3]}"


def hidden_test_lines(folder: Path) -> list[str]:
    """Lines that appear only inside ### BEGIN/END HIDDEN TESTS regions of the sources."""
    regions = [lines_by_region(notebook) for notebook in folder.glob("*.ipynb")]
    hidden = set().union(*[r["hidden tests"] for r in regions])
    return sorted(hidden - set().union(*[r["public"] | r["solution"] for r in regions]))
