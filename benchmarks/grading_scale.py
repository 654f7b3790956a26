"""Grading a class on an external Dask cluster, one of its two workers killed mid-run (issue 26).

    python benchmarks/grading_scale.py                 # 24 submissions, writes RESULTS.md
    python benchmarks/grading_scale.py -n 4 --no-write # a quick try, prints only
    python benchmarks/grading_scale.py --report DIR/run.json  # record a run kept with --keep

CPU only. In a temporary course directory holding assignment 1 (``solutions/``), ``N``
submissions: the even-numbered students submit the solution notebook, the others the untouched
release (``assignments/``). As the README's recipe says, ``dask scheduler`` on a free port and two
``dask worker tcp://... --nworkers 1 --nthreads 1`` (each in its own process group), then the driver
``python -m gpucourse.classroom.grade A --scheduler tcp://...`` in the course directory. Once
``K`` students are in ``grades.csv`` (default N/4), one worker busy grading is killed with SIGKILL,
its whole process group, and not replaced: the run ends on the other worker.

Checks: every student in ``grades.csv`` exactly once with the right score and status (solution:
the maximum, graded; release: 0, zero), each once in the gradebook, and nothing graded twice that
was recorded before the kill. Graded twice is read from the scheduler's transition log: each time
a task goes to ``processing`` the scheduler gives it to a worker to grade; a task recorded before
the kill must have gone there once (only the tasks the killed worker held may go again).

Figures: wall time of the driver; seconds per submission on a worker (the task stream's compute
time: median, mean, per worker); the 1-minute load average sampled during the run; the fixed
overhead (driver start to the first task's start, plus the last task's end to the driver's exit);
and a projection for 500 submissions, ``ceil(500 / workers) * median + overhead``.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import math
import os
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
NAME = "grading_scale"  # its section of benchmarks/RESULTS.md
ASSIGNMENT = "01_threads_blocks_grids"
PROJECTED = 500
PROJECTED_WORKERS = (16, 64, 256)
RUN_TIMEOUT = 3600

if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from common import cpu_machine, markdown_table, package_versions, today  # noqa: E402

from gpucourse.classroom import trial  # noqa: E402


# -- pure parts (tests/benchmarks/test_grading_scale_benchmark.py) -------------------------------------
def starts(story: list[tuple]) -> dict[str, int]:
    """How many times each task went to ``processing`` (given to a worker), from the scheduler's transition log."""
    counts: dict[str, int] = {}
    for key, _start, finish, *_ in story:
        if finish == "processing":
            counts[str(key)] = counts.get(str(key), 0) + 1
    return counts


def projection(median: float, overhead: float, workers: int, submissions: int = PROJECTED) -> float:
    """Seconds to grade ``submissions`` on ``workers``: ``ceil(submissions / workers) * median + overhead``."""
    return math.ceil(submissions / workers) * median + overhead


