"""Map and zip over strided, broadcast tensors of up to 4 dimensions.

``make_map(fn)`` and ``make_zip(fn)`` turn a scalar function (a ``def``, compiled
as a device function) into a kernel with one thread per output element;
``grid_stride=True`` gives the version where each thread loops over elements
``i, i + gridsize, ...``. Inputs are passed with strides aligned to the output's
shape (`Tensor.broadcast_to`), so broadcasting is a stride of 0.
"""

from __future__ import annotations

from numba import cuda, int64

from .tensor import MAX_DIMS, Tensor, broadcast_shape, coalesce
from .indexing import element_count, to_index, to_position


def make_map(fn, grid_stride: bool = False):
    """A kernel ``(out, out_shape, out_strides, a, a_strides)`` computing ``out = fn(a)``."""
    f = cuda.jit(device=True)(fn)

    @cuda.jit
    def tensor_map(out, out_shape, out_strides, a, a_strides):
        index = cuda.local.array(MAX_DIMS, int64)
        i = cuda.grid(1)
        if i < element_count(out_shape):
            to_index(i, out_shape, index)
            out[to_position(index, out_strides)] = f(a[to_position(index, a_strides)])

    @cuda.jit
    def tensor_map_grid_stride(out, out_shape, out_strides, a, a_strides):
        index = cuda.local.array(MAX_DIMS, int64)
        for i in range(cuda.grid(1), element_count(out_shape), cuda.gridsize(1)):
            to_index(i, out_shape, index)
            out[to_position(index, out_strides)] = f(a[to_position(index, a_strides)])

    return tensor_map_grid_stride if grid_stride else tensor_map


def make_zip(fn, grid_stride: bool = False):
    """A kernel ``(out, out_shape, out_strides, a, a_strides, b, b_strides)`` computing ``out = fn(a, b)``."""
    f = cuda.jit(device=True)(fn)

    @cuda.jit
    def tensor_zip(out, out_shape, out_strides, a, a_strides, b, b_strides):
        index = cuda.local.array(MAX_DIMS, int64)
        i = cuda.grid(1)
        if i < element_count(out_shape):
            to_index(i, out_shape, index)
            x = a[to_position(index, a_strides)]
            y = b[to_position(index, b_strides)]
            out[to_position(index, out_strides)] = f(x, y)

    @cuda.jit
    def tensor_zip_grid_stride(out, out_shape, out_strides, a, a_strides, b, b_strides):
        index = cuda.local.array(MAX_DIMS, int64)
        for i in range(cuda.grid(1), element_count(out_shape), cuda.gridsize(1)):
            to_index(i, out_shape, index)
            x = a[to_position(index, a_strides)]
            y = b[to_position(index, b_strides)]
            out[to_position(index, out_strides)] = f(x, y)

    return tensor_zip_grid_stride if grid_stride else tensor_zip


def launch_elementwise(kernel, out: Tensor, *inputs: Tensor, threads: int = 256, blocks: int | None = None) -> None:
    """Launch a map or zip kernel on tensors; inputs broadcast to ``out.shape``.

    Before the launch, dimensions that all the tensors walk as one are merged (`coalesce`):
    a map over contiguous tensors runs as 1-D whatever their rank.
    """
    if broadcast_shape(out.shape, *(t.shape for t in inputs)) != out.shape:
        raise ValueError(f"inputs of shapes {[t.shape for t in inputs]} do not broadcast to out's {out.shape}")
    views = [t.broadcast_to(out.shape) for t in inputs]
    shape, strides = coalesce(out.shape, out.strides, *(v.strides for v in views))
    arguments = [out.storage[out.offset:], shape, strides[0]]
    for view, view_strides in zip(views, strides[1:]):
        arguments += [view.storage[view.offset:], view_strides]
    blocks = blocks or max(1, -(-out.size // threads))
    kernel[blocks, threads](*arguments)
