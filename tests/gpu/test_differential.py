"""The differential test (simulator vs GPU) and its harness.

On a GPU machine `test_the_simulator_agrees_with_the_gpu` runs every registered reference kernel and
every solution kernel on both; elsewhere it is skipped with one line. The harness is tested on the CPU:
the simulator against itself agrees, and against a deliberately perturbed copy of itself it does not.
"""

import json
import math
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT
import gpucourse
from gpucourse import BACKEND
from gpucourse.grading import differential, differential_cases
from gpucourse.grading.differential import (REGISTRY, Case, compare, compare_all, kernel_case, register, report,
                                            simulator, solution_subjects, ulps_apart)


def perturbed(ulps: int, source=simulator):
    """The simulator (or ``source``), with one element of every float output moved by ``ulps`` ulps: a simulator bug."""
    def backend(run):
        outputs = source(run)
        for value in outputs.values():
            if value.dtype.kind == "f" and np.isfinite(value).any():
                flat = value.reshape(-1)
                k = int(np.flatnonzero(np.isfinite(flat))[-1])
                flat[k] += ulps * np.spacing(np.abs(value[np.isfinite(value)]).max())
        return outputs
    return backend


def test_ulps_apart_is_zero_only_for_equal_outputs_and_counts_ulps_of_the_largest_magnitude():
    a = np.array([1.0, -2.0, np.nan, 0.0], np.float32)
    assert ulps_apart(a, a.copy()) == 0
    assert ulps_apart(a, np.array([1.0, -2.0, np.nan, -0.0], np.float32)) == 0  # -0 == +0
    b = a.copy()
    b[1] = np.nextafter(np.float32(-2), np.float32(-3))
    assert ulps_apart(a, b) == 1
    b[0] = np.float32(1) + 3 * np.spacing(np.float32(2))
    assert ulps_apart(a, b) == 3  # in ulps of 2, the largest magnitude
    assert math.isinf(ulps_apart(a, np.array([1.0, -2.0, 5.0, 0.0], np.float32)))  # a NaN gone
    assert math.isinf(ulps_apart(a, a[:3]))
    assert math.isinf(ulps_apart(a, a.astype(np.float64)))
    assert ulps_apart(np.arange(5), np.arange(5)) == 0
    assert math.isinf(ulps_apart(np.arange(5), np.arange(5) + (np.arange(5) == 4)))  # integers: bit for bit


def test_a_bound_needs_a_reason_and_a_name_is_registered_once():
    with pytest.raises(ValueError, match="needs a reason"):
        register("test-only kernel", lambda rng: [], ulps=2)
    with pytest.raises(ValueError, match="already registered"):
        register(next(iter(REGISTRY)), lambda rng: [])


def library_kernels() -> dict:
    """{"module.name": kernel} of every kernel (not device function) a module of `gpucourse.kernels` defines."""
    import importlib
    import pkgutil

    from numba.cuda.dispatcher import CUDADispatcher

    import gpucourse.kernels as package

    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        module = importlib.import_module(f"{package.__name__}.{info.name}")
        for name, value in vars(module).items():
            if (isinstance(value, CUDADispatcher) and not value.targetoptions.get("device")
                    and value.py_func.__module__ == module.__name__):
                found[f"{info.name}.{name}"] = value
    return found


def test_every_library_kernel_is_compared_with_the_gpu_by_name_or_by_a_subject_that_launches_it():
    """A kernel added to the library without a subject of the differential test would never be checked on a GPU."""
    kernels = library_kernels()
    unchecked = [key for key in kernels if key not in REGISTRY and key not in differential_cases.LAUNCHED_BY]
    assert not unchecked, f"register these in differential_cases.py (or name the subject that launches them): {unchecked}"
    assert set(differential_cases.LAUNCHED_BY) <= set(kernels) and set(differential_cases.LAUNCHED_BY.values()) <= set(REGISTRY)
    by_subject = {}
    for key, subject in differential_cases.LAUNCHED_BY.items():
        by_subject.setdefault(subject, set()).add(kernels[key].py_func.__name__)
    rng = np.random.default_rng(0)
    for subject, names in by_subject.items():  # its first case launches each of them, on the simulator
        with gpucourse.trace() as t:
            REGISTRY[subject].cases(rng)[0].run()
        assert names <= {launch.kernel for launch in t.launches}, (subject, names)