# -- the course and the cluster -------------------------------------------------------------------------
def environment() -> dict:
    path = os.pathsep.join([str(ROOT / "lib"), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return dict(os.environ, PYTHONPATH=path, PATH=os.pathsep.join([str(Path(sys.executable).parent),
                                                                      os.environ.get("PATH", "")]))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def dask(*args: str, log: Path, cwd: Path) -> subprocess.Popen:
    """``dask ARGS`` in its own process group (killed as a whole), its output in ``log``."""
    with log.open("w") as out:
        return subprocess.Popen([str(Path(sys.executable).parent / "dask"), *args], cwd=cwd, env=environment(),
                                stdout=out, stderr=subprocess.STDOUT, start_new_session=True)


def kill(process: subprocess.Popen) -> None:
    """SIGKILL to ``process``'s whole group (it leads one: `dask`)."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:  # killed already
        pass
    process.wait()


@dataclass
class Run:
    class_: dict[str, str]
    max_score: float
    wall: float
    loads: list[float]
    killed: str  # the killed worker's address
    killed_at: float  # seconds after the driver started
    recorded_before: list[str]  # students in grades.csv when the worker was killed
    running_on_killed: list[str]  # the tasks the killed worker held (running or queued on it)
    starts: dict[str, int]
    tasks: list[dict]  # the task stream: one record per finished task
    driver_start: float
    driver_end: float
    problems: list[str]
    summary: str


def grade_class(n: int, kill_after: int, folder: Path) -> Run:
    from distributed import Client

    class_ = trial.students(n)
    (folder / "course").mkdir()
    course = trial.make_course(folder / "course", ROOT, ASSIGNMENT, class_)
    logs = folder / "logs"
    logs.mkdir()
    port = free_port()
    address = f"tcp://127.0.0.1:{port}"
    processes = [dask("scheduler", "--host", "127.0.0.1", "--port", str(port), "--no-dashboard",
                      log=logs / "scheduler.log", cwd=folder)]
    try:
        with Client(address, timeout="120s") as client:
            for k in range(2):
                processes.append(dask("worker", address, "--nworkers", "1", "--nthreads", "1", "--no-dashboard",
                                      "--local-directory", str(folder / f"worker{k}"), log=logs / f"worker{k}.log",
                                      cwd=folder))
            client.wait_for_workers(2, timeout=300)
            client.get_task_stream()  # installs the scheduler's task-stream plugin before any task runs
            workers = {pid: worker for worker, pid in client.run(os.getpid).items()}
            return drive(client, course, class_, kill_after, processes[1:], workers, logs)
    finally:
        for process in reversed(processes):
            kill(process)


def worker_of(process: subprocess.Popen, workers: dict[int, str]) -> str | None:
    """The address of the Dask worker ``dask worker`` process ``process`` started (its child, same group)."""
    for pid, address in workers.items():
        try:
            if os.getpgid(pid) == process.pid:
                return address
        except ProcessLookupError:
            continue
    return None


def drive(client, course: Path, class_: dict[str, str], kill_after: int, worker_processes, workers, logs: Path) -> Run:
    grades = course / "grades.csv"
    command = [sys.executable, "-m", "gpucourse.classroom.grade", ASSIGNMENT, "--scheduler", client.scheduler.address]
    loads, killed, killed_at, before, running = [], "", 0.0, [], []
    driver_start = time.time()
    with (logs / "driver.out").open("w") as out, (logs / "driver.err").open("w") as err:
        driver = subprocess.Popen(command, cwd=course, env=environment(), stdout=out, stderr=err)
        try:
            while driver.poll() is None:
                if time.time() - driver_start > RUN_TIMEOUT:
                    raise RuntimeError(f"the driver ran past {RUN_TIMEOUT} s; see {logs}")
                loads.append(os.getloadavg()[0])
                done = [r["student"] for r in trial.read_grades(grades)]
                if not killed and len(done) >= kill_after:
                    processing = client.processing()
                    victim = next((p for p in worker_processes if processing.get(worker_of(p, workers))), None)
                    if victim is not None:
                        killed, before = worker_of(victim, workers), done
                        running = sorted(str(key).removeprefix(f"grade-{ASSIGNMENT}-") for key in processing[killed])
                        kill(victim)
                        killed_at = time.time() - driver_start
                time.sleep(1)
        finally:
            if driver.poll() is None:
                driver.kill()
    driver_end = time.time()
    summary = (logs / "driver.out").read_text()
    if driver.returncode != 0:
        raise RuntimeError(f"the driver failed ({driver.returncode}):\n{(logs / 'driver.err').read_text()[-3000:]}")
    if not killed:
        raise RuntimeError(f"no worker was killed: fewer than {kill_after} students recorded while both were busy")
    keys = [f"grade-{ASSIGNMENT}-{s}" for s in class_]
    story = client.run_on_scheduler(lambda dask_scheduler: dask_scheduler.story(*keys))
    tasks = [t for t in client.get_task_stream() if str(t["key"]).startswith(f"grade-{ASSIGNMENT}-")]
    top = trial.max_score(course / "solutions" / ASSIGNMENT)
    counts = starts(story)
    problems = trial.check_grades(trial.read_grades(grades), ASSIGNMENT, class_, top) + check_gradebook(course, class_)
    problems += [f"{s}: graded {counts.get(f'grade-{ASSIGNMENT}-{s}', 0)} times, recorded before the kill"
                 for s in before if counts.get(f"grade-{ASSIGNMENT}-{s}", 0) != 1]
    return Run(class_, top, driver_end - driver_start, loads, killed, killed_at, before, running, counts, tasks,
               driver_start, driver_end, problems, summary)


def check_gradebook(course: Path, class_: dict[str, str]) -> list[str]:
    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{course / 'gradebook.db'}") as gradebook:
        names = [s.student.id for s in gradebook.find_assignment(ASSIGNMENT).submissions]
    return ([f"{s}: {names.count(s)} submissions in the gradebook" for s in class_ if names.count(s) != 1]
            + [f"{s}: in the gradebook, not in the class" for s in sorted(set(names) - set(class_))])


# -- report ---------------------------------------------------------------------------------------------
def compute_seconds(task: dict) -> float:
    return sum(s["stop"] - s["start"] for s in task["startstops"] if s["action"] == "compute")


def section(run: Run) -> str:
    seconds = [compute_seconds(t) for t in run.tasks]
    median, mean = statistics.median(seconds), statistics.mean(seconds)
    first = min(s["start"] for t in run.tasks for s in t["startstops"] if s["action"] == "compute")
    last = max(s["stop"] for t in run.tasks for s in t["startstops"] if s["action"] == "compute")
    overhead = (first - run.driver_start) + (run.driver_end - last)
    per_worker = []
    for worker in sorted({t["worker"] for t in run.tasks}):
        mine = [compute_seconds(t) for t in run.tasks if t["worker"] == worker]
        state = "killed" if worker == run.killed else "kept"
        per_worker.append([f"`{worker}` ({state})", str(len(mine)), f"{statistics.median(mine):.1f}",
                           f"{statistics.mean(mine):.1f}"])
    solutions = sum(k == "solution" for k in run.class_.values())
    again = {k.removeprefix(f"grade-{ASSIGNMENT}-"): c for k, c in run.starts.items() if c > 1}
    verdict = ("every check passed" if not run.problems else
               f"{len(run.problems)} problem(s): " + "; ".join(run.problems[:10]))
    rows = [[str(w), f"{math.ceil(PROJECTED / w)}", f"{projection(median, overhead, w):.0f}",
             f"{projection(median, overhead, w) / 60:.1f}"] for w in PROJECTED_WORKERS]
    return "\n".join([
        "## Grading a class on Dask, one worker killed",
        "",
        f"`python benchmarks/grading_scale.py -n {len(run.class_)}` (CPU only, no GPU involved).",
        "",
        f"- Machine: {cpu_machine()}; shared with other work: 1-minute load average during the run "
        f"{min(run.loads):.1f} to {max(run.loads):.1f} (mean {statistics.mean(run.loads):.1f}).",
        f"- Date: {today()}",
        f"- Versions: {package_versions('dask', 'distributed', 'nbgrader', 'numba')}",
        f"- Class: {len(run.class_)} submissions of `{ASSIGNMENT}`: {solutions} the solution notebook "
        f"(expected {run.max_score:g} of {run.max_score:g}, graded), {len(run.class_) - solutions} the untouched "
        "release (expected 0, zero).",
        "- Cluster: `dask scheduler` and two `dask worker tcp://... --nworkers 1 --nthreads 1` on this machine; "
        "the driver `python -m gpucourse.classroom.grade ... --scheduler tcp://...` in the course directory.",
        f"- Kill: after {len(run.recorded_before)} student(s) were in `grades.csv` ({run.killed_at:.0f} s into "
        f"the run), worker `{run.killed}` was killed with SIGKILL (its whole process group) while it held "
        f"{', '.join(run.running_on_killed) or 'nothing'} (running, or next in its queue); no replacement: the run "
        "finished on the other worker.",
        f"- Graded twice: read from the scheduler's transition log (a task going to `processing` is the "
        f"scheduler giving it to a worker to grade). Given more than once: {', '.join(f'{s} ({c}x)' for s, c in sorted(again.items())) or 'none'}"
        f"; of the {len(run.recorded_before)} students recorded before the kill, "
        f"{sum(run.starts.get(f'grade-{ASSIGNMENT}-{s}', 0) == 1 for s in run.recorded_before)} given once.",
        "- Checks (every student in `grades.csv` once with the right score and status, each once in the "
        f"gradebook, nothing recorded before the kill graded again): {verdict}.",
        f"- Wall time of the driver (the cluster's start not counted): {run.wall:.0f} s for {len(run.class_)} submissions; seconds per submission "
        f"on a worker (task compute time): median {median:.1f}, mean {mean:.1f}; fixed overhead {overhead:.0f} s "
        "(driver start to the first task's start: the gradebook's assignment, the scatter; the last task's end "
        "to the exit: feedback, the summary).",
        "",
        markdown_table(["worker", "submissions", "median (s)", "mean (s)"], per_worker, right={1, 2, 3}),
        "",
        f"Projection for {PROJECTED} submissions: `ceil({PROJECTED} / workers) * {median:.1f} s + {overhead:.0f} s` "
        "(the measured median and overhead; one worker per core, each as loaded as this machine was, the "
        "overhead assumed not to grow with the class).",
        "",
        markdown_table(["workers", "submissions per worker", "projected (s)", "projected (min)"], rows,
                       right={0, 1, 2, 3}),
    ])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=24, help="submissions (default 24)")
    parser.add_argument("-k", type=int, default=None, help="students recorded before the kill (default n/4)")
    parser.add_argument("--no-write", action="store_true", help="print the section only")
    parser.add_argument("--keep", action="store_true", help="keep the course directory, the logs and run.json")
    parser.add_argument("--report", type=Path, help="report the run kept in this run.json instead of grading")
    options = parser.parse_args(argv)
    if options.report:
        return report(Run(**json.loads(options.report.read_text())), write=not options.no_write)
    kill_after = options.k if options.k is not None else max(1, options.n // 4)
    folder = Path(tempfile.mkdtemp(prefix="grading-scale-"))
    try:
        run = grade_class(options.n, kill_after, folder)
        if options.keep:
            (folder / "run.json").write_text(json.dumps(dataclasses.asdict(run), default=str))
    finally:
        if options.keep:
            print(f"kept: {folder}", file=sys.stderr)
        else:
            shutil.rmtree(folder, ignore_errors=True)
    return report(run, write=not options.no_write)


def report(run: Run, write: bool) -> int:
    """Print the driver's summary and the section; record the section in RESULTS.md; 1 when a check failed."""
    text = section(run)
    print(run.summary)
    print(text)
    if write:
        from gpucourse.course import results  # noqa: PLC0415 (imports gpucourse, which picks a backend)

        results.record(NAME, text)
        print(f"\nwritten to {results.RESULTS.relative_to(ROOT)}")
    return 1 if run.problems else 0


if __name__ == "__main__":
    sys.exit(main())
