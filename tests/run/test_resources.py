"""Registers and shared memory of compiled kernels, without a GPU (nvJitLink's assembler report)."""

import numba
import numpy as np
import pytest

from gpucourse.kernels import matmul as mm
from gpucourse.run import kernel_resources, resources_problem
from gpucourse.run.resources import parse_report

REPORT = """ptxas info    : Compiling entry function '_Z6kernel' for 'sm_75'
ptxas         .     0 bytes stack frame, 8 bytes spill stores, 8 bytes spill loads
ptxas info    : Used 96 registers, used 1 barriers, 616 bytes cmem[0]"""
PTX = """.visible .shared .align 4 .b8 _cudapy_smem_1[4096];
.visible .shared .align 4 .b8 _cudapy_smem_2[1024];
.visible .entry kernel("""


def test_parse_report_reads_registers_spills_and_shared_arrays():
    found = parse_report(REPORT, PTX, "sm_75")
    assert (found.registers, found.spilled_bytes, found.shared_bytes) == (96, 8, 5120)


def test_parse_report_without_a_register_count_says_so():
    with pytest.raises(ValueError, match="no register count"):
        parse_report("ptxas fatal", PTX, "sm_75")


@pytest.mark.skipif(resources_problem() is not None, reason="nvJitLink is not installed")
def test_matmul_kernels_shared_memory_is_their_tiles():
    types = [numba.typeof(np.zeros((1, 2, 2), np.float32))] * 3
    tiled = kernel_resources(mm.matmul_tiled, types)
    register_tiled = kernel_resources(mm.matmul_register_tiled, types, "sm_90")
    assert tiled.shared_bytes == 2 * mm.TILE * mm.TILE * 4
    assert register_tiled.shared_bytes == 4 * mm.BK * (mm.BM + mm.BN)
    assert 0 < tiled.registers < register_tiled.registers <= 255 and register_tiled.architecture == "sm_90"
    assert register_tiled.spilled_bytes == 0
