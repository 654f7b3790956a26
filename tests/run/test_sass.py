"""SASS without a GPU: finding nvdisasm (PATH, NVIDIA's wheel or Triton) and what `run.sass` counts in its output.

The saved samples under ``sass/`` are nvdisasm 13.1's output for nvJitLink 13.5's sm_90 cubins of the kernels
below (the kernels' long mangled names shortened), so the parser is checked where no nvdisasm is installed.
"""

import sys
from pathlib import Path

import numpy as np
import pytest
from numba import cuda, float32

from gpucourse.kernels.vector import load4, store4
from gpucourse.run import resources_problem
from gpucourse.run import sass as rs
from gpucourse.run import tuning as rt

SAMPLES = Path(__file__).parent / "sass"


@cuda.jit
def _shared_product(out, x, steps):
    tile = cuda.shared.array(128, float32)
    t = cuda.threadIdx.x  # 32 threads, x of 128 floats
    store4(tile, (4 * t,), load4(x, (4 * t,)))
    cuda.syncthreads()
    acc = cuda.local.array(4, float32)
    for v in range(4):
        acc[v] = float32(0)
    for k in range(steps):
        a = load4(tile, (4 * ((t + k) % 32),))
        for v in range(4):
            acc[v] += a[v] * a[(v + 1) % 4]
    out[t] = acc[0] + acc[1] + acc[2] + acc[3]


@cuda.jit
def _picked(out, x, n):
    scratch = cuda.local.array(32, float32)
    i = cuda.grid(1)
    for k in range(32):
        scratch[k] = float32(0)
    for r in range(x.size):
        scratch[(i + r) & 31] += x[r]  # indices known only at run time: the array lives in local memory
    if i < out.size:
        out[i] = scratch[n & 31]  # an index known only at run time: the array lives in local memory


def test_sass_counts_of_a_saved_sample_with_vector_loads_and_a_loop():
    counts = rs.sass_counts((SAMPLES / "sm_90_shared_product.sass").read_text())
    assert (counts["LDG.128"], counts["LDS.128"]) == (1, 1)  # load4 of x; load4 of the tile in the loop
    assert counts["LDL"] == counts["STL"] == 0
    assert counts["loop_ffmas"] == 4 and counts["loop_mmas"] == 0  # the k loop: 4 multiply-adds per step
    assert 4 < counts["loop_instructions"] < 40
    lines = rs.sass_findings(counts)
    assert any(line.startswith("SASS shared loads: 1 LDS.128") for line in lines)
    assert any(line.startswith("SASS main loop") and "4 FFMA" in line for line in lines)


def test_sass_counts_of_a_saved_sample_with_local_memory():
    counts = rs.sass_counts((SAMPLES / "sm_90_picked.sass").read_text())
    assert counts["STL"] >= 1 and counts["LDL"] >= 1
    assert any(line.startswith("SASS local memory:") and "STL" in line for line in rs.sass_findings(counts))


SYNTHETIC = """
        /*0000*/                   LDC R1, c[0x0][0x28] ;
.L_x_1:
        /*0010*/                   IMAD.WIDE R2, R0, 0x4, R4 ;
.L_x_0:
        /*0020*/                   LDS.64 R6, [R8] ;
        /*0030*/                   FFMA R10, R6, R7, R10 ;
        /*0040*/                   IADD3 R12, P0, R12, 0x4, RZ ;
        /*0050*/                   IMAD.X R13, RZ, RZ, R13, P0 ;
        /*0060*/                   ISETP.GE.U32.AND P1, PT, R12, R14, PT ;
        /*0070*/                   ISETP.GE.AND.EX P1, PT, R13, R15, PT, P1 ;
        /*0080*/               @!P1 BRA `(.L_x_0) ;
        /*0090*/                   LDG.E.64 R16, desc[UR4][R2.64] ;
        /*00a0*/                @P2 BRA `(.L_x_1) ;
.L_x_3:
        /*00b0*/                   LDL R18, [R1] ;
        /*00b4*/                   FFMA R20, R18, R18, R20 ;
        /*00b8*/                   FFMA R21, R18, R18, R21 ;
        /*00c0*/                   EXIT ;
        /*00c4*/                   MUFU.RCP R22, R18 ;
        /*00c8*/                   BRA `(.L_x_3) ;
.L_x_2:
        /*00d0*/                   BRA `(.L_x_2);
"""