def test_every_library_module_has_kernels_in_the_registry_with_cases():
    modules = {name.split(".")[0] for name in REGISTRY}
    assert {"elementwise", "reduction", "axis_reduction", "matmul", "conv", "fusion", "precision"} <= modules
    rng = np.random.default_rng(0)
    assert all(len(subject.cases(rng)) >= 3 for subject in REGISTRY.values())


class Recording:
    """The simulator, keeping each launch's outputs; `replay` hands them out again in the same order.

    The cases of a seed come in the same order every time, so a replay stands for running them again.
    """

    def __init__(self):
        self.outputs = []

    def __call__(self, run):
        outputs = simulator(run)
        self.outputs.append({name: value.copy() for name, value in outputs.items()})
        return outputs

    def replay(self):
        recorded = iter(self.outputs)
        return lambda run: {name: value.copy() for name, value in next(recorded).items()}


def test_the_simulator_agrees_with_itself_and_a_perturbed_simulator_is_caught():
    subjects, recording = list(REGISTRY.values()), Recording()
    same = compare_all(subjects, reference=recording, candidate=simulator)
    assert all(o.agrees and o.worst == 0 for o in same), report(same)
    one_ulp = compare_all(subjects, reference=recording.replay(), candidate=perturbed(1, recording.replay()))
    assert {o.subject.name for o in one_ulp if not o.agrees} == {s.name for s in subjects if s.ulps == 0}
    far = compare_all(subjects, reference=recording.replay(), candidate=perturbed(1000, recording.replay()))
    assert not any(o.agrees for o in far)
    text = report(far, "simulator", "perturbed simulator")
    assert f"disagreements between the simulator and the perturbed simulator" in text
    assert "`matmul.matmul_tiled`, (1, 37, 29) @ (1, 29, 45)" in text and "ulps apart (bound 70)" in text


def test_a_launch_that_fails_on_one_side_is_a_disagreement():
    def broken(run):
        raise RuntimeError("the simulator cannot run this")

    case = Case("n=3", lambda: {"out": np.zeros(3, np.float32)})
    outcome = compare(differential.Subject("k", lambda rng: [case]), reference=simulator, candidate=broken)
    assert outcome.disagreements == ["n=3: raised on the candidate: RuntimeError: the simulator cannot run this"]
    assert "| `k` | 1 | 0 |" in report([outcome]) and "**no**" in report([outcome])


def test_a_solution_notebooks_kernels_become_subjects_with_the_launches_of_its_checks(tmp_path):
    cells = ["import numpy as np\nfrom numba import cuda\nfrom gpucourse.grading import check_kernel, blocks_1d",
             "@cuda.jit\ndef triple_kernel(out, a):\n    i = cuda.grid(1)\n    if i < out.size:\n"
             "        out[i] = 3 * a[i]",
             "%time 1\ncheck_kernel(triple_kernel, lambda a: 3 * a, blocks_1d([5, 100], threads=[32, 64]))"]
    notebook = {"cells": [{"cell_type": "code", "source": c, "metadata": {}, "outputs": []} for c in cells],
                "metadata": {}, "nbformat": 4, "nbformat_minor": 5}
    (tmp_path / "one.ipynb").write_text(json.dumps(notebook))
    [subject] = solution_subjects(tmp_path / "one.ipynb", {"triple_kernel": (1, "a stated reason")})
    assert subject.name == f"{tmp_path.name}/triple_kernel" and subject.ulps == 1
    outcome = compare(subject, reference=simulator, candidate=simulator)
    assert outcome.cases == 4 and outcome.agrees
    assert not compare(subject, reference=simulator, candidate=perturbed(2)).agrees


