"""benchmarks/bandwidth.py: its accounting and report, and its GPU path on the simulator.

No timing is asserted: on the simulator its times measure the CPU.
"""

import math
import sys

import numpy as np
import pytest

from conftest import ROOT, load_benchmark, table_rows
from gpucourse.course import results

SCRIPT = ROOT / "benchmarks" / "bandwidth.py"
MIB = 2**20


@pytest.fixture(scope="module")
def bandwidth():
    module, unload = load_benchmark(SCRIPT.stem, "bandwidth")
    yield module
    unload()


# -- pure helpers ----------------------------------------------------------------------------------------
def test_bytes_moved(bandwidth):
    n = 1000
    assert bandwidth.bytes_moved("copy", (n,)) == 2 * 4 * n  # read + write
    assert bandwidth.bytes_moved("map", (n,)) == 2 * 4 * n
    assert bandwidth.bytes_moved("zip", (n,)) == 3 * 4 * n  # two reads, one write
    assert bandwidth.bytes_moved("sum", (n,)) == 4 * n  # the partial sums are not counted
    assert bandwidth.bytes_moved("axis", (8, 32), axis=1) == 4 * (8 * 32 + 8)  # input + one per row
    assert bandwidth.bytes_moved("axis", (8, 32), axis=0) == 4 * (8 * 32 + 32)  # input + one per column
    with pytest.raises(ValueError, match="unknown kind"):
        bandwidth.bytes_moved("scan", (n,))


def test_matrix_shape_and_buffer_sets(bandwidth):
    for mib in bandwidth.SIZES_MIB:  # every default size is an even power of 2 of elements: square
        n = mib * MIB // 4
        rows, cols = bandwidth.matrix_shape(n)
        assert rows == cols and rows * cols == n
    assert bandwidth.matrix_shape(2**11) == (32, 64)
    l2 = 50 * MIB
    assert bandwidth.buffer_sets(1 * MIB, l2) == bandwidth.MAX_SETS
    assert bandwidth.buffer_sets(64 * MIB, l2) == 4  # 4 x 64 MiB >= 4 x the L2
    assert bandwidth.buffer_sets(256 * MIB, l2) == 1


def test_relative_error(bandwidth):
    assert bandwidth.relative_error(np.ones(4), np.ones(4)) == 0
    assert bandwidth.relative_error([1.0, np.nan], [1.0, 1.0]) == math.inf  # a poisoned output left unwritten
    assert bandwidth.relative_error(np.ones(3), np.ones(4)) == math.inf


def test_relative_error_in_chunks_is_the_whole_arrays_norm(bandwidth, monkeypatch):
    """Chunked (3 chunks and a part of one here), as over the whole arrays in float64: 2-D, float16 and float32,
    a NaN or an infinity in the last chunk, an all-zero reference."""
    common = sys.modules[bandwidth.relative_error.__module__]
    monkeypatch.setattr(common, "ERROR_CHUNK", 16)
    rng = np.random.default_rng(3)
    want = rng.standard_normal((7, 8))
    for got in (want + 1e-3 * rng.standard_normal((7, 8)), (want * 1.5).astype(np.float32), want.astype(np.float16)):
        whole = np.linalg.norm(got.astype(np.float64) - want) / np.linalg.norm(want)
        assert bandwidth.relative_error(got, want) == pytest.approx(whole, rel=1e-12)
    for bad in (np.nan, np.inf):
        got = want.copy()
        got[-1, -1] = bad
        assert bandwidth.relative_error(got, want) == math.inf
    assert bandwidth.relative_error(np.ones(40), np.zeros(40)) == math.inf  # nothing to compare against
    assert bandwidth.relative_error(np.zeros(40), np.zeros(40)) == 0


def fake_measurements(bandwidth, map_fraction=0.95):
    """Measurements at 1 MiB and 256 MiB with a copy of 3000 GB/s, as a GPU run would give them."""
    M = bandwidth.Measurement
    rows = []
    for mib in (1, 256):
        size = mib * MIB
        copy_ms = 2 * size / 3000e9 * 1e3
        rows += [
            M(bandwidth.COPY, size, 2 * size, copy_ms),
            M("map: one thread per element", size, 2 * size, copy_ms / map_fraction, "map"),
            M("map: contiguous 1-D (benchmark only)", size, 2 * size, copy_ms),
            M("zip: one thread per element", size, 3 * size, 1.5 * copy_ms / 0.91, "zip"),
            M("sum 5: `sum_warp_shuffle`", size, size, 0.5 * copy_ms / 0.60, "sum", "2 launches"),
            M("sum 6: `sum_grid_stride_atomic`", size, size, 0.5 * copy_ms / 0.88, "sum", "1056 blocks"),
        ]
    return rows


