"""Counting the instructions a launch issues (`run.issue`): SASS with its line table, weighed by the trace."""

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse import trace
from gpucourse.run import issue, resources_problem
from gpucourse.run import sass as rs
from gpucourse.run import tuning as rt
from gpucourse.run import assembler, compile_cache
from gpucourse.run.assembler import lined_ptx, ptx_for
from gpucourse.run.ptx import argument_type
from kernels_elsewhere import calling, doubled

# the shape nvdisasm -g prints: a loop unrolled twice (two loads of line 7 per pass), its remainder (one), and a
# loop without a load nested in the first
SASS = """
	//## File "k.py", line 5
        /*0000*/                   S2R R0, SR_TID.X ;
        /*0010*/                   IMAD R1, R0, 0x4, RZ ;
.L_x_0:
	//## File "k.py", line 7
        /*0020*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0030*/                   LDG.E R3, desc[UR4][R4.64+0x4] ;
        /*0040*/                   FADD R5, R2, R3 ;
.L_x_2:
        /*0050*/                   SHF.R.U32.HI R7, RZ, 0x1, R7 ;
        /*0060*/               @!P2 BRA `(.L_x_2) ;
        /*0070*/                   ISETP.GE.AND P0, PT, R1, 0x10, PT ;
        /*0080*/               @!P0 BRA `(.L_x_0) ;
.L_x_1:
        /*0090*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*00a0*/                   MUFU.EX2 R5, R2 ;
        /*00b0*/                   NOP ;
        /*00c0*/               @!P1 BRA `(.L_x_1) ;
	//## File "k.py", line 9
        /*00d0*/                   STG.E desc[UR4][R6.64], R5 ;
        /*00e0*/                   EXIT ;
"""


def test_each_loop_issues_as_often_as_the_trace_counts_its_loads():
    code = issue.issue_code(SASS)
    lines = {("k.py", 7, "global", "read"): 100, ("k.py", 9, "global", "write"): 4}
    counted = code.issued(lines, warps=4)
    # the unrolled loop holds 2 of line 7's loads: 100 / 2 = 50 passes; the loop nested in it runs as often; the
    # remainder (1 load of line 7, fewer than the unrolled loop) and the code outside the loops once per warp
    unrolled, nested, remainder, outside = 50 * 5, 50 * 2, 4 * 3, 4 * 4  # a NOP takes no issue slot
    assert counted["issue"] == unrolled + nested + remainder + outside
    assert counted["fma"] == 50 + 4 and counted["imad"] == 4  # FADD per pass, IMAD once per warp: both the FMA pipe's
    assert counted["alu"] == 50 + 50  # ISETP and SHF per pass
    assert counted["special"] == 4  # MUFU.EX2
    assert counted["round_trips"] == 50 + 4  # the loads of each pass wait once (FADD, MUFU), the STG for none
    twice = code.issued({key: 2 * n for key, n in lines.items()}, warps=4)
    assert code.issued(lines, warps=4, scale=2) == twice  # a trace of half the work, scaled


def test_a_loop_whose_loads_never_ran_issues_nothing_and_no_line_table_reads_as_none():
    code = issue.issue_code(SASS)
    assert code.issued({}, warps=1)["fma"] == 1  # the loop of FADD ran 0 times; the IMAD outside it once
    assert issue.issue_code("\n".join(line for line in SASS.splitlines() if "//##" not in line)) is None
    assert issue.pipes_of("FFMA.FTZ") == ("fma",) and issue.pipes_of("IMAD.WIDE.U32") == ("fma", "imad")
    assert issue.pipes_of("LOP3.LUT") == ("alu",) and issue.pipes_of("BRA") == ()


def _row_sums_of(cell):
    """A kernel of row sums of ``cell(x, row, col, divided)``, a device function it names as a closure variable."""
    @cuda.jit
    def row_sums(out, x, divided):
        row = cuda.blockIdx.x
        total = float32(0)
        for col in range(cuda.threadIdx.x, x.shape[1], cuda.blockDim.x):
            total += cell(x, row, col, divided)
        cuda.atomic.add(out, row, total)

    return row_sums


@cuda.jit(device=True)
def _doubled(x, row, col, divided):  # divided: ignored
    return x[row, col] * float32(2)


