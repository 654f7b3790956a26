"""benchmarks/conv.py: its accounting and report, and its GPU path (kernels and cuDNN calls) on the simulator.

No timing is asserted: on the simulator its times measure the CPU.
"""

from types import SimpleNamespace

import numpy as np
import pytest

from conftest import ROOT, load_benchmark, table_rows
from gpucourse.course import results
from gpucourse.kernels import conv
from test_matmul_benchmark import tf32

SCRIPT = ROOT / "benchmarks" / "conv.py"


@pytest.fixture(scope="module")
def bench():
    module, unload = load_benchmark(SCRIPT.stem, "conv_benchmark")
    yield module
    unload()


# -- pure helpers ----------------------------------------------------------------------------------------
def test_layers_flops_and_the_im2col_blow_up(bench):
    layers = bench.resnet50_layers(32)
    first = layers[0]
    assert (first.x_shape, first.w_shape, first.y_shape) == ((32, 64, 56, 56), (64, 64, 3, 3), (32, 64, 56, 56))
    assert first.flops == 2 * 32 * 64 * 56 * 56 * 64 * 9
    assert first.im2col_bytes == 9 * 4 * 32 * 64 * 56 * 56  # 'same' padding, stride 1: R*S copies of x
    assert first.dims() == "32 x 64x56x56, 64 filters 3x3, stride 1, padding 1"
    assert [layer.name for layer in layers] == ["conv2_x 3x3", "conv3_x 3x3", "conv4_x 3x3", "conv2_x 1x1 reduce"]
    assert layers[2].y_shape == (32, 256, 14, 14) and layers[3].im2col_bytes == 4 * 32 * 256 * 56 * 56
    for layer in layers:
        assert layer.y_shape == conv.output_shape(layer.x_shape, layer.w_shape, layer.stride, layer.padding)
        assert layer.im2col_bytes < 2**30
    strided = bench.Layer("strided", 2, 3, 9, 8, 4, 3, 3, 2, 1)
    assert (strided.Ho, strided.Wo) == (5, 4)
    assert [layer.B for layer in bench.quick_layers()] == [bench.QUICK_BATCH] * 2


def fake_measurements(bench, implicit_fraction=0.55):
    """Two layers: cuDNN at 20 TFLOP/s with benchmark mode on, 16 off; the course's kernels below."""
    M = bench.Measurement
    rows = []
    for layer in bench.resnet50_layers(32)[:3:2]:
        def ms(tflops, layer=layer):
            return layer.flops / (tflops * 1e12) * 1e3
        rows += [M(bench.CUDNN_OFF, layer, ms(16), 2**20, cudnn=True), M(bench.CUDNN_ON, layer, ms(20), 0, cudnn=True),
                 M("`conv_direct`", layer, ms(2), 0),
                 M("im2col + `matmul_register_tiled`", layer, ms(8), layer.im2col_bytes),
                 M("`conv_implicit_gemm_warp_tiled`", layer, ms(20 * implicit_fraction), 0)]
    return rows


def test_fractions_tables_and_the_goal(bench):
    rows = fake_measurements(bench)
    layer = rows[0].layer
    assert bench.reference(rows, layer).kernel == bench.CUDNN_ON
    assert bench.fraction_of_cudnn(rows[4], rows) == pytest.approx(0.55)
    assert bench.goal_line(rows) == ("Goal: `conv_implicit_gemm_warp_tiled` on conv2_x 3x3 (56x56) >= 50% of cuDNN "
                                     "float32: met "
                                     "(55%: 11.0 TFLOP/s against 20.0 for cuDNN, benchmark on).")
    assert ": NOT met (30%: 6.0 TFLOP/s" in bench.goal_line(fake_measurements(bench, 0.30))
    assert "not measured (conv2_x 3x3 was not in this run)" in bench.goal_line(rows[5:])
    assert "not measured (no cuDNN reference" in bench.goal_line([m for m in rows if not m.cudnn])

    full = bench.full_table(rows, 66.9e12).splitlines()
    assert full[0] == ("| kernel | layer | time (ms) | TFLOP/s | % of cuDNN | % of FP32 peak | extra memory (MiB) | "
                       "note |")
    assert len(full) == 2 + len(rows)
    assert "| 16.00 | 80% | 24% | 1.0 |" in full[2] and "| 20.00 | 100% | 30% | 0.0 |" in full[3]
    assert "| 8.00 | 40% | 12% | 220.5 |" in full[5]  # the im2col matrix of conv2_x at batch 32: 220.5 MiB

    pivot = bench.pivot_table(rows).splitlines()
    assert pivot[0].startswith("| layer | shape | GFLOP | im2col matrix (MiB) | cuDNN, benchmark off TFLOP/s (% of cuDNN)")
    assert pivot[2].startswith("| conv2_x 3x3 | 32 x 64x56x56, 64 filters 3x3, stride 1, padding 1 | 7.4 | "
                               "220.5 (9.0x x) | 16.00 (80%) | 20.00 (100%) | 2.00 (10%) |")
    assert len(pivot) == 2 + 2


