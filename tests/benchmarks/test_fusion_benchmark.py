"""benchmarks/fusion.py: its report and goals, and its GPU path on the simulator (no timing is asserted)."""

import os
import subprocess
import sys
from types import SimpleNamespace

import numpy as np
import pytest

from conftest import ROOT, load_benchmark, table_rows
from gpucourse.course import results

SCRIPT = ROOT / "benchmarks" / "fusion.py"
SIMULATED = dict(name="CPU simulator", sms=2, l2_bytes=16 * 1024, real=False)


SOFTMAX_GOAL = ("Goal: the faster of `softmax_vectorised` and `softmax_pipelined` >= 90% of the copy's GB/s at "
                "16384 x 4096")


@pytest.fixture(scope="module")
def bench():
    module, unload = load_benchmark(SCRIPT.stem, "fusion_benchmark")
    yield module
    unload()


def fake_run(bench, fused_ms=1.0, torch_ms=0.9, flash_ms=2.0, registers_ms=3.4, vectorised_ms=3.4, flash2_ms=0.25):
    M = bench.Measurement
    run = []
    for size, times in (((4096, 4096), 1), ((16384, 4096), 4)):  # the second: 4x the bytes, 4x the time
        run += [M(bench.COPY, "softmax", size, 0.8 * times, reference=True),
                M(bench.NAIVE_SOFTMAX, "softmax", size, 4.0 * times),
                M("`softmax_row_fused`", "softmax", size, fused_ms * times),
                M("`softmax_online`", "softmax", size, 1.3 * times),
                M(bench.REGISTERS_SOFTMAX, "softmax", size, registers_ms / 4 * times),
                M(bench.VECTORISED_SOFTMAX, "softmax", size, vectorised_ms / 4 * times),
                M(bench.TORCH_SOFTMAX, "softmax", size, torch_ms * times, reference=True)]
    for N in (1024, 4096):
        run += [M(bench.NAIVE_ATTENTION, "attention", (N, 64), 10.0 * (N / 1024) ** 2, 2 * N * N * 4),
                M("`attention_flash`", "attention", (N, 64), 20.0 * (N / 1024) ** 2, 0),  # the case study
                M(bench.FLASH2_UNSPLIT, "attention", (N, 64), flash_ms * (N / 1024) ** 2, 0),
                M(bench.FLASH2, "attention", (N, 64), flash2_ms * (N / 1024) ** 2, 0),
                M(bench.SDPA, "attention", (N, 64), 0.1 * (N / 1024) ** 2, 3 * 2**20, reference=True)]
    return run


def test_gbps_counts_one_read_and_one_write(bench):
    m = bench.Measurement("`softmax_row_fused`", "softmax", (1000, 1000), 1.0)
    assert m.gbps == pytest.approx(8.0)  # 8 MB in 1 ms
    assert np.isnan(bench.Measurement("x", "softmax", (10, 10), None).gbps)


