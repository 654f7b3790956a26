"""The tuner (search spaces, search, cache, correctness filter) and the compiled-code findings, on the CPU."""

import dataclasses
import math

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse.run import resources_problem
from gpucourse.run import tuning as rt

LOOP_PTX = """
.local .align 4 .b8 __local_depot0[64];
	mov.u32 %r1, 0;
$L__BB0_1:
	mul.wide.s32 %rd4, %r2, 4;
$L__BB0_2:
	mul.wide.s32 %rd5, %r3, 4;
	add.s64 %rd6, %rd1, %rd5;
	ld.global.f32 %f1, [%rd6];
	fma.rn.f32 %f2, %f1, %f1, %f2;
	add.s32 %r3, %r3, 1;
	setp.lt.s32 %p1, %r3, %r4;
	@%p1 bra $L__BB0_2;
	st.local.f32 [%rd2], %f2;
	ld.local.f32 %f3, [%rd2];
	@%p2 bra $L__BB0_1;
	ld.global.v4.f32 {%f4, %f5, %f6, %f7}, [%rd9];
"""


def test_ptx_counts_find_the_innermost_loop_and_what_is_in_it():
    loops = rt.innermost_loops(LOOP_PTX)
    assert len(loops) == 1 and "fma.rn.f32" in loops[0] and "st.local" not in loops[0]
    counts = rt.ptx_counts(LOOP_PTX)
    assert counts["local_bytes"] == 64 and (counts["local_loads"], counts["local_stores"]) == (1, 1)
    assert counts["inner_loop_int64"] == 2  # mul.wide and add.s64; the outer loop's mul.wide is not inner
    assert counts["inner_loop_fmas"] == 1 and counts["inner_loop_instructions"] == 7
    assert (counts["vector_loads"], counts["scalar_global_loads"]) == (1, 1)



def test_the_main_loop_is_the_innermost_loop_with_the_most_fmas():
    assert rt.main_loop_fma_share(LOOP_PTX) == pytest.approx(1 / 7)
    two_loops = LOOP_PTX + """
$L__BB0_9:
	fma.rn.f32 %f8, %f1, %f1, %f8;
	fma.rn.f32 %f9, %f1, %f1, %f9;
	@%p3 bra $L__BB0_9;
"""
    assert rt.main_loop_fma_share(two_loops) == pytest.approx(2 / 3)
    assert rt.main_loop_fma_share("\tadd.s32 %r1, %r1, 1;\n") is None


@pytest.mark.skipif(resources_problem() is not None, reason="needs nvJitLink")
def test_larger_register_tiles_have_a_main_loop_of_more_fmas():
    from numba import types

    from gpucourse.kernels import matmul as mm
    from gpucourse.run.assembler import ptx_for

    argtypes = (types.float32[:, :, ::1],) * 3
    shares = [rt.main_loop_fma_share(ptx_for(mm.make_register_tiled(64, 64, t, t, 16), argtypes, "sm_90"))
              for t in (2, 4, 8)]
    assert 0 < shares[0] < shares[1] < shares[2] < 1


def test_ptx_counts_64_bit_divisions_in_the_innermost_loop_only():
    ptx = """
$L__BB1_1:
	div.s64 %rd3, %rd1, %rd2;
	rem.u64 %rd4, %rd1, %rd2;
	div.u32 %r1, %r2, %r3;
	@%p1 bra $L__BB1_1;
	div.s64 %rd5, %rd1, %rd2;
"""
    assert rt.ptx_counts(ptx)["inner_loop_divisions64"] == 2  # not the 32-bit one, not the one after the loop


def test_ptx_counts_sign_tests_of_64_bit_integers_in_the_innermost_loop():
    ptx = """
$L__BB2_1:
	shr.s64 	%rd681, %rd954, 63;
	and.b64 	%rd682, %rd681, 33;
	and.b64 	%rd930, %rd69, -9223372036854775808;
	shr.s64 	%rd7, %rd6, 2;
	@%p1 bra $L__BB2_1;
	shr.s64 	%rd8, %rd6, 63;
"""
    counts = rt.ptx_counts(ptx)
    assert counts["inner_loop_sign_tests"] == 2  # not the shift by 2, not the test after the loop

