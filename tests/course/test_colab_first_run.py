"""The setup cell on a fresh runtime, as on Colab: install, restart, then run.

A fresh virtual environment holds what Colab starts with (ipykernel, numpy,
matplotlib) and the course's own dependencies (they come from the package index,
and the test skips when it cannot reach one). The setup cell runs in a Jupyter
kernel of that environment, the way a student runs it: rendered to install the
course from a copy of this checkout instead of GitHub, or, with no install source,
from the course's wheel with the package index cut off (PIP_NO_INDEX), as the
student edition carries it.
"""

import os
import shutil
import subprocess
import time
import tomllib
import venv

import nbformat
import pytest
from jupyter_client import KernelManager
from jupyter_client.kernelspec import KernelSpecManager
from nbclient import NotebookClient

from conftest import ROOT
from gpucourse.course.setup_cell import render_cell
from gpucourse.course.wheel import build_wheel

FRESH_RUNTIME = ["ipykernel", "numpy", "matplotlib"]
KERNEL_ENV = {name: value for name, value in os.environ.items() if name not in ("PYTHONPATH", "VIRTUAL_ENV")}
OFFLINE = {**KERNEL_ENV, "PIP_NO_INDEX": "1"}


@pytest.fixture(scope="module")
def runtime(tmp_path_factory):
    """A kernel name, and the folder of its kernel spec, for a fresh environment without the course."""
    root = tmp_path_factory.mktemp("fresh")
    venv.EnvBuilder(with_pip=True).create(root / "venv")
    python = root / "venv" / "bin" / "python"
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    # --no-compile: a module's bytecode is written when it is first imported (half of pip's 50 s here otherwise)
    pip = subprocess.run([python, "-m", "pip", "install", "--quiet", "--no-compile", *FRESH_RUNTIME, *dependencies],
                         capture_output=True, text=True, env=KERNEL_ENV)
    if pip.returncode:
        pytest.skip(f"no package index to build a fresh runtime: {pip.stderr.strip().splitlines()[-1:]}")
    spec = root / "kernels" / "fresh"
    spec.mkdir(parents=True)
    spec.joinpath("kernel.json").write_text(
        f'{{"argv": ["{python}", "-m", "ipykernel_launcher", "-f", "{{connection_file}}"], '
        '"display_name": "fresh", "language": "python"}'
    )
    return root


@pytest.fixture(scope="module")
def checkout(tmp_path_factory):
    """What pip needs to install the course from this checkout, copied so the build leaves it clean."""
    copy = tmp_path_factory.mktemp("checkout")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, copy / name)
    shutil.copytree(ROOT / "lib", copy / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    return copy


def run_setup_cell(runtime, source, cwd=None, env=KERNEL_ENV, exit_within=20):
    """Run the setup cell installing from ``source`` (a wheel when empty) in a new kernel started in ``cwd``;
    its outputs, and whether the kernel then exits within ``exit_within`` seconds (a kernel that does not exit is
    waited for that long: 0 where the test does not ask)."""
    cell = nbformat.v4.new_code_cell(render_cell(source, extra=""))
    notebook = nbformat.v4.new_notebook(cells=[cell])
    manager = KernelManager(kernel_name="fresh", kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(runtime / "kernels")]))
    client = NotebookClient(notebook, km=manager, allow_errors=True, timeout=300)
    with client.setup_kernel(env=env, cwd=str(cwd or runtime)):
        client.execute_cell(cell, 0)
        deadline = time.monotonic() + exit_within
        while manager.is_alive() and time.monotonic() < deadline:
            time.sleep(0.2)
        exited = not manager.is_alive()
    return cell.outputs, exited


def text_of(outputs):
    return "".join(o.get("text", "") + "\n".join(o.get("traceback", [])) for o in outputs)


def uninstall_course(runtime):
    subprocess.run([runtime / "venv" / "bin" / "python", "-m", "pip", "uninstall", "--quiet", "--yes", "gpucourse"],
                   capture_output=True, env=KERNEL_ENV)


