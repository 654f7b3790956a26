"""Every GPU benchmark, on a machine without a GPU: one line saying so, exit 0, results untouched."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from gpucourse.course import results

sys.path.insert(0, str(ROOT / "benchmarks"))
import gpu_check  # noqa: E402

GPU_BENCHMARKS = gpu_check.gpu_benchmarks()  # every GPU benchmark, found as gpu-check finds its parts
# each way of being without a GPU, and the arguments it runs with (both a full and a quick run are covered)
NO_GPU = {"auto": ({}, []), "GPUCOURSE_DEVICE=cpu": ({"GPUCOURSE_DEVICE": "cpu"}, ["--quick"]),
          "NUMBA_ENABLE_CUDASIM=1": ({"NUMBA_ENABLE_CUDASIM": "1"}, [])}


def gpu_usable() -> bool:
    from numba import cuda

    try:
        return cuda.is_available()
    except Exception:
        return False


@pytest.mark.parametrize("environment, arguments", NO_GPU.values(), ids=NO_GPU.keys())
@pytest.mark.parametrize("name", GPU_BENCHMARKS)
def test_without_a_gpu_it_says_so_and_leaves_the_results_alone(name, environment, arguments):
    if not environment and gpu_usable():
        pytest.skip("a GPU is usable here: the script would measure")
    before = results.RESULTS.read_bytes(), results.RESULTS.stat().st_mtime_ns
    env = {k: v for k, v in os.environ.items() if k not in ("GPUCOURSE_DEVICE", "NUMBA_ENABLE_CUDASIM")}
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *arguments],
                         env={**env, **environment}, capture_output=True, text=True, timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1 and "needs a CUDA GPU" in lines[0], run.stdout
    assert (results.RESULTS.read_bytes(), results.RESULTS.stat().st_mtime_ns) == before


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