def test_tables_and_fractions_of_copy(bandwidth):
    rows = fake_measurements(bandwidth)
    assert rows[0].gbps == pytest.approx(3000)
    assert bandwidth.fraction_of_copy(rows[1], rows) == pytest.approx(0.95)
    pivot = bandwidth.pivot_table(rows).splitlines()
    assert pivot[0] == "| kernel | 1 MiB | 256 MiB |" and pivot[1] == "|---|---:|---:|"
    assert pivot[2] == f"| {bandwidth.COPY} | 3,000 GB/s | 3,000 GB/s |"
    assert pivot[3] == "| map: one thread per element | 95% | 95% |"
    assert len(pivot) == 2 + 6  # one row per kernel
    full = bandwidth.full_table(rows).splitlines()
    assert full[0] == "| kernel | size (MiB) | time (ms) | GB/s | % of copy | note |"
    assert len(full) == 2 + len(rows)
    assert "| sum 6: `sum_grid_stride_atomic` | 256 | " in full[-1] and full[-1].endswith("| 88% | 1056 blocks |")


def test_verdict(bandwidth):
    lines = bandwidth.verdict(fake_measurements(bandwidth))
    assert len(lines) == 3
    assert lines[0].startswith("Goal map >= 90% of copy from 256 MiB: reached.")
    assert "256 MiB: 91%" in lines[1] and "reached" in lines[1]
    assert lines[2].startswith("Goal sum >= 85% of copy from 256 MiB: reached. Best: 256 MiB: 88% (sum 6")
    short = bandwidth.verdict(fake_measurements(bandwidth, map_fraction=0.5))
    assert "NOT reached" in short[0] and "50%" in short[0]
    only_small = [m for m in fake_measurements(bandwidth) if m.size == MIB]
    assert bandwidth.verdict(only_small) == ["Goals: none measured (they apply from 256 MiB)."]


def test_section_is_recorded_and_read_back(bandwidth, tmp_path):
    device = bandwidth.Device("NVIDIA H100 80GB HBM3", 132, 50 * MIB)
    text = bandwidth.section(fake_measurements(bandwidth), device, "CUDA driver 13.0, numba-cuda 0.30.4", 7)
    assert "NVIDIA H100 80GB HBM3 (132 SMs, 50 MiB of L2)" in text
    assert "- Versions: CUDA driver 13.0, numba-cuda 0.30.4" in text and "median of 7 samples" in text
    assert "bytes read + bytes written" in text and "GB/s = 10^9 bytes/s" in text
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\nAnother benchmark's section.\n")
    results.record(bandwidth.NAME, text, path)
    results.record(bandwidth.NAME, text, path)
    assert results.recorded(bandwidth.NAME, path) == text
    assert path.read_text().count(results.markers(bandwidth.NAME)[0]) == 1


# -- the GPU path, run on the simulator at a tiny size -------------------------------------------------
SIMULATED = dict(name="CPU simulator", sms=2, l2_bytes=16 * 1024, real=False)


def test_every_kernel_measured_and_checked_on_the_simulator(bandwidth):
    device = bandwidth.Device(**SIMULATED)
    measurements = bandwidth.measure_size(16 * 1024, device, samples=1, libraries={})
    kernels = [m.kernel for m in measurements]
    assert kernels[0] == bandwidth.COPY
    assert sum(k.startswith("map:") for k in kernels) == 5 and sum(k.startswith("zip:") for k in kernels) == 4
    assert "map: 16-byte vectors, grid-stride" in kernels
    transposed = measurements[kernels.index("map: one thread per element, transposed input")]  # 64 x 64, checked
    assert "a 64 x 64 matrix read through its transpose" in transposed.note and transposed.moved == 2 * 16 * 1024
    assert [k for k in kernels if k.startswith("sum ")] == [
        "sum 1: `sum_interleaved`", "sum 2: `sum_interleaved_compact`", "sum 3: `sum_sequential`",
        "sum 4: `sum_first_add`", "sum 5: `sum_warp_shuffle`", "sum 6: `sum_grid_stride_atomic`",
        "sum 7: `sum_grid_stride_vectorised`"]
    assert sum(k.startswith("axis sum:") for k in kernels) == 2
    assert not [m for m in measurements if m.wrong], [m.note for m in measurements if m.wrong]
    assert all(m.ms > 0 and m.moved > 0 for m in measurements)
    assert "best of 2 x, 4 x, 8 x, 16 x SMs" in measurements[kernels.index("sum 6: `sum_grid_stride_atomic`")].note
    vectorised = measurements[kernels.index("sum 7: `sum_grid_stride_vectorised`")]
    assert vectorised.goal == "sum" and "4 loads of 16 bytes in flight per thread; best of 2 x" in vectorised.note
    assert bandwidth.section(measurements, device, bandwidth.versions({}), 1).count("\n| ") == 2 * len(measurements) + 2


