"""benchmarks/precision.py: its report and goal, and its GPU path on the simulator (no timing is asserted)."""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import ROOT, load_benchmark, table_rows
from gpucourse.course import results

SCRIPT = ROOT / "benchmarks" / "precision.py"
SIMULATED = dict(name="CPU simulator", sms=2, l2_bytes=16 * 1024, real=False)


@pytest.fixture(scope="module")
def bench():
    module, unload = load_benchmark(SCRIPT.stem, "precision_benchmark")
    yield module
    unload()


def fake_run(bench, tensor_core_ms=10.0, cublas_ms=2.0, async_ms=12.0):
    M, n = bench.Measurement, 4096
    return [M(bench.FP32, "gemm", n, 40.0, 3e-7), M(bench.FP16_FP32ACC, "gemm", n, 30.0, 3e-7),
            M(bench.TENSOR_CORE, "gemm", n, 25.0, 3e-7), M(bench.TENSOR_CORE_TILED, "gemm", n, tensor_core_ms, 3e-7),
            M(bench.TENSOR_CORE_ASYNC, "gemm", n, async_ms, 3e-7), M(bench.CUBLAS_FP16, "gemm", n, cublas_ms, 3e-4),
            M("`map_fp32`", "map", 2**26, 0.2), M("`map_fp16`", "map", 2**26, 0.11, item=2)]


def test_rates_and_tolerances(bench):
    m = bench.Measurement(bench.TENSOR_CORE, "gemm", 1000, 1.0)
    assert m.tflops == pytest.approx(2.0)  # 2e9 FLOPs in 1 ms
    assert bench.Measurement("`map_fp16`", "map", 10**6, 1.0, item=2).gbps == pytest.approx(4.0)
    assert bench.tolerance(4096, half_output=True) == 2.0**-10
    assert bench.tolerance(4096, half_output=False) == pytest.approx(4 * 2.0**-24 * 64)


def test_goal_met_not_met_and_not_measured(bench):
    """The goal is the faster tiled tensor-core GEMM's, whichever it is."""
    assert bench.goal_line(fake_run(bench)) == (
        "Goal: the faster of `gemm_tensor_core_tiled` and `gemm_tensor_core_async` at 4096^3 >= 4x the best course "
        "fp32 GEMM, % of cuBLAS fp16 recorded: met (`gemm_tensor_core_tiled` 4.0x fp32, 20% of cuBLAS fp16).")
    assert bench.goal_line(fake_run(bench, tensor_core_ms=20.0, cublas_ms=5.0, async_ms=16.0)).endswith(
        ": NOT met (`gemm_tensor_core_async` 2.5x fp32, 31% of cuBLAS fp16).")
    without_torch = [m for m in fake_run(bench) if m.path != bench.CUBLAS_FP16]
    assert bench.goal_line(without_torch).endswith("partly measured (no PyTorch): `gemm_tensor_core_tiled` 4.0x fp32.")
    only_async = [m for m in fake_run(bench, async_ms=8.0) if m.path != bench.TENSOR_CORE_TILED]
    assert bench.goal_line(only_async).endswith(": met (`gemm_tensor_core_async` 5.0x fp32, 25% of cuBLAS fp16).")
    assert bench.goal_line([]).endswith(": not measured.")


def test_section_has_both_tables_and_records(bench, tmp_path):
    text = bench.section(fake_run(bench), bench.Device("NVIDIA H100", 132, 50 * 2**20), "versions", 5)
    assert text.startswith("## Precision: fp16 storage, fp32 accumulation, tensor cores")
    assert "| `gemm_tensor_core_tiled` | 4096^3 | 10 | 13.7 | 4.00x | 3.0e-07 |" in text
    assert "| `gemm_tensor_core_async` | 4096^3 | 12 | 11.5 | 3.33x | 3.0e-07 |" in text
    assert "| `map_fp16` | 67,108,864 | 0.11 | 2,440 | 1.82x |" in text
    assert text.count("\n| ") == (1 + 6) + (1 + 2)
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n")
    results.record(bench.NAME, text, path)
    assert results.recorded(bench.NAME, path) == text


class View(np.ndarray):
    """A NumPy view of a simulator array's memory, standing in for a torch tensor."""

    def data_ptr(self):
        return self.__array_interface__["data"][0]

    def fill_(self, value):
        self[...] = value

    def float(self):
        return self.astype(np.float32)

    def cpu(self):
        return self

    def numpy(self):
        return np.asarray(self)


