"""benchmarks/cost_model.py: the cost model priced again against recorded GPU times, on the CPU."""

import pytest

from conftest import ROOT, load_benchmark, table_rows
from gpucourse.run import resources_problem

pytestmark = pytest.mark.skipif(resources_problem() is not None, reason="the cost model needs nvJitLink")

SECTIONS = {
    "matmul": """## Matrix multiplication against cuBLAS float32

`python benchmarks/matmul.py` on NVIDIA H200 (132 SMs).

- Date: 2026-11-29

### TFLOP/s and % of cuBLAS

| shape | product | GFLOP | cuBLAS TFLOP/s | `matmul_naive` TFLOP/s (% of cuBLAS) | `matmul_coalesced` TFLOP/s (% of cuBLAS) | `matmul_tiled` TFLOP/s (% of cuBLAS) | `matmul_register_tiled` TFLOP/s (% of cuBLAS) | `matmul_warp_tiled` TFLOP/s (% of cuBLAS) |
|---|---|---:|---:|---:|---:|---:|---:|---:|
| 1024^3 | 1024x1024 @ 1024x1024 | 2.1 | 40.0 (cupy) | 9.0 (2%) | 9.0 (3%) | 9.0 (14%) | 9.0 (22%) | 9.0 (69%) |
| 4096^3 | 4096x4096 @ 4096x4096 | 137.4 | 51.4 (cupy) | 0.98 (2%) | 1.39 (3%) | 7.32 (14%) | 11.39 (22%) | 35.24 (69%) |""",
    "conv": """## Convolution against cuDNN float32

`python benchmarks/conv.py` on NVIDIA H200 (132 SMs).

- Date: 2026-11-29

### Every measurement

| kernel | layer | time (ms) | TFLOP/s | note |
|---|---|---:|---:|---|
| cuDNN, benchmark off | conv2_x 3x3 | 0.2542 | 29.11 | |
| `conv_direct` | conv2_x 3x3 | 9.737 | 0.76 | |
| `conv_implicit_gemm` | conv2_x 3x3 | 1.243 | 5.95 | |
| `conv_implicit_gemm_nhwc` | conv2_x 3x3 | 1.01 | 7.33 | |
| `conv_implicit_gemm_warp_tiled` | conv2_x 3x3 | 0.2817 | 26.26 | |
| `conv_direct` | conv3_x 3x3 | 1.0 | 7.0 | |""",
    "fusion": """## Fusion: row softmax and attention

`python benchmarks/fusion.py` on NVIDIA H200 (132 SMs).

- Date: 2026-12-01

### Row softmax

| softmax | rows x cols | time (ms) | GB/s (read x + write y) | of copy | note |
|---|---|---:|---:|---:|---|
| device-to-device copy | 16384 x 4096 | 0.1279 | 4,196 | 100% |  |
| `softmax_naive` (3 kernels) | 16384 x 4096 | 0.4634 | 1,158 | 28% | |
| `softmax_row_fused` | 4096 x 4096 | 0.07 | 2,001 | 48% | |
| `softmax_row_fused` | 16384 x 4096 | 0.2684 | 2,001 | 48% | |
| `softmax_online` | 16384 x 4096 | 0.3238 | 1,658 | 40% | |
| `softmax_registers` | 16384 x 4096 | 0.311 | 1,726 | 41% | |
| `softmax_vectorised` | 16384 x 4096 | 0.14 | 3,800 | 91% | |
| `softmax_vectorised`, 4 vectors per thread | 16384 x 4096 | 0.15 | 3,600 | 85% | |
| `softmax_pipelined` | 16384 x 4096 | 0.145 | 3,700 | 88% | |
| `torch.softmax` | 16384 x 4096 | 0.2098 | 2,558 | 61% | |""",
    "tuning": """## Tuning: the autotuner, its cost model, and the vendor libraries

`python benchmarks/tuning.py` on NVIDIA H100 80GB HBM3 (132 SMs).

- Date: 2026-12-01

| space | shape | candidates (tried) | best config | best ms |
|---|---|---|---|---:|
| sgemm | 1024^3 | 135 (3) | BM=128, BN=64, TM=4, TN=4, BK=16 | 0.1668 |

### Every timed candidate

Each candidate's measured time beside the model's prediction.

| space | shape | config | measured ms | predicted ms |
|---|---|---|---:|---:|
| sgemm | 1024^3 | BM=128, BN=64, TM=4, TN=4, BK=16 | 0.1668 | 0.1 |
| sgemm | 1024^3 | BM=64, BN=64, TM=2, TN=2, BK=16 | 0.5 | 0.2 |
| sgemm | 1024^3 | BM=128, BN=128, TM=8, TN=2, BK=16 | 0.3 | 0.3 |""",
}


