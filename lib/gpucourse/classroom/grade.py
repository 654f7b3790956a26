"""Grade a class on Dask: ``make grade A=<assignment> [SCHEDULER=tcp://host:8786]``.

``python -m gpucourse.classroom.grade ASSIGNMENT [--student S] [--scheduler ADDRESS] [--force]``,
run in the course directory after collecting (``submitted/<student>/<assignment>/``):

1. one task per submission on a Dask cluster (a local one of this machine's cores, or the one at
   ``--scheduler``): a worker autogrades it in a private course, each notebook in a sandboxed kernel,
   runs the clean room, and returns the graded notebooks and scores (`submission`);
2. the driver alone writes ``autograded/``, the gradebook and ``grades.csv``, as each task ends: a
   task of a lost worker runs again elsewhere, and a rerun skips students already graded (``--force``
   grades them again);
3. feedback, and a summary: graded, zero, needs review, failed to grade (with the reason; a kernel that
   did not start, for one), seconds per submission and per worker. A submission with a test that scores
   differently in the clean room, or that its notebook lacks (deleted, or its id changed), needs review: it
   is scored with the lower of each test (0 for a missing one) and its feedback is held until an instructor
   settles it (``--student S --settle notebook`` or ``clean-room``: whose scores stand). A student who
   resubmitted (a newer submission than the one graded) is graded again.

An assignment whose source notebook says ``"gpucourse": {"needs_gpu": true}`` in its metadata goes to
workers started with ``--resources GPU=1``; without one it is scored on the CPU and the notes say so.
"""

from __future__ import annotations

import argparse
import contextlib
import csv
import os
import shutil
import statistics
import sys
import tempfile
import time
import warnings
from dataclasses import dataclass, field, fields
from pathlib import Path

import nbformat
from nbgrader.api import Gradebook
from sqlalchemy.exc import SAWarning

from . import sandbox
from .autograde import TIMED_OUT
from .preloaded import run_module
from .submission import SETTLED, Assignment, Graded, Limits, grade_submission, last_error

GRADES = "grades.csv"
HEADER = ["student", "assignment", "score", "max_score", "clean_room_score", "status", "notes"]
STATUSES = ("graded", "zero", "needs review", "failed to grade")


@dataclass
class Result:
    """One student's line of the summary and of ``grades.csv``."""

    student: str
    score: float = 0.0
    max_score: float = 0.0
    clean_room_score: float | None = None
    status: str = "graded"
    notes: list[str] = field(default_factory=list)

    def row(self, assignment: str) -> list:
        clean = "" if self.clean_room_score is None else self.clean_room_score
        return [self.student, assignment, self.score, self.max_score, clean, self.status, "; ".join(self.notes)]


def nbgrader(course: Path, *args: str, timeout: float = 3600):
    return run_module(course, "nbgrader", *args, timeout=timeout)


def needs_gpu(course: Path, assignment: str) -> bool:
    return any(nbformat.read(p, as_version=4).metadata.get("gpucourse", {}).get("needs_gpu")
               for p in (course / "solutions" / assignment).glob("*.ipynb"))


def prepare(course: Path, assignment: str, limits: Limits) -> Assignment:
    """The gradebook learns the assignment (its release goes to a scratch folder); the tasks' shared part."""
    source = course / "solutions" / assignment
    with tempfile.TemporaryDirectory(prefix="release-") as scratch:
        done = nbgrader(course, "generate_assignment", assignment, "--force",
                        f"--CourseDirectory.release_directory={scratch}", timeout=600)
        if done.returncode != 0:
            sys.exit(f"nbgrader generate_assignment {assignment} failed: {last_error(done.stdout + done.stderr)}")
        template = Path(scratch) / "course"
        (template / "solutions").mkdir(parents=True)
        shutil.copy(course / "nbgrader_config.py", template)
        shutil.copytree(source, template / "solutions" / assignment)
        done = nbgrader(template, "generate_assignment", assignment, "--force", timeout=600)
        if done.returncode != 0:
            sys.exit(f"nbgrader generate_assignment {assignment} failed: {last_error(done.stdout + done.stderr)}")
        gradebook = (template / "gradebook.db").read_bytes()
    files = {str(p.relative_to(source)): p.read_bytes() for p in sorted(source.rglob("*")) if p.is_file()}
    return Assignment(assignment, (course / "nbgrader_config.py").read_bytes(), files, gradebook, str(course), limits)


