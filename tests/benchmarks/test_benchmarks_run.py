"""The benchmark scripts still run (on tiny sizes, course simulator only; no timing is asserted)."""

import importlib.util
import sys

import pytest

from conftest import ROOT
from gpucourse.course import results


@pytest.fixture(scope="module")
def simulator_speed():
    spec = importlib.util.spec_from_file_location("simulator_speed", ROOT / "benchmarks" / "simulator_speed.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look themselves up there
    spec.loader.exec_module(module)
    yield module
    sys.modules.pop(spec.name, None)


def test_simulator_speed_course_side_runs(simulator_speed, tmp_path):
    benchmarks = simulator_speed.SCALES["tiny"]()
    rows = simulator_speed.measure_course(benchmarks, repeats=1)  # checks the holdout outputs too
    assert len(rows) == len(benchmarks)
    for row in rows:
        assert row["course"] > 0 and row["traced"] > 0
        row["numba"] = 100 * row["course"]  # stands in for the other side, which needs its own process
    rows[-1]["numba"] = None  # numba's simulator has no warp shuffles
    text = simulator_speed.section(benchmarks, rows, repeats=1)
    assert text.count("\n| ") == len(benchmarks) + 1  # a header, then one row per benchmark
    assert "geometric mean **100x** over 3 kernels (below the goal of 300x)" in text
    assert "| n/a |" in text

    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\nAnother benchmark's section.\n")
    results.record(simulator_speed.NAME, text, path)
    results.record(simulator_speed.NAME, text, path)
    written = path.read_text()
    begin, _ = results.markers(simulator_speed.NAME)
    assert written.count(begin) == 1 and "Another benchmark's section." in written
    assert results.recorded(simulator_speed.NAME, path) == text


def test_simulator_speed_section_is_the_recorded_one():
    """The committed section has the layout `section` writes (the markers are `gpucourse.results`'s)."""
    text = results.recorded("simulator_speed")
    assert text is not None and text.startswith("## Course simulator vs numba's simulator")
