"""The CPU cost model (roofs, waves and tails, latency) and Spearman's rank correlation."""

import math

import matplotlib
import pytest

from gpucourse.figures import SMS
from gpucourse.figures import tuning as ft

matplotlib.use("Agg")


def test_a_tail_wave_and_too_few_warps_slow_the_prediction():
    sm = SMS["H100"]
    one = dict(sectors=10**6, shared_wavefronts=0, flops=1e6, threads=256, registers=32, shared_bytes=0)
    full = ft.predict(blocks=sm.sms * 8, **one)  # 8 blocks of 8 warps fill the 64 warps of every SM once
    assert (full.blocks_per_sm, full.waves, full.tail_efficiency, full.bound_by) == (8, 1, 1.0, "global memory")
    tail = ft.predict(blocks=sm.sms * 8 + 1, **one)
    assert tail.waves == 2 and tail.tail_efficiency == pytest.approx((sm.sms * 8 + 1) / (2 * sm.sms * 8))
    assert tail.seconds > 1.9 * (full.seconds - ft.LAUNCH_SECONDS)
    few = ft.predict(blocks=sm.sms, **{**one, "threads": 32})  # one warp per SM
    assert few.latency_factor == ft.WARPS_TO_HIDE


def test_each_roof_can_bound_the_time():
    common = dict(blocks=1000, threads=256, registers=32, shared_bytes=0, device="T4")
    assert ft.predict(sectors=10**7, shared_wavefronts=0, flops=1, **common).bound_by == "global memory"
    assert ft.predict(sectors=1, shared_wavefronts=10**9, flops=1, **common).bound_by == "shared memory"
    flops = ft.predict(sectors=1, shared_wavefronts=1, flops=1e12, **common)
    assert flops.bound_by == "FLOPs" and flops.terms["FLOPs"] == pytest.approx(1e12 / 8.1e12)


def test_spearman_ranks():
    assert ft.spearman([1, 2, 3, 4], [10, 20, 30, 40]) == pytest.approx(1)
    assert ft.spearman([1, 2, 3, 4], [4, 3, 2, 1]) == pytest.approx(-1)
    assert list(ft.ranks([5, 1, 5, 3])) == [3.5, 1, 3.5, 2]
    # 1 - 6 sum d^2 / (n (n^2 - 1)) without ties: d = (0, 1, -1, 0, 0)
    assert ft.spearman([1, 2, 3, 4, 5], [1, 3, 2, 4, 5]) == pytest.approx(1 - 6 * 2 / (5 * 24))
    with pytest.raises(ValueError):
        ft.spearman([1], [1])


def test_cost_model_names_its_device_and_refuses_others():
    model = ft.cost_model("A100")
    assert (model.architecture, model.compute_capability) == ("sm_80", (8, 0))
    with pytest.raises(ValueError, match="H100"):
        ft.cost_model("V100")


def test_the_gpu_s_own_name_picks_its_data_sheet():
    """What numba calls the GPUs the course ran on and may run on; the lent machines are H100s and H200s."""
    names = {"NVIDIA H100 80GB HBM3": "H100", "NVIDIA H200": "H200", b"Tesla T4": "T4",
             "NVIDIA A100-SXM4-40GB": "A100", "NVIDIA GeForce RTX 4090": None}
    assert {name: ft.modelled_device(name) for name in names} == names
    h200 = ft.cost_model("H200")
    assert (h200.architecture, h200.compute_capability) == ("sm_90", (9, 0))
    memory_bound = dict(sectors=10**8, shared_wavefronts=0, flops=1, blocks=1000, threads=256, registers=32,
                        shared_bytes=0)
    h100, h200 = (ft.predict(**memory_bound, device=d).terms["global memory"] for d in ("H100", "H200"))
    assert h100 / h200 == pytest.approx(4.8 / 3.35)  # the same chip; HBM3e at 4.8 TB/s against HBM3 at 3.35


def test_pictures_draw_a_space_and_predictions():
    trials = [{"config": {"BM": m, "BK": k}, "seconds": m * k * 1e-6} for m in (32, 64) for k in (8, 16)]
    trials.append({"config": {"BM": 128, "BK": 8}, "error": "too big"})
    figure = ft.heat_map(trials, "BM", "BK")
    assert figure.axes[0].images[0].get_array().shape == (2, 2)
    assert "Prediction only" in ft.predicted_vs_measured([3e-6, 1e-6]).axes[0].get_title()
    title = ft.predicted_vs_measured([1e-6, 2e-6, 3e-6], [2e-6, 3e-6, 5e-6]).axes[0].get_title()
    assert "1.00" in title and not math.isnan(ft.spearman([1, 2, 3], [2, 3, 5]))


def test_waves_step_at_every_full_wave():
    sm = SMS["H100"]
    slots = 8 * sm.sms  # 256-thread blocks of 32 registers: 8 per SM
    line, even = ft.draw_waves("H100", 256, 32, waves=2).axes[0].lines[:2]
    blocks, step = line.get_data()
    within = step[(blocks > 0) & (blocks <= slots)]
    assert within.max() == pytest.approx(within.min())  # one wave costs the same however full
    assert step[blocks > slots].min() > 1.9 * (within.max() - ft.LAUNCH_SECONDS * 1e6)  # the next costs another
    assert even.get_ydata()[list(blocks).index(slots)] == pytest.approx(within.max())  # the even spread meets it


def test_heat_map_text_reads_on_light_and_dark_cells():
    trials = [{"config": {"BM": m, "BN": n}, "seconds": m * n * 1e-9} for m in (32, 64) for n in (32, 64)]
    texts = {t.get_text(): t.get_color() for t in ft.heat_map(trials, "BM", "BN").axes[0].texts}
    assert texts["1.02"] == "black" and texts["4.1"] == "white"  # the fastest is the lightest cell
