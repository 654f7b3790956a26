"""Every GPU benchmark, on a machine without a GPU: one line saying so, exit 0, results untouched."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT
from gpucourse.course import results

sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402

GPU_BENCHMARKS = gpu_check.gpu_benchmarks()  # every GPU benchmark, found as gpu-check finds its parts
# the other ways of being without a GPU than a laptop's, and the arguments each runs with (a full and a quick run)
OTHER_WAYS = {"GPUCOURSE_DEVICE=cpu": ({"GPUCOURSE_DEVICE": "cpu"}, ["--quick"]),
              "NUMBA_ENABLE_CUDASIM=1": ({"NUMBA_ENABLE_CUDASIM": "1"}, [])}
# ``python -c ONE_PROCESS FOLDER ARGUMENTS NAME...``: each benchmark as ``python FOLDER/NAME.py *ARGUMENTS`` would
# run it (ARGUMENTS: a JSON list), one after the other in one process (numba and the course imported once); prints
# {name: [exit status, what it printed]} as JSON.
ONE_PROCESS = """
import contextlib, io, json, runpy, sys, traceback
folder, arguments, names, results = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3:], {}
for name in names:
    path, printed = f"{folder}/{name}.py", io.StringIO()
    sys.argv[:] = [path, *arguments]
    try:
        with contextlib.redirect_stdout(printed):
            runpy.run_path(path, run_name="__main__")
        status = 0
    except SystemExit as exit:
        status = exit.code if isinstance(exit.code, int) else 1
    except Exception:
        status = 1
        printed.write(traceback.format_exc())
    results[name] = [status, printed.getvalue()]
print(json.dumps(results))
"""


def gpu_usable() -> bool:
    from numba import cuda

    try:
        return cuda.is_available()
    except Exception:
        return False


def without_gpu_environment(environment: dict) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("GPUCOURSE_DEVICE", "NUMBA_ENABLE_CUDASIM")}
    return {**env, **environment}


def results_file():
    return results.RESULTS.read_bytes(), results.RESULTS.stat().st_mtime_ns


def says_it_needs_a_gpu(printed: str) -> None:
    lines = printed.strip().splitlines()
    assert len(lines) == 1 and "needs a CUDA GPU" in lines[0], printed


@pytest.mark.parametrize("name", GPU_BENCHMARKS)
def test_without_a_gpu_it_says_so_and_leaves_the_results_alone(name):
    """On a laptop: the script run as a student runs it."""
    if gpu_usable():
        pytest.skip("a GPU is usable here: the script would measure")
    before = results_file()
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{name}.py")],
                         env=without_gpu_environment({}), capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    says_it_needs_a_gpu(run.stdout)
    assert results_file() == before


@pytest.fixture(scope="module")
def other_ways():
    """{way: (what the results file was before, after, {name: [status, printed]})}: every benchmark run each other
    way in one process per way."""
    runs = {}
    for way, (environment, arguments) in OTHER_WAYS.items():
        before = results_file()
        run = subprocess.run([sys.executable, "-c", ONE_PROCESS, str(ROOT / "benchmarks"), json.dumps(arguments),
                              *GPU_BENCHMARKS], env=without_gpu_environment(environment),
                             capture_output=True, text=True, timeout=600)
        assert run.returncode == 0, run.stderr
        runs[way] = before, results_file(), json.loads(run.stdout.strip().splitlines()[-1])
    return runs


@pytest.mark.parametrize("way", OTHER_WAYS)
@pytest.mark.parametrize("name", GPU_BENCHMARKS)
def test_any_other_way_without_a_gpu_it_says_so_and_leaves_the_results_alone(other_ways, name, way):
    before, after, runs = other_ways[way]
    status, printed = runs[name]
    assert status == 0, printed
    says_it_needs_a_gpu(printed)
    assert after == before


def test_told_to_use_a_gpu_that_is_not_there_the_fuzzing_says_so_in_one_line():
    """What gpu-check sets (GPUCOURSE_DEVICE=gpu) on a machine whose GPU is not usable: one line, no traceback."""
    if gpu_usable():
        pytest.skip("a GPU is usable here: the script would run")
    env = {**os.environ, "GPUCOURSE_DEVICE": "gpu"}
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "simulator_fuzz.py"), "--quick"], env=env,
                         capture_output=True, text=True, timeout=300)
    assert run.returncode == 0 and run.stderr == "", run.stderr
    [line] = run.stdout.strip().splitlines()
    assert "needs a CUDA GPU" in line and "GPUCOURSE_DEVICE=gpu" in line
