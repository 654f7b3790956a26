"""benchmarks/compilers.py: its report, its Triton kernel and compiled graph checked on the CPU, and its time budget.

The GPU path needs a GPU (without one it says so: test_benchmarks_without_gpu.py). Three tests need
PyTorch and Triton, which the course's environment and CI do not install: they skip there. With both installed they
run the Triton kernel in Triton's interpreter (``TRITON_INTERPRET=1``, NumPy on the CPU) against NumPy in float64,
``torch.compile`` on the CPU against eager PyTorch, and the benchmark's GPU path end to end on the course simulator.
"""

import math
import os
import sys
import time

import numpy as np
import pytest

from conftest import ROOT, load_benchmark, table_rows

SCRIPT = ROOT / "benchmarks" / "compilers.py"
# (M, N, K): none a multiple of the tiles (16 to 128) but one; a single element; more tiles than one GROUP_M group
SHAPES = ((37, 53, 29), (130, 70, 100), (1, 1, 1), (64, 64, 64), (1100, 65, 17))
TRITON_IMPORTED_BEFORE = "triton" in sys.modules  # then without TRITON_INTERPRET: its own library is compiled code
GPU_CODE = '''
def call(args):
    arg0_1, arg1_1, arg2_1 = args
    buf0 = empty_strided_cuda((1000, 1000), (1000, 1), torch.float32)
    extern_kernels.mm(arg0_1, arg1_1, out=buf0)
    triton_poi_fused_add_relu_0.run(buf1, arg2_1, 1000000, stream=stream0)
    triton_tem_fused_addmm_relu_1.run(arg0_1, arg1_1, buf2, stream=stream0)
    return (buf1, )
'''


@pytest.fixture(scope="module", autouse=True)
def triton_interpreter():
    """TRITON_INTERPRET=1 while this file runs: Triton reads it when it is imported, when ``@triton.jit`` decorates
    and when it runs a kernel; where Triton is not installed it changes nothing."""
    before = os.environ.get("TRITON_INTERPRET")
    os.environ["TRITON_INTERPRET"] = "1"
    yield
    if before is None:
        del os.environ["TRITON_INTERPRET"]
    else:
        os.environ["TRITON_INTERPRET"] = before


@pytest.fixture(scope="module")
def bench():
    module, unload = load_benchmark(SCRIPT.stem, "compilers_benchmark")
    yield module
    unload()


@pytest.fixture(scope="module")
def interpreted():
    """The benchmark and PyTorch, with its Triton kernel in Triton's interpreter."""
    torch = pytest.importorskip("torch", reason="needs PyTorch, which the course's environment and CI do not install")
    pytest.importorskip("triton", reason="needs Triton, which the course's environment and CI do not install")
    if TRITON_IMPORTED_BEFORE:
        pytest.skip("Triton was imported before TRITON_INTERPRET=1 was set: run this file alone")
    module, unload = load_benchmark(SCRIPT.stem, "compilers_interpreted")
    yield module, torch
    unload()


def test_the_kernels_inductor_generated_are_read_from_its_code(bench):
    calls = bench.inductor_calls(GPU_CODE)
    assert calls == ["extern_kernels.mm", "triton_poi_fused_add_relu_0", "triton_tem_fused_addmm_relu_1"]
    summary = bench.inductor_summary(calls)
    assert "(cuBLAS on a GPU) `extern_kernels.mm`" in summary and "Triton pointwise `triton_poi" in summary
    assert "Triton GEMM template `triton_tem_fused_addmm_relu_1`" in summary
    assert bench.inductor_summary(bench.inductor_calls("no call here")) == "no kernel found in the generated code"