def test_a_wrong_result_is_flagged(bandwidth):
    device = bandwidth.Device(**SIMULATED)
    buffers = bandwidth.Buffers.allocate(1024, sets=1)
    case = bandwidth.copy_case(buffers)
    case.expected = lambda: buffers.host_a + 1
    measurement = bandwidth.measure(case, 4096, samples=1, device=device)
    assert measurement.wrong and "relative error" in measurement.note
    assert "WRONG" in bandwidth.pivot_table([bandwidth.measure(bandwidth.copy_case(buffers), 4096, 1, device),
                                             bandwidth.Measurement("x", 4096, 8192, 1.0, wrong=True)])


def test_the_planned_sums_are_block_sums_to_total(bandwidth):
    """The timed launches of each ladder step are those of `block_sums_to_total`, buffers allocated once."""
    from numba import cuda

    from gpucourse.kernels import reduction

    a = np.random.default_rng(1).random(3000, dtype=np.float32)
    data = cuda.to_device(a)
    for kernel in reduction.LADDER:
        launch, result, count = bandwidth.sum_launches(kernel, data, blocks=4)
        launch()
        launch()  # again: step 6 starts from zero each time
        want = reduction.block_sums_to_total(kernel, data, blocks=4).copy_to_host()
        np.testing.assert_allclose(result.copy_to_host(), want, rtol=1e-6)
        np.testing.assert_allclose(want[0], a.sum(dtype=np.float64), rtol=1e-5)
        assert count == (1 if kernel in reduction.ONE_LAUNCH else 2)



# -- main: the time budget (`--seconds`), each size's measurement a stand-in --------------------------------
@pytest.fixture
def run(bandwidth, benchmark_run, monkeypatch):
    """`main` on every default size; ``run.measured``: the sizes measured, in order (each takes a minute)."""
    run = benchmark_run(bandwidth, bandwidth.Device(**SIMULATED))
    run.measured, run.compiled = [], False

    def measure_size(size, device, samples, libraries):
        if not run.compiled:  # the first call compiles every kernel: 20 s
            run.now, run.compiled = run.now + 20, True
        if (size, samples) == (bandwidth.WARM_UP_MIB * MIB, 1):  # the warm-up: nothing more
            run.measured.append("warm-up")
            return []
        run.row()
        run.measured.append(size // MIB)
        return [bandwidth.Measurement(bandwidth.COPY, size, 2 * size, 1.0),
                bandwidth.Measurement("map: contiguous 1-D (benchmark only)", size, 2 * size, 1.1)]

    monkeypatch.setattr(bandwidth, "measure_size", measure_size)
    monkeypatch.setattr(bandwidth, "fits", lambda size, device: None)
    return run


def test_a_time_budget_measures_a_goal_size_first_and_names_the_others(bandwidth, run):
    recorded = run(*run.ONE_ROW)
    assert run.measured == ["warm-up", 256]  # compiled first: 20 s + 60 s, no time for 1024 MiB's 60 s
    assert recorded.write  # a full run's sizes, cut short by time: still recorded, and says so
    assert [row[1] for row in table_rows(recorded.text, "### Every measurement")] == ["256", "256"]
    note = recorded.text.splitlines()[-1]
    assert "1024 MiB, 1 MiB, 4 MiB, 16 MiB, 64 MiB" in note and "bandwidth.py" in note


def test_after_the_warm_up_a_row_s_own_time_decides_whether_the_next_fits(bandwidth, run):
    recorded = run("--seconds", "150")  # 20 s + 60 s + 60 s: both goal sizes, measured in one run
    assert run.measured == ["warm-up", 256, 1024]  # (a first row of 80 s would have left no time for the second)
    assert [row[1] for row in table_rows(recorded.text, "### Every measurement")] == ["256", "256", "1024", "1024"]


def test_a_full_run_tables_every_size_in_order_with_no_note(bandwidth, run):
    recorded = run()
    assert run.measured == [256, 1024, 1, 4, 16, 64]  # the goals' sizes first; no time budget, no warm-up
    sizes = [row[1] for row in table_rows(recorded.text, "### Every measurement")]
    assert sizes == [size for mib in bandwidth.SIZES_MIB for size in [f"{mib:g}"] * 2]
    assert "| kernel | 1 MiB | 4 MiB | 16 MiB | 64 MiB | 256 MiB | 1024 MiB |" in recorded.text
    assert recorded.write and recorded.text.splitlines()[-1].startswith("| ")  # nothing under the table
