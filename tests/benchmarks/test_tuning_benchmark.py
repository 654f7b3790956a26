"""benchmarks/tuning.py: its report and goal (the GPU path needs a GPU; without one it says so, tested elsewhere)."""

from types import SimpleNamespace

import pytest

from conftest import ROOT, load_benchmark

SCRIPT = ROOT / "benchmarks" / "tuning.py"
DEVICE = SimpleNamespace(name="NVIDIA H100 80GB HBM3", sms=132)


@pytest.fixture(scope="module")
def bench():
    module, unload = load_benchmark(SCRIPT.stem, "tuning_benchmark")
    yield module
    unload()


def row(bench, spearman, errors=()):
    r = bench.Row(bench.CASES[1], 135, 24, {"BM": 64, "BN": 64}, 12.0, 2.66, 80.0, [1, 2, 3], [1, 3, 2],
                  list(errors), spearman)
    return r


def test_the_report_has_the_best_config_the_reference_share_and_the_goal(bench):
    text = bench.section([row(bench, 0.9), row(bench, 0.85)], DEVICE, "versions", 5, "H100")
    assert "BM=64, BN=64" in text and "22.2%" in text and "135 (24)" in text
    assert "Spearman >= 0.8: met (lowest 0.85 over 6 predictions)" in text
    assert "NOT met (lowest 0.50" in bench.section([row(bench, 0.9), row(bench, 0.5)], DEVICE, "v", 5, "H100")
    assert "no cost model for a" in bench.section([row(bench, None)], DEVICE, "v", 5, None)


def test_a_failed_candidate_records_nothing(bench, capsys):
    assert bench.finish(bench.NAME, "text", [row(bench, 0.9, ["{'BM': 32}: wrong result: differs"])], write=True) == 1
    assert "nothing recorded" in capsys.readouterr().out


def test_every_case_builds_its_problem_with_a_traced_proxy(bench):
    for case in bench.QUICK_CASES:
        problem = bench.problem_of(case)
        assert problem.proxy is not None and problem.proxy.flops < problem.flops