def already_graded(course: Path, assignment: str) -> set[str]:
    """Students of ``grades.csv`` whose submission was graded (not failed) and not resubmitted since."""
    path = course / GRADES
    if not path.exists():
        return set()
    with path.open(newline="") as f:
        return {r["student"] for r in csv.DictReader(f)
                if r.get("assignment") == assignment and r.get("status") not in (None, "failed to grade")
                and (course / "autograded" / r["student"] / assignment).is_dir()
                and not resubmitted(course, assignment, r["student"])}


def resubmitted(course: Path, assignment: str, student: str) -> bool:
    """Whether the submission is newer than the one graded: another ``timestamp.txt`` (nbgrader's collect), or a
    file changed after the grading."""
    submitted, graded = (course / folder / student / assignment for folder in ("submitted", "autograded"))
    stamps = [folder / "timestamp.txt" for folder in (submitted, graded)]
    if all(stamp.exists() for stamp in stamps) and stamps[0].read_text().strip() != stamps[1].read_text().strip():
        return True
    files = [p.stat().st_mtime for p in submitted.rglob("*") if p.is_file()]
    grading = [p.stat().st_mtime for p in graded.rglob("*.ipynb")]
    return bool(files and grading) and max(files) > min(grading)


def assignment_points(course: Path, assignment: str) -> float:
    """The points of the assignment, from the instructor's gradebook (0 if it does not know it yet)."""
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        try:
            return gradebook.find_assignment(assignment).max_score
        except Exception:  # MissingEntry: not generated in this gradebook
            return 0.0


def record(course: Path, assignment: str, graded: Graded) -> Result:
    """Write one task's outcome: ``autograded/``, the gradebook; the student's `Result`."""
    result = Result(graded.student, clean_room_score=graded.clean_room_score, status=graded.status,
                    notes=list(graded.notes))
    if graded.status == "failed to grade":
        result.max_score = assignment_points(course, assignment)
        return result
    folder = course / "autograded" / graded.student / assignment
    shutil.rmtree(folder, ignore_errors=True)
    for name, data in graded.autograded.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(data)
    # nbgrader's own, on every new submission; a filter, not `catch_warnings`, which is not thread-safe (grading
    # several assignments at once records from several threads)
    warnings.filterwarnings("ignore", category=SAWarning)
    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        gradebook.update_or_create_student(graded.student)
        extra = {"timestamp": graded.timestamp} if graded.timestamp else {}
        gradebook.update_or_create_submission(assignment, graded.student, **extra)
        for (notebook, grade_id), (score, manual) in graded.scores.items():
            grade = gradebook.find_grade(grade_id, notebook, assignment, graded.student)
            grade.auto_score, grade.needs_manual_grade = score, manual
        for (notebook, grade_id), text in graded.comments.items():
            gradebook.find_comment(grade_id, notebook, assignment, graded.student).auto_comment = text
        gradebook.db.commit()
        submission = gradebook.find_submission(assignment, graded.student)
        result.score, result.max_score = submission.score, submission.max_score
    result.notes += not_run(folder)
    if result.status == "graded" and result.score == 0:
        result.status = "zero"
    return result


def not_run(folder: Path) -> list[str]:
    """What the autograded notebooks say about cells that were not run (a dead kernel, the time limit)."""
    said, timed_out = {"NotRun": set(), "KernelDied": set()}, []
    for path in folder.glob("*.ipynb"):
        for cell in nbformat.read(path, as_version=4).cells:
            for output in cell.get("outputs", []):
                if output.get("ename") in said:
                    said[output.ename].add(output.evalue.removeprefix("not run: "))
                elif output.get("ename") == TIMED_OUT:
                    timed_out.append(cell.metadata.get("nbgrader", {}).get("grade_id") or "a cell")
    notes = [f"stopped at its time limit (an endless loop?): {', '.join(timed_out)}"] if timed_out else []
    return notes + (sorted(f"cells not run: {why}" for why in said["NotRun"]) or sorted(said["KernelDied"]))


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


