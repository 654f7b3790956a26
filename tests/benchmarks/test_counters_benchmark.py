"""benchmarks/counters.py: ncu's CSV read in both its shapes, launches dealt out to the targets, the section, the
plumbing through a stand-in ncu, and the targets launched on the simulator (no counter is real here)."""

import contextlib
import json
import stat
import sys

import numpy as np
import pytest

from conftest import ROOT, load_benchmark

SIMULATED = dict(name="CPU simulator", sms=2, l2_bytes=16 * 1024, real=False)
STALL = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"


@pytest.fixture(scope="module")
def bench():
    module, unload = load_benchmark("counters", "counters_benchmark")
    yield module
    unload()


def launch_columns(n: int) -> list[dict]:
    """``n`` launches' metrics as ncu names them (times in ns, bytes in bytes)."""
    return [{"gpu__time_duration.sum": 1000.0 * (k + 1), "dram__bytes_read.sum": 4e6, "dram__bytes_write.sum": 4e6,
             "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": 61.5,
             "sm__warps_active.avg.pct_of_peak_sustained_active": 40.0, "sm__maximum_warps_per_active_cycle_pct": 50.0,
             "launch__registers_per_thread": 64.0, "lts__t_sector_hit_rate.pct": 12.0,
             STALL.format("long_scoreboard"): 9.5, STALL.format("barrier"): 2.25, STALL.format("selected"): 30.0,
             STALL.format("wait"): 1.0, STALL.format("drain"): 0.5, "smsp__inst_executed.sum": 2.5e6 * (k + 1),
             "sm__cycles_elapsed.avg.per_second": 1.755e9} for k in range(n)]


def wide_csv(launches: list[dict], names) -> str:
    """ncu's `--page raw` CSV with a column per metric and a units row, after its ==PROF== lines."""
    metrics = list(launches[0])
    units = {"gpu__time_duration.sum": "nsecond", "dram__bytes_read.sum": "byte", "dram__bytes_write.sum": "byte",
             "smsp__inst_executed.sum": "inst", "sm__cycles_elapsed.avg.per_second": "cycle/second"}
    quote = lambda cells: ",".join(f'"{c}"' for c in cells)  # noqa: E731
    lines = ["==PROF== Connected to process 1 (python3)", quote(["ID", "Process ID", "Kernel Name", *metrics]),
             quote(["", "", "", *(units.get(m, "%") for m in metrics)])]
    lines += [quote([k, 1, name, *(f"{v:,}" for v in launch.values())])
              for k, (launch, name) in enumerate(zip(launches, names))]
    return "\n".join(lines)


def long_csv(launches: list[dict], names) -> str:
    """The same as a row per metric, times in microseconds and bytes in megabytes."""
    rows = ['"ID","Kernel Name","Section Name","Metric Name","Metric Unit","Metric Value"']
    for k, (launch, name) in enumerate(zip(launches, names)):
        for metric, value in launch.items():
            unit, shown = {"gpu__time_duration.sum": ("usecond", value / 1e3),
                           "dram__bytes_read.sum": ("Mbyte", value / 1e6),
                           "dram__bytes_write.sum": ("Mbyte", value / 1e6)}.get(metric, ("%", value))
            rows.append(f'"{k}","{name}","","{metric}","{unit}","{shown:,}"')
    return "\n".join(rows)


@pytest.mark.parametrize("shape", [wide_csv, long_csv])
def test_both_shapes_of_ncu_csv_read_alike_in_base_units(bench, shape):
    launches = bench.launches_in(shape(launch_columns(2), ["softmax_vectorised", "cunn_SoftMaxForward"]))
    assert [launch["Kernel Name"] for launch in launches] == ["softmax_vectorised", "cunn_SoftMaxForward"]
    assert launches[1]["gpu__time_duration.sum"] == pytest.approx(2e-6)  # seconds
    assert launches[0]["dram__bytes_read.sum"] == pytest.approx(4e6)
    assert launches[0]["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"] == 61.5
    with pytest.raises(ValueError, match="no CSV rows"):
        bench.launches_in("==PROF== Disconnected")


def manifest(kernels=(1, 1, None)):
    return [{"label": f"target {k}", "note": f"note {k}", "least_bytes": 4_000_000, "kernels": count}
            for k, count in enumerate(kernels)]


