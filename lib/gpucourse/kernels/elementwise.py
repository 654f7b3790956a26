"""Map and zip over strided, broadcast tensors of up to 4 dimensions.

``make_map(fn)`` and ``make_zip(fn)`` turn a scalar function (a ``def``, compiled
as a device function) into a kernel with one thread per output element;
``grid_stride=True`` gives the version where each thread loops over elements
``i, i + gridsize, ...``. Inputs are passed with strides aligned to the output's
shape (`Tensor.broadcast_to`), so broadcasting is a stride of 0.

``make_map_vectorised(fn)`` and ``make_zip_vectorised(fn)`` are the fast versions for
contiguous float32 tensors of one shape (no strides, no broadcasting): a grid-stride loop
in which each thread first issues `CHUNKS` 16-byte loads (`vector.load4`) per input, then
computes and stores them, so that ``CHUNKS x 16`` bytes per input and thread are in flight
at once; `launch_vectorised` launches them, a few blocks per SM.
"""

from __future__ import annotations

import numbers

from numba import cuda, float32, int64

from .tensor import MAX_DIMS, Tensor, broadcast_shape, coalesce, contiguous_strides
from .indexing import element_count, to_index, to_position
from .vector import WIDTH, load4, store4, vector_aligned

CHUNKS = 4  # 16-byte loads each thread issues per input before it uses them: 64 bytes in flight
VECTOR_THREADS, VECTOR_BLOCKS_PER_SM = 256, 8


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


def _tensors_only(launcher: str, out, inputs) -> None:
    """A TypeError naming the first of ``out`` and ``inputs`` that is not a `Tensor`, and how to make one."""
    for which, value in (("out", out), *((f"input {k}", t) for k, t in enumerate(inputs, 1))):
        if not isinstance(value, Tensor):
            raise TypeError(f"{launcher} takes Tensors, not {type(value).__name__} (its {which}): make one with "
                            "Tensor.from_numpy(array), a copy (read the result back with out.numpy())")


def launch_elementwise(kernel, out: Tensor, *inputs: Tensor, threads: int = 256, blocks: int | None = None) -> None:
    """Launch a map or zip kernel on tensors; inputs broadcast to ``out.shape``.

    Before the launch, dimensions that all the tensors walk as one are merged (`coalesce`):
    a map over contiguous tensors runs as 1-D whatever their rank.
    """
    _tensors_only("launch_elementwise", out, inputs)
    if not (isinstance(threads, numbers.Integral) and threads >= 1):
        raise ValueError(f"threads is the threads per block, a whole number from 1 up (a multiple of 32 such as 256 "
                         f"is best), not {threads!r}")
    if broadcast_shape(out.shape, *(t.shape for t in inputs)) != out.shape:
        raise ValueError(f"inputs of shapes {[t.shape for t in inputs]} do not broadcast to out's {out.shape}")
    views = [t.broadcast_to(out.shape) for t in inputs]
    shape, strides = coalesce(out.shape, out.strides, *(v.strides for v in views))
    arguments = [out.storage[out.offset:], shape, strides[0]]
    for view, view_strides in zip(views, strides[1:]):
        arguments += [view.storage[view.offset:], view_strides]
    blocks = blocks or max(1, -(-out.size // threads))
    kernel[blocks, threads](*arguments)


def make_map_vectorised(fn):
    """A kernel ``(out, a)`` on 1-D contiguous float32 arrays computing ``out = fn(a)`` with 16-byte loads."""
    f = cuda.jit(device=True)(fn)

    @cuda.jit
    def map_vectorised(out, a):
        values = cuda.local.array((CHUNKS, WIDTH), float32)  # constant indices after unrolling: registers
        n = out.size
        start, step = cuda.grid(1), cuda.gridsize(1)
        vectors = n // WIDTH if vector_aligned(out) and vector_aligned(a) else 0
        last = max(vectors - 1, 0)
        for first in range(start, vectors, step * CHUNKS):
            for u in range(CHUNKS):  # all the loads first (the index clamped: no branch around a load) ...
                x = load4(a, (min(first + u * step, last) * WIDTH,))
                for v in range(WIDTH):
                    values[u, v] = x[v]
            for u in range(CHUNKS):  # ... then the arithmetic and the stores
                chunk = first + u * step
                if chunk < vectors:
                    for v in range(WIDTH):
                        values[u, v] = f(values[u, v])  # rounded to float32 as it is stored
                    store4(out, (chunk * WIDTH,), (values[u, 0], values[u, 1], values[u, 2], values[u, 3]))
        for i in range(vectors * WIDTH + start, n, step):  # the tail (all of it when not aligned)
            out[i] = f(a[i])

    return map_vectorised


def make_zip_vectorised(fn):
    """A kernel ``(out, a, b)`` on 1-D contiguous float32 arrays computing ``out = fn(a, b)`` with 16-byte loads."""
    f = cuda.jit(device=True)(fn)

    @cuda.jit
    def zip_vectorised(out, a, b):
        values_a = cuda.local.array((CHUNKS, WIDTH), float32)
        values_b = cuda.local.array((CHUNKS, WIDTH), float32)
        n = out.size
        start, step = cuda.grid(1), cuda.gridsize(1)
        vectors = n // WIDTH if vector_aligned(out) and vector_aligned(a) and vector_aligned(b) else 0
        last = max(vectors - 1, 0)
        for first in range(start, vectors, step * CHUNKS):
            for u in range(CHUNKS):
                x = load4(a, (min(first + u * step, last) * WIDTH,))
                y = load4(b, (min(first + u * step, last) * WIDTH,))
                for v in range(WIDTH):
                    values_a[u, v] = x[v]
                    values_b[u, v] = y[v]
            for u in range(CHUNKS):
                chunk = first + u * step
                if chunk < vectors:
                    for v in range(WIDTH):
                        values_a[u, v] = f(values_a[u, v], values_b[u, v])
                    store4(out, (chunk * WIDTH,), (values_a[u, 0], values_a[u, 1], values_a[u, 2], values_a[u, 3]))
        for i in range(vectors * WIDTH + start, n, step):
            out[i] = f(a[i], b[i])

    return zip_vectorised


def launch_vectorised(kernel, out: Tensor, *inputs: Tensor, sms: int, threads: int = VECTOR_THREADS,
                      blocks_per_sm: int = VECTOR_BLOCKS_PER_SM) -> None:
    """Launch a vectorised map or zip on contiguous tensors of one shape: ``blocks_per_sm x sms`` blocks."""
    _tensors_only("launch_vectorised", out, inputs)
    for t in (out, *inputs):
        if t.shape != out.shape or t.strides != contiguous_strides(t.shape) or t.storage.dtype != out.storage.dtype:
            raise ValueError("the vectorised map and zip take contiguous tensors of one shape and dtype "
                             f"(got shapes {[t.shape for t in (out, *inputs)]}); use launch_elementwise for others")
    arrays = [t.storage[t.offset:t.offset + t.size] for t in (out, *inputs)]
    kernel[blocks_per_sm * sms, threads](*arrays)
