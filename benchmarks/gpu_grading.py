"""gpu-check's part `grading`: a class of assignment 07 graded with its kernels on the GPU, as `make grade` does.

    python benchmarks/gpu_check.py --part grading --out $OUT  # on the GPU machine, with wheels/gpu-check carried

In a throw-away course, two students of ``07_tuning`` (``needs_gpu``: its timed exercise,
``test_row_sums_fast``, times the kernels on the GPU): one submits the solution notebook, one the
untouched release. They are graded by `gpucourse.classroom.grade.grade` (what ``make grade`` runs) on a
local Dask cluster whose one worker is started with ``resources={"GPU": 1}``; each student's kernel runs
in the sandbox when bubblewrap works here (a carried ``bubblewrap_*.deb`` is unpacked into
``build/gpu-check-env/bubblewrap`` and put on PATH where the machine has no ``bwrap``), else unsandboxed,
and the line says so. Before grading, CUDA's start-up is tried as a student's kernel starts: in the
sandbox, under its memory cap (``prlimit --data``, `Limits.memory_limit`).

It fails, with one line for each cause, when: nbgrader or Dask is missing (the wrong wheels carried),
CUDA does not start in the sandbox or under its memory cap (the line names which, from the same start
without each), the solution does not get full marks (its first error is shown) or the release does not
get 0, a note says the GPU exercise was scored on the CPU simulator, the GPU exercise's output does not
say it was timed on the GPU, a kernel died, or a student got no feedback. It prints one summary line
last. Without a GPU it says so in one line and exits with status 2.

The wheels: gpu-check's (``make gpu-wheels``), which carry nbgrader, Dask and bubblewrap's .deb beside what
the notebooks need.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
ASSIGNMENT = "07_tuning"
CLASS = {"solver": "solution", "untouched": "release"}
GPU_EXERCISE = "test_row_sums_fast"
TIMED_ON_GPU = "timed on "  # what its check prints on a GPU (on the CPU: "predicted ... by the cost model")
ON_THE_CPU = "scored on the CPU"  # grade's notes when no worker has a GPU
CUDA_START = "from numba import cuda; cuda.current_context(); print('CUDA started')"

if str(ROOT / "benchmarks") not in sys.path:
    sys.path.insert(0, str(ROOT / "benchmarks"))

from gpu_check import PLACE, WHEELS, no_gpu  # noqa: E402


# -- the sandbox and CUDA's start-up ----------------------------------------------------------------------------------
def unpack_bubblewrap(wheels: Path = WHEELS, place: Path = PLACE) -> str:
    """Where this machine has no ``bwrap``, the carried Debian package unpacked into ``place`` and put on PATH; a note."""
    if shutil.which("bwrap"):
        return f"bwrap {shutil.which('bwrap')}"
    debs = sorted(wheels.glob("bubblewrap_*.deb"))
    if not debs:
        return f"no bwrap here and no bubblewrap_*.deb in {wheels}"
    unpacked = place / "bubblewrap"
    unpacked.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["dpkg", "-x", str(debs[-1]), str(unpacked)], capture_output=True, text=True)
    if done.returncode:
        return f"dpkg -x {debs[-1].name} failed: {done.stderr.strip()[:200]}"
    os.environ["PATH"] = os.pathsep.join([str(unpacked / "usr" / "bin"), os.environ.get("PATH", "")])
    return f"bwrap unpacked from {debs[-1].name}"


def exception(stderr: str) -> str:
    """The exception a Python's ``stderr`` ends with, on one line (from its ``Name: message`` line on), else its last line."""
    lines = [line.strip() for line in stderr.strip().splitlines() if line.strip()]
    start = max((k for k, line in enumerate(lines) if re.match(r"[A-Za-z_][\w.]*: ", line)), default=len(lines) - 1)
    return " ".join(lines[start:])[:300]


