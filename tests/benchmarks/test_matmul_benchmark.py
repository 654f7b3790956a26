"""benchmarks/matmul.py: its accounting and report, and its GPU path on the simulator.

No timing is asserted: on the simulator its times measure the CPU.
"""

import math
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import ROOT, load_benchmark, table_rows
from gpucourse.course import results
from gpucourse.figures import roofline

SCRIPT = ROOT / "benchmarks" / "matmul.py"


@pytest.fixture(scope="module")
def bench():
    module, unload = load_benchmark(SCRIPT.stem, "matmul_benchmark")
    yield module
    unload()


# -- pure helpers ----------------------------------------------------------------------------------------
def test_flops_and_shapes(bench):
    assert bench.matmul_flops(1, 4096, 4096, 4096) == 2 * 4096**3
    assert bench.matmul_flops(8, 512, 3072, 768) == 8 * 2 * 512 * 3072 * 768
    s = bench.square(4096)
    assert (s.a_shape, s.b_shape, s.c_shape) == ((1, 4096, 4096),) * 3
    assert s.flops == 2 * 4096**3 and s.bytes == 3 * 4 * 4096**2 and s.dims() == "4096x4096 @ 4096x4096"
    mlp = bench.DL_SHAPES[0]
    assert mlp.a_shape == (8, 512, 768) and mlp.b_shape == (1, 768, 3072) and mlp.c_shape == (8, 512, 3072)
    assert mlp.flops == 2 * 8 * 512 * 768 * 3072 and mlp.dims() == "8 x 512x768 @ 768x3072 (B broadcast)"
    for shape in bench.DL_SHAPES:  # every shape fits easily in a GPU's memory (a few GB at most)
        assert shape.bytes < 2**30
    assert [s.name for s in map(bench.square, bench.SQUARES)] == ["512^3", "1024^3", "2048^3", "4096^3", "8192^3"]
    assert bench.QUICK_SQUARES == (512, 1024)


def test_fp32_peak_from_device_attributes(bench):
    h100 = bench.fp32_peak(132, (9, 0), 1_980_000)  # H100 SXM: 132 SMs x 128 lanes x 2 x 1.98 GHz
    assert h100 == pytest.approx(132 * 128 * 2 * 1.98e9) and h100 == pytest.approx(66.9e12, rel=1e-3)
    assert h100 == pytest.approx(roofline.H100_SXM.peak_flops, rel=0.01)  # the data sheet's 67 TFLOP/s
    assert bench.fp32_peak(108, (8, 0), 1_410_000) == pytest.approx(19.5e12, rel=1e-3)  # A100: 64 lanes
    assert bench.fp32_peak(128, (8, 9), 2_520_000) == pytest.approx(82.6e12, rel=1e-3)  # RTX 4090
    assert bench.fp32_peak(80, (7, 0), 1_530_000) == pytest.approx(15.7e12, rel=1e-2)  # V100
    assert [bench.fp32_lanes(cc) for cc in [(7, 5), (8, 0), (8, 6), (8, 9), (9, 0)]] == [64, 64, 128, 128, 128]
    assert bench.fp32_peak(132, (42, 0), 1_980_000) is None  # an unknown architecture
    assert bench.fp32_peak(132, (9, 0), None) is None  # no clock
    assert bench.fp32_peak(132, None, 1_980_000) is None
    device = bench.Device("NVIDIA H100 80GB HBM3", 132, 50 * 2**20, True, (9, 0), 1_980_000)
    note = bench.peak_note(device)
    assert note.startswith("FP32 peak: 66.9 TFLOP/s = 132 SMs x 128 FP32 lanes (compute capability 9.0)")
    assert "1.98 GHz" in note and "boost" in note
    assert "unknown" in bench.peak_note(bench.Device("CPU simulator", 2, 16 * 1024, False))


def tf32(x: np.ndarray) -> np.ndarray:
    """``x`` rounded to TF32's 10 bits of mantissa (to nearest even), as float32."""
    bits = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    bits = (bits + 0x0FFF + ((bits >> 13) & 1)) & ~np.uint64(0x1FFF)
    return bits.astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("K", [64, 1024, 8192])
