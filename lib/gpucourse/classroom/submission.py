"""One submission graded on a worker: the task `grade` sends to the Dask cluster, one per student.

The worker rebuilds a private course in a temporary folder (the instructor's ``nbgrader_config.py``,
the assignment's source, a gradebook that knows only the assignment, and the student's files),
autogrades there with nbgrader (each notebook in a sandboxed kernel), runs the clean room, and
returns the graded notebooks and the scores. It writes nothing outside its folder: the driver
alone writes the instructor's gradebook, so a task that a lost worker was running simply runs
again elsewhere.
"""

from __future__ import annotations

import json
import re
import shutil
import socket
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import nbformat
from nbformat.v4 import new_markdown_cell
from nbgrader.api import Gradebook

from .autograde import HIDDEN_COURSES
from .preloaded import environment, run_module


@dataclass
class Limits:
    """What a submission may use; each is an option of `grade` (the help is its ``metadata``)."""

    cell_timeout: int = field(default=300, metadata={"help": "seconds a cell may run; a cell past it is stopped"})
    notebook_timeout: int = field(default=1200, metadata={"help": "seconds a notebook may run; later cells are not "
                                                                  "run"})
    memory_limit: int = field(default=8 << 30, metadata={"help": "bytes of data a student's kernel may allocate"})
    output_bytes: int = field(default=20_000, metadata={"help": "bytes an output keeps in the graded notebook and "
                                                                "the feedback; the rest is cut"})

    def nbgrader_options(self) -> list[str]:
        return [f"--SafeExecute.timeout={self.cell_timeout}", f"--SafeExecute.notebook_timeout={self.notebook_timeout}",
                f"--SafeExecute.memory_limit={self.memory_limit}", f"--ScrubOutputs.max_bytes={self.output_bytes}"]

    def clean_room_options(self) -> list[str]:
        return [f"--timeout={self.cell_timeout}", f"--notebook_timeout={self.notebook_timeout}",
                f"--memory_limit={self.memory_limit}"]


@dataclass
class Assignment:
    """What every task of one run shares (scattered to the workers once)."""

    name: str
    config: bytes  # the instructor's nbgrader_config.py
    source: dict[str, bytes]  # solutions/<name>/...: path inside it -> content
    gradebook: bytes  # a gradebook.db that holds the assignment and no student
    course: str  # the instructor's course folder: hidden from students' kernels where a worker sees it
    limits: Limits


@dataclass
class Graded:
    """What grading one submission gave: the driver records it."""

    student: str
    status: str = "graded"  # graded, needs review, failed to grade (zero is decided from the score)
    notes: list[str] = field(default_factory=list)
    autograded: dict[str, bytes] = field(default_factory=dict)  # autograded/<student>/<assignment>/...
    scores: dict[tuple[str, str], tuple[float | None, bool]] = field(default_factory=dict)  # (notebook, grade_id)
    comments: dict[tuple[str, str], str | None] = field(default_factory=dict)
    timestamp: str | None = None
    clean_room_score: float | None = None
    worker: str = ""
    seconds: float = 0.0


# nbgrader's lines around a traceback it printed: where it points at it, and what it did after it
GENERIC = ("Please see the", "see the above traceback", "There was an error processing", "Removing failed")
MODULE = re.compile(r"^[\w.]+\.(?=[A-Z]\w*: )")  # a traceback's last line names its exception with its module


def last_error(output: str) -> str:
    """The last line of ``output`` that names an error (an exception without its module), leaving out nbgrader's
    lines around its tracebacks."""
    lines = [line.strip() for line in output.splitlines() if line.strip()]
    errors = [line for line in lines if ("Error" in line or "error" in line or "failed" in line.lower())
              and not any(words in line for words in GENERIC)]
    return MODULE.sub("", (errors or lines or ["no output"])[-1])[:300]


def unreadable(path: Path) -> str:
    """Why Jupyter cannot open the notebook at ``path`` ("" if it can): where its JSON breaks, or what it lacks."""
    try:
        json.loads(path.read_text(encoding="utf-8"))
    except UnicodeDecodeError:
        return "not a text file (UTF-8)"
    except json.JSONDecodeError as exc:
        return f"not valid JSON ({exc.msg} at line {exc.lineno}, column {exc.colno}): the file was cut or edited by hand"
    try:
        nbformat.validate(nbformat.read(path, as_version=4))
    except Exception as exc:  # nbformat's own errors, of many kinds
        return f"not a notebook nbformat can read ({type(exc).__name__}: {str(exc).splitlines()[0][:120]})"
    return ""