_row_sums, _row_sums_elsewhere = _row_sums_of(_doubled), _row_sums_of(doubled)
ROW_SUMS_TYPES = tuple(argument_type(a) for a in (np.zeros(3, np.float32), np.zeros((3, 4), np.float32), False))
DOUBLED_OWN_LINE = _doubled.py_func.__code__.co_firstlineno + 2  # `return x[row, col] * float32(2)`
CALLING_LINE = _row_sums_of.__code__.co_firstlineno + 7  # `total += cell(x, row, col, divided)`
needs_sass = pytest.mark.skipif(rs.sass_problem() is not None or resources_problem() is not None,
                                reason="needs nvdisasm (the cu13 extra installs it) and nvJitLink")


def _traced(cols: int, kernel=_row_sums):
    x = np.random.default_rng(cols).standard_normal((3, cols)).astype(np.float32)
    out = np.zeros(3, np.float32)
    with trace() as t:
        kernel[3, 64](out, x, False)
    np.testing.assert_allclose(out, 2 * x.sum(axis=1), rtol=1e-4, atol=1e-4)  # float32 sums of a few hundred
    return t.last


def _sass() -> str:
    return rs.disassemble(lined_ptx(_row_sums, ROW_SUMS_TYPES, "sm_90"), "sm_90", line_table=True)


def test_a_device_function_of_the_kernels_file_counts_at_its_own_lines_one_of_another_at_the_call():
    """As the line table has them (`assembler.lined_ptx` compiles the kernel's file's device functions with lines)."""
    for kernel, line in ((_row_sums, DOUBLED_OWN_LINE), (_row_sums_elsewhere, CALLING_LINE)):
        reads = {key: n for key, n in _traced(256, kernel).kernel_lines.items() if key[2:] == ("global", "read")}
        assert reads == {(__file__, line, "global", "read"): 3 * 2 * 4}  # rows x warps x passes of 64 columns


@needs_sass
def test_the_line_table_gives_another_files_device_function_the_calling_line():
    lines = set(rs.source_lines(rs.disassemble(lined_ptx(_row_sums_elsewhere, ROW_SUMS_TYPES, "sm_90"), "sm_90",
                                               line_table=True)))
    assert (__file__, CALLING_LINE) in lines and not any(line and line[0].endswith("kernels_elsewhere.py")
                                                         for line in lines)


@needs_sass
def test_a_helper_of_the_kernels_file_keeps_its_lines_through_another_files_function(monkeypatch):
    """``_doubled`` called by a device function of another file, compiled first for the line table (as when the
    plain PTX came from the compile cache): its lines stay, and no dispatcher keeps the compilation made for it."""
    through = calling(_doubled)
    kernel = _row_sums_of(through)
    with monkeypatch.context() as patched:
        patched.setattr(compile_cache, "load", lambda key: None)
        patched.setattr(assembler, "ptx_for", lambda *args: "")  # nothing compiled before
        sass = rs.disassemble(lined_ptx(kernel, ROW_SUMS_TYPES, "sm_90"), "sm_90", line_table=True)
    assert (__file__, DOUBLED_OWN_LINE) in rs.source_lines(sass)
    assert not through.overloads and not kernel.overloads  # as they were
    reads = {key: n for key, n in _traced(256, kernel).kernel_lines.items() if key[2:] == ("global", "read")}
    assert reads == {(__file__, DOUBLED_OWN_LINE, "global", "read"): 3 * 2 * 4}


@needs_sass
def test_a_longer_row_issues_more_of_its_loop_and_the_same_code_around_it():
    sass = _sass()
    assert (__file__, DOUBLED_OWN_LINE) in rs.source_lines(sass)
    code = issue.issue_code(sass)
    few, more, many = (code.issued(_traced(cols).kernel_lines, warps=6) for cols in (256, 512, 1024))
    # the loop's passes grow with the row, the code around it (the address set-up, the sum's last additions) not
    for pipe in ("issue", "fma", "alu"):
        assert 0 < more[pipe] - few[pipe] and many[pipe] - more[pipe] == pytest.approx(2 * (more[pipe] - few[pipe]))
    assert few["issue"] / 6 > 20


