"""The CPU side of benchmarks/simulator_fuzz.py: random kernels are valid (no fault on the simulator), compile
for a GPU (the launch's PTX check), are reproducible from their seed, and the comparison keeps to its bounds."""

import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import ROOT, load_benchmark
from h200_fuzz_kernels import KERNELS as SEED_1_AS_DRAWN, KERNELS_2026_11_30

sys.path.insert(0, str(ROOT / "benchmarks"))


def stand_in_gpu(launch):
    """``launch`` on a stand-in GPU: the simulator, with int16 negations left unwrapped as ptxas 12.9 to 13.2 do."""
    from gpucourse.run import simulated
    from gpucourse.simulator import int16_negation_unwrapped

    def on_the_gpu(dispatcher, kernel, arrays, probes=0):
        with simulated(), int16_negation_unwrapped():
            return launch(dispatcher, kernel, arrays, probes)

    return on_the_gpu


@pytest.fixture(scope="module")
def fuzz():
    module, unload = load_benchmark("simulator_fuzz", "simulator_fuzz_under_test")
    yield module
    unload()


def test_random_kernels_run_on_the_simulator_and_compile(fuzz):
    lines = []
    count, disagreements, apart = fuzz.run(12, seed=2026, on_gpu=False, batch=12,
                                           report=lambda *a, **k: lines.append(a))
    assert count == 12 and disagreements == apart == [] and lines == [("12 kernels, 0 disagreements",)]


def test_shards_split_the_kernels_between_processes_each_kernel_once(fuzz):
    counts = [fuzz.run(7, seed=3, on_gpu=False, shard=(k, 3), report=lambda *a, **k: None)[0] for k in range(3)]
    assert counts == [3, 2, 2]
    run = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "simulator_fuzz.py"), "--kernels", "6",
                          "--cpu-only", "--workers", "2"], capture_output=True, text=True, timeout=300,
                         env={**os.environ, "PYTHONPATH": str(ROOT / "lib")})
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert sorted(lines[:2]) == ["shard 1 of 2: 3 kernels, 0 disagreements", "shard 2 of 2: 3 kernels, 0 disagreements"]
    assert lines[2:] == ["6 kernels in 2 processes, 0 disagreements"]


def test_generation_is_reproducible_and_covers_the_grammar(fuzz):
    def kernels(seed):
        generator = fuzz.Generator(seed)
        return [generator.kernel(n) for n in range(60)]

    first = kernels(5)
    assert [k.source for k in first] == [k.source for k in kernels(5)] != [k.source for k in kernels(6)]
    text = "\n".join(k.source for k in first)
    for feature in ("cuda.syncthreads()", "_sync(0xFFFFFFFF", "cuda.atomic.", "return", "math.", "while ",
                    "for k in range(i % 5)", "//", "<<", " if ", "min(", "max(", "pow(", "divmod(", "round(",
                    "t = t + v / float32(0.75)"):  # (a variable read before a branch joins it with another type)
        assert feature in text, feature
    dtypes = {dtype for kernel in first for dtype in kernel.dtypes}
    assert dtypes == set(fuzz.DTYPES)


def test_comparison_bounds(fuzz):
    kernel = fuzz.Generator(1).kernel(0)
    kernel.math_dtype = "float32"
    n = 4
    exact = {"out": np.float64(np.float32([0.5, 1.0, 2.0, np.nan])), "iout": np.arange(n), "tout": np.ones(n),
             "total": np.zeros(1, np.int64)}
    near = {**exact, "out": exact["out"] * (1 + 3 * np.finfo(np.float32).eps)}
    assert fuzz.disagreement(kernel, exact, near) is None  # within 4 ulp of a math function's float32 result
    far = {**exact, "out": exact["out"] * (1 + 8 * np.finfo(np.float32).eps)}
    assert "out differs at [0, 1, 2]" in fuzz.disagreement(kernel, exact, far)
    assert "tout differs" in fuzz.disagreement(kernel, exact, {**exact, "tout": np.nextafter(np.ones(n), 2)})
    assert "iout differs at [3]: [3] against [4]" in fuzz.disagreement(kernel, exact, {**exact, "iout": np.array([0, 1, 2, 4])})
    kernel.math_dtype = None
    assert "out differs" in fuzz.disagreement(kernel, exact, near)  # no math: bit for bit


