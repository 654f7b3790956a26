"""The prediction lectures show where no GPU run is recorded: a traced launch's time from DRAM sectors, labelled."""

import numpy as np
import pytest

import gpucourse
from gpucourse.figures import DEVICES, H100_SXM, T4, LaunchBound, launch_bound, show_prediction
from gpucourse.kernels import Tensor, elementwise


def double(x):
    return x + x


DOUBLE = elementwise.make_map(double)


def traced_map(a: np.ndarray, transposed: bool = False):
    view = Tensor.from_numpy(a.copy())
    view = view.T if transposed else view
    out = Tensor.from_numpy(np.full(view.shape, np.nan, np.float32))
    with gpucourse.trace() as t:
        elementwise.launch_elementwise(DOUBLE, out, view, threads=128)
    np.testing.assert_array_equal(out.numpy(), 2 * view.numpy())
    return t.last


def test_the_devices_come_from_one_table_of_data_sheet_figures():
    assert DEVICES["T4"] is T4 and DEVICES["H100"] is H100_SXM
    assert (T4.peak_flops, T4.bandwidth, H100_SXM.peak_flops, H100_SXM.bandwidth) == (8.1e12, 320e9, 67e12, 3.35e12)


def test_the_bound_is_the_sectors_moved_over_the_bandwidth_or_the_flops_over_the_peak():
    rng = np.random.default_rng(1)
    contiguous = launch_bound(traced_map(rng.standard_normal((10, 100)).astype(np.float32)), flops=1000, device="T4")
    assert contiguous.sectors == 2 * 1000 * 4 // 32  # read once, written once, coalesced
    assert contiguous.bytes_moved == 8000 and contiguous.bound_by == "memory"
    assert contiguous.seconds == pytest.approx(8000 / 320e9)
    strided = launch_bound(traced_map(rng.standard_normal((100, 10)).astype(np.float32), True), device=H100_SXM)
    assert strided.sectors > 2 * contiguous.sectors  # a transposed read touches more sectors
    arithmetic = launch_bound(traced_map(rng.standard_normal((10, 100)).astype(np.float32)), flops=1e9)
    assert arithmetic.blocks == 8 and arithmetic.multiprocessors_used == 8  # 1000 threads in blocks of 128
    assert arithmetic.bound_by == "FLOPs" and arithmetic.seconds == pytest.approx(1e9 / (67e12 * 8 / 132))


def test_a_grid_of_fewer_blocks_than_sms_gets_their_share_of_the_flops_not_of_the_bandwidth():
    one_block = LaunchBound("k", sectors=0, flops=1e9, device=H100_SXM, blocks=1)
    assert one_block.seconds == pytest.approx(1e9 / (67e12 / 132)) and one_block.bound_by == "FLOPs"
    assert LaunchBound("k", 0, 1e9, H100_SXM, blocks=500).seconds == pytest.approx(1e9 / 67e12)  # every SM busy
    assert LaunchBound("k", 0, 1e9, H100_SXM).seconds == pytest.approx(1e9 / 67e12)  # blocks not known
    memory = LaunchBound("k", sectors=10 ** 6, flops=0, device=T4, blocks=1)
    assert memory.seconds == pytest.approx(32e6 / 320e9)  # DRAM bandwidth is shared: not scaled


def test_the_prediction_is_labelled_says_what_it_assumes_and_names_its_devices_and_sources():
    launch = traced_map(np.random.default_rng(2).standard_normal((10, 100)).astype(np.float32))
    text = show_prediction({"double": launch}, useful_bytes=8000, measure="python benchmarks/bandwidth.py").data
    assert text.startswith("**Prediction, not a measurement** (no recorded GPU run here)")  # true on Colab too
    assert "if every 32-byte sector its warps request came from DRAM" in text and "L1 or L2" in text
    assert "| launch | bytes moved | FLOPs | T4: time | T4: GB/s | H100 SXM: time | H100 SXM: GB/s |" in text
    assert f"| `double` | 8,000 | 0 | {8000 / 320e9 * 1e6:.3g} µs (memory) | 320 |" in text  # every byte useful
    assert "T4 Tensor Core GPU data sheet" in text and "`python benchmarks/bandwidth.py` on a GPU" in text
    intro, _table, sources, small_grids = text.split("\n\n")  # compact: one slide holds it with its lecture's cell
    assert small_grids == "SMs a grid fills, FLOPs priced at their share of the peak: `double` 8 of the T4's 40; " \
                          "`double` 8 of the H100 SXM's 132."
    assert len(intro) < 330 and "8.1 TFLOPS" not in sources and "T4: 8.1 TFLOP/s FP32, 320 GB/s" in sources
    flops = show_prediction({"double": launch}, flops={"double": 1000}, devices=["H100"]).data
    assert "H100 SXM: TFLOP/s" in flops and "T4" not in flops


def test_a_prediction_scaled_to_the_size_a_gpu_times_scales_bytes_and_flops():
    launch = traced_map(np.random.default_rng(2).standard_normal((10, 100)).astype(np.float32))
    text = show_prediction({"double": launch}, flops=1000, useful_bytes=8000, devices=["T4"],
                           scaled=(1000, "a million floats")).data
    assert "scaled 1,000x to a million floats, the size a GPU times" in text
    assert f"| `double` | 8,000,000 | 1,000,000 | {8e6 / 320e9 * 1e6:.3g} µs (memory) | 320 |" in text
    assert "SMs a grid fills" not in text  # 8,000 blocks at that size: every SM busy


def test_a_wrong_device_or_launch_says_what_to_pass():
    launch = traced_map(np.random.default_rng(3).standard_normal((10, 100)).astype(np.float32))
    with pytest.raises(ValueError, match="no data-sheet figures for a device named 'V100': use one of T4, A100, H100"):
        launch_bound(launch, device="V100")
    with pytest.raises(TypeError, match=r"needs one traced launch \(t.last"):
        launch_bound(np.zeros(3))