def test_goals_met_and_not_met(bench):
    lines = bench.goal_lines(fake_run(bench))
    assert lines[0].startswith("Goal: `softmax_row_fused` >= 3x `softmax_naive` and >= 80% of torch.softmax at "
                               "16384 x 4096: met (4.0x naive, 90% of torch.softmax)")
    assert lines[1].endswith(": met (5.0x; extra memory 0 at every N).")
    assert lines[2] == f"{SOFTMAX_GOAL}: met (94% of the copy: `softmax_vectorised`)."
    assert lines[3] == ("Goal: `attention_flash2` >= 3x `attention_naive` and <= 3x SDPA's time at N = 4096, extra "
                        "memory O(N): met (40.0x naive, 2.5x SDPA's time; extra memory at most 16 partial results of "
                        "N x (d + 2) at every N).")
    split = [m if m.path != bench.FLASH2 else bench.Measurement(m.path, m.problem, m.size, m.ms, 17 * m.size[0] * 264)
             for m in fake_run(bench)]  # 17 slices' partials, 66 float32 per query
    assert bench.goal_lines(split)[3].endswith("NOT met (40.0x naive, 2.5x SDPA's time; extra memory over 16 partial "
                                               "results of N x (d + 2)).")
    slow = bench.goal_lines(fake_run(bench, fused_ms=2.0, flash_ms=5.0, vectorised_ms=4.0, flash2_ms=0.5))
    assert ": NOT met (2.0x naive, 45% of torch.softmax)" in slow[0] and ": NOT met (2.0x;" in slow[1]
    assert slow[2].endswith(": NOT met (80% of the copy: `softmax_vectorised`).")
    assert ": NOT met (20.0x naive, 5.0x SDPA's" in slow[3]
    without_torch = [m for m in fake_run(bench) if m.path != bench.TORCH_SOFTMAX]
    assert "partly measured (no torch.softmax): 4.0x naive" in bench.goal_lines(without_torch)[0]
    assert bench.goal_lines([]) == [
        "Goal: `softmax_row_fused` >= 3x `softmax_naive` and >= 80% of torch.softmax: not measured.",
        "Goal: `attention_flash2` with its keys not split >= 3x `attention_naive` at N = 4096, extra memory 0: "
        "not measured.",
        f"{SOFTMAX_GOAL}: not measured.",
        "Goal: `attention_flash2` >= 3x `attention_naive` and <= 3x SDPA's time at N = 4096, extra memory O(N): "
        "not measured."]



def test_the_no_extra_memory_flash_goal_reads_flash2_itself_where_it_did_not_split(bench):
    unsplit = [m for m in fake_run(bench) if m.path != bench.FLASH2_UNSPLIT]  # flash2's rows: extra memory 0
    assert bench.goal_lines(unsplit)[1].endswith(": met (40.0x; extra memory 0 at every N).")
    split = [bench.Measurement(m.path, m.problem, m.size, m.ms, 1024) if m.path == bench.FLASH2 else m
             for m in unsplit]  # split, with no row of it unsplit
    assert bench.goal_lines(split)[1].endswith(": not measured.")

def test_section_has_both_tables_and_records(bench, tmp_path):
    run = fake_run(bench)
    text = bench.section(run, bench.Device("NVIDIA H100", 132, 50 * 2**20), "versions", 5)
    assert text.startswith("## Fusion: row softmax and attention")
    assert "| `softmax_row_fused` | 4096 x 4096 | 1 | 134 | 80% |" in text  # of the copy's 0.8 ms
    assert "| `attention_naive` (3 kernels) | 4096 | 64 | 160 | 128.0 |" in text
    assert text.count("\n| ") == (1 + 14) + (1 + 10)
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n")
    results.record(bench.NAME, text, path)
    assert results.recorded(bench.NAME, path) == text


class View(np.ndarray):
    """A NumPy view of a simulator array's memory, standing in for a torch tensor."""

    def data_ptr(self):
        return self.__array_interface__["data"][0]

    def cpu(self):
        return self

    def numpy(self):
        return np.asarray(self)


def fake_torch():
    """``torch.softmax`` on the simulator's arrays, on the same memory."""

    def softmax(t, dim):
        e = np.exp(t - t.max(axis=dim, keepdims=True))
        return (e / e.sum(axis=dim, keepdims=True)).view(View)

    return SimpleNamespace(as_tensor=lambda array, device=None: array._ary.view(View), softmax=softmax)