def test_a_module_adds_a_kernel_in_a_few_lines():
    from numba import cuda

    @cuda.jit
    def halve(out, a):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[i] * np.float32(0.5)

    def cases(rng):
        return [kernel_case(halve, blocks, 64, (n,), np.float32, [rng.standard_normal(n).astype(np.float32)])
                for n, blocks in ((100, 2), (1000, 16))]

    register("test-only halve", cases)
    try:
        outcome = compare(REGISTRY["test-only halve"], reference=simulator, candidate=simulator)
        assert outcome.cases == 2 and outcome.agrees
        assert not compare(REGISTRY["test-only halve"], reference=simulator, candidate=perturbed(1)).agrees
    finally:
        del REGISTRY["test-only halve"]


def test_every_solution_kernel_with_a_bound_exists():
    names = {line.split("def ")[1].split("(")[0] for path in ROOT.glob("solutions/*/*.ipynb")
             for cell in json.loads(path.read_text())["cells"] for line in "".join(cell["source"]).splitlines()
             if line.startswith("def ")}
    # a kernel the grading wing builds around a student's device function (assignment 5's flash exercise)
    names |= {line.strip().split("def ")[1].split("(")[0] for path in (ROOT / "lib/gpucourse/grading").glob("*.py")
              for line in path.read_text().splitlines() if line.strip().startswith("def ")}
    assert set(differential_cases.SOLUTION_BOUNDS) <= names


@pytest.mark.skipif(not BACKEND.on_gpu, reason=f"no CUDA GPU here ({BACKEND.reason}): the differential test runs "
                    "on a GPU machine, with `make gpu-check`")
def test_the_simulator_agrees_with_the_gpu():
    subjects = list(REGISTRY.values())
    for notebook in sorted(ROOT.glob("solutions/*/*.ipynb")):
        subjects += solution_subjects(notebook, differential_cases.SOLUTION_BOUNDS)
    outcomes = compare_all(subjects)
    assert all(o.agrees for o in outcomes), report(outcomes)


def test_the_runner_says_in_one_line_why_it_skips_without_a_gpu():
    if BACKEND.on_gpu:
        pytest.skip("a GPU is usable here: the runner would compare")
    run = subprocess.run([sys.executable, "-m", "gpucourse.grading.differential_cases"], capture_output=True, text=True,
                         timeout=120, cwd=ROOT)
    assert run.returncode == 0 and run.stderr == ""
    assert run.stdout.strip().splitlines() == [
        f"The differential test needs a CUDA GPU: skipped ({BACKEND.reason})."]


def test_the_runner_writes_its_report_with_device_date_and_versions(tmp_path, monkeypatch, capsys):
    """The runner's GPU path, with the simulator standing in for the GPU (on a CPU machine both sides are it)."""
    from types import SimpleNamespace

    from gpucourse.run import Backend

    if BACKEND.on_gpu:
        pytest.skip("a GPU is usable here: test_the_simulator_agrees_with_the_gpu runs the real thing")
    monkeypatch.setattr(differential_cases, "BACKEND", Backend("gpu", "a stand-in"))
    monkeypatch.setattr(differential_cases.cuda, "get_current_device", lambda: SimpleNamespace(name=b"Stand-in GPU"))
    # three kernels of three modules: the whole registry runs in the test above (twice there, four times here)
    few = {name: REGISTRY[name] for name in [next(n for n in REGISTRY if n.startswith(m)) for m in
                                              ("elementwise.", "matmul.", "fusion.")]}
    monkeypatch.setattr(differential_cases, "REGISTRY", few)
    assert differential_cases.main(["--no-solutions", "--markdown", str(tmp_path / "report.md")]) == 0
    text = (tmp_path / "report.md").read_text()
    assert text.startswith("## Differential test: the course simulator against a GPU\n\n"
                           "`python -m gpucourse.grading.differential_cases` on Stand-in GPU.\n\n- Date: ")
    assert "- Versions: Python 3." in text and "numba-cuda 0.30" in text and "CUDA driver" in text
    assert "launches of 3 kernels" in text and text.endswith("All 3 kernels agree between the GPU and the simulator.")
    assert text in capsys.readouterr().out
