"""Storage positions and warp sectors of tensor views, and that their figures build."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402

from gpucourse.figures import draw_views, draw_warp_sectors, positions, warp_positions, warp_sectors  # noqa: E402
from gpucourse.kernels import Tensor  # noqa: E402


def test_positions_follow_offset_and_strides():
    t = Tensor.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    np.testing.assert_array_equal(positions(t), np.arange(12).reshape(3, 4))
    np.testing.assert_array_equal(positions(t.T), np.arange(12).reshape(3, 4).T)
    np.testing.assert_array_equal(positions(t.narrow(1, 1, 2)), [[1, 2], [5, 6], [9, 10]])
    np.testing.assert_array_equal(positions(t.narrow(1, 2, 1).broadcast_to((3, 4))), np.repeat([[2], [6], [10]], 4, 1))
    cube = Tensor.from_numpy(np.zeros((2, 3, 4), np.float32)).permute(2, 0, 1)
    for index in np.ndindex(cube.shape):
        assert positions(cube)[index] == cube.position(index)


def test_warp_sectors_contiguous_transposed_and_broadcast():
    a = Tensor.from_numpy(np.zeros((50, 64), np.float32))
    np.testing.assert_array_equal(warp_sectors(a), [0, 1, 2, 3])     # 32 floats in a row: 128 bytes
    assert len(warp_sectors(a, warp=1)) == 4
    column = Tensor.from_numpy(np.zeros((64, 50), np.float32)).T      # neighbours 200 bytes apart
    assert len(warp_sectors(column)) == 32
    row = Tensor.from_numpy(np.zeros((1, 64), np.float32)).broadcast_to((50, 64))
    assert len(warp_sectors(row, warp=3)) == 4
    scalar = Tensor.from_numpy(np.zeros(1, np.float32)).broadcast_to((40,))
    assert len(warp_positions(scalar, warp=1)) == 8 and len(warp_sectors(scalar, warp=1)) == 1   # the tail warp


def test_figures_build():
    t = Tensor.from_numpy(np.arange(12, dtype=np.float32).reshape(3, 4))
    fig = draw_views({"t": t, "t.T": t.T, "row 1 broadcast": t.narrow(0, 1, 1).broadcast_to((3, 4))})
    assert len(fig.axes) == 4
    plt.close(fig)
    a = Tensor.from_numpy(np.zeros((32, 32), np.float32))
    fig = draw_warp_sectors({"a": a, "a.T": a.T})
    assert "4 sectors" in fig.axes[0].get_title("left") and "32 sectors" in fig.axes[1].get_title("left")
    plt.close(fig)


def test_figures_refuse_what_they_cannot_draw():
    t = Tensor.from_numpy(np.zeros((2, 3), np.float32))
    with pytest.raises(ValueError, match="one storage"):
        draw_views({"t": t, "u": Tensor.from_numpy(np.zeros((2, 3), np.float32))})
    with pytest.raises(ValueError, match="1-D and 2-D"):
        draw_views({"cube": Tensor.from_numpy(np.zeros((2, 2, 2), np.float32))})
    with pytest.raises(ValueError, match="smaller tensor"):
        draw_warp_sectors({"tall": Tensor.from_numpy(np.zeros((500, 100), np.float32)).T})