def test_every_path_measured_and_checked_on_the_simulator(bench, monkeypatch):
    monkeypatch.setattr(bench, "pointer", lambda array: array._ary.__array_interface__["data"][0])
    device = bench.Device(**SIMULATED)
    run = bench.measure_softmax((5, 70), device, 1, {"torch": fake_torch()})
    assert [m.path for m in run] == [bench.COPY, bench.NAIVE_SOFTMAX, "`softmax_row_fused`", "`softmax_online`",
                                     bench.REGISTERS_SOFTMAX, bench.VECTORISED_SOFTMAX, bench.VECTORISED_HALF,
                                     bench.PIPELINED_SOFTMAX, bench.TORCH_SOFTMAX]
    assert run[5].note == "2 blocks of 4 x 32 threads (rows x threads per row), 32 values per thread, 16-byte accesses"
    assert run[6].note == "2 blocks of 4 x 32 threads, 16 values per thread (`make_softmax_vectorised`)"
    assert run[7].note == ("persistent grid 1 (2 per SM), blocks of 8 x 32 threads, rows per block: at most 1 (one per "
                           "turn), 32 values per thread and row")
    run += bench.measure_attention(40, device, 1, {}, d=16)
    assert [m.path for m in run[9:]] == [bench.NAIVE_ATTENTION, "`attention_flash`", bench.FLASH2, bench.FLASH2_FIVE]
    assert not [m for m in run if m.wrong], [m.note for m in run if m.wrong]
    assert all(m.ms > 0 for m in run)
    assert run[9].extra_bytes == 2 * 40 * 40 * 4 and run[10].extra_bytes == 0 and run[11].extra_bytes == 0
    text = bench.section(run, device, "versions", 1)
    assert ("Goal: `attention_flash2` with its keys not split >= 3x `attention_naive` at N = 4096, extra memory 0: "
            "not measured.") in text


def test_flash2_split_over_the_keys_where_its_grid_is_small_for_the_sms(bench):
    from gpucourse.kernels import fusion  # noqa: PLC0415

    N, d = 256, 16  # 4 blocks of queries for 132 SMs: 2 slices of 4 tiles
    Q, K, V = (np.random.default_rng(k).standard_normal((N, d)).astype(np.float32) for k in range(3))
    O = bench.cuda.device_array((N, d), np.float32)
    split, unsplit, five = bench.flash2_cases(*(bench.cuda.to_device(a) for a in (Q, K, V)), O, sms=132)
    assert (split.path, unsplit.path, five.path) == (bench.FLASH2, bench.FLASH2_UNSPLIT, bench.FLASH2_FIVE)
    assert split.kernel_launches == five.kernel_launches == 2
    assert split.extra_bytes() == five.extra_bytes() == 2 * N * (d + 2) * 4 and unsplit.extra_bytes() == 0
    assert "keys in 2 slices" in split.note and "keys in 2 slices" in five.note  # 5 x 132 blocks: still 2
    for case in (split, unsplit, five):
        bench.poison(O)
        case.calls[0]()
        np.testing.assert_allclose(case.result(), fusion.attention_reference(Q, K, V), rtol=1e-4, atol=1e-5)
    one_sm = bench.flash2_cases(*(bench.cuda.to_device(a) for a in (Q, K, V)), O, sms=1)  # its 4 blocks fill it
    assert [c.path for c in one_sm] == [bench.FLASH2, bench.FLASH2_FIVE] and one_sm[0].extra_bytes() == 0
    assert one_sm[1].extra_bytes() == 2 * N * (d + 2) * 4  # 5 blocks for one SM: 4 blocks of queries, 2 slices


def test_a_wrong_result_is_flagged(bench):
    device = bench.Device(**SIMULATED)
    y = bench.cuda.device_array((3, 5), np.float32)
    case = bench.Case("leaves y alone", [lambda: None], y.copy_to_host)
    want = np.full((3, 5), 0.2)
    m = bench.measure(case, "softmax", (3, 5), lambda got: bench.relative_error(got, want), [y], 1, device, 1e-5)
    assert m.wrong and "relative error inf" in m.note


def test_a_path_predicted_too_slow_is_skipped(bench):
    earlier = [bench.Measurement(bench.NAIVE_ATTENTION, "attention", (1024, 64), 300.0)]
    assert bench.predicted_ms(bench.NAIVE_ATTENTION, 2048, earlier) == pytest.approx(1200.0)
    assert bench.predicted_ms("`attention_flash`", 2048, earlier) is None


