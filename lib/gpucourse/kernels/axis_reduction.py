"""Reduce a strided tensor along one axis: one block per output element.

``make_axis_reduce(op, identity)`` gives a kernel
``(out, out_shape, out_strides, a, a_strides, axis_size, axis_stride)``: ``out``
has ``a``'s shape with the reduced axis of size 1, and ``a_strides`` is ``a``'s
strides with that axis's stride set to 0, so that an output index is also the
position of the first element it reduces. Each thread folds the elements
``t, t + blockDim.x, ...`` of the axis into a register, then the block combines
the ``THREADS`` values in a sequential-addressing tree in shared memory.
"""

from __future__ import annotations

from numba import cuda, float32, int64

from .tensor import MAX_DIMS, Tensor
from .indexing import to_index, to_position

THREADS = 128


def make_axis_reduce(op, identity: float):
    """A kernel reducing with ``op`` (a two-argument ``def``); ``identity`` pads the idle threads."""
    combine = cuda.jit(device=True)(op)
    start = float32(identity)

    @cuda.jit
    def axis_reduce(out, out_shape, out_strides, a, a_strides, axis_size, axis_stride):
        buffer = cuda.shared.array(THREADS, float32)
        index = cuda.local.array(MAX_DIMS, int64)
        t = cuda.threadIdx.x
        to_index(cuda.blockIdx.x, out_shape, index)
        first = to_position(index, a_strides)
        value = start
        for k in range(t, axis_size, cuda.blockDim.x):
            value = combine(value, a[first + k * axis_stride])
        buffer[t] = value
        cuda.syncthreads()
        stride = cuda.blockDim.x // 2
        while stride > 0:
            if t < stride:
                buffer[t] = combine(buffer[t], buffer[t + stride])
            cuda.syncthreads()
            stride //= 2
        if t == 0:
            out[to_position(index, out_strides)] = buffer[0]

    return axis_reduce


def launch_axis_reduce(kernel, out: Tensor, a: Tensor, axis: int) -> None:
    """Reduce ``a`` along ``axis`` into ``out`` (shape of ``a`` with that axis of size 1)."""
    expected = a.shape[:axis] + (1,) + a.shape[axis + 1:]
    if out.shape != expected:
        raise ValueError(f"reducing {a.shape} along axis {axis} gives shape {expected}, but out has {out.shape}")
    strides = list(a.strides)
    strides[axis] = 0
    storage, shape, out_strides = out.kernel_arguments()
    kernel[out.size, THREADS](storage, shape, out_strides, a.storage[a.offset:], tuple(strides),
                             a.shape[axis], a.strides[axis])
