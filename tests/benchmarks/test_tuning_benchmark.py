"""benchmarks/tuning.py: its report, goal and time budget (the GPU path needs a GPU; without one it says so, tested
elsewhere)."""

from types import SimpleNamespace

import pytest

from conftest import ROOT, load_benchmark, table_rows

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
    assert "(it knows T4, A100, H100, H200)" in bench.section([row(bench, None)], DEVICE, "v", 5, None)


def test_a_failed_candidate_records_nothing(bench, capsys):
    assert bench.finish(bench.NAME, "text", [row(bench, 0.9, ["{'BM': 32}: wrong result: differs"])], write=True) == 1
    assert "nothing recorded" in capsys.readouterr().out


def test_a_candidate_that_cannot_launch_is_named_not_counted_wrong(bench):
    launch = "{'BM': 128, 'BN': 128, 'TM': 2, 'TN': 8}: CudaAPIError: CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES"
    failed = row(bench, 0.9, [launch])
    assert not failed.wrong and failed.not_launched == [launch]
    text = bench.section([failed], DEVICE, "versions", 5, "H100")
    assert ("Candidates that could not launch (counted in tried, not timed): sgemm 4096^3: "
            "{'BM': 128, 'BN': 128, 'TM': 2, 'TN': 8} (CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES)") in text
    assert "could not launch" not in bench.section([row(bench, 0.9)], DEVICE, "versions", 5, "H100")


def test_every_case_builds_its_problem_with_a_traced_proxy(bench):
    for case in bench.QUICK_CASES:
        problem = bench.problem_of(case)
        assert problem.proxy is not None and problem.proxy.flops < problem.flops


# -- main: the time budget (`--seconds`), each space's tuning a stand-in ----------------------------------------
@pytest.fixture
def run(bench, benchmark_run, monkeypatch):
    """`main` on every case; ``run.measured``: the cases tuned, in order (each takes a minute)."""
    run = benchmark_run(bench, SimpleNamespace(name="CPU simulator", sms=2))  # no cost model for it
    run.measured = []

    def measure(case, samples, budget, libraries, model, priced):
        run.row()
        run.priced = priced
        run.measured.append(case.name)
        return bench.Row(case, 10, 5, {"BM": 64}, 1.0, None, 2.0)

    monkeypatch.setattr(bench, "measure", measure)
    return run


def test_a_time_budget_tunes_each_spaces_largest_shape_first_and_names_those_left_out(bench, run):
    recorded = run(*run.ONE_ROW)
    assert run.measured == ["sgemm 4096^3"] and not run.priced  # gpu-check's share: cost_model.py prices them
    assert recorded.write  # a full run's cases, cut short by time: still recorded, and says so
    assert [row[:2] for row in table_rows(recorded.text)] == [["sgemm", "4096^3"]]
    note = recorded.text.split("\n\n")[4]  # under the table (title, device, list, table, note)
    assert "sgemm_warp 4096^3, conv ResNet conv2_x 3x3, batch 32, softmax 4096 x 4096, sgemm 1024^3" in note
    assert "tuning.py" in note


def test_a_full_run_tables_every_case_in_order_with_no_note(bench, run):
    recorded = run()
    assert run.priced and run.measured == [case.name for case in bench.CASES[1:]] + [bench.CASES[0].name]
    assert [row[1] for row in table_rows(recorded.text)] == [case.label for case in bench.CASES]
    blocks = recorded.text.split("\n\n")  # title, device, list with the goal, table: no note
    assert recorded.write and len(blocks) == 4 and "\n- Goal: " in blocks[2] and blocks[3].startswith("| space |")


def test_a_short_run_measures_what_the_section_lacks_first_and_keeps_the_rest_as_recorded(bench, run, monkeypatch):
    """Short device commands fill the section case by case: what an earlier run on this GPU recorded is measured
    last, and kept (with its date and its candidates) where this run had no time for it."""
    def measure(case, samples, budget, libraries, model, priced):
        run.row()
        run.measured.append(case.name)
        return bench.Row(case, 10, 2, {"BM": 64}, 1.0, None, 2.0, measured=[0.001, 0.002],
                         timed=[{"BM": 64}, {"BM": 32}])

    monkeypatch.setattr(bench, "measure", measure)
    monkeypatch.setattr(bench, "recorded_section", lambda: None)
    first = run(*run.ONE_ROW).text.replace(f"- Date: {bench.today()}", "- Date: 2026-11-30")
    monkeypatch.setattr(bench, "recorded_section", lambda: first)
    run.measured.clear()
    second = run(*run.ONE_ROW).text
    assert run.measured == ["sgemm_warp 4096^3"]  # not sgemm 4096^3 again
    assert [r[:2] for r in table_rows(second)] == [["sgemm", "4096^3"], ["sgemm_warp", "4096^3"]]
    assert [r[:3] for r in table_rows(second, bench.CANDIDATES)] == [
        ["sgemm", "4096^3", "BM=64"], ["sgemm", "4096^3", "BM=32"],
        ["sgemm_warp", "4096^3", "BM=64"], ["sgemm_warp", "4096^3", "BM=32"]]
    assert f"{bench.CARRIED} sgemm 4096^3 (2026-11-30)." in second
    not_measured = next(line for line in second.splitlines() if line.startswith("Not measured"))
    assert "sgemm 4096^3" not in not_measured.replace("sgemm_warp 4096^3", "") and "sgemm 1024^3" in not_measured
    monkeypatch.setattr(bench, "recorded_section", lambda: second)
    run.measured.clear()
    third = run(*run.ONE_ROW).text  # the date each was measured stays with it
    assert f"{bench.CARRIED} sgemm 4096^3 (2026-11-30), sgemm_warp 4096^3 ({bench.today()})." in third
    assert len(table_rows(third)) == 3 and run.measured == ["conv ResNet conv2_x 3x3, batch 32"]
    # another GPU's section, or a run without --seconds: nothing carried
    monkeypatch.setattr(bench, "recorded_section", lambda: first.replace("on CPU simulator", "on NVIDIA A100"))
    run.measured.clear()
    assert bench.CARRIED not in run(*run.ONE_ROW).text and run.measured == ["sgemm 4096^3"]
    monkeypatch.setattr(bench, "recorded_section", lambda: first)
    run.measured.clear()
    assert bench.CARRIED not in run().text and len(run.measured) == len(bench.CASES)