def test_the_report_has_triton_s_pick_inductor_s_kernels_and_the_share_of_cublas(bench):
    from types import SimpleNamespace

    device = SimpleNamespace(name="NVIDIA H100 80GB HBM3", sms=132, compute_capability=(9, 0), clock_khz=1_980_000)
    shape = bench.mb.square(1000)
    rows = [bench.mb.Measurement("cuBLAS via `torch.matmul`", shape, 0.05, cublas=True),
            bench.mb.Measurement(bench.TRITON, shape, 0.1, note="picked BLOCK_M=64; autotuned in 3.0 s over 6 configs"),
            bench.mb.Measurement(bench.COMPILED, shape, 0.2, note="calls cuBLAS `extern_kernels.mm`")]
    text = bench.section(rows, device, "versions", 7, "TF32 settings")
    assert "`python benchmarks/compilers.py` on NVIDIA H100 80GB HBM3" in text and "- Date: " in text
    assert "40.0 (torch)" in text and "20.00 (50%)" in text and "10.00 (25%)" in text
    assert "picked BLOCK_M=64; autotuned in 3.0 s" in text and "over 6 configs keyed on (M, N, K)" in text


def test_a_wrong_result_records_nothing(bench, capsys):
    wrong = bench.mb.Measurement(bench.TRITON, bench.mb.square(1000), 0.1, wrong=True)
    assert bench.finish(bench.NAME, "text", [wrong], write=True) == 1
    assert "nothing recorded" in capsys.readouterr().out


def cpu_clock(call, quantiles):
    """A stand-in for Triton's benchmarker (which needs a GPU): one call, timed by the CPU's clock."""
    began = time.perf_counter()
    call()
    return [time.perf_counter() - began] * len(quantiles)


def relative_error(got, want) -> float:
    return float(np.linalg.norm(got.double().numpy() - want) / np.linalg.norm(want))


def test_every_triton_config_and_the_autotuned_call_multiply_right_in_the_interpreter(interpreted):
    """Each config's tiles, swizzle and masks on shapes that are not multiples of them, NaN-poisoned outputs; then
    the autotuned entry point, its benchmarker replaced by the CPU clock (Triton's needs a GPU). The interpreter
    multiplies tiles with NumPy in float32 (it ignores ``input_precision``), so the bound is float32's for a sum of
    K products: 4 x 2^-24 x sqrt(K) relative, `matmul.tolerance`, as on the GPU."""
    bench, torch = interpreted
    bench.matmul_kernel.do_bench = cpu_clock
    generator = torch.Generator().manual_seed(0)
    for M, N, K in SHAPES:
        a = torch.randn(M, K, generator=generator) * 3 + 1  # non-zero mean: a missed tile shows
        b = torch.randn(K, N, generator=generator)
        want = a.double().numpy() @ b.double().numpy()
        for config in [*bench.CONFIGS, None]:
            c = torch.full((M, N), math.nan)
            if config is None:
                bench.triton_matmul(a, b, c)
            else:
                bench.matmul_kernel.fn[bench.triton_grid(M, N)](a, b, c, M, N, K, *a.stride(), *b.stride(),
                                                                  *c.stride(), **config.all_kwargs())
            assert relative_error(c, want) <= bench.mb.tolerance(K), (M, N, K, config)
        assert bench.matmul_kernel.best_config in bench.CONFIGS
    a = torch.randn(40, 70, generator=generator)
    b = torch.randn(70, 90, generator=generator)[:, ::2]  # strided columns: the strides are the kernel's arguments
    c = torch.full((40, 45), math.nan)
    bench.triton_matmul(a, b, c)
    assert relative_error(c, a.double().numpy() @ b.double().numpy()) <= bench.mb.tolerance(70)


def test_the_compiled_graph_matches_eager_on_the_cpu(interpreted):
    bench, torch = interpreted
    from torch._inductor.utils import run_and_get_code

    generator = torch.Generator().manual_seed(1)
    a, b = torch.randn(37, 29, generator=generator), torch.randn(29, 53, generator=generator)
    bias = torch.randn(53, generator=generator)
    compiled = torch.compile(bench.graph, mode=bench.COMPILE_MODE, dynamic=False)
    got, code = run_and_get_code(compiled, a, b, bias)
    want = bench.graph(a.double(), b.double(), bias.double()).numpy()
    assert relative_error(got, want) <= bench.mb.tolerance(29)
    assert (want == 0).any() and (want > 0).any()  # the ReLU cut some
    assert bench.inductor_calls("\n".join(code))  # it launched something we can name


