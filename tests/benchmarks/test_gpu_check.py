"""make gpu-check on a machine without a GPU: its usage, its parts, the refusal, the wheels, the environment it
prepares, the notebook runner, the summary and the output folder. (The GPU run itself needs the GPU machine.)"""

import io
import os
import re
import stat
import subprocess
import sys
import textwrap
import threading
import time
import zipfile
from concurrent.futures import ThreadPoolExecutor

import nbformat
import pytest

from conftest import ROOT
from gpucourse import BACKEND
from gpucourse.course import recorded
from gpucourse.course.results import measured_on

sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402

SCRIPT = ROOT / "benchmarks" / "gpu_check.py"


def run_script(*arguments, env=None):
    return subprocess.run([sys.executable, str(SCRIPT), *arguments], capture_output=True, text=True, timeout=120,
                          env=env or os.environ)


def executable(path, text):
    path.write_text("#!/bin/sh\n" + text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR)
    return path


def test_the_usage_documents_every_part_and_the_limits():
    usage = run_script("--help")
    assert usage.returncode == 0
    for words in ("lectures", "solutions", "bandwidth", "matmul", "differential", "grading", "--part", "10 minutes", "--resume",
                  "--repeat", "--cell-timeout", "first line", "PYTHONPATH",
                  "64 MiB", "--limit", "--out", "--download-wheels", "--use-this-python", "summary.md", "--quick"):
        assert words in usage.stdout, words


def test_the_parts_are_the_notebooks_every_gpu_benchmark_and_the_differential_test(tmp_path):
    # first those that share the GPU (they check results), then the benchmarks that time it
    assert gpu_check.all_parts() == ["lectures", "solutions", "differential", "simulator_fuzz", "grading", "matmul",
                                     "conv", "fusion", "bandwidth", "precision", "tuning", "counters",
                                     "compilers"]  # goals first
    assert [gpu_check.is_timed(p) for p in gpu_check.all_parts()] == [False] * 5 + [True] * 8
    assert gpu_check.select_parts(None) == gpu_check.select_parts(["all"]) == gpu_check.all_parts()
    assert gpu_check.select_parts(["grading"]) == ["grading"]
    assert gpu_check.select_parts(["matmul", "differential", "lectures"]) == ["lectures", "differential", "matmul"]
    assert gpu_check.select_parts(["compilers", "bandwidth"]) == ["bandwidth", "compilers"]
    with pytest.raises(SystemExit, match="no part named transformer; the parts are: lectures, solutions"):
        gpu_check.select_parts(["transformer"])
    for name in ("common", "simulator_speed", "bandwidth", "conv", "a_new_one"):  # a new benchmark is picked up, last
        (tmp_path / f"{name}.py").write_text("")
    assert gpu_check.all_parts(tmp_path) == ["lectures", "solutions", *gpu_check.SIDE_BY_SIDE, "conv", "bandwidth",
                                             "a_new_one"]


@pytest.mark.parametrize("nvidia_smi", [None, "echo 'NVIDIA-SMI has failed: no driver' >&2; exit 9"],
                         ids=["no nvidia-smi", "nvidia-smi without a GPU"])
def test_without_a_gpu_it_refuses_in_one_line_and_writes_nothing(tmp_path, nvidia_smi):
    if nvidia_smi is None and gpu_check.DRIVER_GPUS.is_dir():
        pytest.skip("the NVIDIA driver lists a GPU here")
    tools = tmp_path / "bin"
    tools.mkdir()
    if nvidia_smi:
        executable(tools / "nvidia-smi", nvidia_smi + "\n")
    out = tmp_path / "out"
    run = run_script("--out", str(out), env={**os.environ, "PATH": str(tools)})
    assert run.returncode == 2 and run.stderr == ""
    [line] = run.stdout.splitlines()
    assert line.startswith("gpu-check needs an NVIDIA GPU and there is none here (")
    assert ("no nvidia-smi on PATH and no GPU in /proc/driver/nvidia/gpus" if nvidia_smi is None else "no driver") in line
    assert not out.exists()