def _grade_ids(path: Path) -> dict[str, float | None]:
    """The notebook's cells by hidden id: their points, None for a cell that is not graded ({} if unreadable)."""
    try:
        cells = nbformat.read(path, as_version=4).cells
    except Exception:
        return {}
    metas = [c.metadata["nbgrader"] for c in cells if "grade_id" in c.metadata.get("nbgrader", {})]
    return {m["grade_id"]: (m.get("points", 0) if m.get("grade") else None) for m in metas}


def find_notebooks(course: Path, assignment: str, student: str) -> tuple[list[str], list[str]]:
    """Put each expected notebook in place; a renamed one is found by its cells. Returns (notes, problems): a
    problem (a notebook missing, or one Jupyter cannot open) stops the grading of the submission."""
    folder, notes, problems = course / "submitted" / student / assignment, [], []
    names = sorted(p.name for p in (course / "solutions" / assignment).glob("*.ipynb"))
    for name in names:
        if not (folder / name).exists():
            wanted = _grade_ids(course / "solutions" / assignment / name)
            others = [p for p in sorted(folder.glob("*.ipynb")) if p.name not in names]
            matches = [p for p in others if _grade_ids(p).keys() & wanted.keys()]
            if len(matches) != 1:
                found = [p.name for p in sorted(folder.rglob("*")) if p.is_file() and p.name != "timestamp.txt"]
                problems.append(f"no {name} in the submission (found: {', '.join(found) or 'nothing'})")
                continue
            shutil.copy(matches[0], folder / name)
            notes.append(f"graded {matches[0].name} as {name} (renamed)")
        why = unreadable(folder / name)
        if why:
            problems.append(f"{name} is {why}")
        else:
            notes += cell_notes(course / "solutions" / assignment / name, folder / name)
    return notes, problems


def missing_cells(wanted: dict, got: dict) -> dict[str, float | None]:
    """The cells of ``wanted`` (`_grade_ids` of the source) that ``got`` (of the submitted notebook) lacks."""
    return {name: points for name, points in wanted.items() if name not in got}


def _named(cells: dict[str, float | None]) -> str:
    return ", ".join(name + ("" if points is None else f" ({points:g} point{'s' * (points != 1)})")
                     for name, points in cells.items())


def cell_notes(source: Path, submitted: Path) -> list[str]:
    """What the submitted notebook lacks or adds among the graded cells (by their hidden ids): notes."""
    wanted, got = _grade_ids(source), _grade_ids(submitted)
    missing, added = missing_cells(wanted, got), sorted(got.keys() - wanted.keys())
    notes = []
    if missing:
        notes.append(f"cells missing from {submitted.name} (deleted, or their id changed): {_named(missing)}")
    if added:
        notes.append(f"cells of {submitted.name} with ids the assignment does not have (not graded): "
                     f"{', '.join(added)}")
    return notes


def tell_missing_tests(source: Path, submitted: Path, autograded: Path) -> None:
    """The graded notebook (and so its feedback) starts with a line naming the graded cells the student's lacks."""
    missing = missing_cells(_grade_ids(source), _grade_ids(submitted))
    tests = {name: points for name, points in missing.items() if points is not None}
    if tests:
        notebook = nbformat.read(autograded, as_version=4)
        notebook.cells.insert(0, new_markdown_cell(
            f"**Tests missing from your notebook** (deleted, or their cell id changed): {_named(tests)}. "
            "This page does not show them; their score was decided on review."))
        nbformat.write(notebook, autograded)


def _write(folder: Path, files: dict[str, bytes]) -> None:
    for name, data in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)