COUNTERS = """## What holds the kernels back: Nsight Compute's counters

Device: NVIDIA H200 (132 SMs), 2026-12-02. CUDA driver 13.0; Version 2025.3.1.0.

### Softmax, 16384 x 4096

| kernel | launch | µs | registers | warp instructions (millions) | SM clock (GHz) | warps stalled most |
|---|---|---:|---:|---:|---:|---|
| `softmax_row_fused` | 16384 blocks of 128 | 270.7 | 32 | 40.00 | 1.75 | not_selected 6.1 |
| `softmax_online` | 16384 blocks of 128 | 326.2 | 32 | n/a | n/a | long_scoreboard 14.9 |

### SGEMM tile shapes, 4096^3

| kernel | launch | µs | registers | warp instructions (millions) | SM clock (GHz) | warps stalled most |
|---|---|---:|---:|---:|---:|---|
| `matmul_warp_tiled` (the top rung) | grid 1024, blocks of 256 | 3,905.9 | 126 | 1,000.00 | 1.70 | not_selected 1.8 |"""


@pytest.fixture(scope="module")
def bench():
    module, unload = load_benchmark("cost_model", "cost_model_benchmark")
    yield module
    unload()


def results_file(tmp_path, **sections):
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\n" + "\n\n".join(
        f"<!-- {name}: begin -->\n{text}\n<!-- {name}: end -->" for name, text in sections.items()) + "\n")
    return path


def test_parsing_what_tuning_py_and_the_tables_write(bench):
    assert bench.parsed_config("BM=128, BN=64, TM=4") == {"BM": 128, "BN": 64, "TM": 4}
    assert bench.parsed_config("kernel=row_fused, threads=128") == {"kernel": "row_fused", "threads": 128}
    assert bench.parsed_config("algorithm=implicit_gemm_nhwc") == {"algorithm": "implicit_gemm_nhwc"}
    assert bench.first_number("0.98 (2%)") == 0.98 and bench.first_number("4,196") == 4196.0


