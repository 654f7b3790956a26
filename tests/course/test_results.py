"""Benchmark sections of RESULTS.md: written one at a time, read back, shown in lectures."""

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
    assert results.show_recorded("bandwidth", path).data == "the table"


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
