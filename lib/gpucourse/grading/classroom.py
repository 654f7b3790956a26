"""Grade a class in one command: ``make grade A=<assignment>`` (``make grade-one A=... S=<student>``).

``python -m gpucourse.grading.classroom ASSIGNMENT [--student S] [--jobs N]``, run in the course
directory after collecting (``submitted/<student>/<assignment>/``):

1. adds students missing from the gradebook, and finds a notebook the student renamed;
2. autogrades each student with nbgrader in a process of its own, several at once, each
   notebook in a sandboxed kernel (`autograde.SafeExecute`);
3. runs each student's tests again in the clean room (`clean_room`) and flags for review any
   test whose score differs;
4. writes the feedback, ``grades.csv`` and a summary: graded, zero, needs review, failed to
   grade (with the reason; never exported as a silent zero).
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook, MissingEntry

from . import sandbox

GRADES = "grades.csv"


@dataclass
class Result:
    """What grading one student's submission gave."""

    student: str
    score: float = 0.0
    max_score: float = 0.0
    clean_room_score: float | None = None
    status: str = "graded"  # graded, zero, needs review, failed to grade
    notes: list[str] = field(default_factory=list)

    def row(self, assignment: str) -> list:
        clean = "" if self.clean_room_score is None else self.clean_room_score
        return [self.student, assignment, self.score, self.max_score, clean, self.status, "; ".join(self.notes)]


@dataclass
class Limits:
    cell_timeout: int = 300
    notebook_timeout: int = 1200
    memory_limit: int = 8 << 30
    output_bytes: int = 20_000

    def nbgrader_options(self) -> list[str]:
        return [f"--SafeExecute.timeout={self.cell_timeout}", f"--SafeExecute.notebook_timeout={self.notebook_timeout}",
                f"--SafeExecute.memory_limit={self.memory_limit}", f"--ScrubOutputs.max_bytes={self.output_bytes}"]

    def clean_room_options(self) -> list[str]:
        return [f"--timeout={self.cell_timeout}", f"--notebook_timeout={self.notebook_timeout}",
                f"--memory_limit={self.memory_limit}"]


def _environment() -> dict:
    # nbgrader runs `alembic` for its database: this environment's bin/ must be on PATH.
    return dict(os.environ, PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))


def _run(course: Path, *command: str, timeout: float) -> subprocess.CompletedProcess:
    try:
        return subprocess.run(command, cwd=course, env=_environment(), capture_output=True, text=True,
                              timeout=timeout)
    except subprocess.TimeoutExpired as expired:
        return subprocess.CompletedProcess(command, -9, expired.stdout or "", f"{expired.stderr or ''}\n"
                                           f"timed out after {timeout:.0f} s")


def _nbgrader(course: Path, *args: str, timeout: float = 3600) -> subprocess.CompletedProcess:
    return _run(course, sys.executable, "-m", "nbgrader", *args, timeout=timeout)


def _last_error(output: str) -> str:
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if "Error" in line or "error" in line or "failed" in line.lower()]
    return (errors or lines or ["no output"])[-1][:300]


def notebook_names(course: Path, assignment: str) -> list[str]:
    return sorted(p.name for p in (course / "solutions" / assignment).glob("*.ipynb"))


def _grade_ids(path: Path) -> set[str]:
    try:
        cells = nbformat.read(path, as_version=4).cells
    except Exception:
        return set()
    return {c.metadata["nbgrader"]["grade_id"] for c in cells if "grade_id" in c.metadata.get("nbgrader", {})}


def find_notebooks(course: Path, assignment: str, student: str) -> list[str]:
    """Put each expected notebook in place; a renamed one is found by its cells. Returns notes."""
    folder, notes = course / "submitted" / student / assignment, []
    for name in notebook_names(course, assignment):
        if (folder / name).exists():
            continue
        wanted = _grade_ids(course / "solutions" / assignment / name)
        others = [p for p in sorted(folder.glob("*.ipynb")) if p.name not in notebook_names(course, assignment)]
        matches = [p for p in others if _grade_ids(p) & wanted]
        if len(matches) == 1:
            shutil.copy(matches[0], folder / name)
            notes.append(f"graded {matches[0].name} as {name} (renamed)")
        else:
            notes.append(f"no {name} in the submission (found: {', '.join(p.name for p in others) or 'nothing'})")
    return notes


def grade_student(course: Path, assignment: str, student: str, limits: Limits) -> Result:
    """Autograde one student in nbgrader's own process, then the clean room; never raises."""
    result = Result(student, notes=find_notebooks(course, assignment, student))
    run = _nbgrader(course, "autograde", assignment, "--student", student, "--force", *limits.nbgrader_options(),
                    timeout=limits.notebook_timeout * 2 + 300)
    autograded = course / "autograded" / student / assignment
    if run.returncode != 0 or not all((autograded / n).exists() for n in notebook_names(course, assignment)):
        result.status = "failed to grade"
        result.notes.append(_last_error(run.stdout + run.stderr))
        return result
    clean = _run(course, sys.executable, "-m", "gpucourse.grading.clean_room", str(course), assignment, student,
                 *limits.clean_room_options(), timeout=limits.notebook_timeout * 2 + 300)
    if clean.returncode != 0:
        result.status = "needs review"
        result.notes.append(f"the clean room failed: {_last_error(clean.stdout + clean.stderr)}")
        return result
    compare(result, json.loads(clean.stdout.strip().splitlines()[-1]))
    return result


