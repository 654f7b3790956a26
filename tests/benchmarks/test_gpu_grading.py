"""benchmarks/gpu_grading.py (gpu-check's part `grading`) on a machine without a GPU: the refusal, the wheels it
carries, CUDA's start-up as a sandboxed kernel starts, each way a graded class fails, and the whole grading on a
worker with GPU=1 whose kernels are told that the GPU is the CPU. (The GPU run itself needs the GPU machine.)"""

import os
import shutil
import socket
import stat
import subprocess
import sys

import nbformat
import pytest

from conftest import ROOT
from gpucourse.classroom import sandbox, submission
from gpucourse.classroom.grade import Result, write_grades

sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402
import gpu_grading  # noqa: E402

SCRIPT = ROOT / "benchmarks" / "gpu_grading.py"
CAP = 256 << 20  # bytes: room for a Python, not for twice as much


def executable(path, text):
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_without_a_gpu_it_refuses_in_one_line(tmp_path):
    if gpu_check.DRIVER_GPUS.is_dir():
        pytest.skip("the NVIDIA driver lists a GPU here")
    run = subprocess.run([sys.executable, str(SCRIPT)], capture_output=True, text=True, timeout=120,
                         env={**os.environ, "PATH": str(tmp_path)})
    assert run.returncode == 2 and run.stderr == ""
    [line] = run.stdout.splitlines()
    assert line.startswith("gpu_grading needs an NVIDIA GPU and there is none here (no nvidia-smi on PATH")


def test_cuda_start_up_is_tried_as_a_kernel_starts_and_the_memory_cap_is_named_when_it_is_the_cause():
    assert gpu_grading.start_in_sandbox(CAP, "print('started')") is None
    message = gpu_grading.start_in_sandbox(CAP, f"bytearray({2 * CAP})")  # fails under the cap alone
    assert message.startswith(f"CUDA's start-up fails under the sandbox's memory cap (prlimit --data={CAP}, 0.25 GiB")
    assert message.endswith("MemoryError")
    message = gpu_grading.start_in_sandbox(CAP, "raise SystemExit('no CUDA driver')")
    assert message == "CUDA does not start here, in the sandbox or out of it: no CUDA driver"
    if sandbox.unavailable() is None:  # the sandbox sets HOME=/tmp: this start fails in it alone
        message = gpu_grading.start_in_sandbox(CAP, "import os; assert os.environ['HOME'] != '/tmp', 'sandboxed'")
        assert message == ("CUDA's start-up fails in the bubblewrap sandbox (it works under the memory cap alone): "
                           "AssertionError: sandboxed")
    if sandbox.unavailable() is None and sandbox.isolates_network():  # and it is tried with no network, as grading
        with socket.create_server(("127.0.0.1", 0)) as server:
            reach = f"import socket; socket.create_connection(('127.0.0.1', {server.getsockname()[1]}), timeout=5)"
            message = gpu_grading.start_in_sandbox(CAP, reach)
        assert message.startswith("CUDA's start-up fails in the bubblewrap sandbox (it works under the memory cap "
                                  "alone): ConnectionRefusedError"), message


@pytest.mark.skipif(shutil.which("dpkg-deb") is None, reason="no dpkg-deb to build a stand-in package")
def test_without_bwrap_the_carried_bubblewrap_package_is_unpacked_and_put_on_path(tmp_path, monkeypatch):
    tools, wheels, place = tmp_path / "bin", tmp_path / "wheels", tmp_path / "env"
    for folder in (tools, wheels):
        folder.mkdir()
    for tool in ("dpkg", "dpkg-deb", "tar", "sh"):
        os.symlink(shutil.which(tool), tools / tool)
    monkeypatch.setenv("PATH", str(tools))
    assert gpu_grading.unpack_bubblewrap(wheels, place) == f"no bwrap here and no bubblewrap_*.deb in {wheels}"
    package = tmp_path / "package"
    (package / "DEBIAN").mkdir(parents=True)
    (package / "DEBIAN" / "control").write_text("Package: bubblewrap\nVersion: 0.8.0\nArchitecture: all\n"
                                                "Maintainer: test\nDescription: stand-in\n")
    (package / "usr" / "bin").mkdir(parents=True)
    executable(package / "usr" / "bin" / "bwrap", "exit 0\n")
    subprocess.run(["dpkg-deb", "--build", str(package), str(wheels / "bubblewrap_0.8.0_all.deb")], check=True,
                   capture_output=True)
    assert gpu_grading.unpack_bubblewrap(wheels, place) == "bwrap unpacked from bubblewrap_0.8.0_all.deb"
    assert shutil.which("bwrap") == str(place / "bubblewrap" / "usr" / "bin" / "bwrap")


def test_a_failed_start_is_said_by_its_exception_on_one_line():
    numba_says = ('Traceback (most recent call last):\n  File "<string>", line 1, in <module>\n    raise CudaSupportError(\n'
                  "numba.cuda.cudadrv.error.CudaSupportError: Error at driver init: \n\nCUDA driver library cannot be "
                  "found.\n: \n")
    assert gpu_grading.exception(numba_says) == ("numba.cuda.cudadrv.error.CudaSupportError: Error at driver init: CUDA "
                                                 "driver library cannot be found. :")
    assert gpu_grading.exception("Traceback (most recent call last):\n  File x\nMemoryError\n") == "MemoryError"
    assert gpu_grading.exception("") == ""


