"""Benchmark sections of RESULTS.md: written one at a time, read back, shown in lectures."""

import pytest

from gpucourse.course import results


def test_sections_are_replaced_one_at_a_time(tmp_path):
    path = tmp_path / "RESULTS.md"
    results.record("bandwidth", "| a | b |\n|---|---|\n| 1 | 2 |", path)
    results.record("matmul", "first", path)
    results.record("matmul", "second", path)
    assert results.recorded("matmul", path) == "second"
    assert results.recorded("bandwidth", path).endswith("| 1 | 2 |")
    assert path.read_text().count("<!-- matmul: begin -->") == 1
    assert results.recorded("conv", path) is None


def test_lectures_show_the_table_or_say_why_not(tmp_path):
    path = tmp_path / "RESULTS.md"
    assert "course repository" in results.show_recorded("matmul", path).data
    results.record("bandwidth", "the table", path)
    assert "No `matmul` results recorded yet" in results.show_recorded("matmul", path).data
    assert results.show_recorded("bandwidth", path).data == "the table"  # no table to cut: shown whole


def _record_many(path, name, times):
    for k in range(times):
        results.record(name, f"{name} {k}\n" + "x" * 20_000, path)


def test_scripts_recording_side_by_side_lose_no_section(tmp_path):
    """gpu-check runs the differential test and the fuzzing at once: each rewrites its own section of one file."""
    import multiprocessing

    path = tmp_path / "RESULTS.md"
    names = [f"part{k}" for k in range(4)]
    context = multiprocessing.get_context("fork")
    writers = [context.Process(target=_record_many, args=(path, name, 40)) for name in names]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join(120)
    assert all(writer.exitcode == 0 for writer in writers)
    assert [results.recorded(name, path).splitlines()[0] for name in names] == [f"{name} 39" for name in names]


def test_recorded_rows_cut_a_table_to_its_header_and_the_rows_named(tmp_path):
    path = tmp_path / "RESULTS.md"
    results.record("session", "Some words.\n\n| kernel | time |\n|---|---:|\n| `flash` | 2 ms |\n| softmax | 1 ms |\n"
           "| map | 3 ms |\n\nMore words.", path)
    assert results.recorded_rows("session", ("flash", "soft"), path) == (
        "| kernel | time |\n|---|---:|\n| `flash` | 2 ms |\n| softmax | 1 ms |")
    assert results.recorded_rows("session", ("conv",), path) is None
    assert results.recorded_rows("other", ("map",), path) is None


# A section as the GPU benchmarks write them: a device line, a date, goal lines, method lines, then two tables (the
# first one row and wider than a slide, the second one row per kernel), then a line under the tables.
WIDE = ["layer", "shape", "GFLOP"] + [f"`conv_{k}` TFLOP/s (% of cuDNN)" for k in
                                      ("direct", "implicit_gemm", "implicit_gemm_nhwc", "implicit_gemm_warp_tiled")]