def progress(done: int, total: int, failed: int, started: float) -> None:
    width = 30
    bar = "#" * (width * done // max(total, 1))
    print(f"\r[{bar:<{width}}] {done}/{total} graded, {failed} failed to grade, {time.monotonic() - started:.0f} s",
          end="\n" if done == total else "", file=sys.stderr, flush=True)


def summary(assignment: str, results: list[Result], timings: list[Graded], wall: float, notes: list[str]) -> str:
    width = max([len(r.student) for r in results] + [7])
    lines = [f"{assignment}: {len(results)} submission(s)", *notes,
             f"{'student':<{width}}  {'score':>11}  {'clean room':>10}  status"]
    for r in results:
        clean = "-" if r.clean_room_score is None else f"{r.clean_room_score:g}"
        lines.append(f"{r.student:<{width}}  {r.score:>5g} / {r.max_score:<3g}  {clean:>10}  {r.status}"
                     + (f": {'; '.join(r.notes)}" if r.notes else ""))
    if timings:
        lines.append(f"{len(timings)} graded in {wall:.0f} s: {statistics.mean(g.seconds for g in timings):.1f} s "
                     f"per submission on a worker (median {statistics.median(g.seconds for g in timings):.1f} s)")
        for worker in sorted({g.worker for g in timings}):
            mine = [g.seconds for g in timings if g.worker == worker]
            lines.append(f"  {worker}: {len(mine)} submission(s), {statistics.mean(mine):.1f} s each")
    lines.append(", ".join(f"{sum(r.status == s for r in results)} {s}" for s in STATUSES))
    return "\n".join(lines)


@contextlib.contextmanager
def connect(scheduler: str | None, workers: int):
    """A client of the cluster at ``scheduler``, or of a local cluster of ``workers`` threads in this process.

    Threads suffice on one machine: a task only waits on the processes it starts (nbgrader, the clean room, each
    in a fresh fork; students' code in sandboxed kernels), so nothing of a student's runs in a worker. Worker
    processes would cost each a Python with Dask and the course imported, and a preloaded process of its own.
    """
    from distributed import Client, LocalCluster

    if scheduler:
        with Client(scheduler, timeout="60s") as client:
            yield client
        return
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=False, dashboard_address=":0",
                      memory_limit=0) as cluster, Client(cluster) as client:  # the sandbox caps each kernel
        yield client


def gpu_workers(client) -> int:
    return sum(w.get("resources", {}).get("GPU", 0) > 0 for w in client.scheduler_info()["workers"].values())


def grade(course: Path, assignment: str, students: list[str], limits: Limits, client,
          settle: str | None = None) -> tuple[list[Result], str]:
    """Every student's submission graded on ``client``'s cluster (a review settled by ``settle``); the results and
    the summary."""
    from distributed import as_completed

    started, notes = time.monotonic(), []
    shared = client.scatter(prepare(course, assignment, limits), broadcast=True)
    options, device = {}, None
    if needs_gpu(course, assignment):
        if gpu_workers(client):
            options, device = {"resources": {"GPU": 1}}, "gpu"
        else:
            device = "cpu"
            notes.append("no GPU worker (dask worker --resources GPU=1): GPU exercises scored on the CPU simulator")
    futures = {}
    for student in students:
        folder = course / "submitted" / student / assignment
        files = {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}
        future = client.submit(grade_submission, shared, student, files, device, settle,
                               key=f"grade-{assignment}-{student}", pure=False, **options)
        futures[future] = student
    results, timings = [], []
    progress(0, len(futures), 0, started)
    for future in as_completed(futures):
        try:
            graded = future.result()
            timings.append(graded)
        except Exception as exc:  # a task that failed on every worker it was tried on (KilledWorker)
            graded = Graded(futures[future], status="failed to grade", notes=[f"{type(exc).__name__}: {exc}"[:300]])
        future.release()  # the result is here: a worker lost later must not make the cluster grade it again
        result = record(course, assignment, graded)
        if device == "cpu" and result.status != "failed to grade":
            result.notes.append("scored on the CPU: no GPU worker")
        results.append(result)
        write_grades(course, assignment, [result])  # now, so that a stopped run keeps what it graded
        progress(len(results), len(futures), sum(r.status == "failed to grade" for r in results), started)
    graded_students = [r.student for r in results if r.status != "failed to grade"]
    if graded_students:
        feedback = nbgrader(course, "generate_feedback", assignment, "--force",
                            *(["--student", graded_students[0]] if len(graded_students) == 1 else []))
        if feedback.returncode != 0:
            print(f"feedback: {last_error(feedback.stdout + feedback.stderr)}", file=sys.stderr)
    held = [r.student for r in results if r.status == "needs review"]
    for student in held:  # not released (nor an older run's) until the review is settled
        shutil.rmtree(course / "feedback" / student / assignment, ignore_errors=True)
    if held:
        notes.append(f"feedback held for {len(held)} submission(s) that need review: look at autograded/<student>/"
                     f"{assignment}/, then settle each with: make grade-one A={assignment} S=<student> "
                     "ARGS='--settle notebook' (its notebook's scores stand) or ARGS='--settle clean-room'")
    notes += release_note(course, assignment)
    results.sort(key=lambda r: r.student)
    return results, summary(assignment, results, timings, time.monotonic() - started, notes)