def test_without_nvidia_smi_the_drivers_list_of_gpus_decides(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    assert gpu_check.no_gpu(tmp_path / "gpus") == f"no nvidia-smi on PATH and no GPU in {tmp_path / 'gpus'}"
    (tmp_path / "gpus" / "0000:00:1e.0").mkdir(parents=True)
    assert gpu_check.no_gpu(tmp_path / "gpus") is None


def test_the_wheels_leave_out_what_the_gpu_machine_has_and_what_headless_runs_never_import():
    names = ["nbgrader", "numpy", "numba_cuda", "jupyterlab", "notebook", "debugpy", "Jinja2", "tornado",
             "SQLAlchemy", "PyYAML", "ipywidgets", "widgetsnbextension", "argon2_cffi", "distributed", "matplotlib"]
    carried, left_out = gpu_check.selection(names)
    assert carried == ["nbgrader", "numpy", "numba_cuda", "tornado", "SQLAlchemy", "ipywidgets", "distributed"]
    assert {name for name, why in left_out.items() if why == "the GPU machine has it"} == {"Jinja2", "PyYAML",
                                                                                            "matplotlib"}
    for name in ("jupyterlab", "notebook", "debugpy", "widgetsnbextension", "argon2_cffi"):
        assert left_out[name].startswith("never imported headless: "), name


def test_one_download_has_the_notebooks_and_the_gradings_packages_for_the_gpu_machine_and_bubblewrap(
        tmp_path, monkeypatch, capsys):
    calls = tmp_path / "calls"
    fake_python = executable(tmp_path / "python", textwrap.dedent(f"""\
        echo "$@" >> {calls}
        while [ "$1" != "-d" ]; do shift; done
        for name in nbgrader-0.9.6-py3-none-any jupyterlab-4.6.6-py3-none-any jinja2-3.1.6-py3-none-any \\
                    ipywidgets-8.1.8-py3-none-any debugpy-1.8-py2.py3-none-any; do
          head -c 1024 /dev/zero > "$2/$name.whl"
        done
        """))
    tools = tmp_path / "bin"
    tools.mkdir()
    executable(tools / "apt-get", 'head -c 1024 /dev/zero > "bubblewrap_0.8.0-2_amd64.deb"\n')
    monkeypatch.setenv("PATH", f"{tools}{os.pathsep}{os.environ['PATH']}")
    folder = tmp_path / "wheels"
    assert gpu_check.download_wheels(folder, str(fake_python)) == 0
    assert sorted(p.name for p in folder.iterdir()) == ["bubblewrap_0.8.0-2_amd64.deb", "ipywidgets-8.1.8-py3-none-any.whl",
                                                        "nbgrader-0.9.6-py3-none-any.whl"]
    pip_calls = calls.read_text().splitlines()
    assert len(pip_calls) == 2 and all("--python-version 3.12 " in c and "--abi cp312" in c and
                                       "--platform manylinux_2_28_x86_64" in c for c in pip_calls)
    assert all(name in pip_calls[0] for name in ("numpy<2.5", "ipykernel", "ipywidgets", "nbgrader==0.9.*", "distributed"))
    assert "--no-deps numba-cuda==0.30.*" in pip_calls[1]
    printed = capsys.readouterr().out
    assert "2 wheels in" in printed and "MiB with bubblewrap's .deb; left out 3: debugpy, jinja2, jupyterlab" in printed


def fake_wheel(folder, name="gpucheckprobe"):
    """A minimal pure-Python wheel: one module, its dist-info."""
    folder.mkdir(exist_ok=True)
    info = f"{name}-1.0.dist-info"
    files = {f"{name}.py": "ANSWER = 42\n", f"{info}/METADATA": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
             f"{info}/WHEEL": "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n"}
    files[f"{info}/RECORD"] = "".join(f"{path},,\n" for path in [*files, f"{info}/RECORD"])
    with zipfile.ZipFile(folder / f"{name}-1.0-py3-none-any.whl", "w") as wheel:
        for path, text in files.items():
            wheel.writestr(path, text)


def test_prepare_refuses_without_wheels(tmp_path):
    with pytest.raises(SystemExit, match="no wheels in .*make gpu-wheels"):
        gpu_check.prepare(tmp_path / "empty", tmp_path / "env", io.StringIO())


def test_a_virtual_environment_with_the_gpu_stack_gets_only_what_it_lacks_first_on_its_path(tmp_path):
    """The device machine's python3 is itself a venv (PyTorch, numba): a venv made from it would see none of them."""
    fake_wheel(tmp_path / "wheels")
    assert gpu_check.is_virtual_environment(sys.executable)  # the tests run in make's .venv
    with open(tmp_path / "log", "w") as log:
        python, first = gpu_check.prepare(tmp_path / "wheels", tmp_path / "env", log)
    assert python == sys.executable and first == [str(tmp_path / "env" / "site")]
    probe = subprocess.run([python, "-c", "import gpucheckprobe; print(gpucheckprobe.ANSWER)"], capture_output=True,
                           text=True, env={**os.environ, "PYTHONPATH": first[0]})
    assert probe.stdout.split() == ["42"]
    assert "installing 1 of 1 wheels" in (tmp_path / "log").read_text()
    with open(tmp_path / "log", "w") as log:  # the next command on a machine still warm: nothing left to install
        assert gpu_check.prepare(tmp_path / "wheels", tmp_path / "env", log) == (python, first)
    assert "installing 0 of 1 wheels" in (tmp_path / "log").read_text()


def test_only_the_wheels_the_machine_lacks_or_pins_otherwise_are_installed(tmp_path):
    wheels = [tmp_path / f"{n}-py3-none-any.whl" for n in ("numpy-2.4.6", "matplotlib-3.10.0", "nbclient-0.10.2",
                                                             "numba_cuda-0.30.4", "tornado-6.5")]
    installed = {"numpy": "2.5.2", "matplotlib": "3.11.2", "numba-cuda": "0.30.4", "tornado": "6.4"}
    assert [w.name.split("-")[0] for w in gpu_check.lacking(wheels, installed)] == ["numpy", "nbclient", "tornado"]


def test_requirements_the_carried_set_leaves_unmet_are_named_except_those_left_out_on_purpose(tmp_path):
    """pip check on the device: a package the image no longer has is said once, before the parts fail on it."""
    for name in ("nbgrader-0.9.6", "distributed-2026.1.0", "ipykernel-6.31.0"):
        (tmp_path / f"{name}-py3-none-any.whl").write_bytes(b"")
    python = executable(tmp_path / "python", textwrap.dedent("""\
        echo "nbgrader 0.9.6 requires jupyterlab, which is not installed."
        echo "distributed 2026.1.0 requires tornado, which is not installed."
        echo "ipykernel 6.31.0 requires debugpy, which is not installed."
        echo "torch 2.11.0 requires sympy, which is not installed."
        echo "ipykernel 6.31.0 has requirement pyzmq>=25, but you have pyzmq 24.0."
        """))
    assert gpu_check.unmet_requirements(str(python), [], tmp_path) == ["distributed needs tornado",
                                                                       "ipykernel needs pyzmq>=25"]


def test_without_a_gpu_stack_in_a_venv_the_wheels_go_into_a_venv_that_sees_the_machines_packages(tmp_path):
    fake_wheel(tmp_path / "wheels")
    with open(tmp_path / "log", "w") as log:
        python, first = gpu_check.prepare(tmp_path / "wheels", tmp_path / "env", log, route="venv")
    probe = subprocess.run([python, "-c", "import gpucheckprobe, sys; print(gpucheckprobe.ANSWER, sys.prefix)"],
                           capture_output=True, text=True)
    assert probe.stdout.split() == ["42", str(tmp_path / "env" / "venv")] and first == []
    assert "include-system-site-packages = true" in (tmp_path / "env" / "venv" / "pyvenv.cfg").read_text()


def notebook(folder, name, *cells):
    path = folder / f"{name}.ipynb"
    nbformat.write(nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells]), path)
    return path


