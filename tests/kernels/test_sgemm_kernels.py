"""The top SGEMM rung (`kernels.sgemm`): correct for several tile configurations and shapes, 16-byte
loads and no local memory in its compiled code. (`test_matmul_kernels` runs it as one of `KERNELS`.)"""

import re

import numpy as np
import pytest
from numba import cuda, types

from gpucourse import simulated
from gpucourse.kernels import matmul as mm, sgemm
from gpucourse.kernels.vector import load4
from gpucourse.run.ptx import compile_for_gpu
from gpucourse.run.assembler import resources_problem
from gpucourse.run.resources import kernel_resources
from gpucourse.run.tuning import ptx_counts

rng = np.random.default_rng(22)

CONFIGURATIONS = [  # (BM, BN, BK, WM, WN, LANES_M): 128, 64 and 64 threads
    (64, 64, 8, 32, 32, 4),
    (32, 64, 16, 32, 32, 8),
    (64, 32, 8, 64, 32, 8),
]
SHAPES = [  # (batch of A, batch of B, M, K, N)
    (1, 1, 70, 64, 68),  # K and N multiples of 4: the 16-byte path, M a partial tile
    (2, 1, 37, 50, 29),  # K and N not: the guarded scalar path
    (1, 2, 150, 36, 130),  # K aligned, N not: vector loads of A, scalar of B
    (1, 1, 1, 3, 1),
]
ARRAY3 = types.Array(types.float32, 3, "C")


PAIRS = [(CONFIGURATIONS[i % 3], shape) for i, shape in enumerate(SHAPES + SHAPES[:2])]


@pytest.mark.parametrize("tiles, shape", PAIRS, ids=str)
def test_any_tiles_and_shape(tiles, shape):  # every configuration on the vector and the scalar path
    kernel = sgemm.make_warp_tiled(*tiles)
    b1, b2, M, K, N = shape
    A = (rng.standard_normal((b1, M, K)) * rng.uniform(0.5, 2, (1, M, 1))).astype(np.float32)
    B = (rng.standard_normal((b2, K, N)) + rng.uniform(-1, 1)).astype(np.float32)
    C = np.full(mm.output_shape(A, B), np.nan, np.float32)
    with simulated():
        mm.launch(kernel, C, A, B)
    expected = np.matmul(A.astype(np.float64), B.astype(np.float64))
    # float32 sums of K products in a fixed order: within a few ulps of the terms' magnitude times sqrt(K)
    scale = np.matmul(np.abs(A).astype(np.float64), np.abs(B).astype(np.float64))
    np.testing.assert_array_less(np.abs(C - expected), 4 * 2.0**-24 * np.sqrt(K) * scale + 1e-30)


def test_a_misaligned_view_takes_the_scalar_path():
    """A view starting one float into its allocation cannot be read with 16-byte loads: the same answer."""
    A = rng.standard_normal((1, 20, 17)).astype(np.float32)
    storage = rng.standard_normal(1 + 16 * 24).astype(np.float32)
    B = storage[1:].reshape(1, 16, 24)
    A = np.ascontiguousarray(A[:, :, :16])
    C = np.full((1, 20, 24), np.nan, np.float32)
    with simulated():
        mm.launch(mm.matmul_warp_tiled, C, A, B)
    np.testing.assert_allclose(C, A @ B, rtol=1e-5, atol=1e-5)


def test_invalid_tiles_are_explained():
    assert sgemm.parameter_problem(128, 128, 8, 64, 32, 4) is None
    assert sgemm.threads(128, 128, 64, 32) == 256 and sgemm.shared_bytes(128, 128, 8) == 2 * 8 * (132 + 128) * 4
    assert "must divide the block tile" in sgemm.parameter_problem(128, 128, 8, 48, 32, 4)
    assert "multiple of 4 (16-byte loads" in sgemm.parameter_problem(128, 128, 6, 64, 32, 4)
    assert "share each tile's 16-byte chunks evenly" in sgemm.parameter_problem(64, 32, 8, 32, 16, 8)
    assert "shared memory" in sgemm.parameter_problem(256, 256, 32, 64, 64, 4)
    with pytest.raises(ValueError, match=r"make_warp_tiled\(128, 128, 8, 64, 32, 3\): LANES_M = 3"):
        sgemm.make_warp_tiled(128, 128, 8, 64, 32, 3)


def test_compiled_code_has_vector_loads_and_no_local_memory():
    ptx = compile_for_gpu(mm.matmul_warp_tiled, (ARRAY3, ARRAY3, ARRAY3))
    for instruction in ("ld.global.v4.f32", "ld.shared.v4.f32", "st.shared.v4.f32", "st.global.v4.f32"):
        assert instruction in ptx, instruction
    assert not re.search(r"\b(ld|st)\.local\b", ptx)
    assert re.findall(r"\.shared \.align (\d+)", ptx) == ["16", "16"]  # both tiles, for their 16-byte accesses
    # two k per pass of the block product's loop (`make_block_product`'s K_PER_PASS): 2 x 16 x 4 FMAs
    assert ptx_counts(ptx)["inner_loop_fmas"] == 128
    if resources_problem():
        pytest.skip(resources_problem())
    used = kernel_resources(mm.matmul_warp_tiled, (ARRAY3, ARRAY3, ARRAY3), "sm_90")
    assert used.spilled_bytes == 0 and used.registers <= 255
    assert used.shared_bytes == sgemm.shared_bytes(128, 128, 8)


@cuda.jit
def first_and_last_of_four(out, x):
    v = load4(x, (0,))
    out[0] = v[0] + v[3]


def test_a_misaligned_vector_load_faults_on_the_simulator_as_on_the_gpu():
    storage = np.arange(9, dtype=np.float32)
    out = np.zeros(1, np.float32)
    with simulated():
        first_and_last_of_four[1, 1](out, storage[:8])
        assert out[0] == 3
        with pytest.raises(Exception, match="misaligned"):
            first_and_last_of_four[1, 1](out, storage[1:])