def test_the_tolerance_passes_float32_and_fails_tf32(bench, K):
    rng = np.random.default_rng(K)
    a, b = rng.standard_normal((8, K), dtype=np.float32), rng.standard_normal((K, 8), dtype=np.float32)
    exact = a.astype(np.float64) @ b.astype(np.float64)
    one_by_one = np.add.accumulate(a[:, :, None] * b[None], axis=1, dtype=np.float32)[:, -1]  # as the kernels sum
    truncated = tf32(a).astype(np.float64) @ tf32(b).astype(np.float64)
    assert bench.relative_error(one_by_one, exact) < bench.tolerance(K) / 4
    assert bench.relative_error(a @ b, exact) < bench.tolerance(K) / 4
    assert bench.relative_error(truncated, exact) > 5 * bench.tolerance(K)


def fake_measurements(bench, warp_fraction=0.74, libraries=("torch", "cupy")):
    """A run at 1024^3 and 4096^3 and one deep-learning shape, cuBLAS at 50 TFLOP/s (CuPy's 45)."""
    M = bench.Measurement
    rows = []
    for shape in (bench.square(1024), bench.square(4096), bench.DL_SHAPES[1]):
        def ms(tflops, shape=shape):
            return shape.flops / (tflops * 1e12) * 1e3
        rows += [M(bench.cublas_label(name), shape, ms(rate), cublas=True, note="same arrays")
                 for name, rate in zip(libraries, (50, 45))]
        rows += [
            M("`matmul_naive`", shape, ms(0.5) if shape.M < 4096 else None,
              note="" if shape.M < 4096 else "skipped: about 1.1 s per launch"),
            M("`matmul_tiled`", shape, ms(10), note="grid 256x256x1"),
            M("`matmul_register_tiled`", shape, ms(12)),
            M("`matmul_warp_tiled`", shape, ms(50 * warp_fraction)),
        ]
    return rows


def test_fractions_tables_and_the_goal(bench):
    rows = fake_measurements(bench)
    assert rows[0].tflops == pytest.approx(50)
    best = bench.reference(rows, bench.square(4096))
    assert best.kernel == "cuBLAS via `torch.matmul`"
    register = [m for m in rows if m.kernel == "`matmul_register_tiled`" and m.shape == bench.square(4096)][0]
    assert bench.fraction_of_cublas(register, rows) == pytest.approx(0.24)
    assert bench.goal_line(rows) == ("Goal: `matmul_warp_tiled` at 4096^3 >= 60% of cuBLAS float32: met "
                                     "(74%: 37.0 TFLOP/s against 50.0 for cuBLAS via `torch.matmul`).")
    assert ": NOT met (55%: 27.5 TFLOP/s" in bench.goal_line(fake_measurements(bench, 0.55))
    small = [m for m in rows if m.shape == bench.square(1024)]
    assert bench.goal_line(small).endswith("not measured (4096^3 was not in this run).")
    alone = [m for m in rows if not m.cublas]
    assert "not measured (no cuBLAS reference" in bench.goal_line(alone)

    peak = bench.fp32_peak(132, (9, 0), 1_980_000)
    full = bench.full_table(rows, peak).splitlines()
    assert full[0] == "| kernel | shape | time (ms) | TFLOP/s | % of cuBLAS | % of FP32 peak | note |"
    assert full[1] == "|---|---|---:|---:|---:|---:|---|"
    assert len(full) == 2 + len(rows)
    assert full[2].startswith("| cuBLAS via `torch.matmul` | 1024^3 | ") and "| 50.00 | 100% | 75% |" in full[2]
    assert "| 45.00 | 90% | 67% |" in full[3]
    assert any(line.startswith("| `matmul_naive` | 4096^3 |  |  |  |  | skipped:") for line in full)

    pivot = bench.pivot_table(rows).splitlines()
    assert pivot[0] == ("| shape | product | GFLOP | cuBLAS TFLOP/s | `matmul_naive` TFLOP/s (% of cuBLAS) | "
                        "`matmul_tiled` TFLOP/s (% of cuBLAS) | `matmul_register_tiled` TFLOP/s (% of cuBLAS) | "
                        "`matmul_warp_tiled` TFLOP/s (% of cuBLAS) |")
    assert pivot[2] == ("| 1024^3 | 1024x1024 @ 1024x1024 | 2.1 | 50.0 (torch) | 0.50 (1%) | 10.00 (20%) | "
                        "12.00 (24%) | 37.00 (74%) |")
    assert pivot[3].startswith("| 4096^3 | 4096x4096 @ 4096x4096 | 137.4 | 50.0 (torch) | skipped |")
    assert len(pivot) == 2 + 3