def fake_torch():
    """``torch.matmul`` of float16 tensors (products and sums in float32, C rounded to float16) on the same memory."""

    def matmul(a, b, out):
        out[...] = np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)

    return SimpleNamespace(as_tensor=lambda array, device=None: array._ary.view(View), float16=np.float16,
                           empty=lambda shape, dtype, device: np.empty(shape, dtype).view(View), matmul=matmul)


def test_every_path_measured_and_checked_on_the_simulator(bench, monkeypatch):
    monkeypatch.setattr(bench, "pointer", lambda array: array._ary.__array_interface__["data"][0])
    device = bench.Device(**SIMULATED)
    run = bench.measure_gemm(40, 1, {"torch": fake_torch()})
    assert [m.path for m in run] == [bench.FP32, bench.FP16_FP32ACC, bench.TENSOR_CORE, bench.TENSOR_CORE_TILED,
                                     bench.TENSOR_CORE_ASYNC, bench.CUBLAS_FP16]
    run += bench.measure_map(1000, device, 1)
    assert [m.path for m in run[6:]] == ["`map_fp32`", "`map_fp16`"] and [m.item for m in run[6:]] == [4, 2]
    assert not [m for m in run if m.wrong], [m.note for m in run if m.wrong]
    assert all(m.ms > 0 for m in run) and all(m.error < 1e-3 for m in run)
    assert "not measured." in bench.section(run, device, "versions", 1)


def test_a_wrong_gemm_is_flagged(bench, monkeypatch):
    from gpucourse.kernels import precision

    monkeypatch.setattr(precision, "launch_gemm", lambda kernel, C, A, B: None)  # leaves C poisoned
    run = bench.measure_gemm(24, 1, {})
    assert [m.wrong for m in run] == [False, True, True, True, True] and all(math.isinf(m.error) for m in run[1:])
    assert "error over" in run[1].note


# -- main: the time budget (`--seconds`), each size's measurement a stand-in --------------------------------
@pytest.fixture
def run(bench, benchmark_run, monkeypatch):
    """`main` on every GEMM size and the map; ``run.measured``: what was measured, in order (each GEMM size takes
    a minute; the map, outside the time budget, none)."""
    run = benchmark_run(bench, bench.Device(**SIMULATED, compute_capability=(9, 0)))
    run.measured = []

    def measure_gemm(n, samples, libraries):
        run.row()
        run.measured.append(f"{n}^3")
        return [bench.Measurement(bench.FP32, "gemm", n, 1.0),
                bench.Measurement(bench.TENSOR_CORE_TILED, "gemm", n, 0.2)]

    def measure_map(size, device, samples):
        run.measured.append("map")
        return [bench.Measurement("`map_fp32`", "map", size, 0.2),
                bench.Measurement("`map_fp16`", "map", size, 0.1, item=2)]

    monkeypatch.setattr(bench, "measure_gemm", measure_gemm)
    monkeypatch.setattr(bench, "measure_map", measure_map)
    return run


def test_a_time_budget_measures_the_map_and_the_goal_size_and_names_the_others(bench, run):
    recorded = run(*run.ONE_ROW)
    assert run.measured == ["map", "4096^3"]
    assert recorded.write  # a full run's sizes, cut short by time: still recorded, and says so
    assert [row[1] for row in table_rows(recorded.text, "### GEMM")] == ["4096^3"] * 2
    assert [row[0] for row in table_rows(recorded.text, "### Memory-bound map")] == ["`map_fp32`", "`map_fp16`"]
    note = recorded.text.splitlines()[-1]
    assert "1024^3, 2048^3" in note and "precision.py" in note


def test_a_full_run_tables_every_size_in_order_with_no_note(bench, run):
    recorded = run()
    assert run.measured == ["map", "4096^3", "1024^3", "2048^3"]
    gemms = [row[1] for row in table_rows(recorded.text, "### GEMM")]
    assert gemms == [f"{n}^3" for n in bench.SQUARES for _ in range(2)]
    assert "`map_fp16`" in recorded.text
    assert recorded.write and recorded.text.splitlines()[-1].startswith("| ")  # nothing under the tables