def _read(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def _private_course(root: Path, assignment: Assignment, student: str, files: dict[str, bytes]) -> None:
    (root / "nbgrader_config.py").write_bytes(assignment.config)
    (root / "gradebook.db").write_bytes(assignment.gradebook)
    _write(root / "solutions" / assignment.name, assignment.source)
    _write(root / "submitted" / student / assignment.name, files)


def _scores(course: Path, assignment: str, student: str, graded: Graded) -> None:
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        for notebook in gradebook.find_submission(assignment, student).notebooks:
            for grade in notebook.grades:
                graded.scores[notebook.name, grade.name] = (grade.auto_score, grade.needs_manual_grade)
            for comment in notebook.comments:
                graded.comments[notebook.name, comment.name] = comment.auto_comment


def _points(value) -> str:
    return "no score" if value is None else f"{value:g}"


SETTLED = ("notebook", "clean-room")  # how an instructor settles a review: whose scores stand


def compare(graded: Graded, report: dict, settle: str | None = None) -> None:
    """Clean-room score, and for every test whose two scores differ, or that the notebook lacks (deleted, or its id
    changed), a note and the lower score: the submission needs review, unless ``settle`` (after a review: "notebook"
    or "clean-room") says whose scores stand."""
    graded.clean_room_score = float(sum(s or 0 for scores in report.values() for s in scores["clean_room"].values()))
    differ = []
    for notebook, scores in report.items():
        ran = scores["autograded"]
        for test in dict.fromkeys([*scores["clean_room"], *ran]):
            points, again = ran.get(test), scores["clean_room"].get(test)
            if test in ran and points == again:
                continue
            there = f"{_points(points)} in the notebook" if test in ran else "not in the notebook"
            differ.append(f"{test}: {there}, {_points(again)} in the clean room")
            if (notebook, test) in graded.scores:  # one the notebook lacks needs manual grading until settled
                score = {"notebook": points, "clean-room": again}.get(settle, min(points or 0, again or 0))
                graded.scores[notebook, test] = (float(score or 0), graded.scores[notebook, test][1] and not settle)
    if differ and settle is None:
        graded.status = "needs review"
        graded.notes += differ[:3] + ([f"and {len(differ) - 3} more tests like these"] if len(differ) > 3 else [])
        left = [line if len(line) <= 80 else line[:77] + "..." for scores in report.values()
                for line in scores.get("left_out", [])]
        if left:  # why the clean room may differ: what of the answers it did not run
            graded.notes.append("the clean room left out " + ", ".join(f"`{line}`" for line in left[:3])
                                + (f" and {len(left) - 3} more" if len(left) > 3 else ""))
        graded.notes.append("scored with the lower of each; feedback held until the review is settled")
    elif differ:
        graded.notes.append(f"reviewed: the {settle}'s scores stand ({len(differ)} test(s) differed)")


def grade_submission(assignment: Assignment, student: str, files: dict[str, bytes], device: str | None = None,
                     settle: str | None = None) -> Graded:
    """Autograde ``files`` (the student's submitted folder) in a private course, then the clean room (`compare`,
    ``settle``); never raises."""
    started, graded = time.monotonic(), Graded(student, worker=socket.gethostname())
    try:
        from distributed import get_worker
        graded.worker = get_worker().address
    except (ImportError, ValueError):
        pass
    limits, name = assignment.limits, assignment.name
    env = dict(environment(device), **{HIDDEN_COURSES: assignment.course})
    with tempfile.TemporaryDirectory(prefix=f"grade-{student}-") as folder:
        course = Path(folder)
        try:
            _private_course(course, assignment, student, files)
            notes, problems = find_notebooks(course, name, student)
            graded.notes += notes + problems
            if problems:
                graded.status = "failed to grade"
                return graded
            stamp = course / "submitted" / student / name / "timestamp.txt"
            graded.timestamp = stamp.read_text().strip() if stamp.exists() else None
            done = run_module(course, "nbgrader", "autograde", name, "--student", student, "--force",
                              *limits.nbgrader_options(), timeout=limits.notebook_timeout * 2 + 300, env=env)
            autograded = course / "autograded" / student / name
            wanted = [p.name for p in (course / "solutions" / name).glob("*.ipynb")]
            if done.returncode != 0 or not all((autograded / n).exists() for n in wanted):
                graded.status = "failed to grade"
                graded.notes.append(last_error(done.stdout + done.stderr))
                return graded
            for notebook in wanted:
                tell_missing_tests(course / "solutions" / name / notebook, course / "submitted" / student / name /
                                   notebook, autograded / notebook)
            graded.autograded = _read(autograded)
            _scores(course, name, student, graded)
            clean = run_module(course, "gpucourse.classroom.clean_room", str(course), name, student,
                               *limits.clean_room_options(), timeout=limits.notebook_timeout * 2 + 300, env=env)
            if clean.returncode != 0:
                graded.status = "needs review"
                graded.notes.append(f"the clean room failed: {last_error(clean.stdout + clean.stderr)}")
            else:
                compare(graded, json.loads(clean.stdout.strip().splitlines()[-1]), settle)
        except Exception as exc:  # a broken file or a full disk: listed with its reason, never lost
            graded.status = "failed to grade"
            graded.notes.append(f"{type(exc).__name__}: {exc}"[:300])
        finally:
            graded.seconds = time.monotonic() - started
    return graded