@cuda.jit
def _runtime_indexed(out, x, n):
    scratch = cuda.local.array(16, float32)
    i = cuda.grid(1)
    for k in range(16):
        scratch[k] = x[(i + k) % x.size]
    if i < out.size:
        out[i] = scratch[n % 16]  # an index known only at run time: the array lives in local memory


@cuda.jit
def _int32_loop(out, x, n):
    i = cuda.grid(1)
    acc = float32(0)
    for k in range(n):
        acc += x[k] * float32(2)
    if i < out.size:
        out[i] = acc


@pytest.mark.skipif(resources_problem() is not None, reason="nvJitLink is not installed")
def test_inspect_compiled_says_local_memory_and_what_the_loop_does():
    x, out = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    local = rt.inspect_compiled(_runtime_indexed, (out, x, 3))
    assert local.local_bytes >= 64 and local.local_loads >= 1
    assert any("local memory" in line and "stack frame" in line for line in local.findings)
    clean = rt.inspect_compiled(_int32_loop, (out, x, 3))
    assert clean.local_bytes == 0 and clean.registers > 0
    assert any(line.startswith("no local memory") for line in clean.findings)
    assert clean.inner_loop_fmas >= 1 and 0 < clean.fma_density <= 1
    assert str(clean).splitlines()[0] == "_int32_loop:"
    shown = str(local).splitlines()[1:]  # each finding under its dash, wrapped between words at 100 columns
    assert len(shown) > len(local.findings) and all(len(line) <= rt.FINDING_WIDTH for line in shown)
    assert sum(line.startswith("  - ") for line in shown) == len(local.findings)
    assert all(line.startswith(("  - ", "    ")) for line in shown)
    assert " ".join(line.strip().removeprefix("- ") for line in shown).split() == " ".join(local.findings).split()



@cuda.jit
def _many_live(out, x):
    acc = cuda.local.array(24, float32)  # 24 accumulators, indices known at compile time: registers
    i = cuda.grid(1)
    for k in range(24):
        acc[k] = x[(i + k) % x.size]
    for r in range(x.size):
        for k in range(24):
            acc[k] = acc[k] * x[r] + float32(1)
    total = float32(0)
    for k in range(24):
        total += acc[k]
    if i < out.size:
        out[i] = total


@pytest.mark.skipif(resources_problem() is not None, reason="nvJitLink is not installed")
def test_inspect_compiled_keeps_the_kernels_cap_on_registers():
    x, out = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    free = rt.inspect_compiled(_many_live, (out, x))
    assert free.registers > 32 and free.spilled_bytes == 0 and free.local_bytes == 0
    capped = rt.inspect_compiled(cuda.jit(max_registers=32)(_many_live.py_func), (out, x))
    assert capped.registers <= 32 and capped.spilled_bytes > 0 and capped.local_bytes > 0
    assert capped.local_loads == capped.local_stores == 0  # the spills are the assembler's, not in the PTX
    assert any("spilled to local memory" in line for line in capped.findings)
    assert any("the assembler added for its spills" in line for line in capped.findings)
    assert not any(line.startswith("no local memory") for line in capped.findings)

def test_space_constraint_grid_and_random_search():
    space = rt.Space("s", {"a": (1, 2, 3), "b": (10, 20)}, lambda c: "odd" if c["a"] % 2 else None)
    assert space.valid() == [{"a": 2, "b": 10}, {"a": 2, "b": 20}]
    assert len(space.rejected()) == 4 and all(why == "odd" for _, why in space.rejected())
    assert rt.candidates(space, "grid", budget=1) == [{"a": 2, "b": 10}]
    drawn = rt.candidates(space, "random", budget=1, seed=3)
    assert drawn == rt.candidates(space, "random", budget=1, seed=3) and drawn[0] in space.valid()
    with pytest.raises(ValueError, match="grid"):
        rt.candidates(space, "annealing")