def test_without_a_gpu_it_says_so_and_exits_0():
    env = {**{k: v for k, v in os.environ.items() if k != "NUMBA_ENABLE_CUDASIM"}, "GPUCOURSE_DEVICE": "cpu"}
    run = subprocess.run([sys.executable, str(SCRIPT), "--quick"], env=env, capture_output=True, text=True,
                         timeout=300)
    assert run.returncode == 0, run.stderr
    lines = run.stdout.strip().splitlines()
    assert len(lines) == 1 and "benchmarks/fusion.py needs a CUDA GPU" in lines[0]


# -- main: the time budget (`--seconds`), each size's measurement a stand-in --------------------------------
@pytest.fixture
def run(bench, benchmark_run, monkeypatch):
    """`main` on every softmax shape and attention size; ``run.measured``: the rows measured, in order (each takes
    a minute)."""
    run = benchmark_run(bench, bench.Device(**SIMULATED))
    run.measured = []

    def measure_softmax(shape, device, samples, libraries):
        run.row()
        run.measured.append(f"softmax {shape[0]} x {shape[1]}")
        return [bench.Measurement(bench.COPY, "softmax", shape, 1.0, reference=True),
                bench.Measurement(bench.VECTORISED_SOFTMAX, "softmax", shape, 1.1)]

    def measure_attention(N, device, samples, libraries, earlier=()):
        run.row()
        run.measured.append(f"attention N = {N}")
        return [bench.Measurement("`attention_flash`", "attention", (N, bench.HEAD_DIM), 1.0, 0)]

    monkeypatch.setattr(bench, "measure_softmax", measure_softmax)
    monkeypatch.setattr(bench, "measure_attention", measure_attention)
    monkeypatch.setattr(bench, "fits", lambda N: None)
    return run


def test_a_time_budget_measures_both_goals_sizes_first_and_names_the_others(bench, run):
    recorded = run(*run.ONE_ROW)
    assert run.measured == ["softmax 16384 x 4096"]
    assert recorded.write  # a full run's sizes, cut short by time: still recorded, and says so
    assert [row[1] for row in table_rows(recorded.text, "### Row softmax")] == ["16384 x 4096"] * 2
    assert table_rows(recorded.text, "### Attention") == []
    note = recorded.text.splitlines()[-1]
    assert ("attention N = 4096, softmax 4096 x 1024, softmax 4096 x 4096, attention N = 1024, attention N = 2048, "
            "attention N = 8192, attention N = 16384") in note and "fusion.py" in note
    run.measured.clear()
    run(f"--seconds={2.5 * run.ROW_SECONDS}")  # two rows: both goals' sizes, before the other softmax shapes
    assert run.measured == ["softmax 16384 x 4096", "attention N = 4096"]


def test_a_full_run_tables_every_size_in_order_with_no_note(bench, run):
    recorded = run()
    assert run.measured[:2] == ["softmax 16384 x 4096", "attention N = 4096"] and len(run.measured) == 8
    softmax = [row[1] for row in table_rows(recorded.text, "### Row softmax")]
    assert softmax == [f"{rows} x {cols}" for rows, cols in bench.SOFTMAX_SHAPES for _ in range(2)]
    assert [row[1] for row in table_rows(recorded.text, "### Attention")] == list(map(str, bench.ATTENTION_N))
    assert recorded.write and recorded.text.splitlines()[-1].startswith("| ")  # nothing under the tables


def test_the_softmax_goal_reads_the_fastest_top_rung_build(bench):
    run = fake_run(bench, vectorised_ms=4.0)  # the copy takes 3.2 ms at 16384 x 4096: 80%
    assert any(line.endswith("NOT met (80% of the copy: `softmax_vectorised`).") for line in bench.goal_lines(run))
    run.append(bench.Measurement(bench.VECTORISED_HALF, "softmax", (16384, 4096), 3.6))
    assert any(line.endswith("NOT met (89% of the copy: `softmax_vectorised`, 4 vectors per thread).")
               for line in bench.goal_lines(run))
    run.append(bench.Measurement(bench.PIPELINED_SOFTMAX, "softmax", (16384, 4096), 3.4))
    assert any(line.endswith(": met (94% of the copy: `softmax_pipelined`).") for line in bench.goal_lines(run))