def test_launches_are_dealt_out_in_order_and_a_library_takes_the_rest(bench):
    launches = bench.launches_in(wide_csv(launch_columns(5), ["a", "b", "t1", "t2", "t3"]))
    rows = bench.rows_of(launches, manifest())
    assert [(r.label, r.kernel, r.kernels) for r in rows] == [("target 0", "a", 1), ("target 1", "b", 1),
                                                             ("target 2", "t1", 3)]
    assert rows[0].dram_bytes / rows[0].least_bytes == pytest.approx(2.0)  # read and written: twice the least
    assert rows[0].dram_gbps == pytest.approx(8e6 / 1e-6 / 1e9)
    assert rows[2].seconds == pytest.approx((3 + 4 + 5) * 1e-6)  # a library's kernels add up
    assert rows[0].stalls[:3] == (("long_scoreboard", 9.5), ("barrier", 2.25), ("wait", 1.0))  # "selected": no stall
    with pytest.raises(ValueError, match="profiled 3 kernels where the targets launch 2: a, b, c"):
        bench.rows_of(bench.launches_in(wide_csv(launch_columns(3), "abc")), manifest((1, 1)))
    with pytest.raises(ValueError, match="profiled 2 kernels where the targets launch 2 and more"):
        bench.rows_of(bench.launches_in(wide_csv(launch_columns(2), "ab")), manifest())


def test_the_section_tables_each_group_and_explains_its_stall_reasons(bench):
    rows = bench.rows_of(bench.launches_in(wide_csv(launch_columns(3), "abc")), manifest((1, 2)))
    device = bench.Device(name="NVIDIA H200", sms=132, l2_bytes=50 * 2**20)
    text = bench.section({"Softmax, 16384 x 4096": rows, "Map, zip and sum, 256 MiB": "Not profiled: why."},
                         device, "versions", "ncu 2025.3.1", "a note")
    assert text.startswith("## What holds the kernels back: Nsight Compute's counters")
    assert "| target 0 | note 0 | 1.0 | 2.00 | 8,000 | 62% | 12% | 40% / 50% | 64 | 2.50 | 1.75 | long_scoreboard 9.5, " \
           "barrier 2.2, wait 1.0 |" in text
    assert "| target 1 (2 kernels: the counters are the first's) | note 1 | 5.0 |" in text and "| 12.50 |" in text
    assert "| target 1 (2 kernels: the counters are the first's) |" in text
    assert "### Map, zip and sum, 256 MiB\n\nNot profiled: why." in text
    assert f"- `long_scoreboard`: {bench.STALLS['long_scoreboard']}." in text and "`drain`" not in text  # the top 3
    assert "a note" in text


STAND_IN_NCU = """#!{python}
import json, sys
arguments = sys.argv[1:]
if "--import" in arguments:
    print(open(arguments[arguments.index("--import") + 1]).read())
    sys.exit(0)
if {fail!r}:
    print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU Performance Counters")
    sys.exit(1)
assert arguments[:2] == ["--clock-control", "none"] and "--profile-from-start" in arguments
open(arguments[arguments.index("--export") + 1] + ".ncu-rep", "w").write({csv!r})
manifest = arguments[arguments.index("--manifest") + 1]
open(manifest, "w").write(json.dumps({manifest!r}))
"""


def stand_in_ncu(tmp_path, fail=False):
    path = tmp_path / "ncu"
    path.write_text(STAND_IN_NCU.format(python=sys.executable, fail=fail, manifest=manifest((1, 1)),
                                        csv=wide_csv(launch_columns(2), ["softmax_online", "softmax_registers"])))
    path.chmod(path.stat().st_mode | stat.S_IEXEC)
    return str(path)


def test_a_group_profiled_through_ncu_and_where_ncu_cannot_read_the_counters(bench, tmp_path):
    rows = bench.profile_group(stand_in_ncu(tmp_path), "softmax", (16384, 4096), 60)
    assert [(r.label, r.kernel) for r in rows] == [("target 0", "softmax_online"), ("target 1", "softmax_registers")]
    why = bench.profile_group(stand_in_ncu(tmp_path, fail=True), "softmax", (16384, 4096), 60)
    assert why.startswith("Not profiled: ncu could not read the counters here (==ERROR== ERR_NVGPUCTRPERM")


