"""The vectorised map and zip: any length, aligned or not, several grids; 16-byte loads and no local memory."""

import re

import numpy as np
import pytest
from numba import types

from gpucourse import simulated
from gpucourse.kernels import Tensor, elementwise as ew
from gpucourse.run.ptx import compile_for_gpu

rng = np.random.default_rng(5)


def cube_plus_one(x):  # numba adds the integer 1 in float64, then rounds to float32 when storing
    return x * x * x + 1


def weighted(x, y):
    return 3 * x - y


MAP, ZIP = ew.make_map_vectorised(cube_plus_one), ew.make_zip_vectorised(weighted)
ARRAY1 = types.Array(types.float32, 1, "C")


def vector(n, offset=0):
    """``n`` random non-uniform floats starting ``offset`` floats into their storage (1: not 16-byte aligned)."""
    storage = (rng.standard_normal(n + offset) * rng.uniform(0.1, 10, n + offset)).astype(np.float32)
    return Tensor(storage, (n,), (1,), offset)


@pytest.mark.parametrize("n, offset, sms, threads, per_sm", [
    (1000, 0, 2, 64, 1), (1003, 0, 1, 32, 3), (4099, 1, 2, 128, 2), (3, 0, 1, 32, 1), (130, 3, 3, 32, 1)])
def test_any_length_alignment_and_grid(n, offset, sms, threads, per_sm):
    a, b = vector(n, offset), vector(n)
    x, y = a.storage[offset:], b.storage
    with simulated():
        out = Tensor(np.full(n + 5, np.nan, np.float32), (n,), (1,))
        ew.launch_vectorised(MAP, out, a, sms=sms, threads=threads, blocks_per_sm=per_sm)
        np.testing.assert_array_equal(out.storage[:n], ((x * x * x).astype(np.float64) + 1).astype(np.float32))
        assert np.isnan(out.storage[n:]).all()  # nothing past the end
        out = Tensor(np.full(n, np.nan, np.float32), (n,), (1,))
        ew.launch_vectorised(ZIP, out, a, b, sms=sms, threads=threads, blocks_per_sm=per_sm)
        np.testing.assert_array_equal(out.storage, (3 * x.astype(np.float64) - y).astype(np.float32))


def test_strided_or_broadcast_tensors_are_refused_with_a_clear_message():
    a = Tensor.from_numpy(rng.standard_normal((4, 6)).astype(np.float32))
    with pytest.raises(ValueError, match="contiguous tensors of one shape"):
        ew.launch_vectorised(MAP, Tensor.from_numpy(np.zeros((6, 4), np.float32)), a.T, sms=1)


@pytest.mark.parametrize("kernel, arguments", [(MAP, 2), (ZIP, 3)], ids=["map", "zip"])
def test_compiled_code_has_vector_loads_and_no_local_memory(kernel, arguments):
    ptx = compile_for_gpu(kernel, (ARRAY1,) * arguments)
    assert len(re.findall(r"ld\.global\.v4\.f32", ptx)) >= ew.CHUNKS * (arguments - 1)
    assert "st.global.v4.f32" in ptx
    assert not re.search(r"\b(ld|st)\.local\b", ptx)