# What an NVIDIA H200 computed (make gpu-check, 2026-11-29, seed 1) where the simulator then disagreed: ballot_sync
# is an int32 in numba-cuda, divmod of a 64-bit unsigned and a signed integer works in float64, and a float % is
# the GPU's fused |x| - floor(|x| / |y|) * |y|, not C's exact fmod.
ON_THE_H200 = {
    140: ("out", [25], [2.6352491533870787e18]),
    476: ("tout", [32, 33, 34, 35, 36], [-10.75] * 5),
    567: ("tout", [0, 1, 2, 3, 4], [-1717471108.983259, -1717471122.0078125, -1717471103.17351,
                                    -1717471121.9609375, -1717471104.7544158]),
    609: ("tout", [52], [1.9765625]),
    693: ("tout", [0, 1, 2, 3, 4], [-1440768000.75, -1440768000.75, -1440767999.75, -1440767997.75,
                                    -1440767994.75]),
    924: ("tout", [0, 1, 2, 3, 4], [-1591197169.0, -1591197161.0, -1591197148.0, -1591197172.5, -1591197164.0]),
    980: ("out", [18], [-1.0]),
    1750: ("out", [28], [1024.0]),
    1785: ("tout", [0, 1, 2, 3, 4], [-272629760.5625] * 5),
}


def drawn_by_seed_1(fuzz, number: int):
    """Kernel ``number`` of seed 1 as the grammar of 2026-11-29 drew it (`h200_fuzz_kernels`)."""
    return fuzz.Kernel(**SEED_1_AS_DRAWN[number])


def test_the_kernels_the_h200_disagreed_on_now_give_its_values(fuzz, tmp_path):
    from gpucourse.run import simulated

    kernels = [drawn_by_seed_1(fuzz, number) for number in ON_THE_H200]
    sys.path.insert(0, str(tmp_path))
    for (number, (name, where, expected)), kernel, dispatcher in zip(
            ON_THE_H200.items(), kernels, fuzz.load(kernels, tmp_path)):
        with simulated():
            outputs = fuzz.launch(dispatcher, kernel, fuzz.inputs(kernel, 1 * 100_003 + number))
        assert outputs[name][where].tolist() == expected, kernel.source


def test_the_assemblers_int16_negation_is_told_apart_output_by_output(fuzz, tmp_path):
    """ptxas 12.9 to 13.2 keep -(-32768) of an int16 as 32768 where it stays an integer and wrap it where it becomes a
    float (the H200's CUDA 13.0 disagreed with a wrapping simulator on k1568's integer total and agreed on k798's
    float product); a GPU output that is neither simulation stays a disagreement."""
    from gpucourse.run import simulated

    assert fuzz.unwraps_int16_negation(("nvJitLink", (13, 0)))
    assert fuzz.unwraps_int16_negation(("the driver's", (12, 9)))
    assert not fuzz.unwraps_int16_negation(("nvJitLink", (13, 3))) and not fuzz.unwraps_int16_negation(None)
    kernel = drawn_by_seed_1(fuzz, 506)  # iout[i] = (-x0[j]), x0 an int16 array holding -32768
    sys.path.insert(0, str(tmp_path))
    (dispatcher,) = fuzz.load([kernel], tmp_path)
    arrays = fuzz.inputs(kernel, 100_003 + 506)
    with simulated():
        wrapped = fuzz.launch(dispatcher, kernel, arrays)
    unwrapped_iout = np.where(wrapped["iout"] == -32768, 32768, wrapped["iout"])
    assert (unwrapped_iout != wrapped["iout"]).any()
    gpu = {**wrapped, "iout": unwrapped_iout}
    assert fuzz.disagreement(kernel, gpu, wrapped).startswith("iout differs")
    assert fuzz.explanation(kernel, gpu, wrapped, dispatcher, arrays, True) == "the assembler's int16 negation"
    assert fuzz.explanation(kernel, gpu, wrapped, dispatcher, arrays, False) is None  # under ptxas 13.3 and later
    wrong = {**gpu, "tout": gpu["tout"] + 1}
    assert fuzz.explanation(kernel, wrong, wrapped, dispatcher, arrays, True) is None
    text = fuzz.section(2000, [], 1, "NVIDIA H200", ["k506: the assembler's int16 negation"], ("nvJitLink", (13, 0)))
    assert "**0 disagreements**" in text and "Assembler of the GPU's code: nvJitLink 13.0" in text
    assert "- Apart, the assembler's int16 negation: 1 kernel whose every difference" in text and ": k506." in text


