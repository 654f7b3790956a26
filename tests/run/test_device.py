"""Device selection at import, in fresh interpreters, and the doctor's report."""

import os
import subprocess
import sys
import tempfile
import textwrap

import pytest

import gpucourse

no_gpu = pytest.mark.skipif(gpucourse.BACKEND.on_gpu, reason="needs a machine without a GPU")

SMALL_LAUNCH = """
import numpy as np
from numba import cuda
@cuda.jit
def twice(out, a):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = 2 * a[i]
a = np.arange(5, dtype=np.float32)
out = np.zeros_like(a)
twice[1, 8](out, a)
assert (out == 2 * a).all(), out
"""


def run_python(code: str, **env) -> subprocess.CompletedProcess:
    """Run ``code`` as a script file (the simulator reads kernels' source, which ``python -c`` lacks)."""
    environment = {k: v for k, v in os.environ.items() if k not in ("NUMBA_ENABLE_CUDASIM", "GPUCOURSE_DEVICE")}
    environment.update(env)
    with tempfile.TemporaryDirectory() as folder:
        script = os.path.join(folder, "script.py")
        with open(script, "w") as file:
            file.write(textwrap.dedent(code))
        return subprocess.run(
            [sys.executable, script], capture_output=True, text=True, env=environment, timeout=120,
        )


def test_forced_cpu_runs_kernels_on_the_simulator_silently():
    result = run_python("import gpucourse; gpucourse.show_device()" + SMALL_LAUNCH, GPUCOURSE_DEVICE="cpu")
    assert result.returncode == 0, result.stderr
    assert "Kernels run on the CPU simulator (GPUCOURSE_DEVICE=cpu)" in result.stdout
    assert result.stderr == ""


@no_gpu
def test_auto_without_gpu_says_so():
    result = run_python("import gpucourse; gpucourse.show_device()" + SMALL_LAUNCH)
    assert result.returncode == 0, result.stderr
    assert "CPU simulator (no usable CUDA GPU found)" in result.stdout


def test_numba_imported_first_is_fine():
    result = run_python("from numba import cuda\nimport gpucourse" + SMALL_LAUNCH, GPUCOURSE_DEVICE="cpu")
    assert result.returncode == 0, result.stderr


@no_gpu
def test_forcing_a_missing_gpu_explains_the_way_out():
    result = run_python("import gpucourse", GPUCOURSE_DEVICE="gpu")
    assert result.returncode != 0
    assert "GPUCOURSE_DEVICE=gpu but" in result.stderr and "gpucourse.doctor()" in result.stderr


def test_unknown_device_choice_warns_and_falls_back():
    result = run_python("import gpucourse", GPUCOURSE_DEVICE="tpu")
    assert result.returncode == 0
    assert "'tpu' is not one of auto, gpu, cpu" in result.stderr


def test_numba_simulator_requested_by_environment_is_respected():
    result = run_python("import gpucourse; print(gpucourse.BACKEND.kind)" + SMALL_LAUNCH, NUMBA_ENABLE_CUDASIM="1")
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "numba-simulator"


def test_numba_simulator_set_too_late_says_what_to_do():
    code = "import os\nfrom numba import cuda\nos.environ['NUMBA_ENABLE_CUDASIM'] = '1'\nimport gpucourse"
    result = run_python(code)
    assert result.returncode != 0
    assert "Restart the kernel" in result.stderr


def test_doctor_reports_versions_backend_and_fixes(capsys):
    gpucourse.doctor()
    report = capsys.readouterr().out
    for needle in ("Backend: Kernels run on", "numba 0.68", "numba-cuda 0.30", "Python 3."):
        assert needle in report
    if not gpucourse.BACKEND.on_gpu:
        assert "CUDA_ERROR_UNSUPPORTED_PTX_VERSION" in report and "NVVM" in report


def test_numbas_performance_warnings_stay_quiet_after_a_config_reload():
    """numba-cuda warns with its own class, and re-reads its switches from the environment after a NUMBA_ change:
    a GPU's small teaching grids would write to stderr, which fails a notebook cell."""
    done = run_python("""
        import os, warnings
        import gpucourse
        from numba.cuda.core import config
        from numba.cuda.core.errors import NumbaPerformanceWarning
        os.environ["NUMBA_OPT"] = "2"
        config.reload_config()
        assert config.CUDA_LOW_OCCUPANCY_WARNINGS == 0 and config.CUDA_WARN_ON_IMPLICIT_COPY == 0
        warnings.warn(NumbaPerformanceWarning("Grid size 1 will likely result in GPU under-utilization"))
    """, GPUCOURSE_DEVICE="cpu")
    assert done.returncode == 0 and done.stderr == "", done.stderr