def test_the_main_loop_is_the_innermost_with_the_most_ffma():
    counts = rs.sass_counts(SYNTHETIC)
    # .L_x_0's body, its branch included; not the outer loop, nor the BRA to itself, nor the branch back from the
    # slow path after EXIT (more FFMA, but no loop)
    assert counts["loop_instructions"] == 7
    assert (counts["loop_ffmas"], counts["loop_int64"], counts["loop_global_loads"]) == (1, 2, 0)  # IMAD.X, .EX
    assert (counts["LDS.64"], counts["LDG.64"], counts["LDL"]) == (1, 1, 1)
    assert rs.sass_counts("no code")["loop_instructions"] == 0
    assert not any(line.startswith("SASS main loop") for line in rs.sass_findings(rs.sass_counts("")))


def _stand_in(site: Path, package: str) -> Path:
    """An installed ``package`` carrying an executable nvdisasm where `rs.PACKAGED_NVDISASM` looks; Triton's import
    fails (it must not be imported), NVIDIA's is a namespace package as the wheel installs it."""
    tool = site.joinpath(package, *dict(rs.PACKAGED_NVDISASM)[package])
    tool.parent.mkdir(parents=True)
    if package == "triton":
        (site / package / "__init__.py").write_text("raise RuntimeError('imported triton')\n")
    tool.write_text("#!/bin/sh\nexit 0\n")
    tool.chmod(0o755)
    return tool


def test_nvdisasm_found_in_nvidias_wheel_then_in_triton_without_importing_either(tmp_path, monkeypatch):
    empty, site = tmp_path / "bin", tmp_path / "site"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    nvidia, triton = _stand_in(site, "nvidia"), _stand_in(site, "triton")
    monkeypatch.setattr(sys, "path", [str(site)])  # only the stand-ins, not the packages installed here
    for package in ("nvidia", "triton"):
        monkeypatch.delitem(sys.modules, package, raising=False)
    assert rs.nvdisasm() == str(nvidia) and rs.sass_problem() is None
    nvidia.chmod(0o644)  # not executable: not a tool
    assert rs.nvdisasm() == str(triton)
    triton.chmod(0o644)
    assert rs.nvdisasm() is None and "nvidia-cuda-nvdisasm" in rs.sass_problem()
    assert "triton" not in sys.modules and "nvidia" not in sys.modules


def test_nvdisasm_on_the_path_comes_first_and_none_says_why(tmp_path, monkeypatch):
    folder = tmp_path / "bin"
    folder.mkdir()
    monkeypatch.setenv("PATH", str(folder))
    monkeypatch.setattr(rs.importlib.util, "find_spec", lambda name: None)  # no Triton installed
    assert rs.nvdisasm() is None and "nvdisasm" in rs.sass_problem() and rs.disassemble("", "sm_90") is None
    (folder / "nvdisasm").write_text("#!/bin/sh\nexit 0\n")
    (folder / "nvdisasm").chmod(0o755)
    assert rs.nvdisasm() == str(folder / "nvdisasm")


@pytest.mark.skipif(rs.sass_problem() is not None or resources_problem() is not None,
                    reason="needs nvdisasm (the cu13 extra installs it) and nvJitLink")
