"""Every GPU benchmark, on a machine without a GPU: one line saying so, exit 0, results untouched."""

import os
import subprocess
import sys

import pytest

from conftest import ROOT
from gpucourse.course import results

GPU_BENCHMARKS = ["bandwidth", "matmul", "conv", "fusion", "precision", "tuning"]
NO_GPU = {"auto": {}, "GPUCOURSE_DEVICE=cpu": {"GPUCOURSE_DEVICE": "cpu"},
          "NUMBA_ENABLE_CUDASIM=1": {"NUMBA_ENABLE_CUDASIM": "1"}}


def gpu_usable() -> bool:
    from numba import cuda

    try:
        return cuda.is_available()
    except Exception:
        return False


@pytest.mark.parametrize("environment", NO_GPU.values(), ids=NO_GPU.keys())
@pytest.mark.parametrize("name", GPU_BENCHMARKS)
def test_without_a_gpu_it_says_so_and_leaves_the_results_alone(name, environment):
    if not environment and gpu_usable():
        pytest.skip("a GPU is usable here: the script would measure")
    before = results.RESULTS.read_bytes(), results.RESULTS.stat().st_mtime_ns
    env = {k: v for k, v in os.environ.items() if k not in ("GPUCOURSE_DEVICE", "NUMBA_ENABLE_CUDASIM")}
    for arguments in (["--quick"], []):
        run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / f"{name}.py"), *arguments],
                             env={**env, **environment}, capture_output=True, text=True, timeout=300)
        assert run.returncode == 0, run.stderr
        lines = run.stdout.strip().splitlines()
        assert len(lines) == 1 and "needs a CUDA GPU" in lines[0], run.stdout
    assert (results.RESULTS.read_bytes(), results.RESULTS.stat().st_mtime_ns) == before