def test_a_gpu_run_counts_the_assemblers_kernels_apart_only_under_such_an_assembler(fuzz, monkeypatch):
    """`run` on a stand-in GPU that leaves int16 negations unwrapped (the launch after the simulator's, per kernel):
    under nvJitLink 13.0 kernel k506 of seed 1 (as drawn on 2026-11-29) is counted apart, under 13.5 it is a
    disagreement."""
    import gpucourse.run
    from gpucourse.run import simulated

    real = fuzz.launch

    def on_the_simulator(dispatcher, kernel, arrays, probes=0):
        with simulated():
            return real(dispatcher, kernel, arrays, probes)

    class AsDrawn:  # seed 1's kernel 506 as the grammar drew it then, whatever the grammar draws now
        def __init__(self, seed):
            assert seed == 1

        def kernel(self, number):
            return drawn_by_seed_1(fuzz, 506)

    monkeypatch.setattr(fuzz, "Generator", AsDrawn)
    monkeypatch.setattr(fuzz, "launch", stand_in_gpu(real))
    monkeypatch.setattr(fuzz, "simulated_launch", on_the_simulator)
    for version, apart in (((13, 0), ["k506: the assembler's int16 negation"]), ((13, 5), [])):
        monkeypatch.setattr(gpucourse.run, "launch_assembler", lambda: ("nvJitLink", version))
        lines = []
        done, disagreements, counted_apart = fuzz.run(507, 1, on_gpu=True, shard=(506, 507),
                                                      report=lambda *a, **k: lines.append(a[0]))
        assert (done, counted_apart) == (1, apart)
        assert len(disagreements) == 1 - len(apart)
        if disagreements:  # it says where the runs part: the int16 negation
            assert "narrowed: the first statement that differs, line 15 of the kernel: `iout[i] = -x0[j]`" \
                in disagreements[0]
            assert "the operation that differs: `-x0[j]`" in disagreements[0]
        assert lines == ["shard 507 of 507: 1 kernels, 0 disagreements, 1 apart (1 the assembler's int16 negation)"
                         if apart else "shard 507 of 507: 1 kernels, 1 disagreements"]


# What the H200 computed on 2026-11-30 (make gpu-check, seed 1, CUDA 13.0) where the simulator then disagreed, by
# cause: a float remainder whose sign test NVVM folded (outputs then within the bounds), a signed overflow (what the
# simulator finds first), and a conditional expression's type (`test_simulator_typing`).
REMAINDER_SIGN_ON_THE_H200 = {311: ("out", [47], [0.1191202774643898]), 508: ("tout", [4], [-224.96875]),
                              111: ("out", [0, 1, 3, 4, 5], [-1024.0] * 5)}
OVERFLOWS_ON_THE_H200 = {378: ("out", [21], [0.0], "int64 +: -9223372036854775808 and -37"),
                         714: ("out", [90], [0.0], "int64 *: -4 and -9223372036854775808"),
                         418: ("tout", [116], [88.25], "int64 +: 47 and 9223372036854775807"),
                         # threads 14 and 60 overflow (x1 + x1 of 2**63 - 1); 0 and 50 read theirs from shared memory
                         1319: ("tout", [0, 14, 50, 60], [6.53888888888889, 55.6, 17.775, 1.5763888888888888],
                                "int64 +: 9223372036854775807 and 9223372036854775807")}


