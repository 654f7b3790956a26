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
