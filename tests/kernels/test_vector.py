"""The simulator's stand-ins of `kernels.vector`'s 16-byte accesses check alignment in the lanes that make the
access only: a lane that an ``if`` keeps out is not checked, as on the GPU."""

import numpy as np
import pytest
from numba import cuda

from gpucourse import simulated
from gpucourse.kernels.vector import load4, store4

rng = np.random.default_rng(4)


@cuda.jit
def copy_every_fourth_row_start(out, x):
    """Lanes whose column ``j`` is a multiple of 4 copy x[i, j:j + 4]; the others (misaligned j) skip it."""
    i, j = cuda.grid(2)
    if i < x.shape[0] and j + 4 <= x.shape[1]:
        if j % 4 == 0:
            store4(out, (i, j), load4(x, (i, j)))


@cuda.jit
def copy_at(out, x, j):
    i = cuda.grid(1)
    if i < x.shape[0]:
        store4(out, (i, j), load4(x, (i, j)))


def test_lanes_that_skip_a_vector_access_are_not_checked():
    x = rng.standard_normal((5, 12)).astype(np.float32)
    out = np.full_like(x, np.nan)
    with simulated():
        copy_every_fourth_row_start[(2, 1), (4, 16)](out, x)
    np.testing.assert_array_equal(out, x)  # every lane's column covered by the aligned lanes' vectors


def test_an_active_misaligned_lane_still_faults():
    x = rng.standard_normal((3, 8)).astype(np.float32)
    out = np.full_like(x, np.nan)
    with simulated():
        copy_at[1, 4](out, x, 4)
        np.testing.assert_array_equal(out[:, 4:], x[:, 4:])
        with pytest.raises(ValueError, match=r"tid=\[0, 0, 0\].*misaligned"):
            copy_at[1, 4](out, x, 2)