def drawn_on_2026_11_30(fuzz, tmp_path, number: int):
    """Kernel ``number`` of seed 1 as drawn on 2026-11-30: (kernel, dispatcher, inputs)."""
    kernel = fuzz.Kernel(**KERNELS_2026_11_30[number])
    sys.path.insert(0, str(tmp_path))
    (dispatcher,) = fuzz.load([kernel], tmp_path)
    return kernel, dispatcher, fuzz.inputs(kernel, 100_003 + number)


def with_the_gpus_values(outputs: dict, name: str, where: list, values: list) -> dict:
    changed = outputs[name].copy()
    changed[where] = values
    return {**outputs, name: changed}


def test_float_remainders_the_h200_folded_are_told_apart_as_nvvms_sign_test(fuzz, tmp_path):
    """The H200's values are the simulator's with the remainder moved by the dividend's sign, which NVVM proved
    (2**65 % 100.0 is -768 there: its frem, fused, is not exact, and 100 was not added); not the plain simulation's."""
    from gpucourse.run import simulated
    from gpucourse.simulator import remainder_sign_of_dividend

    for number, (name, where, values) in REMAINDER_SIGN_ON_THE_H200.items():
        kernel, dispatcher, arrays = drawn_on_2026_11_30(fuzz, tmp_path, number)
        with simulated():
            plain = fuzz.launch(dispatcher, kernel, arrays)
        with simulated(), remainder_sign_of_dividend():
            folded = fuzz.launch(dispatcher, kernel, arrays)
        gpu = with_the_gpus_values(folded, name, where, values)
        assert fuzz.disagreement(kernel, gpu, folded) is None and fuzz.disagreement(kernel, gpu, plain), number
        assert fuzz.explanation(kernel, gpu, plain, dispatcher, arrays, unwrapping=False) == "NVVM's remainder sign"
        wrong = with_the_gpus_values(gpu, "iout", [0], [gpu["iout"][0] + 1])
        assert fuzz.explanation(kernel, wrong, plain, dispatcher, arrays, unwrapping=False) is None


def test_kernels_whose_signed_integers_overflow_are_told_apart_with_what_overflowed(fuzz, tmp_path):
    from gpucourse.run import simulated

    def explained(number, name, where, values):
        kernel, dispatcher, arrays = drawn_on_2026_11_30(fuzz, tmp_path, number)
        with simulated():
            plain = fuzz.launch(dispatcher, kernel, arrays)
        gpu = with_the_gpus_values(plain, name, where, values)
        assert fuzz.disagreement(kernel, gpu, plain), number
        return fuzz.explanation(kernel, gpu, plain, dispatcher, arrays, unwrapping=True), plain

    for number, (name, where, values, first) in OVERFLOWS_ON_THE_H200.items():
        assert explained(number, name, where, values)[0] == f"signed overflow ({first})"
    assert explained(1319, "tout", [0, 13], [6.53888888888889, 1.0])[0] is None  # thread 13: no overflow reaches it
    # k292 overflows in threads 39 and 49, and 35 and 53 shuffle their values: a difference in thread 12 stays a
    # disagreement (there the H200 gave -0.0, a typing bug of the simulator), one in 53 does not
    explanation, plain = explained(292, "out", [12], [1.0])
    assert explanation is None and plain["out"][12] == 0 and np.signbit(plain["out"][12])  # the H200's -0.0
    assert explained(292, "out", [53], [1.0])[0].startswith("signed overflow (int64 -: -8 and")


def test_the_kernels_counted_apart_are_listed_by_cause(fuzz):
    apart = ["k714: signed overflow (int64 *: 3 and -4)", "k139: the assembler's int16 negation",
             "k311: NVVM's remainder sign", "k378: signed overflow (int64 +: 1 and 2)"]
    assert fuzz.counted([], apart) == ("0 disagreements, 4 apart (1 the assembler's int16 negation, "
                                       "1 NVVM's remainder sign, 2 signed overflow)")
    text = fuzz.section(2000, [], 1, "NVIDIA H200", apart, ("nvJitLink", (13, 0)))
    assert "- Apart, signed overflow: 2 kernels whose every difference" in text
    assert "k378 (int64 +: 1 and 2); k714 (int64 *: 3 and -4)." in text
    assert "- Apart, NVVM's remainder sign: 1 kernel whose" in text and ": k311." in text