CONV = "\n".join([
    "## Convolution against cuDNN float32",
    "",
    "`python benchmarks/conv.py` on NVIDIA H200 (132 SMs).",
    "",
    "- Date: 2026-11-29",
    "- Versions: Python 3.12.3, numba 0.68.0",
    "- Goal: `conv_implicit_gemm_warp_tiled` >= 50% of cuDNN float32: met (90%). Set for an H100.",
    "- Goals were set for an H100.",
    "- Timing: CUDA events, median of 7 samples.",
    "",
    "### TFLOP/s and % of cuDNN",
    "",
    "| " + " | ".join(WIDE) + " |",
    "|---|---|" + "---:|" * (len(WIDE) - 2),
    "| conv2_x 3x3 | 32 x 64x56x56 | 7.4 | 0.76 (3%) | 5.95 (20%) | 7.33 (25%) | 26.26 (90%) |",
    "",
    "### Every measurement",
    "",
    "| kernel | layer | time (ms) | TFLOP/s | % of cuDNN | note |",
    "|---|---|---:|---:|---:|---|",
    "| cuDNN, benchmark off | conv2_x 3x3 | 0.2542 | 29.11 | 100% | same x and w |",
    "| `conv_direct` | conv2_x 3x3 | 9.737 | 0.76 | 3% | grid 50176 |",
    "| `conv_implicit_gemm` | conv2_x 3x3 | 1.243 | 5.95 | 20% | grid 1568x1 |",
    "| `conv_implicit_gemm_nhwc` | conv2_x 3x3 | 1.01 | 7.33 | 25% | x, w and y in NHWC |",
    "",
    "Not measured within this run's time budget: conv3_x 3x3.",
])
# The form benchmarks/tuning.py writes: device and date on the first line, the goal at the end.
TUNING = "\n".join([
    "NVIDIA H200, 2026-11-29; CUDA driver 13.0, Python 3.12.3; median of 5 samples per time.",
    "",
    "| space | shape | best config | best ms | reference | reference ms | Spearman |",
    "|---|---|---|---:|---|---:|---:|",
    "| sgemm | 1024^3 | BM=128, BN=64 | 0.1668 | cuBLAS fp32 | 0.05638 | 0.73 |",
    "| softmax | 4096 x 4096 | kernel=row_fused | 0.07325 | torch.softmax | 0.05654 | 0.92 |",
    "",
    "Goal: the cost model ranks the candidates of every space with Spearman >= 0.8: NOT met (lowest 0.73).",
])


def sample(tmp_path):
    path = tmp_path / "RESULTS.md"
    results.record("conv", CONV, path)
    results.record("tuning", TUNING, path)
    return path


def test_a_lecture_shows_the_date_the_goals_and_the_first_table_not_the_whole_section(tmp_path):
    shown = results.show_recorded("conv", sample(tmp_path)).data
    note, goals, table = shown.split("\n\n")
    assert note == ('*Measured on NVIDIA H200, 2026-11-29. Below: "TFLOP/s and % of cuDNN"; '
                    'the whole section: `benchmarks/RESULTS.md`, section `conv`.*')
    assert goals == ("- Goal: `conv_implicit_gemm_warp_tiled` >= 50% of cuDNN float32: met (90%). Set for an H100.\n"
                     "- Goals were set for an H100.")
    assert table.splitlines()[0] == "| " + " | ".join(WIDE) + " |" and len(table.splitlines()) == 3
    assert "Timing" not in shown and "Versions" not in shown and "Every measurement" not in shown


def test_a_lecture_chooses_the_table_by_its_heading_its_rows_by_words_and_its_columns_by_header(tmp_path):
    path = sample(tmp_path)
    shown = results.show_recorded("conv", path, table="### Every measurement", rows=("cuDNN", "conv_implicit"),
                                  columns=("kernel", "time (ms)", "% of cuDNN"), goals=False).data
    note, table = shown.split("\n\n")
    assert note.startswith('*Measured on NVIDIA H200, 2026-11-29. Below: "Every measurement", 3 of 4 rows, '
                           "3 of 6 columns; the whole section: `benchmarks/RESULTS.md`, section `conv`.*")
    assert table == ("| kernel | time (ms) | % of cuDNN |\n|---|---:|---:|\n| cuDNN, benchmark off | 0.2542 | 100% |\n"
                     "| `conv_implicit_gemm` | 1.243 | 20% |\n| `conv_implicit_gemm_nhwc` | 1.01 | 25% |")
    # a wide table cut to the columns a lecture names: whole words, backticks ignored, in the table's order
    wide = results.show_recorded("conv", path, table="TFLOP/s and % of cuDNN",
                                 columns=("conv_implicit_gemm_warp_tiled", "layer", "conv_implicit_gemm")).data
    assert wide.splitlines()[-3:] == [
        "| layer | `conv_implicit_gemm` TFLOP/s (% of cuDNN) | `conv_implicit_gemm_warp_tiled` TFLOP/s (% of cuDNN) |",
        "|---|---:|---:|", "| conv2_x 3x3 | 5.95 (20%) | 26.26 (90%) |"]
    assert "3 of 7 columns" in wide
    # a header equal to the name is the only column it picks
    assert results.recorded_rows("tuning", ("sgemm",), path, columns=("space", "reference")) == (
        "| space | reference |\n|---|---|\n| sgemm | cuBLAS fp32 |")
    assert results.recorded_rows("tuning", ("sgemm",), path, columns=("best",)).startswith("| best config | best ms |")
    only_h100 = results.show_recorded("conv", path, table="Every", goals=("were set",)).data
    assert "\n\n- Goals were set for an H100.\n\n| kernel |" in only_h100