def test_a_wrong_row_is_shown_and_left_out_of_the_reference(bench):
    rows = fake_measurements(bench)
    wrong = bench.Measurement(bench.CUDNN_ON, rows[1].layer, rows[1].ms / 2, 0, True, "relative error 3e-4", True)
    rows[1] = wrong
    assert bench.reference(rows, rows[0].layer).kernel == bench.CUDNN_OFF
    assert "WRONG result; relative error" in bench.full_table(rows, None)
    assert "WRONG 40.00" in bench.pivot_table(rows)


def test_section_is_recorded_and_read_back(bench, tmp_path):
    device = bench.Device("NVIDIA H100 80GB HBM3", 132, 50 * 2**20, True, (9, 0), 1_980_000)
    text = bench.section(fake_measurements(bench), device, "CUDA driver 13.0, numba-cuda 0.30.4, cuDNN 91002", 7,
                         "`torch.nn.functional.conv2d` (cuDNN float32)")
    assert text.startswith("## Convolution against cuDNN float32")
    assert "NVIDIA H100 80GB HBM3 (132 SMs)" in text and "cuDNN 91002" in text and "median of 7 samples" in text
    assert "FP32 peak: 66.9 TFLOP/s" in text and "2 x B x M x Ho x Wo x C x R x S" in text
    path = tmp_path / "RESULTS.md"
    path.write_text("# Benchmark results\n\nAnother benchmark's section.\n")
    results.record(bench.NAME, text, path)
    results.record(bench.NAME, text, path)
    assert results.recorded(bench.NAME, path) == text


# -- the GPU path, run on the simulator at tiny sizes --------------------------------------------------
SIMULATED = dict(name="CPU simulator", sms=2, l2_bytes=1024, real=False)  # one or two sets of arrays
TINY = [("tiny 3x3", 2, 3, 7, 9, 5, 3, 3, 1, 1), ("tiny strided", 1, 4, 9, 8, 70, 3, 3, 2, 2)]


def test_every_kernel_measured_and_checked_on_the_simulator(bench):
    device = bench.Device(**SIMULATED)
    measurements = []
    for layer in TINY:
        measurements += bench.measure_layer(bench.Layer(*layer), device, 1)
    assert [m.kernel for m in measurements[:5]] == [
        "`conv_direct`", "`conv_implicit_gemm`", "im2col + `matmul_register_tiled`", "`conv_implicit_gemm_nhwc`",
        "`conv_implicit_gemm_warp_tiled`"]
    assert len(measurements) == 10
    assert not [m for m in measurements if m.wrong], [m.note for m in measurements if m.wrong]
    assert all(m.ms > 0 for m in measurements)
    im2col = measurements[2]
    assert im2col.extra_bytes == im2col.layer.im2col_bytes and measurements[1].extra_bytes == 0
    text = bench.section(measurements, device, bench.versions({}), 1, "none")
    assert "not measured (conv2_x 3x3 was not in this run)" in text
    assert text.count("\n| ") == (1 + 2) + (1 + len(measurements))


class FakeTorch:
    """A stand-in for ``torch`` on the simulator's arrays: NumPy views of the same memory, the float32
    convolution of `conv2d_reference` as its cuDNN, and an allocator that counts a workspace."""

    WORKSPACE = 3 * 2**20

    def __init__(self, stream=0, tf32=False):
        self.calls, self.allocated, self.peak, self.tf32 = [], 0, 0, tf32
        self.backends = SimpleNamespace(cudnn=SimpleNamespace(benchmark=False, allow_tf32=True))
        self.nn = SimpleNamespace(functional=SimpleNamespace(conv2d=self.conv2d))
        self.cuda = SimpleNamespace(current_stream=lambda: SimpleNamespace(cuda_stream=stream),
                                    synchronize=lambda: None, memory_allocated=lambda: self.allocated,
                                    max_memory_allocated=lambda: self.peak, reset_peak_memory_stats=self.reset)

    def reset(self):
        self.peak = self.allocated

    def as_tensor(self, array, device=None):
        return Tensor(array._ary)

    def conv2d(self, x, w, stride, padding):
        self.calls.append(self.backends.cudnn.benchmark)
        x, w = np.asarray(x), np.asarray(w)
        if self.tf32:
            x, w = tf32(x), tf32(w)
        y = conv.conv2d_reference(x, w, stride, padding).astype(np.float32)
        self.peak = max(self.peak, self.allocated + y.nbytes + self.WORKSPACE)
        return Tensor(y)