BRANCHY = """def k9(x0, x1, out, iout, tout, total):
    i = cuda.grid(1)
    j = min(i, x0.size - 1)
    t = 0.25
    for k in range(i % 5):
        t = min(t + k, 100.0)
    if i < out.size:
        cuda.atomic.add(total, 0, int64(x1[j] // 2))
    t = t + cuda.shfl_down_sync(0xFFFFFFFF, float64(x1[j]), 3)
    if divmod(-x0[j], 5)[0] > x1[j]:
        t = t * 0.5
    if i < out.size:
        tout[i] = t
"""


@pytest.fixture()
def narrowing(fuzz, tmp_path):
    """(fuzz_narrowing, a stand-in GPU that leaves int16 negations unwrapped, the kernel loader)."""
    import fuzz_narrowing

    sys.path.insert(0, str(tmp_path))
    yield fuzz_narrowing, stand_in_gpu(fuzz.launch), lambda kernels: fuzz.load(kernels, tmp_path)
    sys.path.remove(str(tmp_path))


def test_narrowing_names_the_statement_then_the_operation(fuzz, narrowing):
    """The first statement whose value differs, in source order (a condition before its branch), then the innermost
    operation that differs while its operands agree; the probed copy keeps the kernel's statements and order."""
    narrow, on_the_gpu, load = narrowing
    kernel = fuzz.Kernel("k9", BRANCHY, ("int16", "int32"), 32, 37, None)
    arrays = fuzz.inputs(kernel, 5)
    assert arrays[0].min() == -32768
    source, statements = narrow.statement_probes(BRANCHY)
    assert [s.lineno for s in statements] == [2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13]  # each if, the atomic's value
    assert source.count("probe[") == 11 and "shfl_down_sync(4294967295, float64(x1[j]), 3)" in source
    report = narrow.narrow(kernel, arrays, on_the_gpu, fuzz.simulated_launch, load).splitlines()
    assert report[0].startswith("narrowed: the first statement that differs, line 10 of the kernel: "
                                "`if divmod(-x0[j], 5)[0] > x1[j]:`; thread ")
    assert report[1].startswith("  the operation that differs: `-x0[j]`; thread ")
    assert report[1].endswith("GPU 32768.0, simulator -32768.0; its operands agree: `x0[j]` = -32768.0")
    assert len(report) == 2  # divmod(...)[0] and the comparison differ only through -x0[j]


def test_narrowing_says_when_nothing_differs_and_never_raises(fuzz, narrowing):
    narrow, _, load = narrowing
    kernel = fuzz.Kernel("k9", BRANCHY, ("int16", "int32"), 32, 37, None)
    arrays = fuzz.inputs(kernel, 5)
    assert narrow.narrow(kernel, arrays, fuzz.simulated_launch, fuzz.simulated_launch, load).startswith(
        "narrowed: no probed statement differs")

    def broken(kernels):
        raise RuntimeError("NVVM failed")

    assert narrow.narrow(kernel, arrays, fuzz.simulated_launch, fuzz.simulated_launch, broken) == \
        "narrowed: could not probe the kernel (RuntimeError: NVVM failed)"


def test_every_kernel_of_the_grammar_can_be_probed(fuzz, narrowing):
    """Probed copies of random kernels (shared memory, shuffles and votes, atomics, loops, early returns) compile
    for the GPU (the launch's PTX check) and run on both sides; the int16 kernels among them are narrowed to a
    negation."""
    narrow, on_the_gpu, load = narrowing
    generator = fuzz.Generator(1)
    every = [generator.kernel(number) for number in range(40)]
    text = "\n".join(k.source for k in every)
    assert all(feature in text for feature in ("cuda.shared.array", "_sync(", "cuda.atomic.", "return", "while "))
    for number, kernel in enumerate(every):
        report = narrow.narrow(kernel, fuzz.inputs(kernel, 100_003 + number), on_the_gpu, fuzz.simulated_launch,
                               load)
        assert report.startswith(("narrowed: no probed statement differs", "narrowed: the first statement")), report
        if "the first statement" in report:
            assert "the operation that differs: `-" in report, report