def test_cache_key_changes_with_what_the_best_config_depends_on():
    base = ("k", {"M": 64}, ("float32",), "H100", (9, 0), {"numba-cuda": "0.30.4"})
    key = rt.cache_key(*base)
    assert key == rt.cache_key(*base)
    for k, other in enumerate([("k2",), ({"M": 65},), (("float16",),), ("T4",), ((7, 5),), ({"numba-cuda": "0.31"},)]):
        changed = list(base)
        changed[k] = other[0]
        assert rt.cache_key(*changed) != key
    assert rt.cache_key(*base, {"parameters": {"BM": (32,)}}) != rt.cache_key(*base, {"parameters": {"BM": (64,)}})
    assert rt.cache_key("k", {"x": (4, 5)}, ("float32",), "H100", (9, 0), {}) == rt.cache_key(
        "k", {"x": [4, 5]}, ("float32",), "H100", (9, 0), {})  # tuples and lists key alike (JSON has lists)


@cuda.jit
def _shifted_copy(out, x, shift):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = x[(i + shift) % x.size]


class _CountingModel:
    device, architecture, compute_capability = "H100", "sm_90", (9, 0)

    def __init__(self):
        self.calls = 0

    def __call__(self, trace, resources, launch, flops, scale):
        self.calls += 1
        return 1e-6 * launch.block[0] / 32 + 1e-6 * (trace.array("x").instructions["read"].sectors > 0)