def graded_class(root, solver_score=21.0, exercise="✓ row_sums_fast: ... (timed on NVIDIA H100 80GB HBM3 (4096 x 4096))",
                 notes=(), feedback=True):
    """A trial course as grading leaves it: grades.csv, the solver's autograded notebook, feedback."""
    course = root
    shutil.copytree(ROOT / "solutions" / gpu_grading.ASSIGNMENT, course / "solutions" / gpu_grading.ASSIGNMENT)
    notebook = nbformat.read(ROOT / "solutions" / gpu_grading.ASSIGNMENT / "tuning.ipynb", as_version=4)
    for cell in notebook.cells:
        if cell.metadata.get("nbgrader", {}).get("grade_id") == gpu_grading.GPU_EXERCISE:
            cell.outputs = [nbformat.v4.new_output("stream", name="stdout", text=exercise)]
        elif cell.cell_type == "code" and solver_score < 21 and not cell.metadata.get("nbgrader"):
            cell.outputs = [nbformat.v4.new_output("error", ename="RuntimeError", evalue="the CUDA driver failed",
                                                   traceback=[])]
    folder = course / "autograded" / "solver" / gpu_grading.ASSIGNMENT
    folder.mkdir(parents=True)
    nbformat.write(notebook, folder / "tuning.ipynb")
    results = [Result("solver", solver_score, 21.0, status="graded", notes=list(notes)),
               Result("untouched", 0.0, 21.0, status="zero")]
    write_grades(course, gpu_grading.ASSIGNMENT, results)
    for student in gpu_grading.CLASS:
        (course / "feedback" / student / gpu_grading.ASSIGNMENT).mkdir(parents=True)
        if feedback:
            (course / "feedback" / student / gpu_grading.ASSIGNMENT / "tuning.html").write_text("<html/>")
    return course, results


def test_a_class_graded_on_the_gpu_passes_and_each_way_it_can_fail_is_one_line(tmp_path):
    course, results = graded_class(tmp_path / "good")
    assert gpu_grading.problems(course, results, "07_tuning: 2 submission(s)", CAP) == []

    course, results = graded_class(tmp_path / "cpu", exercise="✓ ... (predicted for the H100 by the cost model, no GPU "
                                   "here)", notes=["scored on the CPU: no GPU worker"])
    found = gpu_grading.problems(course, results, "no GPU worker (...): GPU exercises scored on the CPU simulator", CAP)
    assert found == ["the GPU exercise was scored on the CPU simulator: no worker took the GPU=1 task",
                     "the GPU exercise (test_row_sums_fast) was not timed on the GPU; it printed: ✓ ... (predicted "
                     "for the H100 by the cost model, no GPU here)"]

    course, results = graded_class(tmp_path / "died", solver_score=0.0, exercise="",
                                   notes=["the kernel died in an earlier cell (os._exit, a signal, or out of memory)"])
    found = gpu_grading.problems(course, results, "", CAP)
    assert found[0].startswith("solver (solution): score 0.0 of 21.0, graded")
    assert found[1:] == [
        f"a kernel died (out of memory under the sandbox's cap, prlimit --data={CAP}, is one cause): the kernel died "
        "in an earlier cell (os._exit, a signal, or out of memory)",
        "the solution's first error: RuntimeError: the CUDA driver failed",
        "the GPU exercise (test_row_sums_fast) was not timed on the GPU; it printed: nothing"]

    course, results = graded_class(tmp_path / "no feedback", feedback=False)
    assert gpu_grading.problems(course, results, "", CAP) == ["no feedback for solver: see the grading's output",
                                                               "no feedback for untouched: see the grading's output"]


@pytest.mark.skipif(os.environ.get("GPUCOURSE_SLOW") != "1",
                    reason="grades assignment 07 twice (about 60 s on 2 cores): GPUCOURSE_SLOW=1 runs it")
def test_a_gpu_worker_grades_the_solution_full_and_the_release_zero_with_no_cpu_note(tmp_path, monkeypatch):
    if sandbox.unavailable() is not None:
        pytest.skip(f"no sandbox for students' code: {sandbox.unavailable()}")
    told = submission.environment  # the task goes to the GPU worker; its kernels are told the GPU is the CPU
    monkeypatch.setattr(submission, "environment", lambda device=None: told("cpu" if device == "gpu" else device))
    line, found = gpu_grading.run(tmp_path, 8 << 30, on_gpu=False, processes=False)
    assert found == [], line
    assert line.startswith("grading 07_tuning on a GPU=1 worker: solver 21/21 graded, untouched 0/21 zero; kernels "
                           "sandboxed (bubblewrap), memory cap 8 GiB; ") and line.endswith(" s: passed")


def test_gpu_check_runs_the_part_and_a_machine_whose_cuda_does_not_start_fails_it(tmp_path, monkeypatch):
    """nvidia-smi lists a GPU but CUDA does not start: the part fails, saying so, before grading anyone."""
    tools = tmp_path / "bin"
    tools.mkdir()
    executable(tools / "nvidia-smi", "echo 'GPU 0: Stand-in (UUID: GPU-0)'\n")
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    with open(tmp_path / "log", "w") as log:
        result = gpu_check.run_part("grading", sys.executable, 300, log, tmp_path, gpu_check.Settings())
    assert (result.status, result.note) == ("failed", "exit status 1: see gpu-check.log")
    log = (tmp_path / "log").read_text()
    assert f"gpu_grading.py --wheels {gpu_check.WHEELS}\n" in log
    assert "gpu_grading: FAILED: CUDA does not start here, in the sandbox or out of it: " in log