def test_inspect_compiled_reads_the_real_sass():
    x, out = np.arange(128, dtype=np.float32), np.zeros(32, np.float32)
    c = rt.inspect_compiled(_shared_product, (out, x, 3))
    assert c.sass["LDS.128"] >= 1 and c.sass["LDG.128"] >= 1 and c.sass["loop_ffmas"] >= 4
    assert any(line.startswith("SASS main loop") for line in c.findings)
    local = rt.inspect_compiled(_picked, (out, x, 3))
    assert local.sass["LDL"] + local.sass["STL"] >= 1


TILE_LOOP = """
.L_x_1:
        /*0000*/                   LDG.E R4, desc[UR4][R2.64] ;
        /*0010*/                   LDG.E R5, desc[UR4][R2.64+0x100] ;
        /*0020*/                   STS [R6], R4 ;
        /*0030*/                   STS [R6+0x80], R5 ;
.L_x_2:
        /*0040*/                   LDG.E R7, desc[UR4][R8.64] ;
        /*0050*/                   STS [R9], R7 ;
        /*0060*/                   LDG.E R7, desc[UR4][R8.64+0x40] ;
        /*0070*/                   STS [R9+0x4], R7 ;
        /*0080*/                @P0 BRA `(.L_x_2) ;
        /*0090*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
.L_x_0:
        /*00a0*/                   LDS R10, [R11] ;
        /*00b0*/                   FFMA R12, R10, R10, R12 ;
        /*00c0*/                @P1 BRA `(.L_x_0) ;
        /*00d0*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*00e0*/                @P2 BRA `(.L_x_1) ;
        /*00f0*/                   EXIT ;
"""


def test_global_loads_tell_loads_in_flight_together_from_loads_that_wait_each_for_the_last():
    loads = rs.global_loads(TILE_LOOP)
    # the tile loop's own two loads are issued before either is stored: one round trip for both; the rolled copy
    # loop stores each load before it issues the next: one round trip per load
    assert (loads.tile_barriers, loads.tile_loads, loads.tile_round_trips) == (2, 2, 1)
    assert (loads.inner_loads, loads.inner_round_trips, loads.inner_instructions) == (2, 2, 5)
    assert rs.global_loads(SYNTHETIC) is None  # no barrier around its main loop: no tiles to copy


def test_a_loop_nested_between_a_load_and_its_use_hides_its_round_trip():
    load, use = ("", "LDG.E", "R4, desc[UR4][R2.64]", []), ("", "STS", "[R6], R4", [])
    assert rs.round_trips([load, use]) == 1
    assert rs.round_trips([load, rs._NESTED, use]) == 0  # a double-buffered kernel's prefetch: the loop's time
    assert rs.round_trips([use, load]) == 1  # the load at the end of one pass waits at the start of the next


@pytest.mark.skipif(rs.sass_problem() is not None or resources_problem() is not None,
                    reason="needs nvdisasm (the cu13 extra installs it) and nvJitLink")
def test_few_threads_per_block_copy_their_tiles_in_a_rolled_loop_one_round_trip_per_load():
    from gpucourse.kernels import matmul as mm  # noqa: PLC0415
    from gpucourse.run.assembler import ptx_for  # noqa: PLC0415
    from gpucourse.run.ptx import argument_type  # noqa: PLC0415

    a = np.zeros((1, 64, 64), np.float32)
    argtypes = tuple(argument_type(x) for x in (a, a, a))

    def loads(*shape):
        return rs.global_loads(rs.disassemble(ptx_for(mm.make_register_tiled(*shape), argtypes, "sm_90"), "sm_90"))

    many = loads(64, 64, 8, 4, 8)  # 128 threads, 4 + 4 loads each per tile: unrolled, all in flight at once
    assert (many.tile_loads, many.tile_round_trips, many.inner_loads) == (8, 1, 0)
    few = loads(32, 64, 8, 8, 16)  # 32 threads, 16 + 32 loads each: rolled loops, each load stored before the next
    assert few.inner_loads and few.inner_round_trips == few.inner_loads
