"""An assignment that needs a GPU goes to workers started with ``--resources GPU=1``.

Routing only: this machine has no GPU, so the "GPU" worker here is a worker that declares the resource, and
the kernel it starts is told ``GPUCOURSE_DEVICE=gpu`` (a student's cell prints what it was told). Without such
a worker the same assignment is scored on the CPU and says so: `test_nbgrader`'s round trip of assignment 07.
"""

import nbformat
import pytest
from distributed import Client, LocalCluster

import mini_course as mini
from conftest import ROOT
from gpucourse.classroom import sandbox
from gpucourse.classroom.grade import grade
from gpucourse.classroom.preloaded import run_module
from gpucourse.classroom.submission import Limits

SAYS_ITS_DEVICE = "import os\nprint('device:', os.environ.get('GPUCOURSE_DEVICE'))\n" + mini.FUNCTION


def course_needing_a_gpu(root):
    course = mini.make_course(root, ROOT / "nbgrader_config.py")
    source = course / "solutions" / mini.ASSIGNMENT / f"{mini.ASSIGNMENT}.ipynb"
    notebook = nbformat.read(source, as_version=4)
    notebook.metadata["gpucourse"] = {"needs_gpu": True}
    nbformat.write(notebook, source)
    assert run_module(course, "nbgrader", "generate_assignment", mini.ASSIGNMENT, "--force", timeout=600).returncode == 0
    release = course / "assignments" / mini.ASSIGNMENT / f"{mini.ASSIGNMENT}.ipynb"
    mini.plant(course, "ann", mini.submission(release, function=SAYS_ITS_DEVICE))
    return course


def test_a_gpu_worker_takes_the_assignment_and_its_kernels_are_told_to_use_the_gpu(tmp_path):
    if sandbox.unavailable() is not None:
        pytest.skip(f"no sandbox for students' code: {sandbox.unavailable()}")
    course = course_needing_a_gpu(tmp_path)
    with LocalCluster(n_workers=1, threads_per_worker=1, processes=False, dashboard_address=None,
                      resources={"GPU": 1}) as cluster, Client(cluster) as client:
        (result,), summary = grade(course, mini.ASSIGNMENT, ["ann"], Limits(cell_timeout=60), client)
    autograded = nbformat.read(course / "autograded" / "ann" / mini.ASSIGNMENT / f"{mini.ASSIGNMENT}.ipynb",
                               as_version=4)
    printed = "".join(o.get("text", "") for c in autograded.cells if c.cell_type == "code" for o in c.outputs)
    assert "device: gpu" in printed
    assert "no GPU worker" not in summary and not any("scored on the CPU" in n for n in result.notes)