def test_every_group_priced_against_its_recorded_times(bench, tmp_path):
    path = results_file(tmp_path, **SECTIONS, counters=COUNTERS)
    done, left_out = bench.groups(path)
    assert left_out == []
    assert [(g.name, g.source, len(g.launches), len(g.priced)) for g in done] == [
        ("SGEMM ladder, 4096^3", "section `matmul`, on NVIDIA H200, 2026-11-29", 5, 5),
        ("convolutions, conv2_x 3x3", "section `conv`, on NVIDIA H200, 2026-11-29", 4, 4),
        ("fused softmaxes, 16384 x 4096", "section `fusion`, on NVIDIA H200, 2026-12-01", 6, 6),
        ("tuning space sgemm, 1024^3", "section `tuning`, on NVIDIA H100 80GB HBM3, 2026-12-01", 3, 2)]
    ladder = done[0].launches
    assert [launch.label for launch in ladder][::4] == ["matmul_naive", "matmul_warp_tiled"]
    assert ladder[0].measured == pytest.approx(2 * 4096**3 / 0.98e12)  # from the 4096^3 row's TFLOP/s
    assert [launch.measured for launch in done[1].launches] == pytest.approx([9.737e-3, 1.243e-3, 1.01e-3, 0.2817e-3])
    assert [launch.label for launch in done[2].launches] == [  # the fused ones at the goal's size only
        "`softmax_row_fused`", "`softmax_online`", "`softmax_registers`", "`softmax_vectorised`",
        "`softmax_vectorised`, 4 vectors per thread", "`softmax_pipelined`"]
    assert done[2].launches[3].predicted < done[2].launches[1].predicted  # one read of x, against online's two
    assert done[3].launches[2].predicted is None  # 1024 threads x 72 registers: it cannot launch on an H100
    assert all(launch.predicted > 0 for g in done for launch in g.priced)
    assert done[0].spearman == pytest.approx(1.0)  # the ladder in its measured order
    text = bench.section(done, left_out)
    assert "- Goal: Spearman >= 0.8 in every group:" in text
    assert table_rows(text)[0][:4] == ["SGEMM ladder, 4096^3", "`matmul`, on NVIDIA H200, 2026-11-29", "5 (5)", "1.00"]
    last = table_rows(text, "### Every launch")[-1]
    assert last[1:4] == ["BM=128, BN=128, TM=8, TN=2, BK=16", "0.3", "cannot launch"]
    # the model's count of instructions beside ncu's, where the counters section has one
    assert "Not compared: the `counters` section (not recorded)" in text
    counted = bench.ncu_counts(path)
    assert counted == ({"softmax_row_fused": (40e6, 1.75e9), "matmul_warp_tiled": (1000e6, 1.70e9)},
                       "on NVIDIA H200, 2026-12-02")
    compared = table_rows(bench.section(done, left_out, counted), "### Instructions")
    fused, top = done[2].launches[0], done[0].launches[4]
    assert fused.instructions > 0 and top.instructions > 0
    assert compared == [["SGEMM ladder, 4096^3", "matmul_warp_tiled", f"{top.instructions / 1e6:,.2f}", "1,000.00",
                         f"{top.instructions / 1000e6:.2f}", "1.70"],
                        ["fused softmaxes, 16384 x 4096", "`softmax_row_fused`", f"{fused.instructions / 1e6:,.2f}",
                         "40.00", f"{fused.instructions / 40e6:.2f}", "1.75"]]


def test_a_missing_section_or_an_unmodelled_gpu_is_named_and_left_out(bench, tmp_path):
    simulated = SECTIONS["conv"].replace("on NVIDIA H200 (132 SMs)", "on CPU simulator (2 SMs)")
    done, left_out = bench.groups(results_file(tmp_path, conv=simulated))
    assert done == []
    assert left_out == ["section `matmul`: not recorded",
                        "section `conv` (on CPU simulator, 2026-11-29): the model has no data sheet for that GPU",
                        "section `fusion`: not recorded", "section `tuning`: not recorded"]
    text = bench.section(done, left_out)
    assert "- Goal: Spearman >= 0.8 in every group: no group priced." in text
    assert "- Left out: section `matmul`: not recorded; section `conv`" in text


def test_a_tuning_section_without_candidates_says_so(bench, tmp_path):
    old = SECTIONS["tuning"].split("\n\n### Every timed candidate")[0]
    _, left_out = bench.groups(results_file(tmp_path, tuning=old))
    assert left_out[-1] == ("section `tuning`, on NVIDIA H100 80GB HBM3, 2026-12-01: no table "
                            "\"Every timed candidate\" (tuning.py records one from 2026-11-30 on)")


def test_print_prints_and_records_nothing_and_a_run_records_its_section(bench, tmp_path, monkeypatch, capsys):
    from gpucourse.course import results

    one_candidate = "\n".join(SECTIONS["tuning"].splitlines()[:-2])  # one launch to price: quick
    path = results_file(tmp_path, tuning=one_candidate)
    monkeypatch.setattr(results, "RESULTS", path)
    real_record = results.record
    monkeypatch.setattr(results, "record", lambda name, text: real_record(name, text, path))
    before = path.read_text()
    assert bench.main(["--print"]) == 0
    assert "| tuning space sgemm, 1024^3 |" in capsys.readouterr().out and path.read_text() == before
    assert bench.main([]) == 0
    assert results.recorded(bench.NAME, path).startswith("## The cost model against the recorded GPU times")