def test_a_wrong_row_is_shown_and_left_out_of_the_reference(bench):
    rows = fake_measurements(bench)
    wrong = bench.Measurement(rows[0].kernel, rows[0].shape, rows[0].ms / 2, True, "relative error 3e-4", True)
    rows = [wrong, *rows[1:]]
    assert bench.reference(rows, rows[0].shape).kernel == "cuBLAS via `cupy.matmul`"
    assert "WRONG result; relative error" in bench.full_table(rows, None)
    assert "45.0 (cupy)" in bench.pivot_table(rows)


def test_section_is_recorded_and_read_back(bench, tmp_path):
    device = bench.Device("NVIDIA H100 80GB HBM3", 132, 50 * 2**20, True, (9, 0), 1_980_000)
    text = bench.section(fake_measurements(bench), device, "CUDA driver 13.0, numba-cuda 0.30.4", 7,
                         "`torch.matmul` (cuBLAS float32), TF32 off")
    assert text.startswith("## Matrix multiplication against cuBLAS float32")
    assert "NVIDIA H100 80GB HBM3 (132 SMs)" in text and "- Versions: CUDA driver 13.0, numba-cuda 0.30.4" in text
    assert "Goal: `matmul_warp_tiled` at 4096^3 >= 60% of cuBLAS float32: met" in text
    assert "FP32 peak: 66.9 TFLOP/s" in text and "median of 7 samples" in text and "2 x M x N x K" in text
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\nAnother benchmark's section.\n")
    results.record(bench.NAME, text, path)
    results.record(bench.NAME, text, path)
    assert results.recorded(bench.NAME, path) == text
    assert path.read_text().count(results.markers(bench.NAME)[0]) == 1


# -- the GPU path, run on the simulator at tiny sizes --------------------------------------------------
SIMULATED = dict(name="CPU simulator", sms=2, l2_bytes=16 * 1024, real=False)
TINY = dict(name="tiny batch", batch=2, M=40, K=24, N=36, batch_b=1)  # not multiples of any tile


def test_every_kernel_measured_and_checked_on_the_simulator(bench):
    device = bench.Device(**SIMULATED)
    measurements = []
    for shape in (bench.Shape(**TINY), bench.square(33)):
        measurements += bench.measure_shape(shape, device, 1, {}, measurements)
    assert [m.kernel for m in measurements[:5]] == [
        "`matmul_naive`", "`matmul_coalesced`", "`matmul_tiled`", "`matmul_register_tiled`", "`matmul_warp_tiled`"]
    assert len(measurements) == 10
    assert not [m for m in measurements if m.wrong], [m.note for m in measurements if m.wrong]
    assert all(m.ms > 0 for m in measurements)
    text = bench.section(measurements, device, bench.versions({}), 1, "none")
    assert "not measured (4096^3 was not in this run)" in text
    assert text.count("\n| ") == (1 + 2) + (1 + len(measurements))  # two tables: a header, then a row each


def test_the_top_rung_s_variants_are_valid_measured_and_named_by_their_tiles(bench):
    from gpucourse.kernels import sgemm

    assert [sgemm.parameter_problem(**tiles) for tiles in bench.WARP_TILED_VARIANTS] == [None] * 6
    assert sgemm.matmul_warp_tiled.tiles not in bench.WARP_TILED_VARIANTS  # the default is measured anyway
    device = bench.Device(**SIMULATED)
    measurements = bench.measure_shape(bench.Shape(**TINY), device, 1, {}, variants=True)
    labels = [m.kernel for m in measurements]
    assert labels[4:] == ["`matmul_warp_tiled`", "`matmul_warp_tiled` 128x128x16 / 64x32, 4",
                          "`matmul_warp_tiled` 128x128x8 / 64x64, 4", "`matmul_warp_tiled` 128x128x16 / 64x64, 4",
                          "`matmul_warp_tiled` 128x256x8 / 64x64, 4", "`matmul_warp_tiled` 256x128x8 / 64x64, 4",
                          "`matmul_warp_tiled` 128x128x8 / 32x64, 2"]
    assert not [m for m in measurements if m.wrong], [m.note for m in measurements if m.wrong]