def test_a_notebook_fails_on_an_error_on_stderr_output_and_off_the_gpu(tmp_path):
    assert gpu_check.execute_notebook(notebook(tmp_path, "quiet", "x = 1"), 120, require_gpu=False) == []
    noisy = notebook(tmp_path, "noisy", "import sys\nprint('careful', file=sys.stderr)")
    off_the_gpu = [] if BACKEND.on_gpu else ["ran on the simulator, not the GPU"]
    assert gpu_check.execute_notebook(noisy, 120) == ["stderr: careful", *off_the_gpu]
    [failed] = gpu_check.execute_notebook(notebook(tmp_path, "broken", "1 / 0"), 120, require_gpu=False)
    assert failed.startswith("a cell failed") and "ZeroDivisionError" in failed


def test_a_stalled_cell_is_named_by_its_index_and_first_line(tmp_path):
    stalls = notebook(tmp_path, "stalls", "x = 1", "\nimport time\ntime.sleep(60)")
    assert gpu_check.execute_notebook(stalls, 3, require_gpu=False) == [
        "stalled: cell 1 (`import time`) ran past 3 s"]


def test_each_notebook_runs_in_fresh_kernels_and_says_how_many_runs_passed(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    (tmp_path / "lectures").mkdir()
    # a file that grows by one line per run: the third run fails, so each run had a fresh kernel and its own try
    flaky = notebook(tmp_path / "lectures", "flaky", "with open('runs', 'a') as f:\n    f.write('x')",
                     "assert len(open('runs').read()) < 3")
    line = gpu_check.execute_repeatedly(flaky, 3, 60, time.monotonic() + 600, require_gpu=False)
    assert line.startswith("lectures/flaky.ipynb: FAILED in run 3, 2/3 runs: a cell failed")
    quiet = notebook(tmp_path / "lectures", "quiet", "x = 1")
    assert re.fullmatch(r"lectures/quiet.ipynb: ok, 2/2 runs, \d+ s",
                        gpu_check.execute_repeatedly(quiet, 2, 60, time.monotonic() + 600, require_gpu=False))
    assert gpu_check.execute_repeatedly(quiet, 3, 60, time.monotonic() + 0.1, require_gpu=False).startswith(
        "lectures/quiet.ipynb: not finished, 1/3 runs (time limit)")


def test_a_notebook_part_runs_its_notebooks_side_by_side_each_in_its_own_process(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    (tmp_path / "lectures").mkdir()
    for name in ("a", "b", "c"):
        notebook(tmp_path / "lectures", name, "x = 1")
    # a stand-in for `python gpu_check.py ... --execute NOTEBOOK`: it marks itself running until it exits, and says
    # ok only if all three saw all three running at once within $WINDOW seconds
    stand_in = executable(tmp_path / "python", textwrap.dedent(f"""\
        for last; do :; done
        name=$(basename "$last" .ipynb)
        touch "{tmp_path}/running-$name"
        trap 'rm -f "{tmp_path}/running-$name"' EXIT
        for i in $(seq $((WINDOW * 10))); do
            [ $(ls {tmp_path} | grep -c running-) = 3 ] && touch "{tmp_path}/saw-$name"
            if [ -e "{tmp_path}/saw-$name" ] && [ $(ls {tmp_path} | grep -c saw-) = 3 ]; then  # all three saw it
                echo "lectures/$name.ipynb: ok, 1/1 runs, 1 s"; exit 0
            fi
            sleep 0.1
        done
        echo "lectures/$name.ipynb: FAILED in run 1, 0/1 runs: alone"; exit 1
        """))
    settings = gpu_check.Settings(repeat=1, jobs=3)
    monkeypatch.setenv("WINDOW", "60")  # long enough for three processes to start on a loaded machine
    with open(tmp_path / "log", "w") as log:
        result = gpu_check.run_part("lectures", str(stand_in), 200, log, tmp_path, settings)
    assert result.status == "passed", result
    assert result.notebooks == [(f"lectures/{n}.ipynb", "ok, 1/1 runs, 1 s") for n in "abc"]
    assert result.note == "3 notebooks, 1 runs each, 3 at a time"
    for marker in tmp_path.glob("saw-*"):
        marker.unlink()
    settings.jobs = 2  # two at a time: never three running at once
    monkeypatch.setenv("WINDOW", "3")
    with open(tmp_path / "log", "w") as log:
        result = gpu_check.run_part("lectures", str(stand_in), 200, log, tmp_path, settings)
    assert result.status == "failed" and all(line.startswith("FAILED") for _, line in result.notebooks)
    for marker in tmp_path.glob("saw-*"):
        marker.unlink()
    settings = gpu_check.Settings(repeat=1, jobs=1, jobs_alone=3)  # one at a time, until the parts beside are done
    settings.slots = gpu_check.Slots(1)
    monkeypatch.setenv("WINDOW", "60")
    threading.Timer(1.0, settings.slots.widen, [3]).start()  # they are done a second in
    with open(tmp_path / "log", "w") as log:
        result = gpu_check.run_part("lectures", str(stand_in), 200, log, tmp_path, settings)
    assert result.status == "passed", result  # all three at once: the part's pool has a thread for each turn
    logged = (tmp_path / "log").read_text()
    assert "3 notebooks, 1 runs each, 1 at a time (3 once the parts beside them are done)" in logged



def test_a_notebooks_runs_go_side_by_side_longest_notebook_first_and_make_one_line(tmp_path, monkeypatch):
    """On the H200 lecture 07 took 94 s a run, three runs one after another most of the notebooks' 350 s."""
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    (tmp_path / "lectures").mkdir()
    for name in ("short", "long", "flaky"):
        notebook(tmp_path / "lectures", name, "x = 1")
    # a stand-in for one run: it logs which notebook started; flaky's second run fails
    stand_in = executable(tmp_path / "python", textwrap.dedent(f"""\
        for last; do :; done
        name=$(basename "$last" .ipynb)
        echo "$name" >> "{tmp_path}/started"
        echo x >> "{tmp_path}/count-$name"
        if [ "$name" = flaky ] && [ $(wc -l < "{tmp_path}/count-$name") = 2 ]; then
            echo "lectures/$name.ipynb: FAILED in run 1, 0/1 runs: a cell failed: boom"; exit 1
        fi
        echo "lectures/$name.ipynb: ok, 1/1 runs, $(wc -l < "{tmp_path}/count-$name") s"
        """))
    settings = gpu_check.Settings(repeat=3, jobs=1, notebook_seconds={"lectures/long.ipynb": 94})
    with open(tmp_path / "log", "w") as log:
        result = gpu_check.run_part("lectures", str(stand_in), 200, log, tmp_path, settings)
    assert (tmp_path / "started").read_text().split()[:3] == ["long"] * 3  # its three runs first
    assert dict(result.notebooks) == {"lectures/flaky.ipynb": "FAILED in run 2, 2/3 runs: a cell failed: boom",
                                      "lectures/long.ipynb": "ok, 3/3 runs, 3 s",
                                      "lectures/short.ipynb": "ok, 3/3 runs, 3 s"}
    assert result.status == "failed"
    record = gpu_check.Record.read("lectures/long.ipynb: ok, 3/3 runs, 94 s  \nlectures/a.ipynb: FAILED in run 1, 0/3 runs: x")
    assert record.notebook_seconds() == {"lectures/long.ipynb": 94}


def test_a_run_that_dies_before_its_line_fails_and_one_the_time_left_would_cut_is_not_started(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    (tmp_path / "lectures").mkdir()
    for name in ("dies", "long"):
        notebook(tmp_path / "lectures", name, "x = 1")
    stand_in = executable(tmp_path / "python", "echo Traceback: killed; exit 137\n")  # no notebook line
    settings = gpu_check.Settings(repeat=1, jobs=2, notebook_seconds={"lectures/long.ipynb": 500})
    with open(tmp_path / "log", "w") as log:
        result = gpu_check.run_part("lectures", str(stand_in), 200, log, tmp_path, settings)
    assert dict(result.notebooks) == {
        "lectures/dies.ipynb": "FAILED in run 1, 0/1 runs: its process exited with status 137",
        "lectures/long.ipynb": "not finished, 0/1 runs (time limit)"}  # 500 s last time, 200 s left
    assert result.status == "failed"

def test_a_notebook_is_not_started_without_time_for_it(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    (tmp_path / "lectures").mkdir()
    notebook(tmp_path / "lectures", "a", "x = 1")
    with open(tmp_path / "log", "w") as log:
        result = gpu_check.run_part("lectures", sys.executable, gpu_check.NOTEBOOK_AT_LEAST - 1, log, tmp_path,
                                    gpu_check.Settings())
    assert (result.status, result.notebooks) == ("not run", [("lectures/a.ipynb", "not finished, 0/3 runs (time limit)")])


def test_a_part_expected_to_outlast_the_time_left_is_left_to_the_next_command(tmp_path):
    settings = gpu_check.Settings(expected={"differential": 400, "grading": 100})
    results = gpu_check.check(["lectures", "differential", "grading"], sys.executable, tmp_path / "out", 300, settings,
                              runner=fake_runner)
    assert [(r.part, r.status) for r in results] == [("lectures", "passed"), ("differential", "not run"),
                                                      ("grading", "passed")]
    assert re.match(r"expected 400 s, \d+ s left: ", results[1].note) and "`--part differential`" in results[1].note
    record = gpu_check.Record.read("| matmul | partial | 412 |\n| lectures | passed | 900 |\n| tuning | not run | 0 |\n"
                                   "| simulator_fuzz | failed | 570 |\n| grading | passed | 80 |")
    assert record.durations() == {"matmul": 412, "grading": 80}  # a part stopped at the limit may start again


def test_each_benchmark_gets_a_share_of_the_time_left_in_proportion_to_its_last_run():
    assert gpu_check.shares(["matmul", "conv"], 300, {"matmul": 200, "conv": 100}) == pytest.approx(
        {"matmul": 200, "conv": 100})
    assert gpu_check.shares(["matmul", "conv", "tuning"], 300, {"matmul": 200, "conv": 100}) == pytest.approx(
        {"matmul": 400 / 3, "conv": 200 / 3, "tuning": 100})  # never run: the mean of the others (150)
    assert gpu_check.shares(["matmul", "conv"], 300, {}) == {"matmul": 150, "conv": 150}


def test_the_parts_that_share_the_gpu_run_side_by_side_and_the_benchmarks_alone_after_them(tmp_path):
    spans, lock = {}, __import__("threading").Lock()

    def runner(part, python, seconds_left, log, out, settings, share=None):
        began = time.monotonic()
        time.sleep(0.3)
        with lock:
            spans[part] = (began, time.monotonic(), share)
        return gpu_check.Result(part, "passed", 0.3)

    settings = gpu_check.Settings(expected={"matmul": 300, "conv": 100})
    parts = ["lectures", "differential", "grading", "matmul", "conv"]
    results = gpu_check.check(parts, sys.executable, tmp_path / "out", 500, settings, runner=runner)
    assert [r.part for r in results] == parts
    shared, timed = parts[:3], parts[3:]
    assert max(spans[p][0] for p in shared) < min(spans[p][1] for p in shared)  # all three at once
    assert min(spans[p][0] for p in timed) >= max(spans[p][1] for p in shared)  # the benchmarks after them
    assert spans["conv"][0] >= spans["matmul"][1]  # one at a time
    assert all(spans[p][2] is None for p in shared)
    assert 370 < spans["matmul"][2] < 375 and 495 < spans["conv"][2] < 500  # 3:1 of what was left; the last, the rest


def test_a_benchmark_is_given_its_share_as_seconds_and_a_section_with_rows_left_out_is_partial(tmp_path, monkeypatch):
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    (folder / "matmul.py").write_text("import sys\nprint('arguments:', ' '.join(sys.argv[1:]))\n"
                                      "print('Not measured within this run' + \"'s time budget (85 s): 512^3.\")\n")
    monkeypatch.setattr(gpu_check, "BENCHMARKS", folder)
    with open(tmp_path / "log", "w") as log:
        result = gpu_check.run_part("matmul", sys.executable, 500, log, tmp_path, gpu_check.Settings(), share=100)
    assert "arguments: --seconds 85\n" in (tmp_path / "log").read_text()  # the share less its start-up
    assert result.status == "partial" and result.note.startswith("rows left out for time (100 s)")
    summary = gpu_check.summary([result, gpu_check.Result("conv", "passed", 3)])
    assert summary.endswith("gpu-check: 2 of 2 parts passed (1 partial: rows left out for time).")



def test_a_benchmark_cut_at_the_limit_after_recording_its_section_is_partial_and_one_cut_before_fails(
        tmp_path, monkeypatch):
    """On the H200 (2026-11-29) compilers.py wrote its section, then outlived the command's limit while
    PyTorch's compile workers shut down: what it recorded counts."""
    folder = tmp_path / "benchmarks"
    folder.mkdir()
    monkeypatch.setattr(gpu_check, "BENCHMARKS", folder)
    results = {}
    for name, before_sleeping in (("compilers", "print('\\nwritten to RESULTS.md', flush=True)"), ("conv", "")):
        (folder / f"{name}.py").write_text(f"import time\n{before_sleeping}\ntime.sleep(30)\n")
        with open(tmp_path / "log", "w") as log:
            results[name] = gpu_check.run_part(name, sys.executable, 3, log, tmp_path, gpu_check.Settings(), share=3)
    assert results["compilers"].status == "partial" and "recorded its section" in results["compilers"].note
    assert results["compilers"].seconds == 3  # the share it had, not the limit's seconds: the next run's weight
    assert results["conv"].status == "failed" and "stopped at the time limit" in results["conv"].note

def test_resume_measures_a_partial_benchmark_again_only_with_more_time_than_it_had(tmp_path):
    record = gpu_check.Record.read("- Tree: abc\n| matmul | partial | 200 |\n| conv | partial | 50 |\n| fusion | passed | 9 |")
    assert record.partial("abc") == {"matmul": 200, "conv": 50} and record.partial("another tree") == {}
    assert record.passed("abc")[0] == {"fusion"}
    settings = gpu_check.Settings(expected=record.durations(), partial=record.partial("abc"))
    results = gpu_check.check(["matmul", "conv"], sys.executable, tmp_path / "out", 250, settings, runner=fake_runner)
    assert [(r.part, r.status) for r in results] == [("matmul", "not run"), ("conv", "passed")]
    assert results[0].note.startswith("kept its partial run of 200 s: ")
    # a section that keeps earlier rows (tuning.py's): any share measures what it lacks
    settings = gpu_check.Settings(expected={"tuning": 200}, partial={"tuning": 200})
    results = gpu_check.check(["tuning"], sys.executable, tmp_path / "out", 100, settings, runner=fake_runner)
    assert [(r.part, r.status) for r in results] == [("tuning", "passed")]


def fake_runner(part, python, seconds_left, log, out, settings, share=None):
    log.write(f"ran {part}\n")
    if part == "lectures":
        lines = [(p.relative_to(ROOT).as_posix(), "ok, 3/3 runs, 9 s") for p in gpu_check.notebooks("lectures")]
        return gpu_check.Result(part, "passed", 30.2, "", lines)
    return gpu_check.Result(part, "passed" if part != "matmul" else "failed", 12.4,
                            "" if part != "matmul" else "exit status 1: see gpu-check.log")



def test_time_the_benchmarks_leave_over_runs_the_partial_ones_again_with_more_of_it(tmp_path):
    given = []

    def runner(part, python, seconds_left, log, out, settings, share=None):  # matmul partial, conv quick
        given.append((part, round(share)))
        status = "partial" if part == "matmul" and share < 200 else "passed"
        return gpu_check.Result(part, status, share if part == "matmul" else 5.0)

    settings = gpu_check.Settings(expected={"matmul": 100, "conv": 100})
    results = gpu_check.check(["matmul", "conv"], sys.executable, tmp_path / "out", 400, settings, runner=runner)
    assert [part for part, _ in given] == ["matmul", "conv", "matmul"]  # conv's unused share went to matmul
    assert given[2][1] > 1.5 * given[0][1] and [r.status for r in results] == ["passed", "passed"]

def test_resume_goes_on_from_the_results_the_last_command_left_on_the_machine(tmp_path):
    """The device tool copies the working tree again for each command, RESULTS.md as it is here: a second command
    sent before the first's RESULTS.md was copied back (2026-11-30: every check ran again) resumes from the copy the
    first left on the warm machine, and only where that copy records more of this tree as passed."""
    results_file, kept = tmp_path / "RESULTS.md", tmp_path / "machine" / "RESULTS.md"
    as_here = (ROOT / "benchmarks" / "RESULTS.md").read_text()
    results_file.write_text(as_here)
    tree = gpu_check.tree_fingerprint()
    assert not gpu_check.resume_from_kept(results_file, kept, tree)  # nothing kept yet
    gpu_check.check(["lectures"], sys.executable, tmp_path / "out", 570, gpu_check.Settings(), runner=fake_runner,
                    record_as=(gpu_check.Record(tree), "NVIDIA H200 (driver 580, CUDA 13.0)", "Python 3.12"),
                    results_file=results_file, kept=kept)
    assert kept.read_text() == results_file.read_text() == (tmp_path / "out" / "RESULTS.md").read_text()
    results_file.write_text(as_here)  # the next command's working tree: not copied back
    assert not gpu_check.resume_from_kept(results_file, kept, "another tree")
    assert gpu_check.resume_from_kept(results_file, kept, tree)
    assert gpu_check.Record.read(recorded("gpu_check", results_file)).passed(tree)[0] == {"lectures"}
    assert not gpu_check.resume_from_kept(results_file, kept, tree)  # copied back: nothing more to take


def test_a_part_that_raises_fails_alone_and_what_ran_is_copied_to_out_at_once(tmp_path):
    copies = []

    def runner(part, python, seconds_left, log, out, settings, share=None):
        copies.append((out / "RESULTS.md").exists())
        if part == "matmul":
            raise UnicodeDecodeError("utf-8", b"\xff", 0, 1, "invalid start byte")
        return gpu_check.Result(part, "passed", 1.0)

    results = gpu_check.check(["differential", "matmul", "conv"], sys.executable, tmp_path / "out", 500,
                              gpu_check.Settings(), runner=runner)
    assert [(r.part, r.status) for r in results] == [("differential", "passed"), ("matmul", "failed"), ("conv", "passed")]
    assert results[1].note.startswith("gpu-check: UnicodeDecodeError:")
    assert copies == [False, True, True]  # RESULTS.md in out after the first part already


def test_a_childs_undecodable_bytes_are_replaced_not_raised():
    code, output = gpu_check.run_command([sys.executable, "-c", "import sys; sys.stdout.buffer.write(b'ok \\xff')"],
                                         dict(os.environ), 30)
    assert code == 0 and output == "ok \ufffd"


def test_the_run_stops_starting_parts_at_its_limit_and_writes_the_log_results_and_summary_to_out(tmp_path):
    settings = gpu_check.Settings()
    results = gpu_check.check(["lectures", "matmul", "differential"], sys.executable, tmp_path / "out", 5, settings,
                              runner=fake_runner)
    assert [r.status for r in results] == ["not run"] * 3  # under 10 s left: nothing is started
    results = gpu_check.check(["lectures", "matmul", "differential"], sys.executable, tmp_path / "out", 570, settings,
                              runner=fake_runner)
    assert [r.status for r in results] == ["passed", "failed", "passed"]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["RESULTS.md", "gpu-check.log", "summary.md"]
    log = (tmp_path / "out" / "gpu-check.log").read_text()
    assert log.index("ran matmul") > max(log.index("ran lectures"), log.index("ran differential"))
    assert "Python 3." in log
    assert (tmp_path / "out" / "RESULTS.md").read_text() == (ROOT / "benchmarks" / "RESULTS.md").read_text()
    assert (tmp_path / "out" / "summary.md").read_text().splitlines() == [
        "| part | result | seconds | note |", "|---|---|---:|---|", "| lectures | passed | 30 |  |",
        "| matmul | failed | 12 | exit status 1: see gpu-check.log |", "| differential | passed | 12 |  |", "",
        "gpu-check: 2 of 3 parts passed."]


def test_the_gpu_check_section_records_parts_and_notebooks_and_resume_skips_what_passed(tmp_path):
    results_file = tmp_path / "RESULTS.md"
    results_file.write_text((ROOT / "benchmarks" / "RESULTS.md").read_text())
    tree = gpu_check.tree_fingerprint()
    settings = gpu_check.Settings()
    gpu_check.check(["lectures", "matmul"], sys.executable, tmp_path / "out", 570, settings, runner=fake_runner,
                    record_as=(gpu_check.Record(tree), "NVIDIA H100 80GB HBM3 (driver 580, CUDA 13.0)", "Python 3.12"),
                    results_file=results_file)
    section = recorded("gpu_check", results_file)
    assert section.startswith("`python benchmarks/gpu_check.py` on NVIDIA H100 80GB HBM3 (driver 580, CUDA 13.0)")
    assert "| lectures | passed | 30 |" in section and "| matmul | failed | 12 |" in section
    assert "lectures/03_matmul.ipynb: ok, 3/3 runs, 9 s" in section
    assert measured_on(section).startswith("on NVIDIA H100 80GB HBM3, 20")  # what lectures show
    record = gpu_check.Record.read(section)
    parts, notebooks_done = record.passed(tree)
    assert parts == {"lectures"} and "lectures/01_threads_blocks_grids.ipynb" in notebooks_done
    assert record.passed("another tree") == (set(), set())
    # a later command that runs only the differential part keeps what the earlier one recorded
    gpu_check.check(["differential"], sys.executable, tmp_path / "out", 570, settings, runner=fake_runner,
                    record_as=(record, "NVIDIA H100 80GB HBM3 (driver 580, CUDA 13.0)", "Python 3.12"),
                    results_file=results_file)
    section = recorded("gpu_check", results_file)
    assert all(f"| {p} |" in section for p in ("lectures", "matmul", "differential"))
    assert "lectures/03_matmul.ipynb: ok, 3/3 runs, 9 s  \n" in section  # read back and written again as it was


def test_a_benchmark_that_finds_no_gpu_fails_its_part(tmp_path):
    if BACKEND.on_gpu:
        pytest.skip("a GPU is usable here: the benchmark would measure")
    with open(tmp_path / "log", "w") as log:
        result = gpu_check.run_part("bandwidth", sys.executable, 120, log, tmp_path, gpu_check.Settings(quick=True))
    assert (result.status, result.note) == ("failed", "found no usable GPU: see gpu-check.log")
    assert "bandwidth.py --quick\n" in (tmp_path / "log").read_text()
    assert "needs a CUDA GPU" in (tmp_path / "log").read_text()


def test_a_whole_run_on_a_machine_whose_gpu_is_not_usable_fails_its_parts_and_still_reports(tmp_path):
    """nvidia-smi lists a GPU but numba finds none: GPUCOURSE_DEVICE=gpu stops every part, never the simulator."""
    if BACKEND.on_gpu:
        pytest.skip("a GPU is usable here: the parts would run")
    tools = tmp_path / "bin"
    tools.mkdir()
    executable(tools / "nvidia-smi", "echo 'GPU 0: Stand-in (UUID: GPU-0)'\n")
    out = tmp_path / "out"
    results_file = tmp_path / "RESULTS.md"
    run = run_script("--use-this-python", "--part", "differential", "--out", str(out), "--results", str(results_file),
                     env={**os.environ, "PATH": f"{tools}{os.pathsep}{os.environ['PATH']}"})
    assert run.returncode == 1, run.stderr
    assert run.stdout.startswith("gpu-check: differential failed (")
    assert "\n| differential | failed | " in run.stdout and run.stdout.endswith("\n\ngpu-check: 0 of 1 parts passed.\n")
    assert "GPUCOURSE_DEVICE=gpu but no usable CUDA GPU found" in (out / "gpu-check.log").read_text()
    assert sorted(p.name for p in out.iterdir()) == ["RESULTS.md", "gpu-check.log", "summary.md"]


def test_the_notebooks_take_more_turns_once_the_parts_beside_them_are_done(tmp_path):
    """On the H200 the differential test and the fuzzing were done after 145-173 s of the notebooks' 350: the
    notebooks then had the CPUs to themselves, 5 at a time."""
    lock, holding, seen = threading.Lock(), [0], []

    def runner(part, python, seconds_left, log, out, settings, share=None):
        if part == "differential":
            time.sleep(0.6)
            with lock:
                seen.append(("differential done", time.monotonic()))
            return gpu_check.Result(part, "passed", 0.6)

        def one_run(_):  # a notebook's run: it takes a turn, as run_part's do
            with settings.slots:
                with lock:
                    holding[0] += 1
                    seen.append((holding[0], time.monotonic()))
                time.sleep(0.25)
                with lock:
                    holding[0] -= 1

        with ThreadPoolExecutor(8) as pool:
            list(pool.map(one_run, range(8)))
        return gpu_check.Result(part, "passed", 1.0)

    settings = gpu_check.Settings(jobs=1, jobs_alone=3)
    gpu_check.check(["lectures", "differential"], sys.executable, tmp_path / "out", 500, settings, runner=runner)
    done = next(at for what, at in seen if what == "differential done")
    assert max(n for n, at in seen if n != "differential done" and at < done) == 1  # one at a time beside it
    assert max(n for n, at in seen if n != "differential done" and at > done) == 3  # then three


def test_turns_widen_at_once_where_nothing_runs_beside_the_notebooks_or_what_did_was_not_run(tmp_path):
    capacity = {}

    def runner(part, python, seconds_left, log, out, settings, share=None):
        capacity[part] = settings.slots.capacity
        return gpu_check.Result(part, "passed", 0.1)

    settings = gpu_check.Settings(jobs=1, jobs_alone=3)
    gpu_check.check(["lectures"], sys.executable, tmp_path / "out", 500, settings, runner=runner)
    assert capacity == {"lectures": 3}  # widened before the notebooks start: nothing beside them
    settings = gpu_check.Settings(jobs=1, jobs_alone=3, expected={"differential": 10**6})  # no time for it
    results = gpu_check.check(["lectures", "differential"], sys.executable, tmp_path / "out", 500, settings,
                              runner=runner)
    assert results[1].status == "not run" and settings.slots.capacity == 3
    slots = gpu_check.Slots(2)
    slots.widen(1)  # never narrower
    assert slots.capacity == 2


def test_the_log_and_the_summary_name_the_notebooks_slowest_cells(tmp_path, monkeypatch):
    monkeypatch.setattr(gpu_check, "ROOT", tmp_path)
    (tmp_path / "lectures").mkdir()
    slow = notebook(tmp_path / "lectures", "slow", "x = 1", "import time\ntime.sleep(1.2)  # the slow one", "y = 2")
    timed = []
    line = gpu_check.execute_repeatedly(slow, 2, 60, time.monotonic() + 600, require_gpu=False, timed=timed)
    assert line.startswith("lectures/slow.ipynb: ok, 2/2 runs")
    assert len(timed) == 6 and {t.index for t in timed} == {0, 1, 2}
    logged = gpu_check.slowest_line("lectures/slow.ipynb", timed)
    assert re.match(r"slowest cells of lectures/slow.ipynb: cell 1 \(1\.\d s\): `import time`, cell ", logged)
    # two runs' lines of one notebook, and another notebook's: each cell once, at its longest run, slowest first
    output = "\n".join([logged, "slowest cells of lectures/slow.ipynb: cell 1 (3.5 s): `import time`",
                        "slowest cells of solutions/a/a.ipynb: cell 4 (2.0 s): `run(x)`"])
    cells = gpu_check.slowest_cells(output)
    assert [(s, n, i) for s, n, i, _ in cells[:2]] == [(3.5, "lectures/slow.ipynb", 1), (2.0, "solutions/a/a.ipynb", 4)]
    assert len(cells) == 4
    table = gpu_check.summary([gpu_check.Result("lectures", "passed", 9, slowest=cells)])
    assert "| 3.5 | lectures/slow.ipynb | 1 | `import time` |" in table
    assert "slowest cells" not in gpu_check.summary([gpu_check.Result("conv", "passed", 3)])