def test_the_gpu_path_runs_end_to_end_on_the_cpu(interpreted, monkeypatch):
    """`measure_shape` and `section` as on a GPU, with the course simulator's arrays shared with CPU tensors: the
    glue (views, the autotuned call, the compiled graph and its generated code, the checks) runs; the times are the
    simulator's and mean nothing. cuBLAS (``torch.matmul`` on CUDA) has no CPU stand-in: its row is left out."""
    from types import SimpleNamespace

    bench, torch = interpreted
    monkeypatch.setattr(bench, "shared_tensor", lambda torch, array: torch.from_numpy(array._ary))
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    bench.matmul_kernel.do_bench = cpu_clock
    device = SimpleNamespace(name="the CPU simulator", sms=1, l2_bytes=1 << 12, real=False,
                             compute_capability=(9, 0), clock_khz=1_000_000)
    measurements = bench.measure_shape(bench.mb.square(19), device, 1, {"torch": torch})
    assert [m.kernel for m in measurements] == ["`matmul_warp_tiled`", bench.TRITON, bench.EAGER, bench.COMPILED,
                                                bench.COURSE_EPILOGUE]
    assert not any(m.wrong for m in measurements), [m.note for m in measurements]
    text = bench.section(measurements, device, "versions", 1, "settings")
    assert "picked BLOCK_M=" in text and "; calls " in text


# -- main: the time budget (`--seconds`), each shape's measurement a stand-in --------------------------------
@pytest.fixture
def run(bench, benchmark_run, monkeypatch):
    """`main` on every shape, PyTorch, Triton and Inductor's settings stand-ins; ``run.measured``: the shapes
    measured, in order (each takes a minute)."""
    from types import SimpleNamespace

    device = bench.mb.Device("CPU simulator", 2, 16 * 1024, real=False)
    run = benchmark_run(bench, device)
    run.measured = []

    def measure_shape(shape, device, samples, libraries):
        run.row()
        run.measured.append(shape.name)
        return [bench.mb.Measurement(bench.TRITON, shape, 1.0)]

    monkeypatch.setattr(bench, "measure_shape", measure_shape)
    monkeypatch.setattr(bench, "triton", SimpleNamespace(__version__="3.5"))
    monkeypatch.setattr(bench, "reference_libraries", lambda: {"torch": SimpleNamespace()})
    monkeypatch.setattr(bench.mb, "tf32_off_environment", lambda: None)
    monkeypatch.setattr(bench.mb, "tf32_off_torch", lambda torch: "TF32 off")
    monkeypatch.setattr(bench.mb, "matmul_versions", lambda libraries: "versions")
    monkeypatch.setitem(sys.modules, "torch._inductor", SimpleNamespace(config=SimpleNamespace()))
    monkeypatch.setenv("TRITON_CACHE_DIR", "")  # `main` points it at a new folder: undone after the test
    return run


def test_a_time_budget_measures_4096_first_and_names_the_others(bench, run):
    recorded = run(*run.ONE_ROW)
    assert run.measured == ["4096^3"]
    assert recorded.write  # a full run's shapes, cut short by time: still recorded, and says so
    assert [row[0] for row in table_rows(recorded.text, "### TFLOP/s")] == ["4096^3"]
    note = recorded.text.splitlines()[-1]
    assert "1000^3, 1024^3" in note and "compilers.py" in note


def test_a_full_run_tables_every_shape_in_order_with_no_note(bench, run):
    recorded = run()
    assert run.measured == ["4096^3", "1000^3", "1024^3"]
    assert [row[0] for row in table_rows(recorded.text, "### TFLOP/s")] == ["1000^3", "1024^3", "4096^3"]
    assert [row[1] for row in table_rows(recorded.text, "### Every measurement")] == ["1000^3", "1024^3", "4096^3"]
    assert recorded.write and recorded.text.splitlines()[-1].startswith("| ")  # nothing under the tables