def fake_library(name: str, stream: int = 0):
    """A stand-in for ``torch`` or ``cupy`` on the simulator's arrays: NumPy views of the same memory
    (float32 ``np.matmul`` as its cuBLAS)."""

    class View(np.ndarray):
        @property
        def data(self):
            return SimpleNamespace(ptr=self.__array_interface__["data"][0])

    def view(array, device=None):
        return array._ary.view(View)

    def data_ptr(tensor):
        return tensor.__array_interface__["data"][0]

    if name == "torch":
        return SimpleNamespace(as_tensor=view, Tensor=SimpleNamespace(data_ptr=data_ptr), matmul=np.matmul,
                               cuda=SimpleNamespace(current_stream=lambda: SimpleNamespace(cuda_stream=stream)))
    return SimpleNamespace(asarray=view, matmul=np.matmul,
                           cuda=SimpleNamespace(get_current_stream=lambda: SimpleNamespace(ptr=stream)))


@pytest.fixture
def simulator_pointers(bench, monkeypatch):
    """The simulator's arrays have no ``__cuda_array_interface__``: their host memory's address instead."""
    monkeypatch.setattr(bench, "pointer", lambda array: array._ary.__array_interface__["data"][0])


@pytest.mark.parametrize("shape", [TINY, dict(name="one", batch=1, M=20, K=30, N=10),
                                   dict(name="batched", batch=3, M=20, K=30, N=10)], ids=lambda s: s["name"])
def test_the_cublas_calls_write_the_shared_output(bench, simulator_pointers, shape, monkeypatch):
    from gpucourse.kernels import matmul

    monkeypatch.setattr(matmul, "KERNELS", matmul.KERNELS[:1])  # every rung is measured above; one is compared here
    device = bench.Device(**SIMULATED)
    libraries = {"torch": fake_library("torch"), "cupy": fake_library("cupy")}
    measurements = bench.measure_shape(bench.Shape(**shape), device, 1, libraries)
    assert [m.kernel for m in measurements[:2]] == ["cuBLAS via `torch.matmul`", "cuBLAS via `cupy.matmul`"]
    assert all(m.cublas for m in measurements[:2]) and not any(m.cublas for m in measurements[2:])
    assert not [m for m in measurements if m.wrong], [m.note for m in measurements if m.wrong]
    assert bench.reference(measurements, bench.Shape(**shape)) is not None
    assert all(not math.isnan(bench.fraction_of_cublas(m, measurements)) for m in measurements)


def test_a_library_on_another_stream_is_left_out(bench, simulator_pointers, capsys):
    operands = bench.Operands.allocate(bench.Shape(**TINY), sets=1)
    assert bench.cublas_cases(operands, {"torch": fake_library("torch", stream=0x1234)}) == []
    assert "torch.matmul left out: RuntimeError: torch works on stream 0x1234" in capsys.readouterr().out


def test_wrong_results_are_flagged_and_a_tf32_reference_is_not_trusted(bench):
    device = bench.Device(**SIMULATED)
    shape = bench.Shape("deep", 1, 8, 4096, 8)
    operands = bench.Operands.allocate(shape, sets=1)
    a, b = operands.host_a, operands.host_b
    c = operands.c[0]
    as_tf32 = bench.Case("cuBLAS via `torch.matmul`", [lambda: c.copy_to_device(np.matmul(tf32(a), tf32(b)))],
                         cublas=True)
    right = bench.Case("cuBLAS via `cupy.matmul`", [lambda: c.copy_to_device(np.matmul(a, b))], cublas=True)
    unwritten = bench.Case("leaves C alone", [lambda: None])
    measurements = []
    for case in (as_tf32, right, unwritten):
        measurements.append(bench.measure(case, operands, 1, device, measurements))
    assert [m.wrong for m in measurements] == [True, False, True]
    assert "relative error" in measurements[0].note and "inf" in measurements[2].note
    assert operands.full_reference is not None  # the second, right, one
    np.testing.assert_array_equal(operands.full_reference, np.matmul(a, b))
    assert bench.reference(measurements, shape).kernel == "cuBLAS via `cupy.matmul`"