def test_a_failed_install_says_what_failed_and_what_to_try_without_a_traceback(runtime):
    uninstall_course(runtime)
    outputs, exited = run_setup_cell(runtime, "file:///nonexistent/gpu-kernels-course", exit_within=3)
    errors = [o for o in outputs if o.output_type == "error"]
    assert len(errors) == 1 and errors[0].ename == "SetupStopped", text_of(outputs)
    assert errors[0].traceback == [
        "Could not install the course package from file:///nonexistent/gpu-kernels-course: "
        "ERROR: Could not install packages due to an OSError: "
        "[Errno 2] No such file or directory: '/nonexistent/gpu-kernels-course'",
        "Check that the runtime is online and run this cell again; "
        "`%pip install 'gpucourse[] @ file:///nonexistent/gpu-kernels-course'` shows all of pip's output.",
    ]
    assert "Traceback" not in text_of(outputs) and not exited


def test_the_first_run_installs_and_restarts_and_the_next_run_goes_through(runtime, checkout):
    uninstall_course(runtime)
    outputs, exited = run_setup_cell(runtime, checkout.as_uri())
    assert [o.output_type for o in outputs] == ["stream", "error"], text_of(outputs)
    assert outputs[0].text == f"Installing the course package from {checkout.as_uri()} (about a minute)...\n"
    assert outputs[-1].traceback == [
        "Installed the course package; restarting the runtime. Run this cell again."
    ]
    assert exited, "the kernel restarts itself after the install"

    outputs, _ = run_setup_cell(runtime, checkout.as_uri(), exit_within=0)
    assert [o.output_type for o in outputs] == ["stream"], text_of(outputs)
    assert "Kernels run on the CPU simulator" in outputs[0].text


def test_without_an_install_source_or_a_wheel_it_says_where_to_put_the_wheel(runtime, tmp_path):
    uninstall_course(runtime)
    notebook_dir = tmp_path / "a" / "b" / "lectures"
    notebook_dir.mkdir(parents=True)
    outputs, exited = run_setup_cell(runtime, "", cwd=notebook_dir, env=OFFLINE, exit_within=3)
    assert [o.output_type for o in outputs] == ["error"] and outputs[0].ename == "SetupStopped", text_of(outputs)
    assert outputs[0].traceback[0] == ("The course package was not found: no gpucourse-*.whl beside this notebook, "
                                       "in /content or in Google Drive (MyDrive or a folder in it).")
    assert outputs[0].traceback[1].startswith("Upload the gpucourse-*.whl file of your course's student edition")
    assert "Traceback" not in text_of(outputs) and not exited


def test_a_broken_wheel_says_what_pip_said_without_a_traceback(runtime, tmp_path):
    uninstall_course(runtime)
    (tmp_path / "gpucourse-0.1.0-py3-none-any.whl").write_bytes(b"not a zip file")
    outputs, exited = run_setup_cell(runtime, "", cwd=tmp_path, env=OFFLINE, exit_within=3)
    assert [o.output_type for o in outputs] == ["stream", "error"], text_of(outputs)
    message = outputs[-1].traceback
    assert message[0].startswith(f"Could not install the course package from {tmp_path}/gpucourse-0.1.0-py3-none-any.whl: ")
    assert len(message) == 2 and "Traceback" not in text_of(outputs) and not exited


def test_the_editions_wheel_installs_offline_from_two_folders_up(runtime, checkout, tmp_path):
    """The student edition's layout: the wheel at its root, the notebook in lectures/; no package index."""
    uninstall_course(runtime)
    wheel = build_wheel(checkout, tmp_path)
    lectures = tmp_path / "lectures"
    lectures.mkdir()
    outputs, exited = run_setup_cell(runtime, "", cwd=lectures, env=OFFLINE)
    assert [o.output_type for o in outputs] == ["stream", "error"], text_of(outputs)
    assert outputs[0].text == f"Installing the course package from {wheel} (about a minute)...\n"
    assert outputs[-1].traceback == ["Installed the course package; restarting the runtime. Run this cell again."]
    assert exited

    outputs, _ = run_setup_cell(runtime, "", cwd=lectures, env=OFFLINE, exit_within=0)
    assert [o.output_type for o in outputs] == ["stream"], text_of(outputs)
    assert "Kernels run on the CPU simulator" in outputs[0].text