def release_note(course: Path, assignment: str) -> list[str]:
    """How to release the feedback ready in ``feedback/`` where some of it came without the exchange (zip_collect:
    an LMS), which has no timestamp and stops nbgrader's release_feedback at the first such student; else []."""
    ready = [p for p in (course / "feedback").glob(f"*/{assignment}") if any(p.glob("*.html"))]
    lms = sorted(p.parent.name for p in ready if not (p / "timestamp.txt").exists())
    if not lms:
        return []
    others = (f"; release the others' with nbgrader release_feedback {assignment} "
              f"--CourseDirectory.student_id_exclude={','.join(lms)}") if len(lms) < len(ready) else ""
    return [f"{len(lms)} submission(s) came without the exchange (zip_collect): send those students their "
            f"feedback/<student>/{assignment}/*.html yourself{others}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m gpucourse.classroom.grade", description=__doc__.split("\n")[0])
    parser.add_argument("assignment")
    parser.add_argument("--student", help="grade only this student again (a regrade)")
    parser.add_argument("--course", default=".", help="the course directory (default: here)")
    parser.add_argument("--scheduler", default=os.environ.get("SCHEDULER") or None,
                        help="a Dask scheduler's address (tcp://host:8786); default: a local cluster")
    parser.add_argument("--jobs", type=int, default=os.cpu_count() or 1, help="workers of the local cluster")
    parser.add_argument("--force", action="store_true", help="grade again students already in grades.csv")
    parser.add_argument("--settle", choices=SETTLED, help="with --student, after a review: whose scores stand "
                        "where the notebook and the clean room differ (without it: the lower of each, feedback held)")
    for limit in fields(Limits):
        parser.add_argument(f"--{limit.name.replace('_', '-')}", type=int, default=limit.default, dest=limit.name,
                            help=f"{limit.metadata['help']} (default: %(default)s)")
    args = parser.parse_args(argv)

    def stop(message: str):  # a course with nothing to grade by that name: one line, not the usage above it
        parser.exit(2, f"{parser.prog}: error: {message}\n")

    course = Path(args.course).resolve()
    submitted = course / "submitted"
    if not (course / "solutions" / args.assignment).is_dir():
        stop(f"no solutions/{args.assignment}: name an assignment of this course")
    if args.settle and not args.student:
        parser.error("--settle settles one student's review: give --student too (make grade-one A=... S=...)")
    everyone = sorted(p.name for p in submitted.glob("*") if (p / args.assignment).is_dir())
    if args.student and args.student not in everyone:
        stop(f"no submission of {args.student!r} in submitted/{args.student}/{args.assignment}/; students "
             f"with one: {', '.join(everyone) or 'none (collect them first)'}")
    students = [args.student] if args.student else everyone
    if not students:
        stop(f"no submissions in submitted/<student>/{args.assignment}/: collect them first")
    skipped = [] if args.force or args.student else sorted(already_graded(course, args.assignment) & set(students))
    students = [s for s in students if s not in skipped]
    if skipped:
        print(f"{len(skipped)} student(s) already graded, skipped (--force grades them again)", file=sys.stderr)
    again = [s for s in students if (course / "autograded" / s / args.assignment).is_dir()
             and resubmitted(course, args.assignment, s)]
    if again:
        print(f"resubmitted since their grading, graded again: {', '.join(again)}", file=sys.stderr)
    if not students:
        return 0
    unsandboxed = sandbox.unavailable()
    if unsandboxed:
        print(f"WARNING: {unsandboxed}. Grading goes on WITHOUT a sandbox.", file=sys.stderr)
    limits = Limits(**{k: getattr(args, k) for k in vars(Limits())})
    with connect(args.scheduler, args.jobs) as client:
        results, text = grade(course, args.assignment, students, limits, client, args.settle)
    if unsandboxed:
        text = f"WARNING: graded WITHOUT a sandbox ({unsandboxed}); students' code ran with the grader's rights\n" + text
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