def _points(value) -> str:
    return "no score" if value is None else f"{value:g}"


def compare(result: Result, report: dict) -> None:
    """Clean-room score, and a review flag for every test whose two scores differ."""
    result.clean_room_score = sum(s or 0 for scores in report.values() for s in scores["clean_room"].values())
    for notebook, scores in report.items():
        for test, points in scores["autograded"].items():
            again = scores["clean_room"].get(test)
            if points != again:
                result.status = "needs review"
                result.notes.append(f"{test}: {_points(points)} in the notebook, {_points(again)} in the clean room")


def _not_run(course: Path, assignment: str, student: str) -> list[str]:
    """What the autograded notebooks say about cells that were not run (a dead kernel, the time limit)."""
    said = {"NotRun": set(), "KernelDied": set()}
    for path in (course / "autograded" / student / assignment).glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            for output in cell.get("outputs", []):
                if output.get("ename") in said:
                    said[output.ename].add(output.evalue.removeprefix("not run: "))
    return sorted(f"cells not run: {why}" for why in said["NotRun"]) or sorted(said["KernelDied"])


def add_scores(course: Path, assignment: str, results: list[Result]) -> None:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for result in results:
            if result.status == "failed to grade":
                continue
            try:
                submission = gradebook.find_submission(assignment, result.student)
            except MissingEntry:
                result.status = "failed to grade"
                result.notes.append("no submission in the gradebook")
                continue
            result.score, result.max_score = submission.score, submission.max_score
            result.notes += _not_run(course, assignment, result.student)
            if result.status == "graded" and result.score == 0:
                result.status = "zero"


def summary(assignment: str, results: list[Result], unsandboxed: str | None) -> str:
    width = max([len(r.student) for r in results] + [7])
    lines = [f"{assignment}: {len(results)} submission(s)"]
    if unsandboxed:
        lines.append(f"WARNING: graded WITHOUT a sandbox ({unsandboxed}); students' code ran with the grader's rights")
    lines.append(f"{'student':<{width}}  {'score':>11}  {'clean room':>10}  status")
    for r in results:
        clean = "-" if r.clean_room_score is None else f"{r.clean_room_score:g}"
        lines.append(f"{r.student:<{width}}  {r.score:>5g} / {r.max_score:<3g}  {clean:>10}  {r.status}"
                     + (f": {'; '.join(r.notes)}" if r.notes else ""))
    counts = {s: sum(r.status == s for r in results) for s in ("graded", "zero", "needs review", "failed to grade")}
    lines.append(", ".join(f"{n} {s}" for s, n in counts.items()))
    return "\n".join(lines)


HEADER = ["student", "assignment", "score", "max_score", "clean_room_score", "status", "notes"]


def write_grades(course: Path, assignment: str, results: list[Result]) -> Path:
    """``grades.csv`` with these results; the rows of other students and assignments stay."""
    path = course / GRADES
    rows = {}
    if path.exists():
        with path.open(newline="") as f:
            rows = {(r[0], r[1]): r for r in list(csv.reader(f))[1:] if len(r) == len(HEADER)}
    rows.update({(r.student, assignment): r.row(assignment) for r in results})
    with path.open("w", newline="") as f:
        writer = csv.writer(f)
        writer.writerow(HEADER)
        writer.writerows(rows[key] for key in sorted(rows))
    return path


def grade(course: Path, assignment: str, students: list[str], limits: Limits, jobs: int) -> list[Result]:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for student in students:
            gradebook.update_or_create_student(student)
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        results = list(pool.map(lambda s: grade_student(course, assignment, s, limits), students))
    add_scores(course, assignment, results)
    feedback = _nbgrader(course, "generate_feedback", assignment, "--force",
                         *(["--student", students[0]] if len(students) == 1 else []))
    if feedback.returncode != 0:
        print(f"feedback: {_last_error(feedback.stdout + feedback.stderr)}", file=sys.stderr)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpucourse.grading.classroom", description=__doc__.split("\n")[0])
    parser.add_argument("assignment")
    parser.add_argument("--student", help="grade only this student (a regrade)")
    parser.add_argument("--course", default=".", help="the course directory (default: here)")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="students graded at once")
    for name, default in vars(Limits()).items():
        parser.add_argument(f"--{name.replace('_', '-')}", type=int, default=default, dest=name)
    args = parser.parse_args(argv)
    course = Path(args.course).resolve()
    submitted = course / "submitted"
    students = [args.student] if args.student else sorted(
        p.name for p in submitted.glob("*") if (p / args.assignment).is_dir())
    if not (course / "solutions" / args.assignment).is_dir():
        parser.error(f"no solutions/{args.assignment}: name an assignment of this course")
    if not students or not all((submitted / s / args.assignment).is_dir() for s in students):
        parser.error(f"no submissions in submitted/<student>/{args.assignment}/: collect them first")
    unsandboxed = sandbox.unavailable()
    if unsandboxed:
        print(f"WARNING: {unsandboxed}. Grading goes on WITHOUT a sandbox.", file=sys.stderr)
    limits = Limits(**{k: getattr(args, k) for k in vars(Limits())})
    results = grade(course, args.assignment, students, limits, args.jobs)
    write_grades(course, args.assignment, results)
    print(summary(args.assignment, results, unsandboxed))
    return 0


if __name__ == "__main__":
    sys.exit(main())
