"""Checks for module 2's elementwise kernels: map and zip over strided, broadcast tensors.

``tensor(4, 6).T`` describes a layout: a check fills the storage behind it with random values
of its dtype, launches one thread per output element and compares with the NumPy spec::

    check_strided_map(contiguous_kernel, contiguous_spec, [tensor(4, 6).T, tensor(2, 3, 5).narrow(2, 1, 3)])
    check_broadcast_zip(sub_kernel, sub_spec, [(tensor(4, 6), tensor(6, 4).T), (tensor(3, 1), tensor(5))])

As in `check_kernel`, ``out`` is poisoned with a canary after its end, inputs must stay
unchanged, and the first failure raises `CheckFailed` naming the launch and the layouts.
"""

from __future__ import annotations

from typing import Callable, Iterable, Sequence

import numpy as np

from ..kernels import Tensor, broadcast_shape
from .core import blocks_needed
from .runner import Launch, check_launches, expected_of, filled, layout


def tensor(*shape: int) -> Tensor:
    """A contiguous tensor of ``shape``, as a template: a check fills its storage with random values.

    Views of it (``.T``, ``.permute(...)``, ``.narrow(...)``, ``.broadcast_to(...)``) describe the
    layouts a check tests, e.g. ``tensor(4, 6).T`` or ``tensor(3, 1).broadcast_to((2, 3, 5))``.
    """
    return Tensor.from_numpy(np.zeros(tuple(int(s) for s in shape), np.float32))



def check_strided_map(
    kernel,
    spec: Callable[[np.ndarray], np.ndarray],
    views: Sequence[Tensor],
    *,
    threads: Iterable[int] = (32,),
    dtype=np.float32,
    seed: int = 0,
    name: str | None = None,
    quiet: bool = False,
    budget=None,
) -> None:
    """Check ``kernel[blocks, t](out, a, a_shape, a_strides)`` on strided views, for every view and ``t``.

    ``a`` is the view's storage from its first element, ``a_shape`` and ``a_strides`` tuples of
    ints (strides in elements), as `Tensor.kernel_arguments` gives them. ``out`` is a
    contiguous 1-D array with one element per element of the view, in row-major order:
    ``out == spec(view).reshape(-1)``, where ``spec`` gets the view as a NumPy array. One
    thread per element: ``blocks = ceil(size / t)``.
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    threads = list(threads)

    def launches():
        for view in views:
            a = filled(view, rng, dtype, "mixed")
            expected = expected_of(spec, dtype, a.numpy()).reshape(-1)
            storage, shape, strides = a.kernel_arguments()
            for t in threads:
                yield Launch((blocks_needed(a.size, t),), (t,),
                              f"{layout('a', a)} -> out ({expected.size},)",
                              [storage, shape, strides], expected)

    check_launches(kernel, launches(), dtype=dtype, name=name, quiet=quiet, budget=budget)


def check_broadcast_zip(
    kernel,
    spec: Callable[[np.ndarray, np.ndarray], np.ndarray],
    pairs: Sequence[tuple[Tensor, Tensor]],
    *,
    threads: Iterable[int] = (32,),
    dtype=np.float32,
    seed: int = 0,
    name: str | None = None,
    quiet: bool = False,
    budget=None,
) -> None:
    """Check ``kernel[blocks, t](out, out_shape, a, a_shape, a_strides, b, b_shape, b_strides)``.

    For every pair of views ``(a, b)``: each is passed with its *own* shape and strides (not
    broadcast by the host), and the kernel broadcasts them with NumPy's rule. ``out`` is a
    contiguous 1-D array of the broadcast shape's size, in row-major order, with that shape as a
    tuple in ``out_shape``: ``out == spec(a, b).reshape(-1)``. One thread per element of ``out``.
    """
    __tracebackhide__ = True
    rng = np.random.default_rng(seed)
    threads = list(threads)

    def launches():
        for a_view, b_view in pairs:
            a, b = filled(a_view, rng, dtype, "mixed"), filled(b_view, rng, dtype, "mixed")
            out_shape = broadcast_shape(a.shape, b.shape)
            expected = expected_of(spec, dtype, a.numpy(), b.numpy(), shape=out_shape, expects="broadcasting gives")
            a_storage, a_shape, a_strides = a.kernel_arguments()
            b_storage, b_shape, b_strides = b.kernel_arguments()
            size = int(np.prod(out_shape, dtype=np.int64))
            for t in threads:
                yield Launch((blocks_needed(size, t),), (t,),
                              f"{layout('a', a)}, {layout('b', b)} -> out of shape {out_shape}",
                              [tuple(out_shape), a_storage, a_shape, a_strides, b_storage, b_shape, b_strides],
                              expected.reshape(-1))

    check_launches(kernel, launches(), dtype=dtype, name=name, quiet=quiet, budget=budget)