def test_a_choice_that_matches_nothing_warns_and_names_what_there_is(tmp_path):
    path = sample(tmp_path)
    with pytest.warns(UserWarning, match='no table under a heading "Attention".*"TFLOP/s and % of cuDNN", '
                                         '"Every measurement"'):
        shown = results.show_recorded("conv", path, table="Attention").data
    assert "the whole section: `benchmarks/RESULTS.md`, section `conv`" in shown and "|" not in shown
    with pytest.warns(UserWarning, match="no column of \"Every measurement\" is headed 'GB/s'"):
        results.show_recorded("conv", path, table="Every measurement", columns=("kernel", "GB/s"))
    with pytest.warns(UserWarning, match="no row of \"Every measurement\" has a first cell that contains 'flash'"):
        results.show_recorded("conv", path, table="Every measurement", rows=("flash",))


def test_the_whole_section_on_request(tmp_path):
    path = sample(tmp_path)
    shown = results.show_recorded("conv", path, whole=True).data
    assert shown == f"*Measured on NVIDIA H200, 2026-11-29 (`benchmarks/RESULTS.md`).*\n\n{CONV}"
    with pytest.raises(TypeError, match="whole=True"):
        results.show_recorded("conv", path, whole=True, table="Every measurement")


def test_recorded_rows_read_one_table_not_the_rows_of_the_next_under_its_header(tmp_path):
    path = sample(tmp_path)
    # "conv_direct" is in the second table only: the first table's header must not take it
    assert results.recorded_rows("conv", ("conv_direct",), path) is None
    assert results.recorded_rows("conv", ("conv2_x",), path).splitlines()[0] == "| " + " | ".join(WIDE) + " |"
    assert results.recorded_rows("conv", ("conv_direct",), path, table="Every measurement",
                                 columns=("kernel", "TFLOP/s")) == (
        "| kernel | TFLOP/s |\n|---|---:|\n| `conv_direct` | 0.76 |")
    with pytest.raises(LookupError, match="no table under a heading"):
        results.recorded_rows("conv", ("conv_direct",), path, table="Attention")


def test_the_tuning_sections_device_and_date_come_from_its_first_line(tmp_path):
    path = sample(tmp_path)
    assert results.measured_on(TUNING) == "on NVIDIA H200, 2026-11-29"
    assert results.measured_on(CONV) == "on NVIDIA H200, 2026-11-29"
    assert results.measured_on("| a | b |\n|---|---|\n| 1, 2026-11-29 | 2 |") is None
    shown = results.show_recorded("tuning", path, columns=("space", "best config", "Spearman")).data
    assert shown.split("\n\n")[:2] == [
        "*Measured on NVIDIA H200, 2026-11-29. Below: the table, 3 of 7 columns; the whole section: "
        "`benchmarks/RESULTS.md`, section `tuning`.*",
        "- Goal: the cost model ranks the candidates of every space with Spearman >= 0.8: NOT met (lowest 0.73)."]
    assert shown.endswith("| softmax | kernel=row_fused | 0.92 |")
