"""benchmarks/numba_cuda_conformance.py: its buckets and report, from made-up outcomes (the run itself is slow)."""

import pytest

from conftest import load_benchmark


@pytest.fixture(scope="module")
def bench():
    module, unload = load_benchmark("numba_cuda_conformance", "numba_cuda_conformance_under_test")
    yield module
    unload()


def test_buckets_and_report(bench):
    numba = {f"test_a::T::t{k}": ("passed", "") for k in range(6)}
    numba |= {"test_b::T::u": ("passed", ""), "test_c::T::v": ("passed", ""), "test_sm::TestSharedMemoryIssue::test_issue_2393": ("passed", ""),
              "test_a::T::skipped_there": ("skipped", "")}
    course = {
        "test_a::T::t0": ("passed", ""),
        "test_a::T::t1": ("failed", "AssertionError: N != N"),
        "test_a::T::t2": ("failed", "gpucourse.simulator.errors.DataRace: kernel `.`, line N"),
        "test_a::T::t3": ("failed", "gpucourse.simulator.errors.UnsupportedInKernel: kernel `.`, line N"),
        "test_a::T::t4": ("skipped", "requires a GPU"),
        "test_a::T::t5": ("failed", "KeyError: 'x'"),
        "test_b::test_b": ("failed", "AttributeError: no attribute 'ctx_devnum'"),  # the module did not import
        "test_c.py": ("timeout", "over 900 s"),  # the whole file
        "test_sm::TestSharedMemoryIssue::test_issue_2393": ("failed", "gpucourse.simulator.errors.UninitializedRead"),
    }
    result = bench.compare(numba, course)
    assert (result["goal"], result["passed"]) == (9, 1)
    kinds = {kind: tests for (kind, _), tests in result["failing"].items()}
    assert kinds == {"silent wrong result?": ["test_a::T::t1"], "fault report": ["test_a::T::t2"],
                     "course message": ["test_a::T::t3"], "skipped": ["test_a::T::t4"],
                     "other error": ["test_a::T::t5"], "not run: its module did not import": ["test_b::T::u"],
                     "its file timed out": ["test_c::T::v"],
                     "deliberate fault report": ["test_sm::TestSharedMemoryIssue::test_issue_2393"]}
    text = bench.section(result, ["test_a.py", "test_b.py", "test_c.py", "test_sm.py"])
    assert "**1 pass** on the course backend" in text
    assert "| not run: its module did not import | AttributeError: no attribute 'ctx_devnum' | 1 | `T::u` |" in text
    assert "- `test_sm::TestSharedMemoryIssue::test_issue_2393`: reads shared memory nothing wrote" in text
    assert "- `test_c.py`: not measured" in text  # why a file times out, where it was measured


def test_every_process_of_the_course_side_imports_gpucourse_first(bench):
    """Tests that start `python -c ...` (test_print) run it on the course backend too; numba's side never does."""
    import subprocess
    import sys

    code = "import sys; print('gpucourse' in sys.modules)"
    for side, imported in (("course", "True"), ("numba", "False")):
        run = subprocess.run([sys.executable, "-c", code], env=bench.side_environment(side), capture_output=True,
                             text=True, check=True)
        assert run.stdout.strip() == imported, (side, run.stderr)
