"""Registers, local and shared memory of compiled kernels: the assembler's report (CUDA 12 and 13) without a GPU."""

from pathlib import Path

import numba
import numpy as np
import pytest

from gpucourse.kernels import matmul as mm
from gpucourse.run import kernel_resources, resources_problem
from gpucourse.run.assembler import parse_report

REPORTS = Path(__file__).parent / "reports"  # real reports: nvJitLink 12.9 and 13.5 on module 3's kernels
PTX = """.visible .shared .align 4 .b8 _cudapy_smem_1[4096];
.visible .shared .align 4 .b8 _cudapy_smem_2[1024];
.visible .entry kernel("""


@pytest.mark.parametrize("name, expected", [
    ("cuda12.9_sm_75.txt", (42, 0, 0)),             # CUDA 12: "Used 42 registers, used 1 barriers, 616 bytes cmem[0]"
    ("cuda13.5_sm_90.txt", (32, 0, 0)),             # CUDA 13 on sm_90: no cmem figure after the barriers
    ("cuda13.5_sm_90_spills.txt", (255, 260, 1184)),  # 128 x 128 tiles of 16 x 16 per thread: spills
])
def test_parse_report_reads_both_cuda_versions(name, expected):
    found = parse_report((REPORTS / name).read_text(), PTX, "sm_90")
    assert (found.registers, found.spilled_bytes, found.local_bytes) == expected
    assert found.shared_bytes == 5120


def test_parse_report_reads_the_entry_function_not_a_device_function():
    report = """ptxas info    : Function properties for helper
ptxas         .     24 bytes stack frame, 16 bytes spill stores, 16 bytes spill loads
ptxas info    : Compiling entry function 'kernel' for 'sm_80'
ptxas info    : Function properties for kernel
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 40 registers, 16 bytes smem, 480 bytes cmem[0]"""
    found = parse_report(report, PTX, "sm_80")
    assert (found.registers, found.spilled_bytes, found.local_bytes) == (40, 0, 0)


def test_a_cached_link_without_the_assembler_says_so():
    # nvJitLink on a machine with a driver caches links: a cache hit's log has no assembler lines at all
    # (what lecture 3 met on an H100 before the course asked for -no-cache)
    with pytest.raises(ValueError, match="no register count.*cached link"):
        parse_report((REPORTS / "cached_no_ptxas.txt").read_text(), PTX, "sm_75")


@pytest.mark.skipif(resources_problem() is not None, reason="nvJitLink is not installed")
def test_matmul_kernels_shared_memory_is_their_tiles():
    types = [numba.typeof(np.zeros((1, 2, 2), np.float32))] * 3
    tiled = kernel_resources(mm.matmul_tiled, types)
    register_tiled = kernel_resources(mm.matmul_register_tiled, types, "sm_90")
    assert tiled.shared_bytes == 2 * mm.TILE * mm.TILE * 4
    assert register_tiled.shared_bytes == 4 * mm.BK * (mm.BM + mm.BN)
    assert 0 < tiled.registers < register_tiled.registers <= 255 and register_tiled.architecture == "sm_90"
    assert register_tiled.spilled_bytes == 0 and register_tiled.local_bytes == 0


@pytest.mark.skipif(resources_problem() is not None, reason="nvJitLink is not installed")
def test_the_same_kernel_twice_still_has_its_report():
    # the second link of the same PTX is where nvJitLink's cache would answer without the assembler
    types = [numba.typeof(np.zeros((1, 2, 2), np.float32))] * 3
    assert kernel_resources(mm.matmul_tiled, types, "sm_80") == kernel_resources(mm.matmul_tiled, types, "sm_80")


@pytest.mark.skipif(resources_problem() is not None, reason="nvJitLink is not installed")
def test_the_same_ptx_is_assembled_once_also_in_another_process(tmp_path, monkeypatch):
    from gpucourse.run import assembler, compile_cache

    monkeypatch.setenv(compile_cache.ENV, str(tmp_path))
    monkeypatch.setattr(compile_cache, "_memory", {})
    assembled = []
    real = assembler._assembled_now
    monkeypatch.setattr(assembler, "_assembled_now", lambda *args: assembled.append(args[1:]) or real(*args))
    types = [numba.typeof(np.zeros((1, 2, 2), np.float32))] * 3
    ptx = assembler.ptx_for(mm.matmul_register_tiled, types, "sm_90")
    first = assembler.assemble(ptx, "sm_90")
    assert assembler.assemble(ptx, "sm_90") == first and len(assembled) == 1
    monkeypatch.setattr(compile_cache, "_memory", {})  # a new process: read from the disk
    assert assembler.assemble(ptx, "sm_90") == first and len(assembled) == 1
    assert "Used" in first[0] and first[1].startswith(b"\x7fELF")
    capped = assembler.assemble(ptx, "sm_90", max_registers=32)  # other options, or another architecture: assembled
    assembler.assemble(ptx, "sm_100")
    assert assembled[1:] == [("sm_90", 32, False), ("sm_100", None, False)]
    assert parse_report(capped[0], ptx, "sm_90").registers <= 32 < parse_report(first[0], ptx, "sm_90").registers


