"""The exchange, walked as a class uses it: release, two students fetch and submit, collect, grade on Dask, feedback.

Students run nbgrader with the configuration of `make lab` (``.jupyter/student/``) from folders of
their own; the instructor from the course directory; the exchange is a temporary folder.
"""

import csv
import os
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

import mini_course as mini
from conftest import ROOT
from gpucourse.classroom import sandbox
from gpucourse.classroom.preloaded import environment, run_module

STUDENTS = {"ann": {}, "bob": {"kernel": None, "function": None}}  # ann answers both exercises, bob nothing


def nbgrader(folder: Path, env: dict, *args: str) -> str:
    done = run_module(folder, "nbgrader", *args, timeout=600, env=env)  # `python -m nbgrader`, preloaded
    assert done.returncode == 0, f"nbgrader {' '.join(args)}:\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    return done.stdout + done.stderr


def as_student(env: dict, home: Path) -> dict:
    """A student's environment: `make lab`'s configuration, and a home of their own (nbgrader keeps what they
    submitted in its cache there, which fetch_feedback reads)."""
    return dict(env, JUPYTER_CONFIG_PATH=str(ROOT / ".jupyter" / "student"), HOME=str(home),
                JUPYTER_DATA_DIR=str(home / ".local" / "share" / "jupyter"))


@pytest.fixture(scope="module")
def walked(tmp_path_factory):
    if sandbox.unavailable() is not None and os.environ.get("GPUCOURSE_REQUIRE_SANDBOX") != "1":
        pytest.skip(f"no sandbox for students' code: {sandbox.unavailable()}")
    tmp = tmp_path_factory.mktemp("exchange-walk")
    exchange = tmp / "exchange"
    exchange.mkdir(mode=0o777)
    env = dict(environment(), NBGRADER_EXCHANGE=str(exchange))
    env.pop("JUPYTER_CONFIG_PATH", None)
    course = mini.make_course(tmp / "course", ROOT / "nbgrader_config.py")
    nbgrader(course, env, "generate_assignment", mini.ASSIGNMENT, "--force")
    nbgrader(course, env, "release_assignment", mini.ASSIGNMENT)
    homes = {}
    for student, answers in STUDENTS.items():
        home = homes[student] = tmp / student
        home.mkdir()
        nbgrader(home, as_student(env, home), "fetch_assignment", mini.ASSIGNMENT)
        fetched = home / mini.ASSIGNMENT / f"{mini.ASSIGNMENT}.ipynb"
        nbformat.write(mini.submission(fetched, **answers), fetched)
        nbgrader(home, as_student(env, home), "submit", mini.ASSIGNMENT, "--student", student)
    nbgrader(course, env, "collect", mini.ASSIGNMENT)
    graded = subprocess.run([sys.executable, "-m", "gpucourse.classroom.grade", mini.ASSIGNMENT, "--jobs", "2",
                             "--cell-timeout", "60", "--notebook-timeout", "300"], cwd=course, env=env,
                            capture_output=True, text=True, timeout=900)
    assert graded.returncode == 0, graded.stderr[-3000:]
    nbgrader(course, env, "release_feedback", mini.ASSIGNMENT)
    for student, home in homes.items():
        nbgrader(home, as_student(env, home), "fetch_feedback", mini.ASSIGNMENT, "--student", student)
    with (course / "grades.csv").open() as f:
        grades = {row["student"]: row for row in csv.DictReader(f)}
    return course, homes, grades, graded.stdout


def test_submissions_come_through_the_exchange_and_are_graded_on_dask(walked):
    course, _, grades, summary = walked
    assert sorted(p.name for p in (course / "submitted").iterdir()) == sorted(STUDENTS)
    assert (float(grades["ann"]["score"]), grades["ann"]["status"]) == (2, "graded"), summary
    assert (float(grades["bob"]["score"]), grades["bob"]["status"]) == (0, "zero"), summary
    assert "per submission on a worker" in summary


def test_each_student_fetches_their_own_feedback(walked):
    _, homes, _, _ = walked
    for student, home in homes.items():
        pages = list((home / mini.ASSIGNMENT / "feedback").rglob("*.html"))
        assert len(pages) == 1, f"{student}'s feedback: {pages}"
        score = f"(Score: {2.0 if student == 'ann' else 0.0} / 2.0)"  # nbgrader's feedback page
        assert score in " ".join(pages[0].read_text().split()), f"{student}'s feedback lacks {score}"
