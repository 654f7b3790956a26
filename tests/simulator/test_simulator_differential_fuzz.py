"""The CPU side of benchmarks/simulator_fuzz.py: random kernels are valid (no fault on the simulator), compile
for a GPU (the launch's PTX check), are reproducible from their seed, and the comparison keeps to its bounds."""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, load_benchmark

sys.path.insert(0, str(ROOT / "benchmarks"))


@pytest.fixture(scope="module")
def fuzz():
    module, unload = load_benchmark("simulator_fuzz", "simulator_fuzz_under_test")
    yield module
    unload()


def test_random_kernels_run_on_the_simulator_and_compile(fuzz):
    lines = []
    count, disagreements = fuzz.run(12, seed=2026, on_gpu=False, batch=12, report=lambda *a, **k: lines.append(a))
    assert count == 12 and disagreements == [] and lines == [("12 kernels, 0 disagreements",)]


def test_shards_split_the_kernels_between_processes_each_kernel_once(fuzz):
    counts = [fuzz.run(7, seed=3, on_gpu=False, shard=(k, 3), report=lambda *a, **k: None)[0] for k in range(3)]
    assert counts == [3, 2, 2]
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "simulator_fuzz.py"), "--kernels", "6",
                          "--cpu-only", "--workers", "2"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "lib")})
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert sorted(lines[:2]) == ["shard 1 of 2: 3 kernels, 0 disagreements", "shard 2 of 2: 3 kernels, 0 disagreements"]
    assert lines[2:] == ["6 kernels in 2 processes, 0 disagreements"]


def test_generation_is_reproducible_and_covers_the_grammar(fuzz):
    def kernels(seed):
        generator = fuzz.Generator(seed)
        return [generator.kernel(n) for n in range(60)]

    first = kernels(5)
    assert [k.source for k in first] == [k.source for k in kernels(5)] != [k.source for k in kernels(6)]
    text = "\n".join(k.source for k in first)
    for feature in ("cuda.syncthreads()", "_sync(0xFFFFFFFF", "cuda.atomic.", "return", "math.", "while ",
                    "for k in range(i % 5)", "//", "<<", " if ", "min(", "max(", "pow(", "divmod(", "round("):
        assert feature in text, feature
    dtypes = {dtype for kernel in first for dtype in kernel.dtypes}
    assert dtypes == set(fuzz.DTYPES)


def test_comparison_bounds(fuzz):
    kernel = fuzz.Generator(1).kernel(0)
    kernel.math_dtype = "float32"
    n = 4
    exact = {"out": np.float64(np.float32([0.5, 1.0, 2.0, np.nan])), "iout": np.arange(n), "tout": np.ones(n),
             "total": np.zeros(1, np.int64)}
    near = {**exact, "out": exact["out"] * (1 + 3 * np.finfo(np.float32).eps)}
    assert fuzz.disagreement(kernel, exact, near) is None  # within 4 ulp of a math function's float32 result
    far = {**exact, "out": exact["out"] * (1 + 8 * np.finfo(np.float32).eps)}
    assert "out differs at [0, 1, 2]" in fuzz.disagreement(kernel, exact, far)
    assert "tout differs" in fuzz.disagreement(kernel, exact, {**exact, "tout": np.nextafter(np.ones(n), 2)})
    assert "iout differs at [3]" in fuzz.disagreement(kernel, exact, {**exact, "iout": np.array([0, 1, 2, 4])})
    kernel.math_dtype = None
    assert "out differs" in fuzz.disagreement(kernel, exact, near)  # no math: bit for bit