class Tensor(np.ndarray):
    def __new__(cls, array):
        return np.asarray(array).view(cls)

    def data_ptr(self):
        return self.__array_interface__["data"][0]

    def cpu(self):
        return self

    def numpy(self):
        return np.asarray(self)


@pytest.fixture
def simulator_pointers(bench, monkeypatch):
    """The simulator's arrays have no ``__cuda_array_interface__``: their host memory's address instead."""
    monkeypatch.setattr(bench, "pointer", lambda array: array._ary.__array_interface__["data"][0])


def test_the_cudnn_rows_share_the_arrays_set_their_mode_and_count_the_workspace(bench, simulator_pointers):
    device = bench.Device(**SIMULATED)
    torch = FakeTorch()
    measurements = bench.measure_layer(bench.Layer(*TINY[1]), device, 1, torch)
    assert [m.kernel for m in measurements[:2]] == [bench.CUDNN_OFF, bench.CUDNN_ON]
    assert all(m.cudnn for m in measurements[:2]) and not any(m.cudnn for m in measurements[2:])
    assert not [m for m in measurements if m.wrong], [m.note for m in measurements if m.wrong]
    assert False in torch.calls and True in torch.calls
    assert measurements[0].extra_bytes == measurements[1].extra_bytes == FakeTorch.WORKSPACE
    assert bench.reference(measurements, measurements[0].layer) is not None
    assert bench.tf32_off_torch(torch) == "torch.backends.cudnn.allow_tf32 = False"


def test_a_tf32_cudnn_is_caught_and_another_stream_refused(bench, simulator_pointers):
    """Inputs rounded to TF32's 10 bits of mantissa: about 3e-4 of relative error, over cuDNN's 1e-4."""
    device = bench.Device(**SIMULATED)
    layer = bench.Layer("deep", 1, 64, 6, 6, 4, 3, 3, 1, 1)
    operands = bench.Operands.allocate(layer, sets=1)
    m = bench.measure(bench.cudnn_case(FakeTorch(tf32=True), operands, False), operands, 1, device)
    assert m.wrong and m.note.endswith("> 1.0e-04")
    assert 2e-4 < float(m.note.split("relative error ")[1].split(" ")[0]) < 5e-4
    right = bench.measure(bench.cudnn_case(FakeTorch(), operands, True), operands, 1, device)
    assert not right.wrong and "; relative error" in right.note
    with pytest.raises(RuntimeError, match="torch works on stream 0x1234"):
        bench.cudnn_case(FakeTorch(stream=0x1234), operands, True)


# -- main: the time budget (`--seconds`), each layer's measurement a stand-in --------------------------------
@pytest.fixture
def run(bench, benchmark_run, monkeypatch):
    """`main` on the four ResNet-50 layers; ``run.measured``: the layers measured, in order (each takes a minute)."""
    run = benchmark_run(bench, bench.Device(**SIMULATED))
    run.measured = []

    def measure_layer(layer, device, samples, torch=None):
        run.row()
        run.measured.append(layer.name)
        return [bench.Measurement("`conv_implicit_gemm_warp_tiled`", layer, 1.0, 0)]

    monkeypatch.setattr(bench, "measure_layer", measure_layer)
    monkeypatch.setenv("NVIDIA_TF32_OVERRIDE", "0")  # as `main` sets it, undone after the test
    return run


LAYERS = ["conv2_x 3x3", "conv3_x 3x3", "conv4_x 3x3", "conv2_x 1x1 reduce"]


def test_a_time_budget_measures_the_goal_layer_first_and_names_the_others(bench, run):
    recorded = run(*run.ONE_ROW)
    assert run.measured == ["conv2_x 3x3"]
    assert recorded.write  # a full run's layers, cut short by time: still recorded, and says so
    assert [row[0] for row in table_rows(recorded.text, "### TFLOP/s")] == ["conv2_x 3x3"]
    note = recorded.text.splitlines()[-1]
    assert "conv3_x 3x3, conv4_x 3x3, conv2_x 1x1 reduce" in note and "conv.py" in note


def test_a_full_run_tables_every_layer_in_order_with_no_note(bench, run, monkeypatch):
    monkeypatch.setattr(bench, "GOAL_LAYER", "conv4_x 3x3")  # a goal further down: measured first, tabled in place
    recorded = run()
    assert run.measured == ["conv4_x 3x3", "conv2_x 3x3", "conv3_x 3x3", "conv2_x 1x1 reduce"]
    assert [row[0] for row in table_rows(recorded.text, "### TFLOP/s")] == LAYERS
    assert [row[1] for row in table_rows(recorded.text, "### Every measurement")] == LAYERS
    assert recorded.write and recorded.text.splitlines()[-1].startswith("| ")  # nothing under the tables