@pytest.mark.skipif(resources_problem() is not None, reason="nvJitLink is not installed")
def test_launch_bounds_count_for_their_own_jit_of_a_function_only():
    from numba import cuda

    from gpucourse.run.ptx import check_compiles

    a = np.zeros((1, 128, 128), np.float32)
    types = [numba.typeof(a)] * 3
    tiled = mm.make_register_tiled(128, 128, 8, 8, 8)  # 144 registers when nothing bounds it
    bounded = cuda.jit(launch_bounds=(256, 2))(tiled.py_func)  # 2 blocks of 256 threads: at most 128
    plain = cuda.jit(tiled.py_func)
    check_compiles(bounded, (a, a, a))  # the PTX check's cache now holds the bounded PTX of this function
    assert kernel_resources(plain, types, "sm_90").registers > 128
    assert kernel_resources(bounded, types, "sm_90").registers <= 128
    assert kernel_resources(plain, types, "sm_90").registers > 128


class _NumbaLikeDispatcher:
    """numba-cuda 0.30's surface: ``compile`` takes a tuple and returns the overload; its ``get_*`` methods take a
    ``Signature`` (``signature.args``), so a tuple fails there as on a GPU."""

    targetoptions: dict = {}

    class _Kernel:
        regs_per_thread, shared_mem_per_block, local_mem_per_thread = 40, 2048, 0

    def compile(self, signature):
        assert isinstance(signature, tuple)
        return self._Kernel()

    def get_regs_per_thread(self, signature=None):
        return signature.args

    get_local_mem_per_thread = get_shared_mem_per_block = get_regs_per_thread


def test_on_a_gpu_of_the_architecture_asked_the_figures_come_from_the_compiled_overload(monkeypatch):
    from gpucourse.run import resources

    monkeypatch.setattr(resources, "resources_problem", lambda: None)
    monkeypatch.setattr(resources, "_gpu_architecture", lambda: "sm_90")
    found = kernel_resources(_NumbaLikeDispatcher(), (numba.float32[:],), "sm_90")
    assert (found.registers, found.shared_bytes, found.spilled_bytes, found.local_bytes) == (40, 2048, 0, 0)


@pytest.mark.skipif(resources_problem() is not None, reason="needs nvJitLink")
def test_the_launch_assembler_is_nvjitlink_where_numba_cuda_links_with_it(monkeypatch):
    """Here numba-cuda links through cuda.core's Linker with nvJitLink (the fuzzing reads its version); where
    cuda.core has no such decision, numba-cuda's own check answers; with neither, no GPU, None."""
    import sys

    from cuda.bindings import nvjitlink

    from gpucourse.run import launch_assembler

    assert launch_assembler() == ("nvJitLink", tuple(nvjitlink.version()))
    monkeypatch.setitem(sys.modules, "cuda.core._linker", None)  # an import of it fails
    assert launch_assembler() == ("nvJitLink", tuple(nvjitlink.version()))
    from numba.cuda.cudadrv import driver

    monkeypatch.setattr(driver, "_have_nvjitlink", lambda: False)  # the driver's: there is none without a GPU
    assert launch_assembler() is None


def float16_difference():
    """A new kernel ``out = a - b`` of float16 arrays: numba-cuda calls its CUDA C++ float16 operator, linked when
    the kernel loads."""
    from numba import cuda

    @cuda.jit
    def difference(out, a, b):
        i = cuda.grid(1)
        if i < out.size:
            out[i] = a[i] - b[i]

    return difference


@pytest.mark.skipif(resources_problem() is not None, reason="nvJitLink is not installed")
@pytest.mark.parametrize("architecture", ["sm_75", "sm_90"])
def test_a_float16_kernel_is_linked_with_numba_cudas_cpp_as_a_gpu_links_it(architecture):
    """numba-cuda's float16 operators are CUDA C++ it compiles with NVRTC and links as the kernel loads, with
    link-time optimization where nvJitLink is there: inlined. The kernel's PTX alone declares them .extern, and
    nvJitLink refused it (ERROR_INTERNAL: a student's fp16 kernel in blocks over 256 threads crashed on the CPU)."""
    from gpucourse.run.assembler import ptx_for
    from gpucourse.run.tuning import inspect_compiled

    kernel = float16_difference()
    half = np.zeros(4, np.float16)
    types = [numba.typeof(half)] * 3
    found = kernel_resources(kernel, types, architecture)
    assert 0 < found.registers < 64 and found.local_bytes == found.spilled_bytes == 0
    ptx = ptx_for(kernel, types, architecture)
    assert ".extern" not in ptx and "sub.f16" in ptx and f".target {architecture}" in ptx
    assert "no local memory" in str(inspect_compiled(kernel, (half, half, half), architecture, read_sass=False))


def test_a_float16_kernel_launches_in_blocks_of_512_threads_on_the_simulator():
    """A launch over 256 threads checks the registers a block needs, which assembles the kernel (with the
    float16 operators numba-cuda links in)."""
    rng = np.random.default_rng(3)
    a, b = (rng.standard_normal(1000).astype(np.float16) for _ in range(2))
    out = np.full(1000, np.nan, np.float16)
    float16_difference()[2, 512](out, a, b)
    np.testing.assert_array_equal(out, a - b)  # one IEEE half subtraction each: exact as NumPy's


def test_code_the_course_cannot_link_is_named_and_a_launch_then_skips_its_register_check(monkeypatch):
    from gpucourse.run import assembler
    from gpucourse.run.linked_code import UnlinkableCode, _source

    with pytest.raises(UnlinkableCode, match="kernel links .o code; the course links only CUDA C.. without a GPU"):
        _source("helper.o", "kernel")

    def unlinkable(*args):
        raise UnlinkableCode("kernel links .o code")

    monkeypatch.setattr(assembler, "assembled", unlinkable)
    out = np.zeros(600, np.float16)
    float16_difference()[2, 512](out, np.ones(600, np.float16), np.ones(600, np.float16))
    assert (out == 0).all()
