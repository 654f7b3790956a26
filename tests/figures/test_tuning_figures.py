"""The CPU cost model (roofs, waves and tails, latency) and Spearman's rank correlation."""

import math
from types import SimpleNamespace

import matplotlib
import numpy as np
import pytest

from gpucourse.figures import SMS
from gpucourse.figures import tuning as ft
from on_a_slide import SMALLEST_TEXT, smallest_text

matplotlib.use("Agg")


def launch(blocks: int, threads: int = 256, registers: int = 32):
    """The model's prediction for ``blocks`` blocks that each move 1,000 sectors, less the launch's cost."""
    prediction = ft.predict(1000 * blocks, 0, 0, blocks, threads, registers, 0)
    return prediction, prediction.seconds - ft.LAUNCH_SECONDS


def test_the_busiest_sm_sets_the_time_so_a_tail_costs_most_where_an_sm_holds_one_block():
    sms = SMS["H100"].sms
    full, wave = launch(sms * 8)  # 8 blocks of 8 warps fill the 64 warps of every SM: one wave
    assert (full.blocks_per_sm, full.waves, full.tail_efficiency, full.bound_by) == (8, 1, 1.0, "global memory")
    assert full.latency_factor == 1
    tail, seconds = launch(sms * 8 + 1)  # one block more runs alone on an SM after its 8: 9 blocks in turn
    assert tail.waves == 2 and tail.tail_efficiency == pytest.approx((sms * 8 + 1) / (9 * sms))
    # alone, its 8 warps hide latency half as well as 16 would: it takes 2 blocks' time, not a wave's 8
    assert seconds == pytest.approx(wave * (8 + 2) / 8, rel=1e-3)
    big, one_wave = launch(sms, registers=255)  # 255 registers x 256 threads: one block per SM
    assert big.blocks_per_sm == 1
    past, two_waves = launch(sms + 1, registers=255)
    assert past.waves == 2 and two_waves == pytest.approx(2 * one_wave, rel=1e-2)  # a block past costs a wave
    half, half_seconds = launch(sms // 2, registers=255)  # half the SMs idle: the same time as all busy
    assert half.tail_efficiency == 0.5 and half_seconds == pytest.approx(one_wave)


def test_too_few_resident_warps_slow_the_prediction():
    few, _ = launch(SMS["H100"].sms, threads=32)  # one warp per SM
    assert few.latency_factor == ft.WARPS_TO_HIDE
    two, _ = launch(2 * SMS["H100"].sms, threads=32)  # two, side by side on every SM
    assert two.waves == 1 and two.latency_factor == ft.WARPS_TO_HIDE / 2


def test_each_roof_can_bound_the_time():
    common = dict(blocks=1000, threads=256, registers=32, shared_bytes=0, device="T4")
    assert ft.predict(sectors=10**7, shared_wavefronts=0, flops=1, **common).bound_by == "global memory"
    assert ft.predict(sectors=1, shared_wavefronts=10**9, flops=1, **common).bound_by == "shared memory"
    flops = ft.predict(sectors=1, shared_wavefronts=1, flops=1e12, **common)
    assert flops.bound_by == "FLOPs" and flops.terms["FLOPs"] == pytest.approx(1e12 / 8.1e12)


def test_a_loop_of_few_fmas_is_bound_by_instruction_issue():
    common = dict(sectors=1, shared_wavefronts=1, flops=1e12, blocks=1000, threads=256, registers=32, shared_bytes=0)
    alone = ft.predict(**common, device="H100")
    assert "instruction issue" not in alone.terms  # no loop of FMAs: no issue roof
    quarter = ft.predict(**common, device="H100", fma_share=0.25)  # 4 instructions issued per FMA
    assert quarter.bound_by == "instruction issue"
    assert quarter.terms["instruction issue"] == pytest.approx(4 * quarter.terms["FLOPs"])
    # a T4's SM has 64 FP32 lanes, half an issue slot's worth: FMAs alone cannot fill its 4 slots per clock
    t4 = ft.predict(**common, device="T4", fma_share=0.5)
    assert t4.terms["instruction issue"] == pytest.approx(t4.terms["FLOPs"])


def test_counted_instructions_price_the_issue_at_each_pipes_own_rate():
    """Counted per pipe (`run.issue`), the busiest pipe sets the issue roof: an H100's SM issues 4 warp
    instructions per clock, its FMA pipe takes 4 of them, its ALU and the FMA pipe's integer half 2 each, its 16
    special-function lanes half of one; a T4's FMA pipe 2."""
    common = dict(sectors=1, shared_wavefronts=1, flops=1.0, blocks=1000, threads=256, registers=32, shared_bytes=0)
    per_clock = SMS["H100"].sms * 67e12 / 2 / (132 * 128)  # clocks of all SMs per second
    slots = ft.predict(**common, device="H100", issued={"issue": 4e9, "fma": 4e9})
    assert slots.busiest_pipe == "issue" and slots.terms["instruction issue"] == pytest.approx(1e9 / per_clock)
    integer = ft.predict(**common, device="H100", issued={"issue": 4e9, "alu": 3e9})
    assert integer.busiest_pipe == "alu" and integer.bound_by == "instruction issue"
    assert integer.terms["instruction issue"] == pytest.approx(1.5e9 / per_clock)
    imad = ft.predict(**common, device="H100", issued={"issue": 4e9, "fma": 3e9, "imad": 3e9})
    assert imad.busiest_pipe == "imad"
    exp2 = ft.predict(**common, device="H100", issued={"issue": 4e9, "special": 1e9})
    assert exp2.busiest_pipe == "special" and exp2.terms["instruction issue"] == pytest.approx(2e9 / per_clock)
    assert ft.predict(**common, device="T4", issued={"issue": 4e9, "fma": 4e9}).busiest_pipe == "fma"
    # counted instructions replace the estimate from the main loop's share of FMAs
    assert ft.predict(**common, device="H100", fma_share=1e-9, issued={"issue": 4.0}).terms["instruction issue"] < 1e-9


def test_a_block_that_waits_for_its_tiles_is_bound_by_its_own_time():
    """Few warps per block, each load a round trip: the SM holds many such blocks, but each wave of them lasts as
    long as one block's waits and its issue at one instruction per clock per warp."""
    sm, clock = SMS["H200"], 67e12 / 2 / (132 * 128)
    common = dict(sectors=1, shared_wavefronts=1, flops=2.0 * 32 * 132 * 1000, blocks=132, threads=32, registers=32,
                  shared_bytes=0, device="H200", fma_share=0.5)  # one warp per block, 1,000 FMAs per thread
    quick = ft.predict(**common)
    assert quick.latency_factor == ft.WARPS_TO_HIDE  # no round trips known: the rule of thumb slows the roofs
    assert quick.block_seconds == pytest.approx(2000 / clock)  # 2,000 instructions, one per clock
    waiting = ft.predict(**common, round_trips=100, copy_instructions=500)
    assert waiting.latency_factor == 1  # the round trips say how it waits: no rule of thumb on top
    assert waiting.bound_by == "a block's own time"
    assert waiting.block_seconds == pytest.approx((100 * ft.GLOBAL_LATENCY + 2500) / clock)
    roofs, own = max(waiting.terms.values()) / waiting.tail_efficiency, waiting.waves * waiting.block_seconds
    assert waiting.seconds - ft.LAUNCH_SECONDS == pytest.approx(math.hypot(roofs, own))  # joined, own > roofs
    assert own > roofs
    assert waiting.terms["instruction issue"] == pytest.approx(132 * 2500 / (4 * sm.sms * clock))  # the copy's too
    # counted in every loop (`run.issue`): the launch's round trips replace the tile copy's
    counted = ft.predict(**common, round_trips=1, issued={"issue": 132 * 2500, "round_trips": 132 * 100})
    assert counted.block_seconds == pytest.approx(waiting.block_seconds) and counted.latency_factor == 1
    slower = ft.predict(**common, round_trips=100, copy_instructions=500, global_latency=1.3 * ft.GLOBAL_LATENCY)
    assert slower.seconds > waiting.seconds


def test_tile_loads_count_the_copy_per_thread_from_the_trace_and_the_compiled_code():
    from gpucourse.run.sass import GlobalLoads  # noqa: PLC0415

    class Launch:  # a traced launch of 2 blocks x 64 threads: 10 tile loop passes of 2 barriers, 30 loads a thread
        block_barriers = np.array([20, 20])
        arrays = {"A": SimpleNamespace(space="global", instructions={"read": SimpleNamespace(lanes=2 * 64 * 30)})}

    loads = GlobalLoads(tile_barriers=2, tile_loads=1, tile_round_trips=1, inner_loads=4, inner_round_trips=4,
                        inner_instructions=80)
    trips, copy = ft.tile_loads(loads, Launch, scale=3.0, blocks=6, threads=64)  # 3 times as many blocks
    assert (trips, copy) == pytest.approx((10 * 1 + 20 * 1, 20 * 20))  # 10 own loads, 20 in the rolled loop
    assert ft.tile_loads(None, Launch, 1.0, 2, 64) == (0.0, 0.0)


def test_a_block_that_fits_no_sm_has_no_time_the_launch_fails():
    with pytest.raises(ValueError, match=r"cannot launch on the H100 SXM: a block of 1024 threads with 71 registers "
                                         r"each and 0 bytes of shared memory fits no SM \(its registers run out\)"):
        ft.predict(1000, 0, 0, 132, 1024, 71, 0)
    assert ft.predict(1000, 0, 0, 132, 1024, 64, 0).blocks_per_sm == 1  # 64 x 1024: the register file exactly


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
    alone = ft.predicted_vs_measured([241e-6, 193e-6, 217e-6], labels=["64x32", "32x128", "32x32"]).axes[0]
    assert alone.get_ylim()[0] == 0  # lecture 7's started at 190 µs: a 25% spread filled the height
    assert smallest_text(alone.figure)[0] >= SMALLEST_TEXT and smallest_text(figure)[0] >= SMALLEST_TEXT
    title = ft.predicted_vs_measured([1e-6, 2e-6, 3e-6], [2e-6, 3e-6, 5e-6]).axes[0].get_title()
    assert "1.00" in title and not math.isnan(ft.spearman([1, 2, 3], [2, 3, 5]))


def test_waves_step_at_every_multiple_of_the_sm_count_by_a_block_or_by_a_wave():
    sms = SMS["H100"].sms
    shared, alone, even = ft.draw_waves("H100", 256, (32, 255), rounds=3).axes[0].lines[:3]
    blocks = shared.get_xdata()
    assert list(blocks) == list(range(1, 3 * sms + 1))

    def at(line, b):
        return line.get_ydata()[b - 1] - ft.LAUNCH_SECONDS * 1e6

    # one block per SM at a time (255 registers): every SM's next block is a whole wave more
    assert at(alone, sms) == pytest.approx(at(alone, 1)) and at(alone, sms + 1) == pytest.approx(2 * at(alone, sms))
    assert at(alone, 3 * sms) == pytest.approx(3 * at(alone, sms))
    # 8 at a time (32 registers): two blocks side by side take the time of one alone (its warps idle half the
    # time), and each one more per SM adds a block's time
    assert at(shared, 2 * sms) == pytest.approx(at(shared, 1)) and at(shared, 3 * sms) == pytest.approx(1.5 * at(shared, 2 * sms))
    assert even.get_ydata()[2 * sms - 1] == pytest.approx(shared.get_ydata()[2 * sms - 1])  # latency hidden from 2 on
    assert smallest_text(shared.figure)[0] >= SMALLEST_TEXT  # the legend was 8 pt, 11 px on a slide


def test_heat_map_text_reads_on_light_and_dark_cells():
    trials = [{"config": {"BM": m, "BN": n}, "seconds": m * n * 1e-9} for m in (32, 64) for n in (32, 64)]
    texts = {t.get_text(): t.get_color() for t in ft.heat_map(trials, "BM", "BN").axes[0].texts}
    assert texts["1.02"] == "black" and texts["4.1"] == "white"  # the fastest is the lightest cell


def test_one_config_against_one_per_shape():
    """Version 1: the config fastest in total on the workload it was tuned for; version 2: the fastest per shape,
    version 1's config where it ties."""
    shapes = [("big", "a"), ("big", "b"), ("small", "a"), ("small", "b")]
    swept = [({"tile": 1}, [2e-6, 4e-6, 1e-6, 1e-6]),
             ({"tile": 2}, [1e-6, 6e-6, 1e-6, 0.5e-6]),  # faster on big "a" and small "b", slower in total on big
             ({"tile": 3}, [9e-6, 4e-6, 9e-6, 9e-6])]  # ties version 1 on big "b"
    table, gain = ft.one_config_or_one_per_shape(swept, shapes, "big", label=lambda c: f"tile {c['tile']}")
    assert table.startswith("Version 1: tile 1.")
    rows = [[cell.strip() for cell in line.strip("|").split("|")] for line in table.splitlines()
            if line.startswith(("| big", "| small"))]
    assert [(r[1], r[2], r[3], r[4]) for r in rows] == [
        ("a", "2", "tile 2", "1"), ("b", "4", "tile 1", "4"), ("**all**", "**6**", "", "**5** (1.20x)"),
        ("a", "1", "tile 1", "1"), ("b", "1", "tile 2", "0"), ("**all**", "**2**", "", "**2** (1.33x)")]
    assert gain == pytest.approx({"big": 6 / 5, "small": 2 / 1.5})