@needs_sass
def test_the_tuner_hands_the_cost_model_counted_instructions():
    from gpucourse.figures import tuning as ft
    from gpucourse.grading import tuning as gt

    problem = gt.sgemm_problem(256, 256, 256, {"BM": (64,), "BN": (64,), "TM": (4,), "TN": (4,), "BK": (8,)},
                               traced=(128, 128, 64))
    config = problem.space.valid()[0]
    launch_trace, resources, launch, flops, scale = rt._traced(problem, config, "sm_90")
    assert resources.issue_code is not None
    counted = resources.issue_code.issued(launch_trace.kernel_lines, launch.blocks * launch.threads // 32, scale)
    # 4 x 4 FMAs per thread per k: at least the FLOPs' FMAs, in warp instructions
    assert counted["fma"] >= flops / 2 / 32
    assert rt.prediction(problem, config, ft.cost_model("H100")).busiest_pipe is not None


@needs_sass
def test_a_line_table_refused_leaves_the_sass_without_one(monkeypatch):
    """An nvJitLink or nvdisasm that refuses the line table: the SASS is read without it (the tile copy's round
    trips still), and the model counts the issue from the main loop alone."""
    from gpucourse.grading import tuning as gt

    real = rt.start_disassembly

    def refusing(ptx, architecture, registers=None, line_table=False):
        if line_table:
            raise RuntimeError("nvJitLink refused the options for sm_90")
        return real(ptx, architecture, registers)

    monkeypatch.setattr(rt, "start_disassembly", refusing)
    problem = gt.sgemm_problem(64, 64, 64, {"BM": (64,), "BN": (64,), "TM": (4,), "TN": (4,), "BK": (8,)})
    _, resources, _ = rt._trace(problem, problem.space.valid()[0], "sm_90")
    assert resources.global_loads is not None and resources.issue_code is None


def _fresh_row_sums():
    """A kernel no other test compiled: a new function, which calls a device function of this file."""
    return _row_sums_of(_doubled)


def _declarations_sorted(ptx: str) -> str:
    """``ptx`` with every name numba numbers as it compiles made one, and its module-level declarations in order:
    two compilations of the same code may number and declare their globals differently."""
    import re

    lines = re.sub(r"_Z\w+|_cudapy_smem_\d+", "NAME", ptx).splitlines()
    declared = sorted(line for line in lines if line.startswith((".common", ".visible .shared", ".global")))
    return "\n".join(declared + [line for line in lines if line not in declared])


@pytest.mark.skipif(resources_problem() is not None, reason="needs NVVM and nvJitLink")
@pytest.mark.parametrize("make", [_fresh_row_sums, lambda: __import__("gpucourse.kernels.conv").kernels.conv
                                  .make_implicit_gemm_warp_tiled(BM=32, BN=32, BK=8, WM=32, WN=32, LANES_M=8)],
                         ids=["device function of its file", "conv, inlined device function"])
def test_the_line_table_compilation_without_its_table_is_the_plain_one(monkeypatch, make):
    """What `lined_ptx` keeps as the PTX check's compilation is that compilation's code, declaration for
    declaration (numba-cuda 0.30: every kernel of the differential test, checked once by hand, 2026-12-02)."""
    from numba import cuda as numba_cuda

    from gpucourse.run import ptx

    monkeypatch.setattr(compile_cache, "load", lambda key: None)  # compile both here, whatever a cache holds
    kernel = make()
    four_d = argument_type(np.zeros((1, 1, 1, 1), np.float32))
    argtypes = ROW_SUMS_TYPES if kernel.py_func.__name__ == "row_sums" else (four_d,) * 3 + (argument_type(1),) * 2
    lined = lined_ptx(kernel, argtypes, "sm_90")
    with ptx.target_device((9, 0)):
        plain, _ = numba_cuda.compile_ptx(kernel.py_func, argtypes, cc=(9, 0))
    assert ".loc" in lined and ".loc" not in assembler.without_line_table(lined)
    assert _declarations_sorted(assembler.without_line_table(lined)) == _declarations_sorted(plain)


@pytest.mark.skipif(resources_problem() is not None, reason="needs NVVM and nvJitLink")
def test_a_kernel_read_with_its_line_table_is_compiled_once(monkeypatch):
    """The tuner's candidates: the compilation with lines is the PTX check's too, variable types included."""
    from numba import cuda as numba_cuda

    from gpucourse.run import ptx

    monkeypatch.setattr(compile_cache, "_memory", {})
    monkeypatch.setenv(compile_cache.ENV, "off")  # nothing kept from another test or process
    kernel, compiled, real = _fresh_row_sums(), [], numba_cuda.compile_ptx
    monkeypatch.setattr(numba_cuda, "compile_ptx", lambda *a, **k: compiled.append(a[0]) or real(*a, **k))
    lined = lined_ptx(kernel, ROW_SUMS_TYPES, "sm_90")
    assert compiled == [kernel.py_func]
    assert ptx.compile_for_gpu(kernel, ROW_SUMS_TYPES, (9, 0)) == assembler.without_line_table(lined)
    assert compiled == [kernel.py_func] and ptx.variable_types(kernel.py_func, ROW_SUMS_TYPES)  # not compiled again
    ptx.compile_for_gpu(kernel, ROW_SUMS_TYPES, (7, 5))  # another GPU: its own compilation
    assert compiled == [kernel.py_func] * 2


@needs_sass
def test_the_line_table_compilation_is_kept_in_the_compile_cache(monkeypatch):
    from numba import cuda as numba_cuda

    argtypes = ROW_SUMS_TYPES
    first = lined_ptx(_row_sums, argtypes, "sm_90")
    monkeypatch.setattr(numba_cuda, "compile_ptx", lambda *a, **k: pytest.fail("compiled again"))
    assert lined_ptx(_row_sums, argtypes, "sm_90") == first and ".loc" in first


@pytest.mark.filterwarnings("ignore:Could not find source")  # numba-cuda, of the copy's made-up file
def test_the_same_source_in_another_place_does_not_read_this_ones_line_table(monkeypatch):
    """The line table names the kernel's file: a copy of the course elsewhere (another checkout, a wheel in another
    environment) has the same source and so the same fingerprint, but must compile its own."""
    import types

    from numba import cuda as numba_cuda

    here = _row_sums.py_func
    moved = types.FunctionType(here.__code__.replace(co_filename="/elsewhere/test_issue.py"), here.__globals__,
                               here.__name__, here.__defaults__, here.__closure__)
    assert "/elsewhere/" not in lined_ptx(_row_sums, ROW_SUMS_TYPES, "sm_90")  # kept in the compile cache
    compiled, real = [], numba_cuda.compile_ptx
    monkeypatch.setattr(numba_cuda, "compile_ptx", lambda *a, **k: compiled.append(a[0]) or real(*a, **k))
    assert "/elsewhere/test_issue.py" in lined_ptx(cuda.jit(moved), ROW_SUMS_TYPES, "sm_90") and compiled


@needs_sass
def test_the_line_table_is_the_plain_code_with_lines():
    argtypes = ROW_SUMS_TYPES
    plain = rs.disassemble(ptx_for(_row_sums, argtypes, "sm_90"), "sm_90")
    assert [i[1] for i in rs.instructions(_sass())] == [i[1] for i in rs.instructions(plain)]


@pytest.mark.skipif(resources_problem() is not None, reason="needs NVVM and nvJitLink")
def test_a_device_function_inlined_by_numba_keeps_the_line_table(monkeypatch):
    """numba-cuda 0.30 places the arguments of a device function numba inlines (conv's ``pixel_chunk``) where
    NVVM refuses them ("Symbol name with unsupported characters"): the line table is compiled without them."""
    from gpucourse.kernels import conv

    monkeypatch.setattr(compile_cache, "load", lambda key: None)  # compile it here, whatever a cache holds
    kernel = conv.make_implicit_gemm_warp_tiled(BM=32, BN=32, BK=8, WM=32, WN=32, LANES_M=8)  # small: quick
    four_d = argument_type(np.zeros((1, 1, 1, 1), np.float32))
    ptx = lined_ptx(kernel, (four_d, four_d, four_d, argument_type(1), argument_type(1)), "sm_90")
    assert ptx is not None and ".loc" in ptx and "llvm.dbg" not in ptx


@cuda.jit(device=True, inline="always")  # numba copies its code into the kernel: the line table keeps its lines
def _inlined_cell(x, row, col, divided):
    if divided:
        return x[row, col] / (x[row, (col + 7) % x.shape[1]] + float32(3))  # not taken below: did not run
    return x[row, col] * float32(2)


_inlined_row_sums = _row_sums_of(_inlined_cell)
DIVIDED_LINE = _inlined_cell.py_func.__code__.co_firstlineno + 3
DOUBLED_LINE = DIVIDED_LINE + 1


def _sums_undivided(kernel, seed: int):
    """(out, x, the launch's trace) of ``kernel`` (`_row_sums_of`) on 3 rows of 300, no cell divided."""
    x = np.random.default_rng(seed).standard_normal((3, 300)).astype(np.float32) + 4
    out = np.zeros(3, np.float32)
    with trace(lines=True) as t:
        kernel[3, 64](out, x, False)
    np.testing.assert_allclose(out, 2 * x.sum(axis=1), rtol=1e-4)  # float32 sums of 100 values near 4
    return out, x, t


def test_a_trace_knows_which_lines_ran_only_when_asked():
    """Only the cost model's traces ask for the lines that ran; a trace without them says so rather than call every
    line run."""
    x = np.ones((3, 300), np.float32)
    with trace() as t:
        _row_sums[3, 64](np.zeros(3, np.float32), x, False)
    with pytest.raises(ValueError, match=r"did not watch which lines ran: record it inside `with trace\(lines=True"):
        t.last.lines_not_run
    with trace(lines=True) as t:
        _row_sums[3, 64](np.zeros(3, np.float32), x, False)
    assert t.last.lines_not_run == set() and t.last.lines_ran


def test_a_branch_not_taken_is_a_line_not_run_in_the_kernel_or_a_device_function_of_its_file():
    _, _, inlined = _sums_undivided(_inlined_row_sums, 7)
    assert inlined.last.lines_not_run == {(__file__, DIVIDED_LINE)}
    _, _, called = _sums_undivided(_cell_row_sums, 7)
    assert {(__file__, SCALED_LINE), (__file__, CALLS_SCALED_LINE)} <= called.last.lines_not_run


@needs_sass
def test_a_function_numba_inlines_counts_at_its_own_lines_and_a_branch_not_taken_issues_nothing():
    out, x, t = _sums_undivided(_inlined_row_sums, 5)
    reads = {key[1]: n for key, n in t.last.kernel_lines.items() if key[2:] == ("global", "read") and n}
    assert reads == {DOUBLED_LINE: 3 * 2 * 5}  # rows x warps x passes of 64 columns (300 of them), in this file
    argtypes = tuple(argument_type(a) for a in (out, x, False))
    sass = rs.disassemble(lined_ptx(_inlined_row_sums, argtypes, "sm_90"), "sm_90", line_table=True)
    assert (__file__, DIVIDED_LINE) in rs.source_lines(sass)  # its own line, not the kernel's `def`
    assert t.last.lines_not_run == {(__file__, DIVIDED_LINE)}
    code = issue.issue_code(sass)
    counted = code.issued(t.last.kernel_lines, warps=6, not_run=t.last.lines_not_run)
    with_the_branch = code.issued(t.last.kernel_lines, warps=6)
    assert with_the_branch["special"] > counted["special"]  # the division's reciprocal, in the loop
    assert with_the_branch["issue"] - counted["issue"] > 5 * 6 * 10


@cuda.jit(device=True)
def _scaled(x, row, col):  # never called below: its lines are known to the trace all the same
    return x[row, col] / (x[row, (col + 7) % x.shape[1]] + float32(3))


@cuda.jit(device=True)
def _cell(x, row, col, divided):
    if divided:
        return _scaled(x, row, col)
    return x[row, col] * float32(2)


_cell_row_sums = _row_sums_of(_cell)
SCALED_LINE = _scaled.py_func.__code__.co_firstlineno + 2
CALLS_SCALED_LINE = _cell.py_func.__code__.co_firstlineno + 3


@needs_sass
def test_a_device_function_keeps_its_lines_and_one_never_called_issues_nothing(monkeypatch):
    """Compiled apart without lines, NVVM's copy of ``_cell`` and ``_scaled`` took the kernel's calling line,
    which ran: the division's reciprocal counted though no thread divided (conv's scalar im2col path did so)."""
    monkeypatch.setattr(compile_cache, "load", lambda key: None)  # compile it here, whatever a cache holds
    out, x, t = _sums_undivided(_cell_row_sums, 6)
    assert {(__file__, SCALED_LINE), (__file__, CALLS_SCALED_LINE)} <= t.last.lines_not_run
    argtypes = tuple(argument_type(a) for a in (out, x, False))
    kept = [(f.overloads, dict(f.overloads), dict(f.targetoptions)) for f in (_cell, _scaled)]
    entries = len(_cell.targetctx._defns)
    sass = rs.disassemble(lined_ptx(_cell_row_sums, argtypes, "sm_90"), "sm_90", line_table=True)
    for function, (overloads, held, options) in zip((_cell, _scaled), kept):  # as they were
        assert function.overloads is overloads and overloads == held and function.targetoptions == options
    assert len(_cell.targetctx._defns) == entries  # the target's entries of the line table's compilations gone
    assert [i[1] for i in rs.instructions(sass)] == [
        i[1] for i in rs.instructions(rs.disassemble(ptx_for(_cell_row_sums, argtypes, "sm_90"), "sm_90"))]
    assert (__file__, SCALED_LINE) in rs.source_lines(sass)  # its own line, though compiled apart
    code = issue.issue_code(sass)
    counted = code.issued(t.last.kernel_lines, warps=6, not_run=t.last.lines_not_run)
    with_the_branch = code.issued(t.last.kernel_lines, warps=6)
    assert with_the_branch["special"] > counted["special"]  # the division's reciprocal, in the loop
    assert with_the_branch["issue"] - counted["issue"] > 5 * 6 * 10