def test_a_group_past_its_time_is_named_as_left_out(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "without_gpu", lambda script: False)
    monkeypatch.setattr(bench, "current_device", lambda: bench.Device(**SIMULATED))
    monkeypatch.setattr(bench, "ncu_path", lambda: "ncu")
    monkeypatch.setattr(bench, "profile_group", lambda *arguments: bench.TIMED_OUT)
    monkeypatch.setattr(bench, "ncu_version", lambda ncu: "ncu 2025.3.1")
    assert bench.main(["--no-write", "--seconds", "600"]) == 0
    printed = capsys.readouterr().out
    assert "Not measured within this run's time budget (600 s, `--seconds`): Softmax, 16384 x 4096, Map, zip and " \
           "sum, 256 MiB, SGEMM tile shapes, 4096^3." in printed  # gpu-check's mark of a partial part


def test_without_ncu_the_section_says_so(bench, monkeypatch, capsys):
    monkeypatch.setattr(bench, "without_gpu", lambda script: False)
    monkeypatch.setattr(bench, "current_device", lambda: bench.Device(**SIMULATED))
    monkeypatch.setattr(bench, "ncu_path", lambda: None)
    assert bench.main(["--no-write"]) == 0
    printed = capsys.readouterr().out
    assert printed.count("Not profiled: Nsight Compute's `ncu` is not on this machine.") == 6  # 3 groups, said twice
    assert "### Map, zip and sum, 256 MiB" in printed and "### SGEMM tile shapes, 4096^3" in printed


def test_the_targets_launch_on_the_simulator_as_the_timed_benchmarks_launch_them(bench, tmp_path):
    from gpucourse.kernels import fusion

    device = bench.Device(**SIMULATED)
    softmax = bench.softmax_targets((5, 70), {})
    assert [t.label for t in softmax] == ["`softmax_row_fused`", "`softmax_online`", bench.fusion.REGISTERS_SOFTMAX,
                                          *bench.fusion.TOP_SOFTMAXES]
    bench.launch_once(softmax, tmp_path / "softmax.json", contextlib.nullcontext)
    assert json.loads((tmp_path / "softmax.json").read_text())[0] == {
        "label": "`softmax_row_fused`", "note": f"5 blocks of {fusion.THREADS}", "least_bytes": 2 * 5 * 70 * 4, "kernels": 1}
    x = softmax[0].launch.args[2].copy_to_host()  # launch_softmax(kernel, y, x)
    y = softmax[-1].launch.args[1].copy_to_host()  # the last target's output
    np.testing.assert_allclose(y, fusion.softmax_reference(x), rtol=1e-5, atol=1e-7)

    n = 4096 + 3
    targets = bench.bandwidth_targets(n, device)
    labels = [t.label for t in targets]
    assert len(labels) == 16 and labels[0] == labels[3] == "map: 16-byte vectors, grid-stride"
    assert labels[-1].startswith("sum 7: ") and targets[0].least_bytes == 2 * n * 4
    assert [t.note.split(" blocks")[0] for t in targets[:4]] == ["4", "8", "16", "32"]  # 2, 4, 8, 16 x 2 SMs
    bench.launch_once(targets, tmp_path / "bandwidth.json", contextlib.nullcontext)
    assert len(json.loads((tmp_path / "bandwidth.json").read_text())) == 16


def test_the_sgemm_targets_are_the_tuned_tiles_and_the_top_rung_and_compute_a_product(bench, tmp_path):
    n = 70  # not a multiple of any tile
    targets = bench.sgemm_targets(n)
    assert [t.label for t in targets] == ["`matmul_register_tiled`, BM=64, BN=64, TM=8, TN=4, BK=8",
                                          "`matmul_register_tiled`, BM=64, BN=64, TM=4, TN=4, BK=16",
                                          "`matmul_warp_tiled` (the top rung)"]
    assert [t.note for t in targets[:2]] == ["grid 4, blocks of 128", "grid 4, blocks of 256"]
    assert all(t.least_bytes == 3 * n * n * 4 and t.kernels == 1 for t in targets)
    for target in targets:
        c, a, b = target.launch.args  # (a Launch's, or a partial's)
        c[:] = np.nan  # poisoned: each launch must write all of C
        bench.launch_once([target], tmp_path / "sgemm.json", contextlib.nullcontext)
        want = a.copy_to_host()[0].astype(np.float64) @ b.copy_to_host()[0]
        np.testing.assert_allclose(c.copy_to_host()[0], want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_the_script_is_a_gpu_check_part_after_the_goals_and_before_the_compilers():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import gpu_check

    parts = gpu_check.all_parts()
    assert parts.index("tuning") < parts.index("counters") < parts.index("compilers")