def test_a_kernel_predicted_too_slow_is_skipped(bench):
    device = bench.Device(**SIMULATED)
    operands = bench.Operands.allocate(bench.square(16), sets=1)
    slow = bench.Measurement("`matmul_naive`", bench.square(8), 1e6)  # 1000 s at 8^3: hopeless at 16^3

    def must_not_run():
        raise AssertionError("a skipped kernel was launched")

    m = bench.measure(bench.Case("`matmul_naive`", [must_not_run]), operands, 1, device, [slow])
    assert m.skipped and m.ms is None and m.note.startswith("skipped: about 8e+03 s per launch at its")
    assert "of 8^3" in m.note
    assert bench.predicted_ms("`matmul_tiled`", bench.square(16), [slow]) is None


def test_the_goal_shape_measured_first_predicts_the_smaller_shapes_too(bench):
    """With a time budget 4096^3 comes first: nothing predicts it (every kernel runs there), and it predicts the
    smaller squares measured after it, as the largest shape measured so far."""
    goal = bench.Measurement("`matmul_naive`", bench.square(4096), 137.4)  # 1 TFLOP/s
    assert bench.predicted_ms("`matmul_naive`", bench.square(4096), []) is None
    ms, seen = bench.predicted_ms("`matmul_naive`", bench.square(512), [goal])
    assert ms == pytest.approx(137.4 / 8**3, rel=1e-3) and seen is goal


# -- main: the time budget (`--seconds`), each shape's measurement a stand-in --------------------------------
@pytest.fixture
def run(bench, benchmark_run, monkeypatch):
    """`main` on every default shape; ``run.measured``: the shapes measured, in order (each takes a minute)."""
    run = benchmark_run(bench, bench.Device(**SIMULATED))
    run.measured, run.variants = [], []

    def measure_shape(shape, device, samples, libraries, earlier=(), variants=False):
        run.row()
        run.measured.append(shape.name)
        run.variants += [shape.name] if variants else []
        return [bench.Measurement("`matmul_warp_tiled`", shape, 1.0)]

    monkeypatch.setattr(bench, "measure_shape", measure_shape)
    monkeypatch.setattr(bench, "fits", lambda shape, device: None)
    for variable in ("NVIDIA_TF32_OVERRIDE", "CUPY_TF32"):  # as `main` sets them, undone after the test
        monkeypatch.setenv(variable, "0")
    return run


def every_shape(bench) -> list[str]:
    return [shape.name for shape in (*map(bench.square, bench.SQUARES), *bench.DL_SHAPES)]


def test_a_time_budget_measures_the_goal_shape_first_and_names_the_others(bench, run):
    recorded = run(*run.ONE_ROW)
    assert run.measured == ["4096^3"]
    assert recorded.write  # a full run's shapes, cut short by time: still recorded, and says so
    assert [row[0] for row in table_rows(recorded.text, "### TFLOP/s")] == ["4096^3"]
    note = recorded.text.splitlines()[-1]
    others = [name for name in every_shape(bench) if name != "4096^3"]
    assert ", ".join(others) in note and "matmul.py" in note


def test_a_full_run_tables_every_shape_in_order_with_no_note(bench, run):
    recorded = run()
    assert run.measured[0] == "4096^3" and sorted(run.measured) == sorted(every_shape(bench))
    assert [row[0] for row in table_rows(recorded.text, "### TFLOP/s")] == every_shape(bench)
    assert [row[1] for row in table_rows(recorded.text, "### Every measurement")] == every_shape(bench)
    assert recorded.write and recorded.text.splitlines()[-1].startswith("| ")  # nothing under the tables


def test_variants_are_measured_at_the_goal_shape_only(bench, run):
    run()
    assert run.variants == []
    run("--variants")
    assert run.variants == ["4096^3"]