# -- `measure`, its GPU path, on the simulator at tiny sizes (the simulator's events time the CPU) -------------
def tiny_problem(case):
    """``case``'s space at a size the simulator runs in a second, none of its sizes a multiple of a tile."""
    from gpucourse.grading import tuning as gt

    if case.family == "sgemm":
        tiles = {"BM": (16, 32), "BN": (16, 32), "TM": (2,), "TN": (2,), "BK": (8,)}
        return gt.sgemm_problem(40, 36, 24, tiles, traced=(24, 20, 16))
    if case.family == "sgemm_warp":
        from gpucourse.kernels import sgemm

        tiles = {"BM": (64,), "BN": (64, 128), "BK": (8,), "WM": (32,), "WN": (32, 64), "LANES_M": (4,)}
        return gt.sgemm_problem(40, 36, 24, tiles, factory=sgemm.make_warp_tiled, traced=(24, 20, 16))
    if case.family == "conv":
        return gt.conv_problem(1, 4, 7, 6, 5, traced=(1, 4, 5, 5, 4))
    return gt.softmax_problem(5, 70, traced=(3, 40))


def test_measure_tunes_times_and_ranks_every_space_with_the_cost_model_of_the_gpu_it_names(bench, monkeypatch):
    from gpucourse.figures import tuning as ft
    from gpucourse.run import tuning as rt

    monkeypatch.setattr(bench, "problem_of", tiny_problem)
    monkeypatch.setattr(rt, "_device", lambda: ("NVIDIA H200", (9, 0)))  # as if it timed on a GPU
    model = ft.cost_model(ft.modelled_device("NVIDIA H200"))
    rows = [bench.measure(case, 1, 3, {}, model) for case in bench.QUICK_CASES]
    for row in rows:
        assert row.errors == [] and row.best is not None and row.best_ms > 0, row
        assert row.tried == len(row.measured) == len(row.predicted) >= 2 and row.spearman is not None
        assert all(p > 0 for p in row.predicted)
    text = bench.section(rows, SimpleNamespace(name="NVIDIA H200", sms=132), "v", 1, model.device)
    assert "the cost model for the H200 ranks the candidates" in text
    assert [r[0] for r in table_rows(text)] == ["sgemm", "sgemm_warp", "conv", "softmax"]


def test_the_report_keeps_every_timed_candidates_time_and_prediction(bench):
    timed = row(bench, 0.5)
    timed.timed = [{"BM": 64, "BN": 64}, {"BM": 32, "BN": 64}, {"BM": 64, "BN": 32}]
    text = bench.section([timed], DEVICE, "versions", 5, "H100")
    assert text.split("\n\n")[-3] == bench.CANDIDATES
    assert table_rows(text, bench.CANDIDATES) == [["sgemm", "4096^3", "BM=64, BN=64", "1000", "1000"],
                                                  ["sgemm", "4096^3", "BM=32, BN=64", "3000", "2000"],
                                                  ["sgemm", "4096^3", "BM=64, BN=32", "2000", "3000"]]


def test_a_run_with_a_time_share_tables_the_measured_times_for_cost_model_to_price(bench, monkeypatch):
    from gpucourse.figures import tuning as ft
    from gpucourse.run import tuning as rt

    monkeypatch.setattr(bench, "problem_of", tiny_problem)
    monkeypatch.setattr(rt, "_device", lambda: ("NVIDIA H200", (9, 0)))
    model = ft.cost_model(ft.modelled_device("NVIDIA H200"))
    timed = bench.measure(bench.QUICK_CASES[0], 1, 3, {}, model, priced=False)
    assert len(timed.measured) == len(timed.timed) >= 2 and timed.predicted == [] and timed.spearman is None
    text = bench.section([timed], SimpleNamespace(name="NVIDIA H200", sms=132), "v", 1, model.device)
    assert "priced for the H200 on a CPU by `benchmarks/cost_model.py`" in text
    assert [r[3:] for r in table_rows(text, bench.CANDIDATES)][0][1] == "-" and len(table_rows(text, bench.CANDIDATES)) \
        == len(timed.measured)