def _copy_problem(kernel=_shifted_copy, seed=1):
    x = np.random.default_rng(seed).standard_normal(100).astype(np.float32)
    d_x, out = cuda.to_device(x), {}

    def build(config):
        out["y"] = cuda.to_device(np.full(100, np.nan, np.float32))
        return rt.Launch(kernel, (-(-100 // config["threads"]),), (config["threads"],),
                         (out["y"], d_x, config["shift"]))

    def wrong():
        got = out["y"].copy_to_host()
        return None if np.array_equal(got, x) else "differs"

    space = rt.Space("copy", {"shift": (0, 1), "threads": (32, 64)})
    return rt.Problem("copy", space, build, wrong, 0.0, {"x": (100,)}, ("float32",))


def test_tune_drops_wrong_candidates_ranks_by_the_model_and_caches(tmp_path):
    model, problem = _CountingModel(), _copy_problem()
    result = rt.tune(problem, model=model, cache=tmp_path / "cache.json", measure=False)
    assert result.best == {"shift": 0, "threads": 32} and "cost model" in result.how and not result.from_cache
    wrong = [t for t in result.trials if "error" in t]
    assert [t["config"]["shift"] for t in wrong] == [1, 1] and all("wrong result" in t["error"] for t in wrong)
    assert model.calls == 2  # only the correct candidates are priced
    again = rt.tune(problem, model=model, cache=tmp_path / "cache.json", measure=False)
    assert again.from_cache and again.best == result.best and model.calls == 2  # a hit costs no timing


def test_a_launch_priced_again_in_the_process_is_traced_once(monkeypatch):
    """The same candidate on the same inputs is run on the simulator once per process (a grader, a sweep and a
    lecture cell price it again); other inputs, another config or a kernel compiled with other options run again, and
    a wrong result is never kept."""
    runs, run = [], rt._run_traced
    monkeypatch.setattr(rt, "_run_traced", lambda *a: runs.append(a[1]) or run(*a))
    monkeypatch.setattr(rt, "_TRACED", type(rt._TRACED)())
    model, problem, right = _CountingModel(), _copy_problem(), {"shift": 0, "threads": 32}
    assert rt.price(problem, right, model) == rt.price(problem, right, model) and len(runs) == 1
    rt.price(problem, {"shift": 0, "threads": 64}, model)
    rt.price(_copy_problem(seed=2), right, model)
    rt.price(_copy_problem(cuda.jit(lineinfo=True)(_shifted_copy.py_func)), right, model)
    assert len(runs) == 4
    for _ in range(2):
        with pytest.raises(rt.WrongResult):
            rt._trace(problem, {"shift": 1, "threads": 32}, "sm_90")
    assert len(runs) == 6 and len(rt._TRACED) == 4
    monkeypatch.setattr(rt, "TRACES_KEPT", 2)
    rt.price(problem, {"shift": 0, "threads": 128}, model)
    assert len(rt._TRACED) == 2
    rt.price(problem, right, model)  # among the oldest: forgotten
    assert len(runs) == 8


def test_a_trace_kept_for_the_model_holds_its_counts_and_not_each_access(monkeypatch):
    """The model's traces are kept (`TRACES_KEPT` of them): with the indices of every access they held 590 MB for
    lecture 7's 8 SGEMM candidates (a laptop keeps 64); now the counts only, the same as a full trace's."""
    from gpucourse.run.cpu_backend import trace

    monkeypatch.setattr(rt, "_TRACED", type(rt._TRACED)())
    kept, _, launch = rt._trace(_copy_problem(), {"shift": 0, "threads": 64}, "sm_90")
    with trace() as full:
        launch()
    assert set(kept.arrays) == set(full.last.arrays) and rt._TRACED
    for name, array in full.last.arrays.items():
        counts = kept.arrays[name]
        assert counts.events is None and array.events
        assert counts.instructions == array.instructions
        for kind in ("read", "write"):
            assert np.array_equal(counts.per_thread[kind], array.per_thread[kind])
            assert np.array_equal(counts.per_element[kind], array.per_element[kind])
    with pytest.raises(TypeError):  # the records are gone: no silent empty answer
        kept.touched(next(iter(kept.arrays)))


def test_the_model_s_candidates_are_compiled_for_its_gpu_only(monkeypatch):
    """A candidate's PTX check is its compilation for the GPU the model predicts, not a second one for the oldest
    GPU (lecture 7's search over 8 SGEMM tiles: 14.6 s with both, 8.4 s with one)."""
    from gpucourse.run import compile_cache, ptx

    @cuda.jit
    def copy_never_compiled_before(out, x, shift):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = x[(i + shift) % x.size]

    asked, compile_ptx = [], cuda.compile_ptx
    monkeypatch.setattr(compile_cache, "_memory", {})
    monkeypatch.setenv(compile_cache.ENV, "off")
    monkeypatch.setattr(cuda, "compile_ptx", lambda *a, **k: asked.append(k["cc"]) or compile_ptx(*a, **k))
    problem = _copy_problem(copy_never_compiled_before)
    result = rt.tune(problem, model=_CountingModel(), measure=False)
    assert result.best == {"shift": 0, "threads": 32} and set(asked) == {(9, 0)}, asked
    launch = problem.build(result.best)
    launch()  # a later launch takes that check too, with the variable types the simulator needs
    assert problem.wrong() is None and set(asked) == {(9, 0)}, asked
    assert ptx.variable_types(copy_never_compiled_before.py_func, tuple(map(ptx.argument_type, launch.args)))


def test_tune_without_a_gpu_or_a_model_says_what_to_pass():
    with pytest.raises(ValueError, match="cost_model"):
        rt.tune(_copy_problem(), measure=False)
    with pytest.raises(TypeError, match=r"model='H100' is not a cost model: pass model=.*cost_model\('H100'\)"):
        rt.tune(_copy_problem(), model="H100")


def test_the_cost_models_entry_points_given_a_gpus_name_say_what_to_pass():
    problem, config = _copy_problem(), {"shift": 0, "threads": 32}
    for call in (rt.price, rt.prediction):
        with pytest.raises(TypeError, match=r"model='H100' is not a cost model: pass model=.*cost_model\('H100'\)"):
            call(problem, config, "H100")
    from gpucourse.grading import tuning as gt
    problems = [gt.sgemm_problem(n, n, n, {"BM": (32,), "BN": (32,), "TM": (4,), "TN": (4,), "BK": (8,)},
                                 traced=(32, 32, 8), on_device=False) for n in (64, 128)]
    with pytest.raises(TypeError, match="model='H100' is not a cost model"):
        rt.price_each(problems, {"BM": 32, "BN": 32, "TM": 4, "TN": 4, "BK": 8}, "H100")


def test_tune_refuses_a_cache_or_a_budget_it_cannot_use(tmp_path):
    problem, model = _copy_problem(), _CountingModel()
    with pytest.raises(TypeError, match=r"cache is a Cache or the path of its JSON file, .* not dict \{\}"):
        rt.tune(problem, model=model, cache={}, measure=False)
    for budget in ("5", 0, 2.5):
        with pytest.raises(ValueError, match=f"budget is how many configs to try, a whole number from 1 up .* not "
                                             f"{budget!r}"):
            rt.tune(problem, model=model, budget=budget, measure=False)
    with pytest.raises(ValueError, match="a Cache is one JSON file, and .* is a directory: give a file's path"):
        rt.Cache(tmp_path)
    assert model.calls == 0  # refused before anything was priced


def test_inspect_compiled_says_what_it_takes():
    x = np.zeros(8, np.float32)
    with pytest.raises(TypeError, match=r"inspect_compiled reads a kernel, a function decorated with @cuda.jit, "
                                        r"not function '_plain'"):
        rt.inspect_compiled(_plain, (x, x), read_sass=False)
    with pytest.raises(TypeError, match="a function decorated with @cuda.jit, not CUDADispatcher"):
        rt.inspect_compiled(cuda.jit(device=True)(_plain), (x, x), read_sass=False)
    with pytest.raises(TypeError, match=r"args are the kernel's arguments in a tuple, such as \(out, x\), not one "
                                        "ndarray"):
        rt.inspect_compiled(_int32_loop, x, read_sass=False)
    for architecture in (90, "90", "sm90"):
        with pytest.raises(ValueError, match=f"an architecture is a string such as 'sm_90' .*, not {architecture!r}"):
            rt.inspect_compiled(_int32_loop, (x, x, 3), architecture, read_sass=False)


def _plain(out, x):
    out[0] = x[0]


def test_a_space_parameter_given_one_value_instead_of_a_tuple_is_named():
    from gpucourse.grading import tuning as gt
    with pytest.raises(TypeError, match=r"the space's TM is 2: .* TM=\(2,\) for one value"):
        gt.sgemm_problem(64, 64, 64, {"BM": (32,), "BN": (32,), "TM": (2), "TN": (4,), "BK": (8,)}, on_device=False)
    with pytest.raises(ValueError, match="needs the parameters BM, BN, TM, TN, BK, got BM"):
        gt.sgemm_problem(64, 64, 64, {"BM": (32,)}, on_device=False)


def test_price_each_prices_every_size_from_one_traced_launch(monkeypatch):
    from gpucourse.figures import tuning as ft
    from gpucourse.grading import tuning as gt

    model, config = ft.cost_model("H100"), {"BM": 32, "BN": 32, "TM": 4, "TN": 4, "BK": 8}
    sizes = [(128, 768, 768), (512, 3072, 768), (1000, 300, 100)]  # the last: not a multiple of a tile
    problems = [gt.sgemm_problem(*size, traced=(64, 32, 16), on_device=False) for size in sizes]
    one_by_one = [rt.price(p, config, model) for p in problems]
    traces, trace = [], rt._trace
    monkeypatch.setattr(rt, "_trace", lambda *a: traces.append(a) or trace(*a))
    assert rt.price_each(problems, config, model) == pytest.approx(one_by_one, rel=1e-12)
    assert len(traces) == 1 and len(set(one_by_one)) == 3
    for odd in ([*problems, gt.sgemm_problem(64, 64, 64, traced=(32, 32, 16))],  # another proxy size
                [gt.sgemm_problem(64, 64, 64)]):  # no proxy
        with pytest.raises(ValueError, match="same size"):
            rt.price_each(odd, config, model)


def test_a_size_priced_from_its_proxy_makes_none_of_its_arrays():
    """The model reads a full-size launch's grid and block only (`Problem.geometry`): lecture 7's BERT layer made
    A, B and a NaN-filled C at every size for every candidate (about 3.5 s of its sweep). A, B and C of 2^20 x 2^20
    would take 4 TiB each: priced without them, and the same price as an array-free build gives."""
    from gpucourse.figures import tuning as ft
    from gpucourse.grading import tuning as gt

    tiles, model = {"BM": (64,), "BN": (64,), "TM": (4,), "TN": (4,), "BK": (8,)}, ft.cost_model("H100")
    huge = gt.sgemm_problem(2**20, 2**20, 2**20, tiles, traced=(32, 32, 8), on_device=False)
    config = huge.space.valid()[0]
    kernel, grid, block = huge.geometry(config)
    assert grid == (2**14, 2**14, 1) and block == (16, 16) and kernel is huge.geometry(config)[0]
    seconds = rt.price(huge, config, model)
    assert rt.price_each([huge], config, model) == [seconds] and math.isfinite(seconds)
    shapeless = dataclasses.replace(huge, geometry=None, build=lambda c: rt.Launch(*huge.geometry(c), ()))
    assert rt.price(shapeless, config, model) == seconds


@pytest.mark.parametrize("family", ["conv", "softmax"])
def test_a_conv_or_softmax_size_priced_from_its_proxy_makes_none_of_its_arrays(family):
    """As the SGEMM's: the tuning benchmark's conv layer (batch 32, 64 x 56 x 56) made its input, its weights in two
    layouts and its reference (about 6 s) before a candidate was priced; x of 2^16 x 2^16 x 2^16 would be 1 TiB."""
    from gpucourse.figures import tuning as ft
    from gpucourse.grading import tuning as gt

    if family == "conv":
        huge = gt.conv_problem(2**16, 64, 2**16, 2**16, 64, traced=(1, 4, 5, 5, 4), on_device=False)
        config = {"algorithm": "implicit_gemm"}
    else:
        huge = gt.softmax_problem(2**30, 2**16, threads=(128,), traced=(2, 40), on_device=False)
        config = {"kernel": "online", "threads": 128}
    seconds = rt.price(huge, config, ft.cost_model("H100"))
    assert math.isfinite(seconds) and huge.wrong() == "nothing launched to check: launch build(config) first"


def test_sweep_gives_every_config_at_every_size_priced_or_timed_and_checked(monkeypatch):
    from gpucourse.figures import tuning as ft
    from gpucourse.grading import tuning as gt

    tiles = {"BM": (16, 32), "BN": (32,), "TM": (2,), "TN": (4,), "BK": (8,)}
    sizes = [(40, 36, 24), (70, 20, 10)]
    model = ft.cost_model("T4")
    priced = rt.sweep([gt.sgemm_problem(*s, tiles, traced=(32, 32, 8), on_device=False) for s in sizes], model)
    assert [c for c, _ in priced] == [{"BM": 16, "BN": 32, "TM": 2, "TN": 4, "BK": 8},
                                      {"BM": 32, "BN": 32, "TM": 2, "TN": 4, "BK": 8}]
    on_gpu = [gt.sgemm_problem(*s, tiles, traced=(32, 32, 8)) for s in sizes]
    assert [times for _, times in priced] == [rt.price_each(on_gpu, c, model) for c, _ in priced]
    monkeypatch.setattr(rt, "_device", lambda: ("a GPU", (9, 0)))  # timed, as on a GPU (here the simulator's events)
    build = on_gpu[1].build  # at the second size, 32-row tiles launched on one block: most of C unwritten

    def one_block_of_32_rows(config):
        launch = build(config)
        return launch if config["BM"] == 16 else dataclasses.replace(launch, grid=(1, 1, 1))

    on_gpu[1] = dataclasses.replace(on_gpu[1], build=one_block_of_32_rows)
    timed = rt.sweep(on_gpu)
    assert all(0 < t < math.inf for t in timed[0][1])
    assert timed[1][1][0] < math.inf and timed[1][1][1] == math.inf  # wrong: not a time


@pytest.mark.skipif(resources_problem() is not None, reason="nvJitLink is not installed")
def test_an_nvdisasm_that_fails_leaves_the_sass_unread_and_says_why(monkeypatch):
    def older_nvdisasm(*args):  # another package's nvdisasm, older than the assembler's cubin
        raise RuntimeError("nvdisasm failed on the sm_90 cubin: unsupported ELF version")

    monkeypatch.setattr(rt, "disassemble", older_nvdisasm)
    x, out = np.arange(32, dtype=np.float32), np.zeros(32, np.float32)
    found = rt.inspect_compiled(_many_live, (out, x))
    assert found.sass is None and found.registers > 32
    assert found.findings[-1] == "SASS not read: nvdisasm failed on the sm_90 cubin: unsupported ELF version"


@pytest.mark.skipif(resources_problem() is not None, reason="needs nvJitLink")
def test_the_models_picks_that_lecture_7_quotes():
    """Lecture 7 (section 7): among benchmarks/tuning.py's 24 random SGEMM candidates (seed 0), the H200 model's
    first at 4096^3 is the configuration the H200 measured fastest on 2026-11-30 (64 x 64 tiles of 8 x 4, BK 8;
    its second, 15% slower, the fourth measured: 4 x 8, BK 16), where before a block's own time it put 32 x 64
    tiles of 8 x 8 first, which the H200 measured among the slowest."""
    from gpucourse.figures import tuning as ft
    from gpucourse.grading import tuning as gt

    problem = gt.sgemm_problem(4096, 4096, 4096, traced=(128, 128, 64), on_device=False)
    model, priced = ft.cost_model("H200"), []
    for config in rt.candidates(problem.space, "random", 24, 0):
        try:
            priced.append((rt.price(problem, config, model), config))
        except ValueError:  # a block that fits no SM: it cannot launch, and the H200 did not time it
            continue
    assert len(priced) == 22
    priced.sort(key=lambda pair: pair[0])
    ranked = [config for _, config in priced]
    assert ranked[:2] == [dict(BM=64, BN=64, TM=8, TN=4, BK=8), dict(BM=64, BN=64, TM=4, TN=8, BK=16)]
    assert ranked.index(dict(BM=32, BN=64, TM=8, TN=8, BK=16)) > 11  # measured 21.9 ms: the slower half


def test_a_candidate_the_gpu_refuses_for_its_registers_is_said_in_words(monkeypatch):
    """On the H200 (2026-11-29) two SGEMM candidates of 1024 threads failed with CUDA's own text, cut at 200
    characters; the trial now says why a block does not fit."""
    problem = _copy_problem()
    refused = dataclasses.replace(problem, build=lambda config: dataclasses.replace(  # 64: as if 1024 threads
        problem.build(config), kernel=_Refused(), block=(1024,)) if config["threads"] == 64 else problem.build(config))
    monkeypatch.setattr(rt, "_device", lambda: ("a GPU", (9, 0)))
    result = rt.tune(refused)
    errors = [t["error"] for t in result.trials if "error" in t and t["config"]["threads"] == 64]
    assert errors and all(e.startswith("cannot launch: a block of 1024 threads may use 64 registers a thread "
                                       "(65,536 an SM), and this config's kernel needs more") for e in errors), errors


class _Refused:
    """A kernel whose launch the GPU refuses, as numba raises it."""

    def __getitem__(self, configuration):
        def launch(*args):
            raise RuntimeError("[701] Call to cuLaunchKernel results in CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES")
        return launch


def test_a_candidate_that_breaks_the_cuda_context_stops_the_search_naming_it(monkeypatch):
    """After an illegal address every later launch of the process fails: the trials after it were recorded as
    failed, one by one, with no word of the config that broke the context."""
    problem = _copy_problem()
    faulting = dataclasses.replace(problem, build=lambda config: dataclasses.replace(
        problem.build(config), kernel=_Faulting()) if config["threads"] == 64 else problem.build(config))
    monkeypatch.setattr(rt, "_device", lambda: ("a GPU", (9, 0)))
    with pytest.raises(rt.ContextLost, match=r"config \{.*'threads': 64.*\} broke the GPU's CUDA context .*"
                                             "CUDA_ERROR_ILLEGAL_ADDRESS.* restart the kernel"):
        rt.tune(faulting)


class _Faulting:
    """A kernel that reads past its array on a GPU, as numba reports it."""

    def __getitem__(self, configuration):
        def launch(*args):
            raise RuntimeError("[700] Call to cuCtxSynchronize results in CUDA_ERROR_ILLEGAL_ADDRESS")
        return launch
