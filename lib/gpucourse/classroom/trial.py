"""A trial class for checking the grading pipeline: students who submit the solution or the untouched release.

`make_course` builds a throw-away course directory from the course's own ``solutions/`` and
``assignments/``; `check_grades` says what is wrong with the ``grades.csv`` that grading it wrote
(solution: full marks, graded; release: 0, zero). Used by ``benchmarks/grading_scale.py`` and
``benchmarks/gpu_grading.py``.
"""

from __future__ import annotations

import csv
import shutil
from pathlib import Path

import nbformat


def students(n: int) -> dict[str, str]:
    """``{student: "solution" | "release"}``: half of each, alternating."""
    return {f"student{k:03d}": "solution" if k % 2 == 0 else "release" for k in range(n)}


def expected(kind: str, max_score: float) -> tuple[float, str]:
    """The score and status a submission of ``kind`` must get."""
    return (max_score, "graded") if kind == "solution" else (0.0, "zero")


def max_score(folder: Path) -> float:
    """The points of every graded cell of the notebooks in ``folder`` (an assignment's source)."""
    return float(sum(c.metadata.get("nbgrader", {}).get("points", 0) for path in sorted(folder.glob("*.ipynb"))
                     for c in nbformat.read(path, as_version=4).cells if c.metadata.get("nbgrader", {}).get("grade")))


def make_course(root: Path, course: Path, assignment: str, class_: dict[str, str]) -> Path:
    """In ``root``: ``course``'s nbgrader configuration and ``assignment``'s source, and each student's submission
    (a copy of ``course``'s solution or release folder) in ``submitted/<student>/<assignment>/``."""
    shutil.copy(course / "nbgrader_config.py", root / "nbgrader_config.py")
    shutil.copytree(course / "solutions" / assignment, root / "solutions" / assignment)
    for student, kind in class_.items():
        source = course / ("solutions" if kind == "solution" else "assignments") / assignment
        shutil.copytree(source, root / "submitted" / student / assignment)
    return root


def read_grades(path: Path) -> list[dict]:
    """The rows of a ``grades.csv`` ([] while there is none)."""
    if not path.exists():
        return []
    with path.open(newline="") as f:
        return list(csv.DictReader(f))


def check_grades(rows: list[dict], assignment: str, class_: dict[str, str], max_score: float) -> list[str]:
    """What is wrong with ``grades.csv``'s rows: a student missing, twice, unknown, or a wrong score or status."""
    problems = []
    mine = [r for r in rows if r["assignment"] == assignment]
    seen = [r["student"] for r in mine]
    problems += [f"{s}: {seen.count(s)} rows" for s in sorted(set(seen)) if seen.count(s) > 1]
    problems += [f"{s}: missing" for s in sorted(set(class_) - set(seen))]
    problems += [f"{s}: not in the class" for s in sorted(set(seen) - set(class_))]
    for row in mine:
        if row["student"] in class_:
            score, status = expected(class_[row["student"]], max_score)
            if (float(row["score"]), float(row["max_score"]), row["status"]) != (score, max_score, status):
                problems.append(f"{row['student']} ({class_[row['student']]}): score {row['score']} of "
                                f"{row['max_score']}, {row['status']} ({row['notes']}); expected {score:g}, {status}")
    return problems
