"""Which thread is which: the lanes of a launch and their CUDA coordinates.

The simulator runs every thread of a launch at once, as one lane of NumPy
arrays. Lane ``l`` is thread ``threadIdx`` of block ``blockIdx`` with
``l = block_linear * threads_per_block + thread_linear`` (x fastest, as in CUDA),
and warps are 32 consecutive threads of a block.
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

WARP_SIZE = 32


def dim3(value) -> tuple[int, int, int]:
    """A launch dimension as (x, y, z), as CUDA pads it."""
    if isinstance(value, (int, np.integer)):
        value = (int(value),)
    value = tuple(int(v) for v in value)
    if not 1 <= len(value) <= 3 or any(v < 1 for v in value):
        raise ValueError(f"a grid or block size must be 1 to 3 positive integers, got {value}")
    return value + (1,) * (3 - len(value))


class Geometry:
    """Coordinates of every lane of a launch of ``grid`` blocks of ``block`` threads."""

    def __init__(self, grid, block):
        self.grid = dim3(grid)
        self.block = dim3(block)
        self.threads_per_block = int(np.prod(self.block))
        self.blocks = int(np.prod(self.grid))
        self.lanes = self.threads_per_block * self.blocks
        lane = np.arange(self.lanes, dtype=np.int64)
        self.block_of = lane // self.threads_per_block
        self.thread_of = lane % self.threads_per_block
        bx, by, bz = self.block
        gx, gy, _ = self.grid
        self.threadIdx = SimpleNamespace(
            x=self.thread_of % bx, y=(self.thread_of // bx) % by, z=self.thread_of // (bx * by)
        )
        self.blockIdx = SimpleNamespace(
            x=self.block_of % gx, y=(self.block_of // gx) % gy, z=self.block_of // (gx * gy)
        )
        self.blockDim = SimpleNamespace(x=bx, y=by, z=bz)
        self.gridDim = SimpleNamespace(x=gx, y=self.grid[1], z=self.grid[2])
        warps_per_block = -(-self.threads_per_block // WARP_SIZE)
        self.warps_per_block = warps_per_block
        self.warps = warps_per_block * self.blocks
        warp_in_block = self.thread_of // WARP_SIZE
        self.warp_of = self.block_of * warps_per_block + warp_in_block
        self.laneid = self.thread_of % WARP_SIZE
        self.warp_first_lane = lane - self.laneid
        self.warp_size_of = np.minimum(WARP_SIZE, self.threads_per_block - warp_in_block * WARP_SIZE)
        t, b = self.threadIdx, self.blockIdx
        self.grid_index = (b.x * bx + t.x, b.y * by + t.y, b.z * self.block[2] + t.z)

    def block_number(self, block) -> int:
        """The linear number of a block given as a number or a blockIdx tuple."""
        if isinstance(block, (int, np.integer)):
            return int(block)
        gx, gy, _ = self.grid
        bx, by, bz = (tuple(block) + (0, 0))[:3]
        return bx + by * gx + bz * gx * gy

    def thread_number(self, thread) -> int:
        """The linear number in its block of a thread given as a number or a threadIdx tuple."""
        if isinstance(thread, (int, np.integer)):
            return int(thread)
        bx, by, _ = self.block
        tx, ty, tz = (tuple(thread) + (0, 0))[:3]
        return tx + ty * bx + tz * bx * by

    def thread_name(self, lane: int) -> str:
        """``thread threadIdx=(x, y, z) of block blockIdx=(x, y, z)``."""
        t, b = self.threadIdx, self.blockIdx
        return (
            f"thread threadIdx=({t.x[lane]}, {t.y[lane]}, {t.z[lane]}) "
            f"of block blockIdx=({b.x[lane]}, {b.y[lane]}, {b.z[lane]})"
        )

    def block_name(self, block: int) -> str:
        gx, gy, _ = self.grid
        return f"blockIdx=({block % gx}, {(block // gx) % gy}, {block // (gx * gy)})"

    def thread_coordinates(self, lane: int) -> str:
        t = self.threadIdx
        return f"threadIdx=({t.x[lane]}, {t.y[lane]}, {t.z[lane]})"