def start_in_sandbox(memory: int, code: str = CUDA_START) -> str | None:
    """None when ``code`` (CUDA's start-up) runs as a student's kernel starts: in the sandbox (where bubblewrap works)
    under ``prlimit --data=memory``; else why not, naming the sandbox or the cap, from the same code run without
    each in turn."""
    from gpucourse.classroom import sandbox

    capped = ["prlimit", f"--data={memory}", "--", sys.executable, "-c", code]
    tries = [("the memory cap alone", capped), ("neither sandbox nor cap", capped[3:])]
    with tempfile.TemporaryDirectory(prefix="cuda-start-") as folder:
        if sandbox.unavailable() is None:
            connection, sockets = Path(folder) / "connection.json", Path(folder) / "sockets"
            connection.write_text("{}")
            sockets.mkdir()  # with no network, where the machine allows it, as a student's kernel is sandboxed
            argv = [a.replace("{connection_file}", str(connection))
                    for a in sandbox.kernel_argv([], Path(folder), memory, sockets if sandbox.isolates_network() else None)]
            tries.insert(0, ("the sandbox", argv[:argv.index("prlimit")] + capped))
        failed = []
        for where, argv in tries:
            done = subprocess.run(argv, capture_output=True, text=True, timeout=300)
            if done.returncode == 0:
                break
            failed.append((where, exception(done.stderr) or f"exit status {done.returncode}"))
        else:
            return f"CUDA does not start here, in the sandbox or out of it: {failed[-1][1]}"
    if not failed:
        return None
    why = failed[0][1]
    if where == "the memory cap alone":
        return f"CUDA's start-up fails in the bubblewrap sandbox (it works under the memory cap alone): {why}"
    return (f"CUDA's start-up fails under the sandbox's memory cap (prlimit --data={memory}, {memory / 2**30:g} GiB: "
            f"Limits.memory_limit, grade's --memory-limit) and works without it: {why}")


# -- the grading --------------------------------------------------------------------------------------------------
def jupyter_data_on_path() -> None:
    """The Jupyter data (nbconvert's templates, for the feedback) of the folders on PYTHONPATH onto JUPYTER_PATH:
    wheels installed with ``pip --target`` (gpu-check's site folder) put it there, where Jupyter does not look."""
    found = [str(Path(p) / "share" / "jupyter") for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
             if p and (Path(p) / "share" / "jupyter").is_dir()]
    if found:
        os.environ["JUPYTER_PATH"] = os.pathsep.join([*found, *filter(None, [os.environ.get("JUPYTER_PATH")])])


def grade_on_a_gpu_worker(course: Path, limits, processes: bool = True):
    """``make grade``'s grading of every student of ``course`` on a local cluster of one worker with GPU=1."""
    from distributed import Client, LocalCluster

    from gpucourse.classroom import grade

    with LocalCluster(n_workers=1, threads_per_worker=1, processes=processes, dashboard_address=None,
                      memory_limit=0, resources={"GPU": 1}) as cluster, Client(cluster) as client:
        return grade.grade(course, ASSIGNMENT, sorted(CLASS), limits, client)


def outputs(course: Path, student: str) -> list[tuple[str | None, dict]]:
    """(grade_id or None, output) of every code cell's outputs in ``student``'s autograded notebooks, in order."""
    import nbformat

    return [(cell.metadata.get("nbgrader", {}).get("grade_id"), output)
            for path in sorted((course / "autograded" / student / ASSIGNMENT).glob("*.ipynb"))
            for cell in nbformat.read(path, as_version=4).cells if cell.cell_type == "code"
            for output in cell.get("outputs", [])]


def exercise_output(course: Path, student: str, grade_id: str = GPU_EXERCISE) -> str:
    """The text the graded cell ``grade_id`` printed in ``student``'s autograded notebooks."""
    return "".join(o.get("text", "") or o.get("evalue", "") for g, o in outputs(course, student) if g == grade_id).strip()


def first_error(course: Path, student: str) -> str | None:
    """The first error in ``student``'s autograded notebooks, as ``ename: evalue``."""
    errors = [o for _, o in outputs(course, student) if o.get("output_type") == "error"]
    return f"{errors[0].get('ename')}: {errors[0].get('evalue', '')}"[:300] if errors else None


def problems(course: Path, results, summary: str, memory: int, on_gpu: bool = True) -> list[str]:
    """What is wrong with a graded trial class: one line per cause."""
    from gpucourse.classroom import trial

    found = trial.check_grades(trial.read_grades(course / "grades.csv"), ASSIGNMENT, CLASS,
                               trial.max_score(course / "solutions" / ASSIGNMENT))
    notes = [note for r in results for note in r.notes]
    if ON_THE_CPU in summary or any(ON_THE_CPU in note for note in notes):
        found.append("the GPU exercise was scored on the CPU simulator: no worker took the GPU=1 task")
    died = [note for note in notes if "kernel died" in note]
    if died:
        found.append(f"a kernel died (out of memory under the sandbox's cap, prlimit --data={memory}, is one cause): "
                     f"{died[0]}")
    found += [f"no feedback for {student}: see the grading's output" for student in CLASS
              if not list((course / "feedback" / student / ASSIGNMENT).glob("*.html"))]
    solver = next(s for s, kind in CLASS.items() if kind == "solution")
    if any(r.student == solver and r.score < r.max_score for r in results):
        found.append(f"the solution's first error: {first_error(course, solver)}")
    said = exercise_output(course, solver)
    if on_gpu and TIMED_ON_GPU not in said:
        found.append(f"the GPU exercise ({GPU_EXERCISE}) was not timed on the GPU; it printed: {said[:300] or 'nothing'}")
    if not on_gpu and "by the cost model" not in said:
        found.append(f"the GPU exercise ({GPU_EXERCISE}) was not priced by the cost model; it printed: {said[:300]}")
    return found


def run(folder: Path, memory: int, on_gpu: bool = True, processes: bool = True) -> tuple[str, list[str]]:
    """Grade the trial class in ``folder``: the summary line and the problems."""
    from gpucourse.classroom import sandbox, submission, trial

    jupyter_data_on_path()
    course = trial.make_course(folder, ROOT, ASSIGNMENT, CLASS)
    started = time.monotonic()
    results, summary = grade_on_a_gpu_worker(course, submission.Limits(memory_limit=memory), processes)
    found = problems(course, results, summary, memory, on_gpu)
    sandboxed = sandbox.unavailable()
    where = "sandboxed (bubblewrap)" if sandboxed is None else f"UNSANDBOXED ({sandboxed})"
    scores = ", ".join(f"{r.student} {r.score:g}/{r.max_score:g} {r.status}" for r in results)
    line = (f"grading {ASSIGNMENT} on a GPU=1 worker: {scores}; kernels {where}, memory cap {memory / 2**30:g} GiB; "
            f"{time.monotonic() - started:.0f} s: {'passed' if not found else 'FAILED'}")
    return line, found


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--wheels", type=Path, default=WHEELS,
                        help="the carried wheels, with bubblewrap's .deb (default wheels/gpu-check: make gpu-wheels)")
    parser.add_argument("--memory-limit", type=int, help="the sandbox's memory cap in bytes (default: grade's)")
    arguments = parser.parse_args(argv)
    problem = no_gpu()
    if problem:
        print(f"gpu_grading needs an NVIDIA GPU and there is none here ({problem}): run it on the GPU machine "
              "(benchmarks/README.md, gpu-check's part `grading`).")
        return 2
    missing = [name for name in ("nbgrader", "distributed") if importlib.util.find_spec(name) is None]
    if missing:
        print(f"gpu_grading: FAILED: no {' or '.join(missing)} here: carry wheels/gpu-check as `make gpu-wheels` "
              "downloads it now, and run it through `python3 benchmarks/gpu_check.py` (benchmarks/README.md)")
        return 1
    os.environ.pop("GPUCOURSE_DEVICE", None)  # as under `make grade` (gpu-check sets it for its notebooks)
    from gpucourse.classroom import submission

    memory = arguments.memory_limit or submission.Limits().memory_limit
    print(f"gpu_grading: {unpack_bubblewrap(arguments.wheels)}", flush=True)
    cap = start_in_sandbox(memory)
    if cap:
        print(f"gpu_grading: FAILED: {cap}")
        return 1
    with tempfile.TemporaryDirectory(prefix="gpu-grading-") as folder:
        line, found = run(Path(folder), memory)
    for problem in found:
        print(f"gpu_grading: FAILED: {problem}")
    print(line)
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
